from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from forgeml.core.errors import InvalidDataError, UsageError
from forgeml.rag.labelled import LabelledSet, Query
from forgeml.rag.metrics import (
    evaluate,
    metric_names,
    ndcg_at,
    precision_at,
    recall_at,
    reciprocal_rank,
)

IDS = st.sampled_from([f"d{i}" for i in range(12)])
RANKINGS = st.lists(IDS, max_size=15)
RELEVANT = st.frozensets(IDS, min_size=1, max_size=6)


def test_hand_computed_values() -> None:
    ranked, relevant = ["a", "x", "b", "y"], frozenset({"a", "b", "c"})
    assert recall_at(ranked, relevant, 2) == pytest.approx(1 / 3)
    assert recall_at(ranked, relevant, 4) == pytest.approx(2 / 3)
    assert precision_at(ranked, relevant, 2) == pytest.approx(1 / 2)
    assert precision_at(ranked, relevant, 10) == pytest.approx(2 / 10)
    assert reciprocal_rank(ranked, relevant) == 1.0
    # DCG = 1/log2(2) + 1/log2(4) = 1.5; ideal = 1 + 1/log2(3) + 1/log2(4)
    assert ndcg_at(ranked, relevant) == pytest.approx(1.5 / (1.5 + 1 / math.log2(3)))
    assert ndcg_at(ranked, relevant) == pytest.approx(0.703918, abs=1e-6)


def test_a_late_single_hit() -> None:
    ranked, relevant = ["x", "y", "b"], frozenset({"b"})
    assert reciprocal_rank(ranked, relevant) == pytest.approx(1 / 3)
    assert ndcg_at(ranked, relevant) == pytest.approx(0.5)  # 1/log2(4) over an ideal of 1
    assert ndcg_at(ranked, relevant, k=2) == 0.0
    assert recall_at(ranked, relevant, 2) == 0.0


def test_a_repeated_id_counts_once_at_its_first_rank() -> None:
    ranked, relevant = ["x", "x", "b", "b"], frozenset({"b", "c"})
    assert reciprocal_rank(ranked, relevant) == pytest.approx(1 / 2)
    assert precision_at(ranked, relevant, 2) == pytest.approx(1 / 2)
    assert recall_at(ranked, relevant, 2) == pytest.approx(1 / 2)
    assert ndcg_at(ranked, relevant) == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)))


def test_only_the_first_ten_count_for_ndcg() -> None:
    ranked = [f"x{i}" for i in range(10)] + ["gold"]
    assert ndcg_at(ranked, frozenset({"gold"})) == 0.0
    assert ndcg_at(ranked, frozenset({"gold"}), k=11) == pytest.approx(1 / math.log2(12))


@given(RANKINGS, RELEVANT, st.integers(1, 20))
def test_every_metric_lies_in_zero_one(ranked: list[str], relevant: frozenset[str], k: int) -> None:
    for value in (
        recall_at(ranked, relevant, k),
        precision_at(ranked, relevant, k),
        reciprocal_rank(ranked, relevant),
        ndcg_at(ranked, relevant, k),
    ):
        assert 0.0 <= value <= 1.0 + 1e-12


@given(RELEVANT, RANKINGS)
def test_a_perfect_ranking_scores_one(relevant: frozenset[str], tail: list[str]) -> None:
    ranked = sorted(relevant) + tail
    assert ndcg_at(ranked, relevant) == pytest.approx(1.0)
    assert reciprocal_rank(ranked, relevant) == 1.0
    assert recall_at(ranked, relevant, len(relevant)) == 1.0
    assert precision_at(ranked, relevant, len(relevant)) == 1.0


@given(RANKINGS, RELEVANT)
def test_moving_a_hit_up_never_lowers_ndcg(ranked: list[str], relevant: frozenset[str]) -> None:
    unique = list(dict.fromkeys(ranked))
    hits = [i for i, doc_id in enumerate(unique) if doc_id in relevant and i > 0]
    if not hits:
        return
    i = hits[0]
    swapped = [*unique[: i - 1], unique[i], unique[i - 1], *unique[i + 1 :]]
    assert ndcg_at(swapped, relevant) >= ndcg_at(unique, relevant) - 1e-12


@given(RANKINGS, RELEVANT, st.integers(1, 20))
def test_recall_grows_with_k(ranked: list[str], relevant: frozenset[str], k: int) -> None:
    assert recall_at(ranked, relevant, k + 1) >= recall_at(ranked, relevant, k)


def labelled() -> LabelledSet:
    return LabelledSet(
        name="toy",
        documents=[],
        queries=[
            Query("q1", "alpha", frozenset({"a"})),
            Query("q2", "beta", frozenset({"b", "c"})),
            Query("q3", "gamma", frozenset({"g"})),
        ],
    )


ANSWERS = {"alpha": ["a", "x"], "beta": ["x", "c", "b"], "gamma": ["x", "y"]}


def retrieve(query: str, k: int) -> Sequence[str]:
    return ANSWERS[query][:k]


def test_evaluate_averages_each_query_row() -> None:
    asked: list[int] = []

    def counted(query: str, k: int) -> Sequence[str]:
        asked.append(k)
        return retrieve(query, k)

    report = evaluate(counted, labelled(), k=2)
    assert asked == [10, 10, 10]  # deep enough for nDCG@10 whatever k
    assert list(report.means) == metric_names(2) == ["recall@2", "precision@2", "mrr", "ndcg@10"]
    assert [row.query_id for row in report.rows] == ["q1", "q2", "q3"]
    assert report.rows[1].ranked == ["x", "c", "b"]
    assert report.means["recall@2"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert report.means["precision@2"] == pytest.approx((0.5 + 0.5 + 0) / 2 / 3 * 2)
    assert report.means["mrr"] == pytest.approx((1 + 0.5 + 0) / 3)
    q2 = (1 / math.log2(3) + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    assert report.means["ndcg@10"] == pytest.approx((1 + q2 + 0) / 3)


def test_report_below_names_the_metrics_under_their_minimum() -> None:
    report = evaluate(retrieve, labelled(), k=2)
    assert report.below({"mrr": 0.4, "ndcg@10": 0.9}) == {"ndcg@10": report.means["ndcg@10"]}
    assert report.below({"mrr": 0.5}) == {}
    with pytest.raises(UsageError, match=r"^Unknown metric 'recall@5'; choose from mrr, ndcg@10"):
        report.below({"recall@5": 0.5})


def test_evaluate_refuses_a_bad_k_and_an_empty_set() -> None:
    with pytest.raises(UsageError, match=r"^k must be at least 1; got 0.$"):
        evaluate(retrieve, labelled(), k=0)
    with pytest.raises(InvalidDataError, match="holds no queries"):
        evaluate(retrieve, LabelledSet(name="none", documents=[], queries=[]), k=5)
