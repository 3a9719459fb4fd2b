"""Benchmark of issue 15: the control plane's run list, reads and token checks, vs MLflow.

What is measured, over N seeded finished runs (50 params and 50 metrics each, written
into MLflow's tables and forgeml's `runs` table by benchmarks/_cp_seed.py), on SQLite and,
with `--pg URL` (or FORGEML_TEST_PG_URL), on fresh PostgreSQL databases:

- forgeml: its API served by uvicorn (`api_in_thread`, in a child process) with the
  accounts authorizer, called over HTTP by httpx with a real bearer token:
  `GET /api/v1/runs?status=FINISHED&limit=100` (newest first) and
  `GET /api/v1/runs?name=sweep-0&status=FINISHED&limit=100`, each request followed by its
  next page (the cursor of `X-Next-Cursor`; a name has about 1,000 runs): p50/p95 of
  the single requests. The list route filters on name, status and parent and sorts on
  started_at, name or status; it has no metric or param filter, so MLflow's filtered
  search below has no exact twin here.
- authenticated reads/s: `GET /api/v1/alerts` from 8 threads for a fixed count, against
  the accounts server and against the same app with no sign-in (single-user);
- one token check: `forgeml.auth.authenticate` in this process, median in µs.
- MLflow (baseline): `mlflow server` over the same MLflow store, single worker,
  `POST /api/2.0/mlflow/runs/search` with `metrics.accuracy > 0.5 and params.model =
  'mlp3'`, ordered by `metrics.accuracy DESC`, 100 per page, plus its next page; and the
  UI's unfiltered list (ordered by start time). p50/p95 likewise, over at most
  MLFLOW_ROUNDS first pages (each takes seconds).

Target: forgeml's list p95 under 200 ms at 100k runs. Run from the repository root:

    PYTHONPATH=src .venv/bin/python benchmarks/control_plane.py            # 100k runs
    PYTHONPATH=src .venv/bin/python benchmarks/control_plane.py --quick    # 1k runs
    PYTHONPATH=src .venv/bin/python benchmarks/control_plane.py --pg postgresql+psycopg://...

The three servers of a database (forgeml's with accounts and single-user, and MLflow's,
without its job runner) start together and are timed one after the other. `--quick`
(SQLite alone, FORGEML_TEST_PG_URL unset) measured on this 2-core machine (`/usr/bin/time`,
`--quick --json`, the script before this change run at the same time): 72 s of wall time
and 23.2 s of CPU, against 191 s and 24.8 s before, at a load average of 12 to 19 (an
unrelated CI run). With FORGEML_TEST_PG_URL set it measures PostgreSQL too, twice the work.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx

from _cli import make_parser, print_json
from _cp_seed import fresh_databases, seed

TARGET_P95_MS = 200.0
MLFLOW_ROUNDS = 3
MLFLOW_FILTER = "metrics.accuracy > 0.5 and params.model = 'mlp3'"
FORGEML_QUERIES = {
    "status": {"status": "FINISHED", "limit": "100"},
    "name_status": {"name": "sweep-0", "status": "FINISHED", "limit": "100"},
}
MLFLOW_QUERIES = {
    "filter_sort": {"filter": MLFLOW_FILTER, "order_by": ["metrics.accuracy DESC"]},
    "list": {"filter": "", "order_by": ["attributes.start_time DESC"]},
}


def _percentiles(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    return {
        "p50_ms": statistics.median(ms),
        "p95_ms": ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))],
        "requests": len(ms),
    }


def _timed(call: Callable[[], httpx.Response]) -> tuple[float, httpx.Response]:
    started = time.perf_counter()
    response = call()
    seconds = time.perf_counter() - started
    response.raise_for_status()
    return seconds, response


def forgeml_list(client: httpx.Client, query: dict[str, str], rounds: int) -> dict[str, float]:
    """`rounds` first pages, each with its next page; times of every request."""
    times: list[float] = []
    for _ in range(rounds):
        took, first = _timed(lambda: client.get("/api/v1/runs", params=query))
        times.append(took)
        cursor = first.headers.get("X-Next-Cursor")
        if len(first.json()) != 100 or not cursor:
            raise RuntimeError(f"{query}: no full first page with a next one")
        after = {**query, "after": cursor}
        took, second = _timed(lambda after=after: client.get("/api/v1/runs", params=after))
        if len(second.json()) != 100:
            raise RuntimeError(f"{query}: no full second page")
        times.append(took)
    return _percentiles(times)


def mlflow_search(client: httpx.Client, body: dict[str, Any], rounds: int) -> dict[str, float]:
    """As `forgeml_list`, through MLflow's runs/search."""
    body = {"experiment_ids": ["1"], "max_results": 100, **body}
    times: list[float] = []
    for _ in range(rounds):
        took, first = _timed(lambda: client.post("/api/2.0/mlflow/runs/search", json=body))
        times.append(took)
        page = first.json()
        if len(page.get("runs", [])) != 100 or not page.get("next_page_token"):
            raise RuntimeError(f"MLflow {body}: no full first page with a next one")
        after = {**body, "page_token": page["next_page_token"]}
        took, _ = _timed(lambda after=after: client.post("/api/2.0/mlflow/runs/search", json=after))
        times.append(took)
    return _percentiles(times)


def reads_per_second(url: str, headers: dict[str, str], total: int, threads: int = 8) -> float:
    """GET /api/v1/alerts `total` times from `threads` threads (one client each)."""

    def worker(count: int) -> None:
        with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
            for _ in range(count):
                client.get("/api/v1/alerts").raise_for_status()

    worker(threads)  # warm the routes and the connection pool's first use
    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(worker, [total // threads] * threads))
    return (total // threads) * threads / (time.perf_counter() - started)


def _serve(home: str, db_url: str | None, mode: str, port: Any, stop: Any) -> None:
    # a child process: the server's GIL is not the client's
    from forgeml.api._accounts import choose_authorizer
    from forgeml.api._thread import api_in_thread
    from forgeml.core.config import Settings
    from forgeml.core.workspace import Workspace

    workspace = Workspace(Settings(home=Path(home), user="bench", db_url=db_url))
    with api_in_thread(workspace, authorizer=choose_authorizer(workspace, mode)) as url:
        port.value = int(url.rsplit(":", 1)[1])
        stop.wait()
    workspace.close()


@contextmanager
def forgeml_server(home: Path, db_url: str | None, mode: str) -> Iterator[str]:
    """The forgeml API over `home` in a child process; yields its URL."""
    context = multiprocessing.get_context("spawn")
    port, stop = context.Value("i", 0), context.Event()
    process = context.Process(target=_serve, args=(str(home), db_url, mode, port, stop))
    process.start()
    try:
        deadline = time.monotonic() + 120
        while port.value == 0:
            if not process.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the forgeml API did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port.value}"
    finally:
        stop.set()
        process.join(30)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def mlflow_server(store_uri: str, scratch: Path) -> Iterator[str]:
    """`mlflow server` (one worker) over `store_uri`; yields its URL."""
    port = _free_port()
    command = [
        sys.executable, "-m", "mlflow", "server", "--backend-store-uri", store_uri,
        "--default-artifact-root", (scratch / "mlartifacts").as_uri(),
        "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
    ]  # fmt: skip
    scratch.mkdir(parents=True, exist_ok=True)  # started beside forgeml's, which made it
    log = (scratch / "mlflow-server.log").open("wb")
    # without its job runner (MLflow 3's default starts `mlflow.server.jobs._job_runner` and
    # its Huey consumers beside the server): no benchmark submits MLflow jobs, and those
    # processes' start-up took the cores the servers and pages are timed on
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    # its own session: `mlflow server` starts uvicorn as a child, stopped with it
    process = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"mlflow server did not start; see {scratch}/mlflow-server.log")
            time.sleep(0.2)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def prepare(home: Path, db_url: str | None, mlflow_url: str | None) -> tuple[str, str, str]:
    """Both schemas, MLflow's experiment and a token of a viewer account; returns
    (forgeml store URL, MLflow store URL, experiment id) after setting the token aside."""
    from forgeml.core.config import Settings
    from forgeml.core.workspace import Workspace
    from forgeml.tracking._mlflow import ensure_experiment, open_client, tracking_uri

    if mlflow_url is not None:
        os.environ["MLFLOW_TRACKING_URI"] = mlflow_url
    workspace = Workspace(Settings(home=home, user="bench", db_url=db_url))
    try:
        _ = workspace.store  # opening it migrates forgeml's schema
        client = open_client(workspace)
        experiment = ensure_experiment(client, "bench", (home / "mlartifacts").as_uri())
        return workspace.settings.database_url, tracking_uri(workspace.settings), experiment
    finally:
        workspace.close()


def token_for_viewer(home: Path, db_url: str | None) -> str:
    """An unscoped token of the service account `ci`, a viewer of the default project."""
    from forgeml.auth import add_member, create_user, issue_token
    from forgeml.core.config import Settings
    from forgeml.core.workspace import Workspace

    workspace = Workspace(Settings(home=home, user="bench", db_url=db_url))
    try:
        create_user(workspace, "ci", actor="bench", kind="service")
        add_member(workspace, "default", "ci", "viewer", actor="bench")
        return issue_token(workspace, "ci", "bench", actor="bench")[1]
    finally:
        workspace.close()


def token_check_us(home: Path, db_url: str | None, token: str, count: int = 300) -> float:
    """Median µs of one `authenticate` (the id's row looked up, the secret's hash compared)."""
    from forgeml.auth import authenticate
    from forgeml.core.config import Settings
    from forgeml.core.workspace import Workspace

    workspace = Workspace(Settings(home=home, user="bench", db_url=db_url))
    try:
        times = []
        for _ in range(count):
            started = time.perf_counter()
            authenticate(workspace, token)
            times.append(time.perf_counter() - started)
        return statistics.median(times) * 1e6
    finally:
        workspace.close()


def measure_backend(
    scratch: Path,
    db_url: str | None,
    mlflow_url: str | None,
    runs: int,
    rounds: int,
    mlflow_runs: int,
) -> dict[str, Any]:
    """Seed `runs` runs into one kind of database (the first `mlflow_runs` of them into
    MLflow's store too) and measure both servers over them."""
    home = scratch / "home"
    forgeml_url, store_uri, experiment = prepare(home, db_url, mlflow_url)
    started = time.perf_counter()
    seed(forgeml_url, store_uri, experiment, runs, mlflow_runs)
    figures: dict[str, Any] = {"seed_seconds": time.perf_counter() - started}
    token = token_for_viewer(home, db_url)
    bearer = {"Authorization": f"Bearer {token}"}
    # the three servers start together (a start is mostly imports, and MLflow's takes the
    # longest), then each is timed alone while the others wait idle
    with ExitStack() as servers, ThreadPoolExecutor(3) as pool:
        starting = [
            pool.submit(servers.enter_context, forgeml_server(home, db_url, "accounts")),
            pool.submit(servers.enter_context, forgeml_server(home, db_url, "single-user")),
            pool.submit(servers.enter_context, mlflow_server(store_uri, scratch)),
        ]
        wait(starting)  # every one up, or failed, before any is stopped
        accounts, single_user, mlflow = (started.result() for started in starting)
        with httpx.Client(base_url=accounts, headers=bearer, timeout=120) as client:
            figures["forgeml"] = {
                name: forgeml_list(client, query, rounds) for name, query in FORGEML_QUERIES.items()
            }
        figures["reads_per_second_token"] = reads_per_second(accounts, bearer, 40 * rounds)
        figures["reads_per_second_no_auth"] = reads_per_second(single_user, {}, 40 * rounds)
        figures["token_check_us"] = token_check_us(home, db_url, token)
        # MLflow's filtered search takes seconds a request: fewer rounds keep the run short
        slow = min(rounds, MLFLOW_ROUNDS)
        with httpx.Client(base_url=mlflow, timeout=600) as client:
            figures["mlflow"] = {
                name: mlflow_search(client, {**body, "experiment_ids": [experiment]}, slow)
                for name, body in MLFLOW_QUERIES.items()
            }
    worst = max(q["p95_ms"] for q in figures["forgeml"].values())
    figures["target_met"] = worst < TARGET_P95_MS
    return figures


def measure(
    runs: int, rounds: int, pg_url: str | None, mlflow_runs: int | None = None
) -> dict[str, Any]:
    """Every backend asked for; the load average next to the figures (a shared machine)."""
    mlflow_runs = runs if mlflow_runs is None else min(runs, mlflow_runs)
    figures: dict[str, Any] = {
        "runs": runs, "mlflow_runs": mlflow_runs, "rounds": rounds,
        "target_p95_ms": TARGET_P95_MS,
    }  # fmt: skip
    figures["load_before"] = os.getloadavg()
    with tempfile.TemporaryDirectory() as scratch:
        figures["sqlite"] = measure_backend(
            Path(scratch) / "sqlite", None, None, runs, rounds, mlflow_runs
        )
        if pg_url:
            with fresh_databases(pg_url, ["forgeml", "mlflow"]) as (forgeml_db, mlflow_db):
                figures["postgresql"] = measure_backend(
                    Path(scratch) / "pg", forgeml_db, mlflow_db, runs, rounds, mlflow_runs
                )
            os.environ.pop("MLFLOW_TRACKING_URI", None)
    figures["load_after"] = os.getloadavg()
    return figures


def print_table(figures: dict[str, Any]) -> None:
    print(
        f"control plane over {figures['runs']} runs (50 params, 50 metrics each; MLflow's "
        f"store holds the first {figures['mlflow_runs']}), "
        f"{figures['rounds']} first pages + next pages; load {figures['load_before']}"
    )
    print(f"{'database':<11}{'query':<36}{'p50 ms':>10}{'p95 ms':>10}")
    for backend in ("sqlite", "postgresql"):
        if backend not in figures:
            continue
        found = figures[backend]
        for server in ("forgeml", "mlflow"):
            for name, q in found[server].items():
                label = f"{server} {name}"
                print(f"{backend:<11}{label:<36}{q['p50_ms']:>10.1f}{q['p95_ms']:>10.1f}")
        print(
            f"{backend:<11}reads/s (8 threads): {found['reads_per_second_token']:.0f} with a "
            f"token, {found['reads_per_second_no_auth']:.0f} without; one token check "
            f"{found['token_check_us']:.0f} µs; seeding {found['seed_seconds']:.1f} s"
        )
        verdict = "met" if found["target_met"] else "NOT met"
        print(f"{backend:<11}forgeml list p95 under {TARGET_P95_MS:g} ms -> {verdict}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = make_parser(__doc__, "1,000 runs and 2 rounds instead of 100,000 and 25")
    parser.add_argument("--runs", type=int, default=100_000, help="runs seeded")
    parser.add_argument("--rounds", type=int, default=25, help="first pages (each + next)")
    parser.add_argument(
        "--mlflow-runs",
        type=int,
        default=None,
        help="seed only this many of the runs into MLflow's store (default: all); its "
        "filtered search takes seconds a request at 5,000 runs",
    )
    parser.add_argument(
        "--pg",
        default=os.environ.get("FORGEML_TEST_PG_URL"),
        help="a PostgreSQL URL whose server gets two fresh databases (default: "
        "FORGEML_TEST_PG_URL; none: SQLite only)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Seed, measure, print the table (and JSON)."""
    args = parse_args(argv)
    runs, rounds = (1_000, 2) if args.quick else (args.runs, args.rounds)
    figures = measure(runs, rounds, args.pg, args.mlflow_runs)
    print_table(figures)
    print_json(args, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
