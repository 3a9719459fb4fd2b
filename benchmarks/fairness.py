"""Fairness on Adult: the report's cost, and ThresholdOptimizer mitigation as served, each
beside fairlearn called directly on the same model in the same run.

- The fairness report: forgeml's `fairness_report` (`forgeml.train.fairness`, what a run
  with `data.slices` records: a `MetricFrame` per sensitive column plus fairlearn's
  demographic parity and equalized odds differences and ratios) against one `MetricFrame`
  per column called directly, its summaries read off `difference()` / `ratio()` (the peer),
  on the test split's predictions of the Adult MLP for `sex` and `race`: the same numbers
  (largest absolute difference), the median time of each.
- Mitigation: `forgeml models mitigate`'s code (`forgeml.governance.fairness.mitigate`:
  ThresholdOptimizer fitted on the validation split) for demographic parity across `sex`
  and equalized odds across `race`; each new version is served by the model server's
  loader (`load_model(...).run_rows`, whose decoder applies `forgeml.serve.thresholds`)
  on the raw test rows. The peer is fairlearn's `ThresholdOptimizer` fitted directly
  (prefit, on the same validation rows) on the same model wrapped as a scikit-learn
  estimator, and its `predict`. Both sides draw at random where a group's rule mixes two
  thresholds, forgeml from a hash of the row, fairlearn from its `random_state`: so the
  decisions are compared twice, given fairlearn's own seeded draws and given forgeml's
  row draws (a `RandomState` whose `rand` returns them), beside the probabilities the
  rules give (largest absolute difference) and the share of rows drawn at random.
  dp_diff / eo_diff / accuracy before (the original model served) and after, on the test
  split; the promotion gate (`fairness_check`, `--max-dp-diff` / `--max-eo-diff`) on both
  versions' recorded validation metrics; time per 1,000 predictions (one batch, median).

    python benchmarks/fairness.py [--quick] [--json]

`--quick` trains 1 epoch, times 3 repeats, and runs with one thread per pool
(`_cli.one_thread`). Measured on this 2-core machine (`/usr/bin/time`, `--quick --json`, the
script before this change run at the same time): 140 s of wall time and 16.5 s of CPU,
against 157 s and 24.7 s before, at a load average of 12 to 14 (an unrelated CI run); 28 s
before at a load average of 2. In a cProfile of the quick run, importing torch and MLflow
and migrating MLflow's new database took 55 of its 138 s.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _adult import EXAMPLES, prepare_adult
from _cli import make_parser, one_thread, print_json

SENSITIVE = ("sex", "race")
MITIGATIONS = {"sex": "demographic_parity", "race": "equalized_odds"}
# the promotion gate's bound on what each mitigation equalises (`models promote --max-...`)
GATES = {"sex": {"max_dp_diff": 0.05}, "race": {"max_eo_diff": 0.1}}


def _median_s(function: Callable[[], Any], repeats: int, warm: bool = False) -> float:
    if not warm:
        function()  # warm-up: lazy imports and first-call allocations
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def train(workspace: Any, quick: bool) -> str:
    from forgeml.tracking.runner import run_training
    from forgeml.train.config import load_config

    overrides = ["epochs=1"] if quick else []
    summary = run_training(workspace, load_config(str(EXAMPLES / "train.yaml"), overrides))
    assert summary.model is not None
    return summary.model.ref


class Split:
    """A split's raw rows (the model's input fields), labels (1: positive) and groups."""

    def __init__(self, workspace: Any, model: Any, dataset_version: str, name: str) -> None:
        from forgeml.data import catalog

        frame = catalog.read_frame(workspace, dataset_version, name)
        fields = [field.name for field in model.row_encoder().fields]
        positive = model.class_names[1]
        self.rows = frame.select(fields).to_dicts()
        self.y = (frame["Y"].to_numpy() == positive).astype(int)
        self.groups = {column: frame[column].cast(str).to_list() for column in SENSITIVE}

    def pandas(self, count: int | None = None) -> Any:
        import pandas as pd

        return pd.DataFrame(self.rows[:count])


def report_cost(y: np.ndarray, predicted: np.ndarray, split: Split, repeats: int) -> dict:
    """forgeml's fairness report against one MetricFrame per column called directly."""
    from forgeml.train.fairness import fairness_report

    ours = lambda: fairness_report(y, predicted, split.groups)  # noqa: E731
    peer = lambda: peer_report(y, predicted, split.groups)  # noqa: E731
    found, expected = ours().metrics, peer()  # also the timings' warm-up
    names = set(found) | set(expected)
    differences = [abs(found.get(n, np.nan) - expected.get(n, np.nan)) for n in names]
    return {
        "rows": len(y),
        "columns": list(SENSITIVE),
        "values_compared": len(names),
        "max_abs_difference": float(max(differences)),
        "forgeml_ms": _median_s(ours, repeats, warm=True) * 1000,
        "peer_ms": _median_s(peer, repeats, warm=True) * 1000,
        "repeats": repeats,
        "summaries": {name: found[name] for name in sorted(found) if "/count" not in name},
    }


def peer_report(
    y: np.ndarray, predicted: np.ndarray, sensitive: dict[str, list[str]]
) -> dict[str, float]:
    """The same figures from one MetricFrame per column, as a fairlearn user writes them:
    per-group values, and the summaries from `difference()` / `ratio()` between groups."""
    from fairlearn.metrics import (
        MetricFrame,
        count,
        false_positive_rate,
        selection_rate,
        true_positive_rate,
    )
    from sklearn.metrics import accuracy_score

    metrics = {
        "accuracy": accuracy_score,
        "tpr": true_positive_rate,
        "fpr": false_positive_rate,
        "selection_rate": selection_rate,
        "count": count,
    }
    found: dict[str, float] = {}
    for column, groups in sensitive.items():
        frame = MetricFrame(metrics=metrics, y_true=y, y_pred=predicted, sensitive_features=groups)
        difference, ratio = frame.difference(), frame.ratio()
        prefix = f"fairness/{column}/"
        found[prefix + "dp_diff"] = float(difference["selection_rate"])
        found[prefix + "dp_ratio"] = float(ratio["selection_rate"])
        found[prefix + "eo_diff"] = float(max(difference["tpr"], difference["fpr"]))
        found[prefix + "eo_ratio"] = float(min(ratio["tpr"], ratio["fpr"]))
    return found


def _group_metrics(y: np.ndarray, predicted: np.ndarray, groups: list[str]) -> dict[str, float]:
    from fairlearn.metrics import demographic_parity_difference, equalized_odds_difference

    return {
        "accuracy": float(np.mean(predicted == y)),
        "dp_diff": float(demographic_parity_difference(y, predicted, sensitive_features=groups)),
        "eo_diff": float(equalized_odds_difference(y, predicted, sensitive_features=groups)),
    }


def _recorded(report: dict[str, Any], column: str) -> dict[str, Any]:
    """The mitigation run's own before/after figures (fairness.json), per split: on the
    validation split the thresholds were fitted on, and on the test split."""
    return {
        f"{split}_{when}": {
            measure: report[when][split][measure]
            if measure == "accuracy"
            else report[when][split][column][measure]
            for measure in ("accuracy", "dp_diff", "eo_diff")
        }
        for split in ("validation", "test")
        for when in ("before", "after")
    }


def _model_estimator(model: Any) -> Any:
    """The served model as a prefit scikit-learn classifier of raw-row DataFrames."""
    from sklearn.base import BaseEstimator, ClassifierMixin

    class Served(ClassifierMixin, BaseEstimator):
        def __sklearn_is_fitted__(self) -> bool:
            return True

        def fit(self, x: Any, y: Any = None) -> Served:
            return self

        def predict_proba(self, x: Any) -> np.ndarray:
            rows = x.to_dict("records")
            return model.run_rows(rows, {"probabilities"})["probabilities"].astype(np.float64)

        def predict(self, x: Any) -> np.ndarray:
            return self.predict_proba(x).argmax(axis=1)

    return Served()


class _GivenDraws(np.random.RandomState):
    """A RandomState whose `rand(n)` returns fixed draws: fairlearn's predict with forgeml's."""

    def __init__(self, draws: np.ndarray) -> None:
        super().__init__(0)
        self.draws = draws

    def rand(self, *size: Any) -> Any:
        return self.draws


def mitigation(
    workspace: Any,
    source: Any,
    original: Any,
    splits: tuple[Split, Split],
    column: str,
    repeats: int,
) -> dict[str, Any]:
    from fairlearn.postprocessing import ThresholdOptimizer

    from forgeml.governance.fairness import MitigateRequest, mitigate
    from forgeml.serve.model import load_model
    from forgeml.tracking import FairnessBounds, fairness_check, get_model_version
    from forgeml.train.thresholds import row_draw

    validation, test = splits
    constraint = MITIGATIONS[column]
    result = mitigate(workspace, source.ref, MitigateRequest(column, constraint))
    served = load_model(workspace, result.model, "torch", None)
    positive = original.class_names[1]
    answers = served.run_rows(test.rows, {"probabilities", "label"})
    after = (answers["label"] == positive).astype(int)
    plain = (original.run_rows(test.rows, {"label"})["label"] == positive).astype(int)

    peer = ThresholdOptimizer(
        estimator=_model_estimator(original),
        constraints=constraint,
        prefit=True,
        predict_method="predict_proba",
    )
    peer.fit(validation.pandas(), validation.y, sensitive_features=validation.groups[column])
    frame, groups = test.pandas(), test.groups[column]
    peer_q = peer._pmf_predict(frame, sensitive_features=groups)[:, 1]
    seeded = peer.predict(frame, sensitive_features=groups, random_state=0)
    draws = np.array([row_draw(row) for row in test.rows])
    same_draws = peer.predict(frame, sensitive_features=groups, random_state=_GivenDraws(draws))
    served_q = answers["probabilities"][:, 1].astype(np.float64)

    batch, batch_frame = test.rows[:1000], test.pandas(1000)
    batch_groups = groups[:1000]
    bounds = FairnessBounds(**GATES[column])
    mitigated = get_model_version(workspace, result.model.ref)
    return {
        "constraint": constraint,
        "model": result.model.ref,
        "rows": len(test.rows),
        "before": _group_metrics(test.y, plain, groups),
        "after_served": _group_metrics(test.y, after, groups),
        "after_peer": _group_metrics(test.y, seeded, groups),
        "smallest_test_group": min(groups.count(g) for g in set(groups)),
        "recorded": _recorded(result.report, column),
        "randomised_share": float(np.mean((served_q > 0) & (served_q < 1))),
        "max_abs_probability_difference": float(np.max(np.abs(served_q - peer_q))),
        "agreement_same_draws": float(np.mean(after == same_draws)),
        "agreement_seeded": float(np.mean(after == seeded)),
        "gate": {
            "bounds": GATES[column],
            "before_passed": fairness_check(source.ref, source.metrics, bounds).passed,
            "after_passed": fairness_check(mitigated.ref, mitigated.metrics, bounds).passed,
        },
        "per_1k_ms": {
            "forgeml_served": _median_s(lambda: served.run_rows(batch, {"label"}), repeats) * 1000,
            "peer_predict": _median_s(
                lambda: peer.predict(batch_frame, sensitive_features=batch_groups, random_state=0),
                repeats,
            )
            * 1000,
            "unmitigated_served": _median_s(lambda: original.run_rows(batch, {"label"}), repeats)
            * 1000,
        },
    }


def measure(quick: bool, home: Path | None, ref: str | None) -> dict[str, Any]:
    """Prepare Adult and train in a scratch home, or use `ref` in the workspace at `home`."""
    import torch

    repeats = 3 if quick else 50
    results: dict[str, Any] = {
        "quick": quick,
        "repeats": repeats,
        "torch_threads": torch.get_num_threads(),
        "cpus": len(os.sched_getaffinity(0)),
        "load_average_1min": {"start": os.getloadavg()[0]},
    }
    with tempfile.TemporaryDirectory(prefix="forgeml-bench-fairness-") as scratch:
        if home is None:
            workspace = prepare_adult(Path(scratch) / "home")
        else:
            from forgeml.core.config import Settings
            from forgeml.core.workspace import Workspace

            workspace = Workspace(Settings(home=home, user="bench"))
        try:
            results.update(measure_model(workspace, ref or train(workspace, quick), repeats))
        finally:
            workspace.close()
    results["load_average_1min"]["end"] = os.getloadavg()[0]
    return results


def measure_model(workspace: Any, ref: str, repeats: int) -> dict[str, Any]:
    from forgeml.serve.model import load_model
    from forgeml.tracking import get_model_version

    source = get_model_version(workspace, ref)
    assert source.dataset_version is not None
    original = load_model(workspace, source, "torch", None)
    validation, test = (
        Split(workspace, original, source.dataset_version, name) for name in ("validation", "test")
    )
    labels = original.run_rows(test.rows, {"label"})["label"]
    predicted = (labels == original.class_names[1]).astype(int)
    return {
        "model": source.ref,
        "report": report_cost(test.y, predicted, test, repeats),
        "mitigation": {
            column: mitigation(workspace, source, original, (validation, test), column, repeats)
            for column in MITIGATIONS
        },
    }


def format_table(results: dict[str, Any]) -> str:
    report = results["report"]
    lines = [
        f"fairness report, {report['rows']} test rows, sex and race: forgeml "
        f"{report['forgeml_ms']:.1f} ms, fairlearn MetricFrame directly {report['peer_ms']:.1f} "
        f"ms ({report['forgeml_ms'] / report['peer_ms']:.2f}x); largest difference of the "
        f"{report['values_compared']} summaries {report['max_abs_difference']:.1e}",
        f"{'mitigation':<28} {'accuracy':>9} {'dp_diff':>8} {'eo_diff':>8}",
    ]
    for column, found in results["mitigation"].items():
        for when in ("before", "after_served", "after_peer"):
            figures = found[when]
            lines.append(
                f"{column + ' ' + found['constraint'] + ' ' + when:<28.28} "
                f"{figures['accuracy']:>9.4f} {figures['dp_diff']:>8.4f} "
                f"{figures['eo_diff']:>8.4f}"
            )
        recorded = found["recorded"]
        lines.append(
            f"  {column}: the mitigation run's own figures (accuracy / dp_diff / eo_diff), "
            + "; ".join(
                f"{split} {_triple(recorded[split + '_before'])} -> "
                f"{_triple(recorded[split + '_after'])}"
                for split in ("validation", "test")
            )
            + f"; smallest test group {found['smallest_test_group']} rows"
        )
        per_1k, gate = found["per_1k_ms"], found["gate"]
        lines.append(
            f"  {column}: served vs fairlearn predict agree on "
            f"{found['agreement_same_draws']:.2%} given the same draws, "
            f"{found['agreement_seeded']:.2%} with fairlearn's seeded draws "
            f"({found['randomised_share']:.2%} of rows drawn at random); probabilities "
            f"differ by <= {found['max_abs_probability_difference']:.1e}"
        )
        lines.append(
            f"  {column}: per 1k rows: served {per_1k['forgeml_served']:.1f} ms, fairlearn "
            f"predict {per_1k['peer_predict']:.1f} ms, unmitigated served "
            f"{per_1k['unmitigated_served']:.1f} ms; gate {gate['bounds']}: before "
            f"{'pass' if gate['before_passed'] else 'fail'}, after "
            f"{'pass' if gate['after_passed'] else 'fail'}"
        )
    load = results["load_average_1min"]
    lines.append(
        f"model {results['model']}; torch threads {results['torch_threads']}; "
        f"load average (1 min) {load['start']:.2f} -> {load['end']:.2f} on "
        f"{results['cpus']} CPUs"
    )
    return "\n".join(lines)


def _triple(figures: dict[str, float]) -> str:
    return "/".join(f"{figures[m]:.3f}" for m in ("accuracy", "dp_diff", "eo_diff"))


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = make_parser(__doc__, "a 1-epoch model, 3 timed repeats, one thread (under a minute).")
    parser.add_argument("--home", type=Path, help="measure a model of this workspace instead")
    parser.add_argument("--model", help="with --home: the binary Adult model (NAME@vN)")
    args = parser.parse_args(argv)
    if (args.home is None) != (args.model is None):
        parser.error("--home and --model go together.")
    if args.quick:
        one_thread()
    results = measure(args.quick, args.home, args.model)
    print(format_table(results))
    print_json(args, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
