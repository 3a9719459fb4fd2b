from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from forgeml.monitor.drift import (
    DriftConfig,
    ReferenceProfile,
    build_reference,
    detect_drift,
    domain_classifier,
    mmd_test,
    text_mmd,
)
from forgeml.monitor.drift._multivariate import auc_p_value
from tests.conftest import SHARED_DATA
from tests.monitor.drift.conftest import adult_frame

WINDOW = 1_000


@pytest.fixture(scope="module")
def adult_reference() -> ReferenceProfile:
    return build_reference(adult_frame().head(20_000))


def _held_out(seed: int) -> pl.DataFrame:
    return adult_frame().slice(20_000).sample(WINDOW, seed=seed)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_held_out_adult_rows_are_not_told_from_the_reference(
    adult_reference: ReferenceProfile, seed: int
) -> None:
    found = domain_classifier(adult_reference, _held_out(seed))

    assert found.reference_rows == WINDOW and found.current_rows == WINDOW
    assert found.statistic is not None and found.statistic < 0.55
    assert not found.drifted


@pytest.mark.parametrize("column", ["age", "relationship"])
def test_a_broken_relation_between_columns_is_caught_where_each_column_is_calm(
    adult_reference: ReferenceProfile, column: str
) -> None:
    # the same values, shuffled: every marginal is unchanged, the joint is not
    window = _held_out(4).with_columns(pl.col(column).shuffle(seed=4))

    per_feature = detect_drift(adult_reference, window, multivariate=True)

    assert per_feature.drifted_columns == []
    [found] = per_feature.multivariate
    assert found.detector == "domain_classifier" and found.drifted
    assert found.statistic is not None and found.statistic >= 0.6
    assert found.p_value is not None and found.p_value < 1e-6
    assert column in found.columns


def test_an_older_population_is_told_apart(adult_reference: ReferenceProfile) -> None:
    window = _held_out(5).with_columns(pl.col("age") + 10)

    found = domain_classifier(adult_reference, window)

    assert found.drifted and found.statistic is not None and found.statistic > 0.7


def test_too_few_rows_give_a_note_not_a_verdict(adult_reference: ReferenceProfile) -> None:
    found = domain_classifier(adult_reference, _held_out(6).head(5))

    assert found.statistic is None and not found.drifted
    assert found.note is not None and "too few" in found.note


def test_the_auc_p_value_follows_mann_whitney() -> None:
    from scipy import stats

    rng = np.random.default_rng(0)
    first, second = rng.normal(0.2, 1, 300), rng.normal(0, 1, 200)
    u = stats.mannwhitneyu(first, second, alternative="greater", method="asymptotic")
    auc = u.statistic / (300 * 200)

    assert auc_p_value(auc, 300, 200) == pytest.approx(u.pvalue, rel=0.02)


def test_mmd_separates_shifted_embeddings_and_not_equal_ones() -> None:
    rng = np.random.default_rng(1)
    reference, same = rng.normal(size=(150, 8)), rng.normal(size=(150, 8))
    shifted = rng.normal(size=(150, 8)) + 0.5

    calm_value, calm_p = mmd_test(reference, same, 200, np.random.default_rng(0))
    moved_value, moved_p = mmd_test(reference, shifted, 200, np.random.default_rng(0))

    assert calm_p > 0.05 and abs(calm_value) < 0.01
    assert moved_p < 0.01 and moved_value > 0.05


def _sst2(label: int) -> list[str]:
    frame = pl.read_csv(SHARED_DATA / "sst2" / "train.tsv", separator="\t", quote_char=None)
    # whole sentences only: SST-2's phrases repeat the sentences they come from
    sentences = frame.filter(pl.col("label") == label, pl.col("sentence").str.len_chars() > 60)
    return sentences.sample(200, seed=label)["sentence"].to_list()


@pytest.mark.slow  # loads sentence-transformers and MiniLM: ~20 s of a busy 2-core host
def test_mmd_of_minilm_embeddings_flags_a_sentiment_swap_on_sst2() -> None:
    from forgeml.monitor.drift import minilm_embedder

    positive, negative = _sst2(1), _sst2(0)
    reference = build_reference(pl.DataFrame({"text": positive[:100]}))
    assert reference.text_columns == ["text"]
    embed = minilm_embedder()
    config = DriftConfig(multivariate_rows=100)

    calm = text_mmd(reference, pl.DataFrame({"text": positive[100:]}), "text", embed, config)
    swapped = text_mmd(reference, pl.DataFrame({"text": negative[:100]}), "text", embed, config)

    assert calm.detector == "mmd:text" and not calm.drifted, calm
    assert swapped.drifted and swapped.p_value is not None and swapped.p_value < 0.01, swapped
