"""Benchmark of issue 13's concept-drift figure: forgeml's error-rate detector against
river's ADWIN, KSWIN and DDM on the same error streams.

The streams are river's synthetic SEA, Agrawal and Hyperplane generators, `--seeds` seeds
each. Per stream: a base learner is trained on the first 5,000 samples of concept A
(scikit-learn: a logistic regression for SEA and Hyperplane, whose concepts are linear,
a depth-8 decision tree for Agrawal) and frozen; it then predicts `--before` more samples
of concept A and `--after` samples of concept B (SEA: variant 0 -> 3; Agrawal: function
0 -> 2; Hyperplane: another seed's random hyperplane). Its 0/1 errors are the stream every
detector sees, in the same run: forgeml's `ErrorRateDetector` (ARL set to 100,000, so one
false alarm per 100,000 predictions is expected), river's ADWIN and DDM (defaults) on
every stream, and river's KSWIN (defaults) on the first `--kswin-seeds` seeds of each
generator only: it runs a KS test per sample, ~1 ms each on this machine.

Scored per stream: the change is detected when the detector alarms in the `--after`
samples after it (delay: the first such alarm's index minus the change's, plus one); an
alarm before the change is a false alarm (reported per 50,000 pre-change samples).
Goals: recall >= 0.95, <= 1 false alarm per 50,000 samples, mean delay no worse than the
best of river's three. The
delays are compared stream by stream, over the streams both detectors caught: a peer
that misses the slow changes would otherwise look fast.

    PYTHONPATH=src .venv/bin/python benchmarks/concept_drift.py [--quick] [--json]
"""

from __future__ import annotations

import itertools
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from _cli import make_parser, print_json

TRAIN = 5_000
RUN_LENGTH = 100_000
PER = 50_000  # false alarms are reported per this many samples
PEERS = ("ADWIN", "KSWIN", "DDM")


def _concepts(name: str, seed: int) -> tuple[Iterator[Any], Iterator[Any]]:
    from river.datasets import synth

    if name == "SEA":
        return iter(synth.SEA(variant=0, noise=0.1, seed=seed)), iter(
            synth.SEA(variant=3, noise=0.1, seed=seed + 10_000)
        )
    if name == "Agrawal":
        return iter(synth.Agrawal(classification_function=0, seed=seed)), iter(
            synth.Agrawal(classification_function=2, seed=seed + 10_000)
        )
    return iter(synth.Hyperplane(seed=seed, n_features=10)), iter(
        synth.Hyperplane(seed=seed + 10_000, n_features=10)
    )


def _arrays(samples: Iterator[Any], count: int) -> tuple[np.ndarray, np.ndarray]:
    rows = list(itertools.islice(samples, count))
    features = np.array([list(x.values()) for x, _ in rows], dtype=np.float64)
    return features, np.array([int(y) for _, y in rows])


def error_stream(name: str, seed: int, before: int, after: int) -> np.ndarray:
    """The frozen base learner's 0/1 errors: `before` samples of concept A, `after` of B."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.tree import DecisionTreeClassifier

    first, second = _concepts(name, seed)
    features, labels = _arrays(first, TRAIN)
    if name == "Agrawal":
        learner: Any = DecisionTreeClassifier(max_depth=8, random_state=seed)
    else:
        learner = make_pipeline(StandardScaler(), LogisticRegression())
    learner.fit(features, labels)
    errors = []
    for samples, count in ((first, before), (second, after)):
        features, labels = _arrays(samples, count)
        errors.append((learner.predict(features) != labels).astype(np.int64))
    return np.concatenate(errors)


def _forgeml(errors: np.ndarray, seed: int) -> list[int]:
    from forgeml.monitor.drift import ConceptDriftConfig, ErrorRateDetector

    detector = ErrorRateDetector(ConceptDriftConfig(run_length=RUN_LENGTH))
    return [alarm.index for alarm in detector.update(errors)]


def _river(name: str) -> Callable[[np.ndarray, int], list[int]]:
    def run(errors: np.ndarray, seed: int) -> list[int]:
        from river import drift
        from river.drift import binary

        detector: Any = {
            "ADWIN": drift.ADWIN,
            "KSWIN": lambda: drift.KSWIN(seed=seed),
            "DDM": binary.DDM,
        }[name]()
        found = []
        for index, value in enumerate(errors.tolist()):
            detector.update(bool(value) if name == "DDM" else value)
            if detector.drift_detected:
                found.append(index)
        return found

    return run


def _score(alarms: list[int], change: int, end: int) -> dict[str, Any]:
    later = [index for index in alarms if change <= index < end]
    return {
        "detected": bool(later),
        "delay": later[0] - change + 1 if later else None,
        "false_alarms": sum(index < change for index in alarms),
    }


def measure(seeds: int, before: int, after: int, kswin_seeds: int) -> dict[str, Any]:
    detectors = {"forgeml": _forgeml, **{name: _river(name) for name in PEERS}}
    scores: dict[str, list[dict[str, Any]]] = {name: [] for name in detectors}
    seconds = dict.fromkeys(detectors, 0.0)
    rates = []
    for generator, seed in itertools.product(("SEA", "Agrawal", "Hyperplane"), range(seeds)):
        errors = error_stream(generator, seed, before, after)
        rates.append((generator, errors[:before].mean(), errors[before:].mean()))
        for name, detect in detectors.items():
            if name == "KSWIN" and seed >= kswin_seeds:
                continue
            started = time.perf_counter()
            alarms = detect(errors, seed)
            seconds[name] += time.perf_counter() - started
            scored = _score(alarms, before, before + after)
            scores[name].append({"generator": generator, "seed": seed, **scored})
    figures: dict[str, Any] = {
        "error_rates": {
            generator: {
                "before": statistics.fmean(r[1] for r in rates if r[0] == generator),
                "after": statistics.fmean(r[2] for r in rates if r[0] == generator),
            }
            for generator in ("SEA", "Agrawal", "Hyperplane")
        }
    }
    for name, found in scores.items():
        delays = [score["delay"] for score in found if score["delay"] is not None]
        false_alarms = sum(score["false_alarms"] for score in found)
        figures[name] = {
            "streams": len(found),
            "recall": sum(score["detected"] for score in found) / len(found),
            "mean_delay": statistics.fmean(delays) if delays else None,
            "median_delay": statistics.median(delays) if delays else None,
            "false_alarms": false_alarms,
            "false_alarms_per_50k": false_alarms / (len(found) * before) * PER,
            "seconds": seconds[name],
            "by_generator": {
                generator: _by_generator([s for s in found if s["generator"] == generator])
                for generator in ("SEA", "Agrawal", "Hyperplane")
            },
        }
    figures["paired"] = {name: _paired(scores["forgeml"], scores[name]) for name in PEERS}
    ours = figures["forgeml"]
    figures["goals"] = {
        "recall": ours["recall"] >= 0.95,
        "false_alarms": ours["false_alarms_per_50k"] <= 1.0,
        "delay_vs_every_peer": all(
            pair["forgeml"] is not None and pair["forgeml"] <= pair["peer"]
            for pair in figures["paired"].values()
        ),
    }
    return figures


def _paired(ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean delays over the streams both detectors caught (a peer that misses the hard
    changes would otherwise look fast)."""
    delays = {(s["generator"], s["seed"]): s["delay"] for s in ours}
    pairs = [
        (delays[(s["generator"], s["seed"])], s["delay"])
        for s in theirs
        if s["delay"] is not None and delays[(s["generator"], s["seed"])] is not None
    ]
    return {
        "streams": len(pairs),
        "forgeml": statistics.fmean(p[0] for p in pairs) if pairs else None,
        "peer": statistics.fmean(p[1] for p in pairs) if pairs else None,
    }


def _by_generator(found: list[dict[str, Any]]) -> dict[str, Any]:
    delays = [score["delay"] for score in found if score["delay"] is not None]
    return {
        "recall": sum(score["detected"] for score in found) / len(found) if found else None,
        "mean_delay": statistics.fmean(delays) if delays else None,
        "false_alarms": sum(score["false_alarms"] for score in found),
    }


def report(figures: dict[str, Any]) -> None:
    print(
        f"concept drift: {figures['seeds']} seeds x SEA, Agrawal, Hyperplane; change after "
        f"{figures['before']} samples, {figures['after']} after it (load "
        f"{figures['load_average_1min']:.1f})"
    )
    for generator, rate in figures["error_rates"].items():
        print(f"  {generator:<10} base learner's error {rate['before']:.3f} -> {rate['after']:.3f}")
    print(
        f"  {'detector':<9} {'streams':>7} {'recall':>7} {'mean delay':>11} {'median':>7} "
        f"{'FA/50k':>7}  by generator (recall, mean delay)"
    )
    for name in ("forgeml", *PEERS):
        found = figures[name]
        per = "  ".join(
            f"{g}: {v['recall']:.2f}, {v['mean_delay']:.0f}"
            if v["mean_delay"] is not None
            else f"{g}: {v['recall']:.2f}, -"
            for g, v in found["by_generator"].items()
        )
        mean = found["mean_delay"]
        median = found["median_delay"]
        print(
            f"  {name:<9} {found['streams']:>7} {found['recall']:>7.2f} "
            f"{f'{mean:.0f}' if mean is not None else '-':>11} "
            f"{f'{median:.0f}' if median is not None else '-':>7} "
            f"{found['false_alarms_per_50k']:>7.2f}  {per}"
        )
    print("  mean delay over the streams both caught (forgeml vs peer):")
    for name, pair in figures["paired"].items():
        if pair["streams"]:
            print(
                f"    vs {name:<6} {pair['streams']:>3} streams: "
                f"{pair['forgeml']:.0f} vs {pair['peer']:.0f}"
            )
    goals = figures["goals"]
    print(
        f"  goals: recall >= 0.95 {'met' if goals['recall'] else 'NOT met'}; <= 1 false alarm "
        f"per 50k {'met' if goals['false_alarms'] else 'NOT met'}; mean delay <= each peer's "
        f"on the same streams {'met' if goals['delay_vs_every_peer'] else 'NOT met'}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__, "3 seeds, shorter streams")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per generator (30)")
    args = parser.parse_args(argv)
    seeds = args.seeds or (3 if args.quick else 30)
    before, after = (4_000, 1_000) if args.quick else (15_000, 3_000)
    kswin_seeds = 1 if args.quick else 2
    figures: dict[str, Any] = {
        "quick": args.quick,
        "seeds": seeds,
        "before": before,
        "after": after,
        "kswin_seeds": kswin_seeds,
        "run_length": RUN_LENGTH,
        "load_average_1min": os.getloadavg()[0],
    }
    figures |= measure(seeds, before, after, kswin_seeds)
    report(figures)
    print_json(args, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
