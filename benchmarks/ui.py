"""Benchmark of issue 16: the web UI in a real Chromium, vs MLflow's UI over the same runs.

What is measured, in Debian's /usr/bin/chromium driven by Playwright (a fresh browser
context per round, so nothing is cached between rounds), over N seeded finished runs
(benchmarks/_cp_seed.py: 50 params and 50 metrics each, in forgeml's `runs` table and in
the workspace's MLflow store, the first `--mlflow-runs` of them; the seed adds the tags
MLflow's UI reads, `mlflow.runName` and `mlflow.user`, without which its runs page fails
with "Cannot read properties of undefined (reading 'some')"):

- runs page: from navigation to the table's first row visible (forgeml `/runs`, MLflow
  `/#/experiments/<id>/runs`), with the Navigation Timing of the document
  (domContentLoaded, load);
- filter: from pressing Enter in the filter box (forgeml: name `sweep-0`; MLflow:
  `attributes.run_name = 'sweep-0'`) to a table whose rows are all `sweep-0`'s;
- chart: `--chart-runs` runs carry a `loss` curve of `--steps` steps; from navigation to
  the chart drawn on one such run's page (forgeml `/runs/<id>`, its curve LTTB-downsampled
  by the server; MLflow `/#/experiments/<id>/runs/<id>/model-metrics`), on forgeml's
  comparison of 8 of them and of all of them (`/runs/compare`: one chart, every curve
  LTTB-downsampled to the chart's pixel width; issue 16's goal is 100 runs of 10k steps),
  with the longest browser long task seen (PerformanceObserver 'longtask', registered
  before the page's scripts). The charted runs' curve previews are stored as forgeml
  stores them when it ends a run (`forgeml.tracking.store_curve_previews`, what
  `finish_run` calls), after the curves are seeded. The first view of each page (the
  warm-up round: the server reads the previews; later rounds find the curves in its cache
  of downsampled curves) is reported beside the medians;
- log stream (forgeml only: MLflow has no jobs): a job printing `--log-rate` numbered
  lines a second for `--log-seconds` seconds, followed on `/jobs/<id>` until it ends; the
  distinct numbered lines the page shows vs those written.

Both servers run single-user (no sign-in), one process each, started together. Medians
of `--rounds` rounds after a warm-up round; the load average before and after and the
machine's cores are printed with the figures (a shared machine).
Goals (issue 16): runs page < 1 s, filter < 200 ms, chart < 1.5 s with no long task over
200 ms, no log line lost. Run from the repository root:

    PYTHONPATH=src .venv/bin/python benchmarks/ui.py              # 100k runs, 5k in MLflow
    PYTHONPATH=src .venv/bin/python benchmarks/ui.py --quick      # 2k runs, 10 x 1k steps

(`--quick` aims at a minute: 57 s on 2 cores at a load average of 3 to 6; at 10 to 17 the
two servers' start-up alone took over a minute. It times one round after the first view, not
two, with one thread per pool (`_cli.one_thread`); the servers stop together, and MLflow's
without its job runner. Measured on this 2-core machine (`/usr/bin/time`, `--quick --json`,
the script before this change run at the same time): 145 s of wall time and 30.3 s of CPU,
against 190 s and 32.2 s before, at a load average of 12 to 22 (an unrelated CI run);
stopping the servers took 6 s instead of 26 s.)
"""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx

from _cli import make_parser, one_thread, print_json
from _cp_seed import make_runs, seed
from control_plane import mlflow_server

CHROMIUM = "/usr/bin/chromium"
GOALS = {"runs_page_ms": 1000.0, "filter_ms": 200.0, "chart_ms": 1500.0, "long_task_ms": 200.0}
TARGET = "sweep-0"  # the filtered name: with 2,000 runs or more the newest run is another's
COMPARED = 8
# every long task of the page, from before its first script
LONG_TASKS = """
window.__longTasks = [];
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) window.__longTasks.push(entry.duration);
}).observe({type: "longtask", buffered: true});
"""
# a job's command: waits for its go file, then prints numbered lines at a steady rate
LOG_JOB = """
import os, sys, time
go, rate, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
while not os.path.exists(go):
    time.sleep(0.01)
start, written = time.monotonic(), 0
while written < rate * seconds:
    due = int((time.monotonic() - start) * rate) + 1
    sys.stdout.write("".join(f"line {i}\\n" for i in range(written, min(due, int(rate * seconds)))))
    sys.stdout.flush()
    written = min(due, int(rate * seconds))
    time.sleep(0.005)
"""


def create_experiment(mlflow_url: str, home: Path) -> str:
    """The `bench` experiment, made through MLflow's REST API (no mlflow import here)."""
    answer = httpx.post(
        f"{mlflow_url}/api/2.0/mlflow/experiments/create",
        json={"name": "bench", "artifact_location": (home / "mlartifacts").as_uri()},
        timeout=60,
    )
    answer.raise_for_status()
    return str(answer.json()["experiment_id"])


def add_mlflow_tags(store_uri: str) -> None:
    """The tags MLflow's own client writes at a run's start and its runs page reads."""
    db = sqlite3.connect(store_uri.removeprefix("sqlite:///"))
    try:
        rows = db.execute("SELECT run_uuid, name FROM runs").fetchall()
        tags = [("mlflow.runName", name, run) for run, name in rows]
        tags += [("mlflow.user", "bench", run) for run, _ in rows]
        db.executemany("INSERT INTO tags (key, value, run_uuid) VALUES (?, ?, ?)", tags)
        db.commit()
    finally:
        db.close()


def add_curves(store_uri: str, run_ids: list[str], steps: int) -> None:
    """A `loss` curve of `steps` steps per run (and its latest value, which both UIs read
    to know the run has the metric)."""
    db = sqlite3.connect(store_uri.removeprefix("sqlite:///"))
    try:
        for n, run in enumerate(run_ids):
            points = [
                ("loss", 1.0 / (1 + 0.01 * s) + 0.01 * ((s * 7919 + n) % 13), 1_000 * s, run, s)
                for s in range(steps)
            ]
            db.executemany(
                "INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan) "
                "VALUES (?, ?, ?, ?, ?, 0)",
                points,
            )
            db.execute(
                "INSERT INTO latest_metrics (key, value, timestamp, step, is_nan, run_uuid) "
                "VALUES (?, ?, ?, ?, 0, ?)",
                (points[-1][0], points[-1][1], points[-1][2], steps - 1, run),
            )
        db.commit()
    finally:
        db.close()


def store_previews(settings: Any, run_ids: list[str]) -> None:
    """Each run's curve previews, by the function `finish_run` calls as it ends a run (the
    seeded runs have ended), one run a call as each run's end makes them."""
    from forgeml.core.workspace import Workspace
    from forgeml.tracking import store_curve_previews

    workspace = Workspace(settings)
    try:
        for run_id in run_ids:
            store_curve_previews(workspace, [run_id])
    finally:
        workspace.close()


def _serve(home: str, port: Any, stop: Any) -> None:
    # a child process: the server's GIL is not the browser driver's
    from forgeml.api._accounts import choose_authorizer
    from forgeml.api._thread import api_in_thread
    from forgeml.core.config import Settings
    from forgeml.core.workspace import Workspace
    from forgeml.ui import create_app

    workspace = Workspace(Settings(home=Path(home), user="bench"))
    _ = workspace.store  # opening it makes forgeml's schema, which the seed fills
    authorizer = choose_authorizer(workspace, "single-user")
    with api_in_thread(workspace, authorizer=authorizer, app_factory=create_app) as url:
        port.value = int(url.rsplit(":", 1)[1])
        stop.wait()
    workspace.close()


@contextmanager
def forgeml_ui(home: Path) -> Iterator[str]:
    """forgeml's API and UI over `home` in a child process; yields its URL."""
    context = multiprocessing.get_context("spawn")
    port, stop = context.Value("i", 0), context.Event()
    process = context.Process(target=_serve, args=(str(home), port, stop))
    process.start()
    try:
        deadline = time.monotonic() + 120
        while port.value == 0:
            if not process.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the forgeml UI did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port.value}"
    finally:
        stop.set()
        process.join(5)
        if process.is_alive():  # a connection uvicorn waits on: nothing left to measure
            process.terminate()
            process.join(10)


class Pages:
    """Fresh Chromium pages, each in its own context (an empty cache), with the long-task
    observer installed and every console error and page error kept."""

    def __init__(self, browser: Any, timeout_ms: float) -> None:
        self.browser = browser
        self.timeout_ms = timeout_ms
        self.errors: list[str] = []

    @contextmanager
    def open(self) -> Iterator[Any]:
        context = self.browser.new_context(viewport={"width": 1280, "height": 900})
        context.add_init_script(LONG_TASKS)
        page = context.new_page()
        page.set_default_timeout(self.timeout_ms)
        page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        try:
            yield page
        finally:
            context.close()


def _shown_at(page: Any, predicate: str) -> float:
    """performance.now() (ms since navigation) at the first frame where `predicate` holds."""
    handle = page.wait_for_function(f"() => ({predicate}) && performance.now()")
    return float(handle.json_value())


def _navigation(page: Any) -> dict[str, float]:
    timing = page.evaluate(
        "() => { const n = performance.getEntriesByType('navigation')[0];"
        " return {dom_content_loaded_ms: n.domContentLoadedEventEnd, load_ms: n.loadEventEnd}; }"
    )
    return {key: float(value) for key, value in timing.items()}


def _rows_all(selector: str, name: str) -> str:
    return (
        f"(() => {{ const rows = [...document.querySelectorAll({selector!r})];"
        f" return rows.length > 0 && rows.every((r) => r.innerText.includes({name!r})); }})()"
    )


# per UI: the runs page, its first row, its filter box and how to type in it, its rows
FORGEML = {
    "row": ".run-row",
    "filter": "#runs-filter input[name=name]",
    "query": TARGET,
}
MLFLOW = {
    "row": ".ag-pinned-left-cols-container .ag-row",
    "filter": "input[placeholder*='metrics.rmse']",
    "query": f"attributes.run_name = '{TARGET}'",
}


def runs_round(pages: Pages, url: str, ui: dict[str, str]) -> dict[str, float]:
    """One round: the runs page to its first row, then the filter to its rows."""
    with pages.open() as page:
        page.goto(url, wait_until="commit")
        first_row = _shown_at(page, f"document.querySelector({ui['row']!r})")
        page.wait_for_load_state("load")
        figures = {"first_row_ms": first_row, **_navigation(page)}
        if page.evaluate(_rows_all(ui["row"], TARGET)):
            raise RuntimeError(f"{url}: every row is {TARGET}'s before the filter")
        page.fill(ui["filter"], ui["query"])
        started = float(page.evaluate("() => performance.now()"))
        page.press(ui["filter"], "Enter")
        figures["filter_ms"] = _shown_at(page, _rows_all(ui["row"], TARGET)) - started
        return figures


def chart_round(pages: Pages, url: str, ready: str) -> dict[str, float]:
    """One round: a page to its chart drawn (`ready` holds), and its longest long task
    until then and the load event's end."""
    with pages.open() as page:
        page.goto(url, wait_until="commit")
        drawn = _shown_at(page, ready)
        page.wait_for_load_state("load")
        tasks = page.evaluate("() => window.__longTasks")
        return {"chart_ms": drawn, "longest_task_ms": max(tasks, default=0.0)}


def medians(rounds: list[dict[str, float]]) -> dict[str, float]:
    """The median of each figure over the rounds (and the rounds' count)."""
    found = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    return found | {"rounds": len(rounds)}


def log_stream(pages: Pages, url: str, home: Path, rate: int, seconds: float) -> dict[str, Any]:
    """A job printing `rate` numbered lines a second for `seconds`, followed on its page."""
    from forgeml.core.config import Settings
    from forgeml.core.workspace import Workspace
    from forgeml.scheduler.submit import submit_and_run

    go = home / "log-job.go"
    script = home / "log_job.py"
    script.write_text(LOG_JOB)
    command = [sys.executable, str(script), str(go), str(rate), str(seconds)]
    workspace = Workspace(Settings(home=home, user="bench"))
    ran: list[Any] = []
    job = threading.Thread(
        target=lambda: ran.append(
            submit_and_run(
                workspace,
                {"command": command, "name": "log-stream"},
                detach=False,
                wait=True,
                output=lambda _: None,
            )
        )
    )
    job.start()
    try:
        job_id = _job_id(url, "log-stream")
        with pages.open() as page:
            page.goto(f"{url}/jobs/{job_id}")
            page.wait_for_selector("#job-log")
            go.touch()
            started = time.perf_counter()
            page.wait_for_selector("#job-log-end:has-text('Ended')")
            ended = time.perf_counter() - started
            text = page.inner_text("#job-log")
            state = page.inner_text("#job-log-end")
    finally:
        go.touch()
        job.join()
        workspace.close()
    lines = [line for line in text.splitlines() if line.startswith("line ")]
    written = int(rate * seconds)
    shown = len({line for line in lines})
    return {
        "rate_per_s": rate, "seconds": seconds, "written": written, "shown": shown,
        "in_order": lines == [f"line {i}" for i in range(len(lines))],
        "end_seen_after_s": ended, "ended": state, "lost": written - shown,
    }  # fmt: skip


def _job_id(url: str, name: str) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for job in httpx.get(f"{url}/api/v1/jobs", timeout=30).json():
            if job["name"] == name:
                return str(job["job_id"])
        time.sleep(0.05)
    raise RuntimeError(f"no job {name!r} appeared")


def _say(what: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {what}", file=sys.stderr, flush=True)


def _repeat(pages: Pages, rounds: int, once: Callable[[], dict[str, float]]) -> dict[str, float]:
    """The medians of `rounds` rounds after a warm-up round (each server's first answer pays
    its imports and caches), whose figures are kept as `first_...`."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        first = once()
    except PlaywrightTimeout:  # a page that never gets there: said, not measured again
        return {"timed_out_after_ms": pages.timeout_ms, "rounds": 0}
    found = medians([once() for _ in range(rounds)])
    return found | {f"first_{key}": value for key, value in first.items()}


@contextmanager
def both_servers(home: Path, store_uri: str, scratch: Path) -> Iterator[tuple[str, str]]:
    """forgeml's UI and `mlflow server`, started at the same time and stopped at the same
    time (each waits on its server's graceful shutdown); yields their URLs."""
    with ExitStack() as forgeml, ExitStack() as mlflow, ThreadPoolExecutor(2) as pool:
        started = [
            pool.submit(forgeml.enter_context, forgeml_ui(home)),
            pool.submit(mlflow.enter_context, mlflow_server(store_uri, scratch)),
        ]
        wait(started)  # both up, or failed, before either is stopped
        try:
            yield started[0].result(), started[1].result()
        finally:
            _say("stopping the servers")
            stopping = [pool.submit(stack.close) for stack in (forgeml, mlflow)]
            for stopped in stopping:
                stopped.result()
            _say("servers stopped")


def measure(args: Any) -> dict[str, Any]:
    """Seed, serve both UIs, and measure each page in Chromium."""
    from playwright.sync_api import sync_playwright

    from forgeml.core.config import Settings
    from forgeml.tracking._mlflow import tracking_uri

    figures: dict[str, Any] = {
        "runs": args.runs, "mlflow_runs": args.mlflow_runs, "chart_runs": args.chart_runs,
        "steps": args.steps, "rounds": args.rounds, "goals": GOALS,
        "load_before": os.getloadavg(), "cores": os.cpu_count(),
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        home = scratch / "home"
        home.mkdir()
        os.environ.pop("MLFLOW_TRACKING_URI", None)
        settings = Settings(home=home, user="bench")
        store_uri = tracking_uri(settings)
        # each server makes its own schema as it starts (MLflow's migrations take 15 s of a
        # loaded machine), both at once; the rows go in once they are up
        with (
            both_servers(home, store_uri, scratch) as (forgeml_url, mlflow_url),
            sync_playwright() as playwright,
        ):
            _say("servers up")
            started = time.perf_counter()
            experiment = create_experiment(mlflow_url, home)
            seed(settings.database_url, store_uri, experiment, args.runs, args.mlflow_runs)
            add_mlflow_tags(store_uri)
            charted = [run.run_id for run in make_runs(args.chart_runs)]
            add_curves(store_uri, charted, args.steps)
            store_previews(settings, charted)
            figures["seed_seconds"] = time.perf_counter() - started
            _say(f"seeded in {figures['seed_seconds']:.0f} s")
            browser = playwright.chromium.launch(executable_path=CHROMIUM)
            pages = Pages(browser, args.timeout_s * 1000.0)
            try:
                figures["forgeml"] = forgeml_pages(pages, forgeml_url, charted, args.rounds)
                figures["forgeml"]["log"] = log_stream(
                    pages, forgeml_url, home, args.log_rate, args.log_seconds
                )
                _say("forgeml log measured")
                mlflow_runs = f"{mlflow_url}/#/experiments/{experiment}"
                figures["mlflow"] = {
                    "runs_page": _repeat(
                        pages, args.rounds, lambda: runs_round(pages, f"{mlflow_runs}/runs", MLFLOW)
                    ),
                    "chart_run": _repeat(
                        pages,
                        args.rounds,
                        lambda: chart_round(
                            pages,
                            f"{mlflow_runs}/runs/{charted[0]}/model-metrics",
                            MLFLOW_CHART,
                        ),
                    ),
                }
                figures["console_errors"] = pages.errors[:20]
            finally:
                browser.close()
    figures["load_after"] = os.getloadavg()
    figures["goals_met"] = goals_met(figures["forgeml"])
    return figures


def forgeml_pages(pages: Pages, url: str, charted: list[str], rounds: int) -> dict[str, Any]:
    """forgeml's runs page and filter, a run's chart, and the comparison of `COMPARED` runs
    and of all `charted` runs (one chart of them all)."""
    # every chart of the page drawn (uPlot's draw hook marks its figure)
    canvas = (
        "(() => { const f = [...document.querySelectorAll('figure.curve')];"
        " return f.length > 0 && f.every((e) => e.dataset.drawn); })()"
    )

    def compare(runs: list[str]) -> str:
        return f"{url}/runs/compare?" + "&".join(f"run={run}" for run in runs)

    found = {
        "runs_page": _repeat(pages, rounds, lambda: runs_round(pages, f"{url}/runs", FORGEML)),
        "chart_run": _repeat(
            pages, rounds, lambda: chart_round(pages, f"{url}/runs/{charted[0]}", canvas)
        ),
        "chart_compare": _repeat(
            pages, rounds, lambda: chart_round(pages, compare(charted[:COMPARED]), canvas)
        ),
        "chart_all": _repeat(pages, rounds, lambda: chart_round(pages, compare(charted), canvas)),
    }
    _say("forgeml pages measured")
    return found


# MLflow 3.17's run page: a Plotly line a metric of more than one step (single values are
# bars); its path has its points once drawn. (`.plot .scatterlayer path.js-line` matched
# nothing in 3.17, which an earlier run reported as "not drawn in 60 s".)
MLFLOW_CHART = (
    "[...document.querySelectorAll('.js-plotly-plot path.js-line')]"
    ".some((p) => (p.getAttribute('d') || '').length > 100)"
)


def goals_met(found: dict[str, Any]) -> dict[str, bool]:
    """Which of issue 16's goals forgeml's figures meet (the chart's over every page that
    draws one, the comparison of all charted runs among them)."""
    charts = [found["chart_run"], found["chart_compare"], found["chart_all"]]
    return {
        "runs_page": found["runs_page"]["first_row_ms"] < GOALS["runs_page_ms"],
        "filter": found["runs_page"]["filter_ms"] < GOALS["filter_ms"],
        "chart": all(c.get("chart_ms", float("inf")) < GOALS["chart_ms"] for c in charts),
        "no_long_task": all(
            c.get("longest_task_ms", float("inf")) <= GOALS["long_task_ms"] for c in charts
        ),
        "log_lossless": found["log"]["lost"] == 0 and found["log"]["in_order"],
    }


def print_table(figures: dict[str, Any]) -> None:
    print(
        f"web UI in Chromium over {figures['runs']} runs (MLflow's store holds the first "
        f"{figures['mlflow_runs']}); {figures['chart_runs']} runs with {figures['steps']} "
        f"steps; medians of {figures['rounds']} rounds after a first view; load average "
        f"{figures['load_before']} -> {figures['load_after']} on {figures['cores']} cores"
    )
    print(f"{'measure (ms)':<46}{'forgeml':>12}{'MLflow':>12}")
    rows = [
        ("runs page: first row visible", "runs_page", "first_row_ms"),
        ("runs page: domContentLoaded", "runs_page", "dom_content_loaded_ms"),
        ("runs page: load", "runs_page", "load_ms"),
        ("filter: Enter to filtered rows", "runs_page", "filter_ms"),
        ("one run's chart drawn", "chart_run", "chart_ms"),
        ("one run's page: longest long task", "chart_run", "longest_task_ms"),
        (f"{COMPARED} runs compared: charts drawn", "chart_compare", "chart_ms"),
        (f"{COMPARED} runs compared: longest long task", "chart_compare", "longest_task_ms"),
        (f"{COMPARED} runs compared: first view drawn", "chart_compare", "first_chart_ms"),
        (f"{figures['chart_runs']} runs in one chart: drawn", "chart_all", "chart_ms"),
        (f"{figures['chart_runs']} runs in one chart: longest long task", "chart_all",
         "longest_task_ms"),
        (f"{figures['chart_runs']} runs in one chart: first view drawn", "chart_all",
         "first_chart_ms"),
        (f"{figures['chart_runs']} runs in one chart: first view longest task", "chart_all",
         "first_longest_task_ms"),
    ]  # fmt: skip
    for label, group, key in rows:
        cells = [
            f"{figures[ui][group][key]:>12.0f}"
            if key in figures[ui].get(group, {})
            else f"{'-' if group not in figures[ui] else 'timeout':>12}"
            for ui in ("forgeml", "mlflow")
        ]
        print(f"{label:<46}{''.join(cells)}")
    log = figures["forgeml"]["log"]
    print(
        f"log stream: {log['written']} lines written at {log['rate_per_s']}/s, "
        f"{log['shown']} shown (in order: {log['in_order']}), end seen "
        f"{log['end_seen_after_s']:.1f} s after the start; MLflow has no jobs"
    )
    print(
        "goals met:",
        ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in figures["goals_met"].items()),
    )


def parse_args(argv: list[str] | None = None) -> Any:
    """Command-line options."""
    parser = make_parser(
        __doc__,
        "2,000 runs (500 in MLflow), 10 charted runs of 1,000 steps, 1 round after the first "
        "view, pages given 15 s, a log of 1 s, one thread per server: under a minute",
    )
    parser.add_argument("--runs", type=int, default=100_000, help="runs seeded")
    parser.add_argument("--mlflow-runs", type=int, default=5_000, help="of them in MLflow's UI")
    parser.add_argument("--chart-runs", type=int, default=100, help="runs given a curve")
    parser.add_argument("--steps", type=int, default=10_000, help="steps of each curve")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per page (medians)")
    parser.add_argument("--log-rate", type=int, default=5_000, help="log lines a second")
    parser.add_argument("--log-seconds", type=float, default=4.0, help="seconds of log")
    parser.add_argument("--timeout-s", type=float, default=60.0, help="a page's time limit")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.mlflow_runs, args.chart_runs, args.steps, args.rounds = (
            2_000, 500, 10, 1_000, 1
        )  # fmt: skip
        args.log_seconds, args.timeout_s = 1.0, 15.0
    if args.runs < 2_000:
        parser.error("--runs: at least 2000 (the filter needs two run names)")
    args.mlflow_runs = min(args.mlflow_runs, args.runs)
    args.chart_runs = min(args.chart_runs, args.mlflow_runs)
    return args


def main(argv: list[str] | None = None) -> int:
    """Seed, measure, print the table (and JSON)."""
    args = parse_args(argv)
    if args.quick:
        one_thread()  # the servers' too: they start with this environment
    figures = measure(args)
    print_table(figures)
    print_json(args, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
