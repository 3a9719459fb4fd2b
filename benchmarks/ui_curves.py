"""The curves of a chart's first view: 100 runs of 10,000 steps LTTB-downsampled to the
compare page's 960 px, with nothing cached in the app (issue 16).

This is the server's part of `/runs/compare`'s first view (`ui/_curves.run_curves`), the
part `benchmarks/ui.py`'s browser figures cannot tell apart from drawing; each round gets a
new cache, as the page's first visit does. Curves are seeded as `benchmarks/ui.py` seeds
them (`add_curves`), each run a FINISHED row in forgeml's store, and each run's previews
stored by `forgeml.tracking.store_curve_previews`, the function `finish_run` calls as it
ends a run (timed: the cost a run's end gains). Each round times, in turn:

- first view: `run_curves` reading the runs' stored previews (one query) and downsampling
  them from 2,000 points to 960;
- live: the same call on a second forgeml store with no previews over the same MLflow
  store (runs ended before previews existed, or outside forgeml): every curve read from
  MLflow's table and downsampled from 10,000 points;
- MLflow's own client reading the same curves (`MlflowClient.get_metric_history` of each
  run, what MLflow's UI and a user's script call), without downsampling.

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
    """Seed the curves and their previews into fresh stores and time `run_curves` of them
    all, with and without the previews."""
    from forgeml.core.config import Settings
    from forgeml.core.workspace import Workspace
    from forgeml.tracking import store_curve_previews
    from forgeml.tracking._mlflow import open_client, tracking_uri
    from forgeml.ui._curves import CurveCache, run_curves

    figures: dict[str, Any] = {"runs": args.runs, "steps": args.steps, "rounds": args.rounds}
    with tempfile.TemporaryDirectory() as scratch:
        os.environ.pop("MLFLOW_TRACKING_URI", None)
        home = Path(scratch)
        workspace = Workspace(Settings(home=home, user="bench"))
        # the same MLflow store (home/mlflow.db), a forgeml store that holds no previews
        unpreviewed = Workspace(
            Settings(home=home, db_url=f"sqlite:///{home / 'no-previews.db'}", user="bench")
        )
        try:
            open_client(workspace)  # MLflow's schema
            run_ids = [f"{n:032x}" for n in range(args.runs)]
            add_curves(tracking_uri(workspace.settings), run_ids, args.steps)
            for each in (workspace, unpreviewed):
                add_finished_runs(each, run_ids)
            stored = []
            for run_id in run_ids:  # one run a call, as each run's end makes them
                started = time.perf_counter()
                store_curve_previews(workspace, [run_id])
                stored.append(time.perf_counter() - started)
            figures["load_before"] = os.getloadavg()
            client = open_client(workspace)
            seconds, live, peer, drawn, read_live = [], [], [], {}, {}
            for _ in range(args.rounds):
                started = time.perf_counter()
                drawn = run_curves(workspace, run_ids, WIDTH, CurveCache(), set(run_ids))
                seconds.append(time.perf_counter() - started)
                started = time.perf_counter()
                read_live = run_curves(unpreviewed, run_ids, WIDTH, CurveCache(), set(run_ids))
                live.append(time.perf_counter() - started)
                started = time.perf_counter()
                read = [client.get_metric_history(run_id, "loss") for run_id in run_ids]
                peer.append(time.perf_counter() - started)
        finally:
            unpreviewed.close()
            workspace.close()
    figures |= _milliseconds("first_view", seconds) | _milliseconds("live", live)
    figures |= _milliseconds("mlflow_client", peer) | _milliseconds("preview_store", stored)
    figures["mlflow_points_per_curve"] = max(len(history) for history in read)
    figures["points_per_curve"] = max(len(c["loss"][0]) for c in drawn.values())
    figures["live_points_per_curve"] = max(len(c["loss"][0]) for c in read_live.values())
    figures["load_after"] = os.getloadavg()
    figures["goal_ms"] = GOALS["chart_ms"]
    return figures


def add_finished_runs(workspace: Any, run_ids: list[str]) -> None:
    """A FINISHED row in forgeml's store for each run (what `finish_run` leaves)."""
    from datetime import UTC, datetime

    from forgeml.core.store import RunRecord

    now = datetime.now(UTC)
    with workspace.store.session() as session:
        session.add_all(
            RunRecord(
                id=run_id,
                name="bench",
                experiment="bench",
                status="FINISHED",
                config={},
                started_at=now,
                ended_at=now,
                heartbeat_at=now,
                lease_seconds=30,
                pid=0,
                host="bench",
                metrics={},
                created_by="bench",
            )
            for run_id in run_ids
        )


def _milliseconds(name: str, seconds: list[float]) -> dict[str, Any]:
    """`name`_ms (every round) and `name`_median_ms."""
    return {
        f"{name}_ms": [1_000 * s for s in seconds],
        f"{name}_median_ms": 1_000 * statistics.median(seconds),
    }


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
        f"{args.rounds}; load {figures['load_before'][0]:.1f}): from stored previews "
        f"{figures['first_view_median_ms']:,.0f} ms "
        f"(rounds {', '.join(f'{ms:,.0f}' for ms in figures['first_view_ms'])}); "
        f"live from MLflow's table {figures['live_median_ms']:,.0f} ms; "
        f"MLflow's client reading them: {figures['mlflow_client_median_ms']:,.0f} ms; "
        f"storing a run's previews at its end: {figures['preview_store_median_ms']:,.1f} ms"
    )
    print_json(args, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
