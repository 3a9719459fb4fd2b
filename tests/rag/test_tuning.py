from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from forgeml.core.errors import InvalidDataError, UsageError
from forgeml.rag.metrics import ndcg_at
from forgeml.rag.tuning import Candidates, convex_fuse, min_max, tune_alpha

SCORES = st.dictionaries(
    st.sampled_from([f"d{i}" for i in range(10)]),
    st.integers(-1000, 1000).map(float),  # distinct scores stay distinct once rescaled
    max_size=10,
)


def test_min_max_rescales_to_zero_one() -> None:
    assert min_max({"a": 2.0, "b": 4.0, "c": 3.0}) == {"a": 0.0, "b": 1.0, "c": 0.5}
    assert min_max({"a": 7.0, "b": 7.0}) == {"a": 1.0, "b": 1.0}
    assert min_max({}) == {}


@given(SCORES)
def test_min_max_keeps_order_within_bounds(scores: dict[str, float]) -> None:
    scaled = min_max(scores)
    assert scaled.keys() == scores.keys()
    assert all(0.0 <= value <= 1.0 for value in scaled.values())
    for a, low in scores.items():
        for b, high in scores.items():
            if low < high:
                assert scaled[a] < scaled[b]


def test_convex_fuse_hand_computed() -> None:
    dense = {"a": 0.9, "b": 0.5, "c": 0.1}  # normalised: a 1, b 0.5, c 0
    bm25 = {"b": 12.0, "d": 2.0}  # normalised: b 1, d 0
    # alpha 0.3: a 0.3, b 0.15 + 0.7 = 0.85, c 0, d 0
    assert convex_fuse(dense, bm25, 0.3) == ["b", "a", "c", "d"]
    assert convex_fuse(dense, bm25, 1.0) == ["a", "b", "c", "d"]
    assert convex_fuse(dense, bm25, 0.0) == ["b", "a", "c", "d"]


@given(SCORES, SCORES)
def test_the_end_weights_give_one_retrievers_order(
    dense: dict[str, float], bm25: dict[str, float]
) -> None:
    only_dense = [doc_id for doc_id in convex_fuse(dense, bm25, 1.0) if doc_id in dense]
    assert [dense[doc_id] for doc_id in only_dense] == sorted(dense.values(), reverse=True)
    only_bm25 = [doc_id for doc_id in convex_fuse(dense, bm25, 0.0) if doc_id in bm25]
    assert [bm25[doc_id] for doc_id in only_bm25] == sorted(bm25.values(), reverse=True)
    assert set(convex_fuse(dense, bm25, 0.5)) == dense.keys() | bm25.keys()


def test_convex_fuse_refuses_an_alpha_outside_zero_one() -> None:
    with pytest.raises(
        UsageError, match=r"^The hybrid weight alpha must be between 0 and 1; got 1.5.$"
    ):
        convex_fuse({}, {}, 1.5)


def test_tune_alpha_finds_the_weight_that_needs_both_retrievers() -> None:
    # the gold "g" is second in each list; only fusion that weighs both lifts it to first
    query = Candidates(
        dense={"x": 1.0, "g": 0.75, "z": 0.0},
        bm25={"y": 10.0, "g": 7.5, "w": 0.0},
        relevant=frozenset({"g"}),
    )
    tuning = tune_alpha([query], steps=10)
    assert [alpha for alpha, _ in tuning.curve] == pytest.approx([i / 10 for i in range(11)])
    assert tuning.curve[0][1] == pytest.approx(ndcg_at(["y", "g"], frozenset({"g"})))
    assert tuning.curve[10][1] == pytest.approx(ndcg_at(["x", "g"], frozenset({"g"})))
    # g: 0.75a + 0.75(1 - a) = 0.75 beats x (a) and y (1 - a) when 0.25 < a < 0.75
    best = [alpha for alpha, value in tuning.curve if value == 1.0]
    assert best == pytest.approx([0.3, 0.4, 0.5, 0.6, 0.7])
    assert tuning.alpha == 0.5 and tuning.ndcg == 1.0


def test_tune_alpha_breaks_ties_towards_the_middle_then_down() -> None:
    # g scores alpha, x 1 - alpha: g is first from alpha 0.5 on (a tie goes to the smaller id)
    dense_wins = Candidates(
        dense={"g": 1.0, "x": 0.0}, bm25={"x": 1.0, "g": 0.0}, relevant=frozenset({"g"})
    )
    tuning = tune_alpha([dense_wins], steps=4)
    assert [value for _, value in tuning.curve][2:] == [1.0, 1.0, 1.0]
    assert tuning.alpha == 0.5
    flat = Candidates(dense={"g": 1.0}, bm25={"g": 1.0}, relevant=frozenset({"g"}))
    assert tune_alpha([flat], steps=3).alpha == pytest.approx(1 / 3)


def test_tune_alpha_refuses_no_queries_and_no_steps() -> None:
    with pytest.raises(InvalidDataError, match="no queries"):
        tune_alpha([])
    with pytest.raises(UsageError, match="at least 1 step; got 0"):
        tune_alpha([Candidates({}, {}, frozenset({"g"}))], steps=0)
