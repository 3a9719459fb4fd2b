"""forgeml beside the tools its users would pick instead, side by side (issue 12).

In one run on this machine, with the same models, data and load generator on both sides,
each figure a ratio of medians over rounds that alternate between forgeml and the peer
(this VM's speed swings ~2x within minutes, so a slow spell falls on both):

1. trainer samples/s: forgeml's `fit` with MLflow tracking on against PyTorch Lightning's
   `Trainer` with its `MLFlowLogger`, Adult MLP, 600 steps (peers_trainer.py);
2. serving: `forgeml serve` against Ray Serve and BentoML on the Adult MLP (`:predict`) and
   the MiniLM encoder (embeddings): requests/s and p50 at concurrency 1 and 16, and the
   highest sustained open-loop rate (peers_serving.py);
3. the gateway: latency added to OpenAI `/v1/embeddings` on the same replica, and the rate
   lost at saturation, against LiteLLM's proxy (peers_gateway.py);
4. data ingest -> clean -> split: `benchmarks/data_pipeline.py --json`, its last JSON object
   under `data` as it reports it.

The peers never become forgeml's dependencies: they live in their own virtualenvs under
benchmarks/ (`--setup` creates them from peers-requirements.txt and
peers-litellm-requirements.txt), and their servers load the registered models through
forgeml's own code (`_peers/model.py`). A peer that cannot run here is reported with its
own error instead of a ratio.

    PYTHONPATH=src .venv/bin/python benchmarks/peers.py --setup    # once: the peers' venvs
    PYTHONPATH=src .venv/bin/python benchmarks/peers.py            # full run, a table
    PYTHONPATH=src .venv/bin/python benchmarks/peers.py --quick --json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _adult import REPO
from _cli import make_parser, print_json
from peers_gateway import gateway_figure
from peers_serving import serving_figure
from peers_setup import setup_all
from peers_trainer import report as trainer_report
from peers_trainer import trainer_figure
from serving import prepare

FIGURES = ("trainer", "serving", "gateway", "data")


def run(quick: bool, only: set[str]) -> dict[str, Any]:
    """Every figure of this benchmark (those in `only`), in one run."""
    figures: dict[str, Any] = {"quick": quick, "load_average_1min": {"start": os.getloadavg()[0]}}
    with tempfile.TemporaryDirectory(prefix="forgeml-bench-peers-") as where:
        scratch = Path(where)
        if "trainer" in only:
            steps, rounds = (100, 1) if quick else (600, 5)
            figures["trainer"] = trainer_figure(scratch, steps, rounds)
        if only & {"serving", "gateway"}:
            home = scratch / "serving-home"
            home.mkdir()
            prepare(home)
            if "serving" in only:
                rounds, seconds = (1, 1.0) if quick else (5, 3.0)
                figures["serving"] = serving_figure(home, scratch, rounds, seconds)
            if "gateway" in only:
                plan = [(1, 1, 1.0), (8, 1, 1.0)] if quick else [(1, 7, 2.5), (8, 5, 4.0)]
                figures["gateway"] = gateway_figure(home, scratch, plan)
        if "data" in only:
            figures["data"] = data_figure(quick)
    figures["load_average_1min"]["end"] = os.getloadavg()[0]
    figures["ratios"] = ratios(figures)
    return figures


def data_figure(quick: bool) -> dict[str, Any]:
    """benchmarks/data_pipeline.py's own last JSON object (its keys as it reports them)."""
    command = [sys.executable, str(REPO / "benchmarks" / "data_pipeline.py"), "--json"]
    command += ["--quick"] * quick
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run(
        command, check=False, capture_output=True, text=True, env=env, timeout=3600
    )
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-5:])
        return {"error": f"data_pipeline.py exited with {done.returncode}: {tail}"}
    for line in reversed(done.stdout.strip().splitlines()):
        if line.startswith("{"):
            found: dict[str, Any] = json.loads(line)
            return found
    return {"error": "data_pipeline.py printed no JSON object"}


def ratios(figures: dict[str, Any]) -> dict[str, Any]:
    """The headline ratios of the issue's table, with each goal and whether it is met."""
    found: dict[str, Any] = {}
    trainer = figures.get("trainer", {})
    if "ratios" in trainer:
        found["trainer_vs_lightning_defaults"] = trainer["ratios"]["lightning_defaults"]
        found["trainer_vs_lightning_log_every_step"] = trainer["ratios"]["lightning_log_every_step"]
        found["trainer_vs_lightning_fused_adamw"] = trainer["ratios"]["lightning_fused_adamw"]
        found["trainer_goal_met"] = trainer["goal_met"]
    for peer, result in figures.get("serving", {}).get("peers", {}).items():
        if "error" in result:
            found[f"serving_{peer}_error"] = result["error"]
        for kind, per_kind in result.items() if "error" not in result else ():
            for point in ("c1", "c16"):
                found[f"serving_{kind}_{point}_rate_vs_{peer}"] = per_kind[point]["rate_ratio"]
            found[f"serving_{kind}_p50_c1_{peer}_over_forgeml"] = (
                per_kind["c1"][peer]["p50_ms"] / per_kind["c1"]["forgeml"]["p50_ms"]
            )
            sustained = per_kind["sustained"]
            found[f"serving_{kind}_sustained_rate_vs_{peer}"] = sustained["forgeml"]["rate"] / max(
                sustained[peer]["rate"], 1e-9
            )
    serving_ratios = [v for k, v in found.items() if k.startswith("serving_") and "c1_rate" in k]
    serving_ratios += [v for k, v in found.items() if k.startswith("serving_") and "c16_rate" in k]
    if serving_ratios:
        found["serving_goal_met"] = min(serving_ratios) >= 3.0
    if "litellm_error" in figures.get("gateway", {}):
        found["gateway_litellm_error"] = figures["gateway"]["litellm_error"]
    gateway = figures.get("gateway", {}).get("ratios", {})
    found.update({f"gateway_{k}": v for k, v in gateway.items()})
    if "c1_added_p50_under_a_tenth" in gateway:
        found["gateway_latency_goal_met"] = all(
            gateway.get(f"{c}_added_p50_under_a_tenth", False) for c in ("c1", "c8")
        )
    if "c8_forgeml_rate_lost" in gateway:
        found["gateway_rate_goal_met"] = gateway["c8_forgeml_rate_lost"] <= 0.05
    data = figures.get("data", {})
    if "error" in data:
        found["data_error"] = data["error"]
    if "ratios" in data:
        found.update({f"data_{name}": value for name, value in data["ratios"].items()})
        found.update({f"data_{name}_goal_met": met for name, met in data["goals_met"].items()})
    return found


def report(figures: dict[str, Any]) -> None:
    """Print the figures as tables."""
    from peers_report import gateway_lines, headline_lines, serving_lines

    load = figures["load_average_1min"]
    print(f"load average (1 min): {load['start']:.1f} at the start, {load['end']:.1f} at the end")
    if figures["quick"]:
        print("--quick: one short round per point, indicative only; goals are judged on full runs")
    if "trainer" in figures:
        print("\n".join(["", *trainer_report(figures["trainer"])]))
    if "serving" in figures:
        print("\n".join(["", *serving_lines(figures["serving"])]))
    if "gateway" in figures:
        print("\n".join(["", *gateway_lines(figures["gateway"])]))
    if "data" in figures:
        data = figures["data"]
        shown = data.get("error") or json.dumps(data.get("ratios", data.get("targets", "")))
        print(f"\ndata pipeline (benchmarks/data_pipeline.py): {shown}")
    print("\n".join(["", *headline_lines(figures["ratios"])]))


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__, "short points, one round each")
    parser.add_argument("--setup", action="store_true", help="create the peers' venvs, then exit")
    parser.add_argument(
        "--only", default=",".join(FIGURES), help=f"figures to run, of {','.join(FIGURES)}"
    )
    args = parser.parse_args(argv)
    if args.setup:
        setup_all()
        return 0
    only = {name.strip() for name in args.only.split(",") if name.strip()}
    if not only or only - set(FIGURES):
        parser.error(f"--only takes figures of {','.join(FIGURES)}")
    started = time.perf_counter()
    figures = run(args.quick, only)
    figures["wall_s"] = time.perf_counter() - started
    report(figures)
    print_json(args, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
