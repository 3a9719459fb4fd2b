"""Benchmark of issue 13: forgeml's embedded alert evaluation against Prometheus' own
(promtool), on the same series, in the same run.

What is measured: a synthetic serving fleet of M models (each: a 10-bucket latency
histogram, request and 5xx-error counters, a queue-depth gauge, a latency objective; a
seeded share of them slow, failing or swamped) scraped every 15 s for 35 minutes. Both
evaluators run forgeml's shipped rule file (`forgeml monitor rules`) over those series at
every 15 s step:

- forgeml: the samples are put in a `SampleStore` and `AlertEvaluator.evaluate` runs at
  each step, recording the alert state machine in a fresh SQLite store (what
  `forgeml server` does each cycle, less the scrapes). Reported: the median time of one
  evaluation cycle (all rules), the total, and the peak sample count kept.
- promtool (Debian's `prometheus` package, the peer): `promtool test rules` with the same
  input series and evaluation interval, checking at the last step exactly the alerts
  forgeml's evaluator has firing then (labels and annotations). It passes only if the two
  agree; its wall time (start-up, ingestion and every evaluation) is reported beside
  forgeml's total for the same work.

Run from the repository root:

    PYTHONPATH=src .venv/bin/python benchmarks/alerts.py            # 200 models
    PYTHONPATH=src .venv/bin/python benchmarks/alerts.py --quick    # 30 models
    PYTHONPATH=src .venv/bin/python benchmarks/alerts.py --json     # JSON last line
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import select

from _cli import make_parser, print_json
from forgeml.core.config import Settings
from forgeml.core.store import AlertRecord
from forgeml.core.workspace import Workspace
from forgeml.monitor.alerts import AlertEvaluator, SampleStore, labels_of, load_rules
from forgeml.monitor.alerts._state import instances
from forgeml.monitor.assets import RULES_FILE, rules_text

STEP_S = 15
MINUTES = 35
BUCKETS = ("0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "+Inf")
START = 1_800_000_000.0


def fleet(models: int, seed: int = 0) -> list[tuple[dict[str, str], list[float]]]:
    """Every series of the fleet with its values at each step (15 s apart)."""
    rng = random.Random(seed)
    steps = MINUTES * 60 // STEP_S + 1
    series: list[tuple[dict[str, str], list[float]]] = []
    for index in range(models):
        model, instance = f"m{index}", f"10.0.0.{index % 250}:8080"
        kind = rng.choice(["fine"] * 6 + ["slow", "failing", "swamped"])
        rate = rng.uniform(5, 50)  # requests per second
        base = {"model": model, "instance": instance}
        # cumulative share of requests under each bound
        shares = [0.2, 0.5, 0.8, 0.95, 0.99, 0.999, 1, 1, 1, 1]
        if kind == "slow":
            shares = [0, 0, 0, 0.05, 0.1, 0.3, 0.6, 0.9, 1, 1]
        for bound, share in zip(BUCKETS, shares, strict=True):
            values = [round(rate * STEP_S * step * share) for step in range(steps)]
            series.append(({"__name__": "forgeml_request_latency_seconds_bucket", **base,
                            "le": bound}, [float(v) for v in values]))  # fmt: skip
        series.append(({"__name__": "forgeml_requests_total", **base},
                       [float(round(rate * STEP_S * s)) for s in range(steps)]))  # fmt: skip
        error_share = 0.2 if kind == "failing" else 0.01
        errors = [float(round(rate * STEP_S * s * error_share)) for s in range(steps)]
        series.append(({"__name__": "forgeml_request_errors_total", **base, "status": "500"},
                       errors))  # fmt: skip
        depth = [float(rng.randint(1, 9)) if kind == "swamped" else float(rng.choice([0, 0, 1]))
                 for _ in range(steps)]  # fmt: skip
        series.append(({"__name__": "forgeml_queue_depth", **base}, depth))
        series.append(({"__name__": "forgeml_latency_objective_seconds", **base},
                       [0.5] * steps))  # fmt: skip
    return series


def run_forgeml(series: list[tuple[dict[str, str], list[float]]], home: Path) -> dict[str, Any]:
    workspace = Workspace(Settings(home=home, user="bench"))
    samples = SampleStore()
    evaluator = AlertEvaluator(workspace, load_rules(), samples=samples, scrape_replicas=False)
    keys = [labels_of(labels) for labels, _ in series]
    steps = len(series[0][1])
    cycles, promql = [], []
    peak = 0
    started = time.perf_counter()
    for step in range(steps):
        at = START + step * STEP_S
        samples.ingest("fleet", [(k, v[step]) for k, (_, v) in zip(keys, series, strict=True)], at)
        peak = max(peak, len(samples))
        tick = time.perf_counter()
        for rule in evaluator.rules:  # the PromQL alone, without recording (measured apart)
            instances(rule, samples, at)
        promql.append(time.perf_counter() - tick)
        tick = time.perf_counter()
        evaluator.evaluate(at)
        cycles.append(time.perf_counter() - tick)
    total = time.perf_counter() - started - sum(promql)
    with workspace.store.session() as session:
        firing = [
            (row.labels, row.annotations)
            for row in session.scalars(select(AlertRecord).where(AlertRecord.state == "firing"))
        ]
    evaluator.close()
    workspace.close()
    return {"cycle_ms": statistics.median(cycles) * 1000, "total_s": total,
            "promql_ms": statistics.median(promql) * 1000,
            "peak_samples": peak, "firing": firing, "steps": steps}  # fmt: skip


def _series_text(labels: dict[str, str]) -> str:
    name = labels["__name__"]
    inner = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "__name__")
    return f"{name}{{{inner}}}"


def run_promtool(
    series: list[tuple[dict[str, str], list[float]]], firing: list[Any], steps: int, folder: Path
) -> dict[str, Any]:
    promtool = shutil.which("promtool")
    if promtool is None:
        return {"available": False}
    (folder / RULES_FILE).write_text(rules_text())
    by_rule: dict[str, list[dict[str, Any]]] = {}
    for labels, texts in firing:
        exp = {"exp_labels": {k: v for k, v in labels.items() if k != "alertname"}}
        if texts:
            exp["exp_annotations"] = texts
        by_rule.setdefault(labels["alertname"], []).append(exp)
    eval_time = f"{(steps - 1) * STEP_S}s"
    tests = {
        "rule_files": [RULES_FILE],
        "evaluation_interval": f"{STEP_S}s",
        "tests": [{
            "interval": f"{STEP_S}s",
            "input_series": [
                {"series": _series_text(labels), "values": " ".join(f"{v:g}" for v in values)}
                for labels, values in series
            ],
            "alert_rule_test": [
                {"eval_time": eval_time, "alertname": rule.name,
                 "exp_alerts": by_rule.get(rule.name, [])}
                for rule in load_rules()
            ],
        }],
    }  # fmt: skip
    (folder / "bench.test.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    started = time.perf_counter()
    done = subprocess.run(
        [promtool, "test", "rules", "bench.test.yml"],
        cwd=folder, capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - started
    output = "" if done.returncode == 0 else (done.stdout + done.stderr)[-2000:]
    return {"available": True, "total_s": wall, "agrees": done.returncode == 0, "output": output}


def measure(models: int) -> dict[str, Any]:
    series = fleet(models)
    with tempfile.TemporaryDirectory() as scratch:
        ours = run_forgeml(series, Path(scratch) / "home")
        peer = run_promtool(series, ours["firing"], ours["steps"], Path(scratch))
    return {
        "models": models, "series": len(series), "steps": ours["steps"],
        "forgeml_cycle_ms": round(ours["cycle_ms"], 2),
        "forgeml_promql_ms": round(ours["promql_ms"], 2),
        "forgeml_total_s": round(ours["total_s"], 3),
        "forgeml_peak_samples": ours["peak_samples"],
        "firing_alerts": len(ours["firing"]),
        "promtool_total_s": round(peer["total_s"], 3) if peer["available"] else None,
        "promtool_agrees": peer.get("agrees"),
        "promtool_output": peer.get("output", ""),
    }  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = make_parser(__doc__, "30 models instead of 200")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    figures = measure(30 if args.quick else 200)
    print(f"{figures['models']} models, {figures['series']} series, {figures['steps']} steps "
          f"of {STEP_S} s; {figures['firing_alerts']} alerts firing at the end")  # fmt: skip
    print(f"| evaluator | PromQL of one cycle | one cycle, recorded | all {figures['steps']} "
          "steps | agrees |")  # fmt: skip
    print("|---|---|---|---|---|")
    print(f"| forgeml (embedded) | {figures['forgeml_promql_ms']:.1f} ms | "
          f"{figures['forgeml_cycle_ms']:.1f} ms | {figures['forgeml_total_s']:.2f} s "
          "| - |")  # fmt: skip
    if figures["promtool_total_s"] is None:
        print("| promtool | (promtool is missing: Debian's prometheus package) | | | |")
    else:
        print(f"| promtool (Prometheus 2.42) | - | - | {figures['promtool_total_s']:.2f} s | "
              f"{'yes' if figures['promtool_agrees'] else 'NO'} |")  # fmt: skip
    if figures["promtool_output"]:
        print(figures["promtool_output"], file=sys.stderr)
    print_json(args, figures)
    return 0 if figures["promtool_agrees"] in (True, None) else 1


if __name__ == "__main__":
    sys.exit(main())
