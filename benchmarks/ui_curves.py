"""The curves of a chart's first view: 100 runs of 10,000 steps read from MLflow's table and
LTTB-downsampled to the compare page's 960 px, with nothing cached (issue 16).

This is the server's part of `/runs/compare`'s first view (`ui/_curves.run_curves`), the
part `benchmarks/ui.py`'s browser figures cannot tell apart from drawing; each round gets a
new cache, as the page's first visit does. Curves are seeded as `benchmarks/ui.py` seeds
them (`add_curves`). The peer is MLflow's own client reading the same curves
(`MlflowClient.get_metric_history` of each run, what MLflow's UI and a user's script call),
without downsampling, over the same store, once per round as well.

    PYTHONPATH=src .venv/bin/python benchmarks/ui_curves.py            # 100 runs x 10k steps
    PYTHONPATH=src .venv/bin/python benchmarks/ui_curves.py --quick    # 10 runs x 1k steps
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _cli import make_parser, print_json
from ui import GOALS, add_curves

WIDTH = 960  # the compare page's chart, in points (ui/_pages_runs.COMPARE_WIDTH)


def measure(args: Any) -> dict[str, Any]:
    """Seed the curves into a fresh MLflow store and time `run_curves` of them all."""
    from forgeml.core.config import Settings
    from forgeml.core.workspace import Workspace
    from forgeml.tracking._mlflow import open_client, tracking_uri
    from forgeml.ui._curves import CurveCache, run_curves

    figures: dict[str, Any] = {"runs": args.runs, "steps": args.steps, "rounds": args.rounds}
    with tempfile.TemporaryDirectory() as scratch:
        os.environ.pop("MLFLOW_TRACKING_URI", None)
        workspace = Workspace(Settings(home=Path(scratch), user="bench"))
        try:
            open_client(workspace)  # MLflow's schema
            run_ids = [f"{n:032x}" for n in range(args.runs)]
            add_curves(tracking_uri(workspace.settings), run_ids, args.steps)
            figures["load_before"] = os.getloadavg()
            client = open_client(workspace)
            seconds, peer, drawn = [], [], {}
            for _ in range(args.rounds):
                started = time.perf_counter()
                drawn = run_curves(workspace, run_ids, WIDTH, CurveCache(), set(run_ids))
                seconds.append(time.perf_counter() - started)
                started = time.perf_counter()
                read = [client.get_metric_history(run_id, "loss") for run_id in run_ids]
                peer.append(time.perf_counter() - started)
        finally:
            workspace.close()
    figures["first_view_ms"] = [1_000 * s for s in seconds]
    figures["first_view_median_ms"] = 1_000 * statistics.median(seconds)
    figures["mlflow_client_ms"] = [1_000 * s for s in peer]
    figures["mlflow_client_median_ms"] = 1_000 * statistics.median(peer)
    figures["mlflow_points_per_curve"] = max(len(history) for history in read)
    figures["points_per_curve"] = max(len(c["loss"][0]) for c in drawn.values())
    figures["load_after"] = os.getloadavg()
    figures["goal_ms"] = GOALS["chart_ms"]
    return figures


def parse_args(argv: list[str] | None = None) -> Any:
    """Command-line options."""
    parser = make_parser(__doc__, "10 runs of 1,000 steps, 3 rounds: seconds")
    parser.add_argument("--runs", type=int, default=100, help="runs charted together")
    parser.add_argument("--steps", type=int, default=10_000, help="steps of each curve")
    parser.add_argument("--rounds", type=int, default=5, help="first views timed (median)")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.steps, args.rounds = 10, 1_000, 3
    if min(args.runs, args.steps, args.rounds) < 1:
        parser.error("--runs, --steps and --rounds: at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    """Seed, measure, print the figures (and JSON)."""
    args = parse_args(argv)
    figures = measure(args)
    print(
        f"{args.runs} runs x {args.steps} steps, curves of a first view (median of "
        f"{args.rounds}): {figures['first_view_median_ms']:,.0f} ms "
        f"(rounds {', '.join(f'{ms:,.0f}' for ms in figures['first_view_ms'])}; "
        f"load {figures['load_before'][0]:.1f}); MLflow's client reading them: "
        f"{figures['mlflow_client_median_ms']:,.0f} ms"
    )
    print_json(args, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
