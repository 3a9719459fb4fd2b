"""Compare a current window with a reference profile, column by column.

Counts (PSI, Jensen-Shannon, chi-square, missing values) cover every row of the window,
in one `select` for the numeric columns and one value count per categorical column. KS
and Wasserstein compare the reference's quantile sketch with a seeded sample of the window
of at most `DriftConfig.sample_size` rows, so their cost does not grow with the window.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from forgeml.core.errors import EmptyWindowError, InvalidDataError, MissingColumnError
from forgeml.data._frame import require_columns
from forgeml.monitor.drift import _statistics as st
from forgeml.monitor.drift._config import DriftConfig
from forgeml.monitor.drift._multivariate import (
    Embed,
    MultivariateDrift,
    domain_classifier,
    text_mmd,
)
from forgeml.monitor.drift._reference import (
    CategoricalReference,
    NumericReference,
    ReferenceProfile,
    bin_counts,
    column_kind,
    cumulative_counts,
    finite,
    finite_columns,
)
from forgeml.monitor.drift._report import ColumnDrift, DriftReport, EffectName, MissingShareCheck

_Column = NumericReference | CategoricalReference


def _chosen(reference: ReferenceProfile, columns: list[str] | None) -> list[str]:
    names = list(columns) if columns is not None else reference.features
    for name in names:
        if name in reference.skipped:
            raise InvalidDataError(
                f"Column '{name}' is of type {reference.skipped[name]}, which drift "
                "cannot compare; leave it out of the columns."
            )
        if name not in reference.columns:
            known = ", ".join(reference.features)
            raise MissingColumnError(
                f"Column '{name}' is not in the reference profile (its columns: {known})."
            )
    return names


def _check_types(reference: ReferenceProfile, current: pl.DataFrame, names: list[str]) -> None:
    for name in names:
        expected, found = reference.columns[name].kind, column_kind(current.schema[name])
        if found != expected:
            raise InvalidDataError(
                f"Column '{name}' is {expected} in the reference but of type "
                f"{current.schema[name]} in the current data."
            )


def _missing_check(
    column: _Column, missing: int, rows: int, config: DriftConfig
) -> MissingShareCheck:
    before, after = column.missing / column.rows, missing / rows
    p_value = st.share_test(column.missing, column.rows, missing, rows)
    moved = abs(after - before) >= config.null_share_threshold
    return MissingShareCheck(
        reference=before, current=after, p_value=p_value, drifted=p_value < config.alpha and moved
    )


def _verdict(
    p_value: float, effects: dict[EffectName, float | None], config: DriftConfig
) -> tuple[EffectName | None, float | None, bool]:
    """The effect size nearest its threshold, and whether the column drifted.

    Drifted: p-value below alpha AND at least one effect size at or past its threshold.
    """
    thresholds: dict[EffectName, float] = {
        "psi": config.psi_threshold,
        "wasserstein": config.wasserstein_threshold,
        "js": config.js_threshold,
    }
    known = {name: value for name, value in effects.items() if value is not None}
    if not known:
        return None, None, False
    effect = max(known, key=lambda name: known[name] / thresholds[name])
    passed = known[effect] >= thresholds[effect]
    return effect, known[effect], p_value < config.alpha and passed


def _numeric_drift(
    name: str,
    column: NumericReference,
    counts: list[int],
    sample: np.ndarray,
    missing: MissingShareCheck,
    config: DriftConfig,
) -> ColumnDrift:
    common = {"column": name, "kind": "numeric", "values": sum(counts), "missing": missing}
    if sum(counts) == 0 or len(sample) == 0:
        return _no_values(common, missing, "no values in the current window")
    if not column.quantiles:
        return _no_values(common, missing, "no values in the reference")
    reference = np.asarray(column.quantiles)
    statistic, p_value = st.ks_against_quantiles(reference, column.sketched, sample)
    scale = column.std if column.std and column.std > 0 else None
    effects: dict[EffectName, float | None] = {
        "psi": st.psi(column.counts, counts),
        "js": st.js_distance(column.counts, counts),
        "wasserstein": None
        if scale is None
        else st.wasserstein_against_quantiles(reference, sample, scale),
    }
    effect, size, value_drift = _verdict(p_value, effects, config)
    return ColumnDrift.model_validate(
        common
        | {
            "test": "ks",
            "statistic": statistic,
            "p_value": p_value,
            "effect": effect,
            "effect_size": size,
            "psi": effects["psi"],
            "js_distance": effects["js"],
            "wasserstein": effects["wasserstein"],
            "drifted": value_drift or missing.drifted,
            "note": None if scale else "constant in the reference: no Wasserstein scale",
        }
    )


def _categorical_drift(
    name: str,
    column: CategoricalReference,
    found: dict[str, int],
    missing: MissingShareCheck,
    config: DriftConfig,
) -> ColumnDrift:
    values = sum(found.values())
    common = {"column": name, "kind": "categorical", "values": values, "missing": missing}
    reference_present = sum(column.categories.values()) + column.other
    if values == 0 or reference_present == 0:
        side = "current window" if values == 0 else "reference"
        return _no_values(common, missing, f"no values in the {side}")
    named = [found.get(category, 0) for category in column.categories]
    expected = [*column.categories.values(), column.other]
    observed = [*named, values - sum(named)]
    statistic, p_value = st.chi_square(expected, observed)
    effects: dict[EffectName, float | None] = {
        "psi": st.psi(expected, observed),
        "js": st.js_distance(expected, observed),
    }
    effect, size, value_drift = _verdict(p_value, effects, config)
    return ColumnDrift.model_validate(
        common
        | {
            "test": "chi2",
            "statistic": statistic,
            "p_value": p_value,
            "effect": effect,
            "effect_size": size,
            "psi": effects["psi"],
            "js_distance": effects["js"],
            "wasserstein": None,
            "unseen_share": observed[-1] / values if column.other == 0 else None,
            "drifted": value_drift or missing.drifted,
        }
    )


def _no_values(common: dict[str, object], missing: MissingShareCheck, note: str) -> ColumnDrift:
    return ColumnDrift.model_validate(
        common
        | {
            "test": "none",
            "statistic": None,
            "p_value": None,
            "effect": None,
            "effect_size": None,
            "psi": None,
            "js_distance": None,
            "wasserstein": None,
            "drifted": missing.drifted,
            "note": note,
        }
    )


def _numeric_counts(
    reference: ReferenceProfile, current: pl.DataFrame, names: list[str]
) -> dict[str, tuple[int, list[int]]]:
    """Missing values and bin counts of every numeric column, in one `select`."""
    plans = {
        name: [pl.col(name).null_count(), *cumulative_counts(name, column.edges)]
        for name in names
        if isinstance(column := reference.columns[name], NumericReference)
    }
    if not plans:
        return {}
    row = (
        finite_columns(current, list(plans))
        .select(
            expression.alias(f"{i}:{k}")
            for i, plan in enumerate(plans.values())
            for k, expression in enumerate(plan)
        )
        .row(0, named=True)
    )
    found: dict[str, tuple[int, list[int]]] = {}
    for i, (name, plan) in enumerate(plans.items()):
        results = [row[f"{i}:{k}"] for k in range(len(plan))]
        found[name] = (int(results[0]), bin_counts(results[1:]))
    return found


def _category_counts(series: pl.Series) -> tuple[int, dict[str, int]]:
    counts = series.cast(pl.String).drop_nulls().alias("value").value_counts(name="count")
    found = dict(zip(counts["value"].to_list(), counts["count"].to_list(), strict=True))
    return series.len() - sum(found.values()), found


def _column_drift(
    name: str,
    reference: ReferenceProfile,
    current: pl.DataFrame,
    sample: pl.DataFrame,
    numeric: dict[str, tuple[int, list[int]]],
    config: DriftConfig,
) -> ColumnDrift:
    column = reference.columns[name]
    if isinstance(column, NumericReference):
        missing, counts = numeric[name]
        check = _missing_check(column, missing, current.height, config)
        values = sample.select(finite(name)).get_column(name).drop_nulls().to_numpy()
        return _numeric_drift(name, column, counts, values, check, config)
    missing, found = _category_counts(current.get_column(name))
    check = _missing_check(column, missing, current.height, config)
    return _categorical_drift(name, column, found, check, config)


def detect_drift(
    reference: ReferenceProfile,
    current: pl.DataFrame,
    config: DriftConfig | None = None,
    columns: list[str] | None = None,
    *,
    multivariate: bool = False,
    embed: Embed | None = None,
    outputs: pl.DataFrame | None = None,
) -> DriftReport:
    """Judge each feature (and the prediction, when the reference names one) for drift.

    Args:
        reference: the profile of the training split (`build_reference`).
        current: the window or dataset to check.
        config: alpha, effect-size thresholds and sampling (defaults: `DriftConfig()`).
        columns: the features to check (default: every feature of the reference).
        multivariate: also run the domain classifier over the checked features (and, with
            `embed`, MMD over each text column among them).
        embed: texts -> embedding matrix, for MMD of text columns.
        outputs: the model's answers to `current`'s rows (`output_frame` columns), judged
            against the reference's `predictions` profile when it has one.

    Returns:
        One `ColumnDrift` per feature, the prediction's apart; the share of drifted
        features and whether it reaches `config.dataset_drift_share`.

    Raises:
        EmptyWindowError: `current` has no rows.
        MissingColumnError: a column is not in the reference, or not in `current`.
        InvalidDataError: a column's type differs from the reference's kind, or is one
            the reference skipped.
    """
    config = config or DriftConfig()
    if current.height == 0:
        raise EmptyWindowError(
            "The current window has no rows; drift needs at least one row to compare."
        )
    names = _chosen(reference, columns)
    extra = [reference.prediction] if reference.prediction else []
    checked = list(dict.fromkeys([*names, *extra]))
    require_columns(current, checked, "The drift check")
    _check_types(reference, current, checked)
    sample = current.select(checked)
    if current.height > config.sample_size:
        sample = sample.sample(n=config.sample_size, seed=config.seed)
    numeric = _numeric_counts(reference, current, checked)
    results = [_column_drift(n, reference, current, sample, numeric, config) for n in names]
    prediction = (
        _column_drift(reference.prediction, reference, current, sample, numeric, config)
        if reference.prediction
        else None
    )
    drifted = [result.column for result in results if result.drifted]
    share = len(drifted) / len(results) if results else 0.0
    return DriftReport(
        reference_rows=reference.rows,
        current_rows=current.height,
        config=config,
        columns=results,
        prediction=prediction,
        drifted_columns=drifted,
        drifted_share=share,
        drifted=bool(results) and share >= config.dataset_drift_share,
        multivariate=_multivariate(reference, current, names, config, multivariate, embed),
        predictions=(answers := _prediction_drift(reference, outputs, config)),
        predictions_drifted=any(result.drifted for result in answers),
    )


def _multivariate(
    reference: ReferenceProfile,
    current: pl.DataFrame,
    names: list[str],
    config: DriftConfig,
    wanted: bool,
    embed: Embed | None,
) -> list[MultivariateDrift]:
    if not wanted:
        return []
    rows = current.select(names)
    found = [domain_classifier(reference, rows, config)]
    texts = [name for name in names if name in reference.text_columns]
    if embed is not None:
        found += [text_mmd(reference, rows, name, embed, config) for name in texts]
    return found


def _prediction_drift(
    reference: ReferenceProfile, outputs: pl.DataFrame | None, config: DriftConfig
) -> list[ColumnDrift]:
    if reference.predictions is None or outputs is None or outputs.height == 0:
        return []
    profile = reference.predictions
    shared = [name for name in profile.features if name in outputs.columns]
    if not shared:
        return []
    kinds = {"numeric": pl.Float64, "categorical": pl.String}
    answers = outputs.select(
        pl.col(name).cast(kinds[profile.columns[name].kind]) for name in shared
    )
    return detect_drift(profile, answers, config, shared).columns
