"""Benchmark of issue 5's model server: the model's own time, then the server under load.

What is measured, in one run on this machine:

1. The limit: the model's own time in-process (`forgeml.serve.model.LoadedModel.run_rows`:
   raw rows -> FeatureSpec or tokenizer -> forward -> decoded outputs, i.e. all the work a
   server must do besides HTTP), at batch 1 and at the batch size with the most rows/s,
   for the Adult MLP and the SST-2 MiniLM classifier.
2. The server direct: `forgeml serve` in a child process, driven by a load generator in a
   SECOND child process (asyncio + aiohttp over loopback, closed loop, each point bounded in
   seconds): requests/s, p50 and p99 at several concurrencies, for the Adult MLP
   (`:predict`) and MiniLM embeddings (`/v1/embeddings`).
3. Batching: MiniLM embeddings at saturation with `--max-batch-size 1` vs dynamic batching
   (the default, no queue delay, and `--max-wait-ms 20`), three servers measured in
   alternating rounds (`BATCHING_ARMS`, medians).
4. Adult p99 at 80% of its maximum sustained throughput: open-loop load (a request every
   1/rate s whether or not earlier ones finished, over a pool of `OPEN_LOOP_CONNECTIONS`
   keep-alive connections, each request timed from when it was due); the sustained rate is
   the highest open-loop rate served in full without a queue building up (`sustained_rate`).
5. The gateway: both models deployed (`forgeml.serve.deployments.deploy`, one replica each)
   behind `forgeml gateway` in its own process, with an API key; the same load points at
   concurrency 1 (7 rounds of 2.5 s) and 16 (3 rounds of 5 s), each round sending a model's
   point to the replica directly and then through the gateway, back to back: "the gateway
   adds" is the median of the per-round differences, measured on the same replica.

Targets (issue 5): server p50 overhead at concurrency 1 under 1 ms over the model's own
batch-1 time (judged against the server's own inference time during the same load point,
read from its `forgeml_inference_seconds` histogram, 5 rounds; the p50 minus the in-process
limit of step 1 is reported too); the gateway under 1 ms p50 more; dynamic batching >= 3x
batch-1 serving for MiniLM at saturation; Adult p99 under 50 ms at 80% of the maximum
sustained throughput.
`target(kind, base_url, model)` builds the same request for any base URL (a server, a
replica or the gateway), so the direct and gateway rows send identical requests.

The models are trained here (Adult MLP 20 steps, MiniLM 2 steps on 64 SST-2 rows):
latency does not depend on how long a model trained.

    PYTHONPATH=src .venv/bin/python benchmarks/serving.py            # 10 s per load point
    PYTHONPATH=src .venv/bin/python benchmarks/serving.py --quick    # 1-2 s per point
    PYTHONPATH=src .venv/bin/python benchmarks/serving.py --json     # JSON last line
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _adult import REPO, prepare_adult
from _cli import make_parser, print_json

SST2 = REPO.parent / "shared" / "data" / "sst2" / "train.tsv"
TEXT = "a gorgeous, witty, seductive movie that keeps you guessing."
OPEN_LOOP_CONNECTIONS = 32


# --- models -------------------------------------------------------------------------------


def prepare(home: Path) -> None:
    """Adult MLP and MiniLM classifier registered in `home` (as adult-mlp, sst2-minilm)."""
    from forgeml.data import pipeline
    from forgeml.data.ingest import IngestOptions
    from forgeml.tracking.runner import run_training
    from forgeml.train.config import TrainConfig, load_config

    workspace = prepare_adult(home)
    try:
        steps = ["max_steps=20", "epochs=null", "schedule.warmup_steps=0"]
        run_training(workspace, load_config(str(REPO / "examples/adult/train.yaml"), steps))
        rows = SST2.read_text(encoding="utf-8").splitlines()[:65]
        source = home / "sst2.tsv"
        source.write_text("\n".join(rows) + "\n", encoding="utf-8")
        pipeline.add(workspace, "sst2", source, IngestOptions())
        pipeline.derive(workspace, "split", "sst2", {"ratios": [0.8, 0.1, 0.1], "seed": 0})
        text = {
            "name": "sst2-minilm",
            "data": {"dataset": "sst2", "target": "label", "text_column": "sentence"},
            "model": {"name": "text_classifier", "params": {"max_length": 64}},
            "max_steps": 2,
            "batch_size": 16,
            "schedule": {"warmup_steps": 0},
        }
        run_training(workspace, TrainConfig.model_validate(text))
    finally:
        workspace.close()


def adult_rows(count: int) -> list[dict[str, Any]]:
    """Raw Adult test records (no label), cleaned as the example's recipe does."""
    import polars as pl

    path = REPO.parent / "shared" / "data" / "adult" / "adult.test"
    frame = pl.read_csv(path, skip_rows=1, has_header=False, n_rows=4 * count, infer_schema=False)
    names = [
        "age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
        "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
        "hours-per-week", "native-country", "Y",
    ]  # fmt: skip
    frame = frame.rename(dict(zip(frame.columns, names, strict=True)))
    frame = frame.with_columns(pl.col(pl.String).str.strip_chars().replace("?", None))
    numbers = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
    frame = frame.with_columns(pl.col(numbers).cast(pl.Int64)).drop_nulls().head(count)
    return frame.drop("Y").to_dicts()


def limit(home: Path, quick: bool) -> dict[str, Any]:
    """In-process time of `run_rows` per batch size (median of repeats, ms)."""
    from forgeml.core.config import Settings
    from forgeml.core.workspace import Workspace
    from forgeml.serve.model import load_model
    from forgeml.tracking import get_model_version

    workspace = Workspace(Settings(home=home, user="bench"))
    found: dict[str, Any] = {}
    cases = {
        "adult-mlp": ((1, 8, 32, 128), adult_rows(128), {"label", "probabilities"}),
        "sst2-minilm": ((1, 8, 32), [TEXT] * 32, {"embeddings"}),
    }
    for name, (sizes, rows, outputs) in cases.items():
        model = load_model(workspace, get_model_version(workspace, name), "torch", None)
        per_size = {}
        for size in sizes:
            batch = rows[:size]
            model.run_rows(batch, outputs)  # warm up
            times, budget = [], time.perf_counter() + (0.5 if quick else 2.0)
            while time.perf_counter() < budget or len(times) < 5:
                started = time.perf_counter()
                model.run_rows(batch, outputs)
                times.append((time.perf_counter() - started) * 1000)
            median = statistics.median(times)
            per_size[size] = {"ms": median, "rows_per_s": size / median * 1000}
        best = max(per_size, key=lambda size: per_size[size]["rows_per_s"])
        found[name] = {"batch1_ms": per_size[1]["ms"], "best_batch": best, "sizes": per_size}
    workspace.close()
    return found


def _child_env(home: Path) -> dict[str, str]:
    """The environment of a child forgeml process working in `home`."""
    env = {**os.environ, "FORGEML_HOME": str(home), "PYTHONPATH": str(REPO / "src")}
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def _limit_in_child(home: Path, quick: bool) -> dict[str, Any]:
    """`limit` in a fresh process, as a server runs: none of training's threads around."""
    command = [sys.executable, __file__, "--limit-worker", str(home), *(["--quick"] * quick)]
    done = subprocess.run(
        command, capture_output=True, check=True, timeout=600, env=_child_env(home)
    )
    found: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return found


# --- the server and the load generator ---------------------------------------------------


def _start(
    command: list[str], home: Path, port: int, ready: Callable[[str], bool], what: str
) -> tuple[subprocess.Popen[bytes], str]:
    """Run `command` in a child process; return it and its base URL once `ready(url)`."""
    process = subprocess.Popen(
        command, env=_child_env(home), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and process.poll() is None:
        if ready(url):
            return process, url
        time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"{what} did not become ready")


def start_server(home: Path, ref: str, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    """`forgeml serve REF` in a child process; returns it and its base URL once ready."""
    from forgeml.serve._supervisor import free_port, probe, server_command

    port = free_port()
    return _start(server_command([ref, *args], port), home, port, probe, f"forgeml serve {ref}")


def stop_server(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()


def measure(
    url: str,
    body: Any,
    headers: dict[str, str],
    concurrency: int,
    seconds: float,
    rate: float | None = None,
) -> dict[str, Any]:
    """Run the load generator in a second process against `url` (POST `body`)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as spec:
        json.dump({"url": url, "body": body, "headers": headers}, spec)
    command = [sys.executable, __file__, "--load-worker", spec.name]
    command += ["--concurrency", str(concurrency), "--seconds", str(seconds)]
    if rate is not None:
        command += ["--rate", str(rate)]
    try:
        done = subprocess.run(command, check=False, capture_output=True, timeout=seconds + 120)
    finally:
        os.unlink(spec.name)
    if done.returncode != 0:
        raise RuntimeError(f"the load generator failed:\n{done.stderr.decode()[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return result


async def _generate(
    spec: dict[str, Any], concurrency: int, seconds: float, rate: float | None
) -> dict[str, Any]:
    """Closed loop (`concurrency` callers) or open loop (`rate` requests/s) for `seconds`.

    aiohttp, not httpx: on this 2-core machine the generator shares the CPU with the server,
    and aiohttp's client costs about a third of httpx's per request.
    """
    import aiohttp

    latencies: list[float] = []
    lags: list[float] = []  # open loop: how late the generator itself sent each request
    timeline: list[tuple[float, float]] = []  # open loop: (due time, latency) of each answer
    from_send: list[float] = []  # open loop: latency from the actual send, lateness left out
    errors = 0
    content = json.dumps(spec["body"]).encode()
    headers = {**spec["headers"], "content-type": "application/json"}
    # open loop: a bounded pool of keep-alive connections, as a load balancer keeps; a request
    # that waits for a free connection counts that wait in its latency
    connector = aiohttp.TCPConnector(
        limit=max(concurrency, 1) if rate is None else OPEN_LOOP_CONNECTIONS
    )
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def one(due: float | None = None) -> None:
            nonlocal errors
            sent = time.perf_counter()
            started = sent if due is None else due
            if due is not None:
                lags.append(sent - due)
            async with session.post(spec["url"], data=content, headers=headers) as response:
                await response.read()
                if response.status == 200:
                    latencies.append(time.perf_counter() - started)
                    if due is not None:
                        timeline.append((due, latencies[-1]))
                        from_send.append(latencies[-1] - (sent - due))
                else:
                    errors += 1

        warm = max(concurrency, 4) if rate is None else OPEN_LOOP_CONNECTIONS
        await asyncio.gather(*(one() for _ in range(warm)))  # open the connections, warm up
        latencies.clear()
        lags.clear()
        timeline.clear()
        from_send.clear()
        started = time.perf_counter()
        deadline = started + seconds
        if rate is None:

            async def loop() -> None:
                while time.perf_counter() < deadline:
                    await one()

            await asyncio.gather(*(loop() for _ in range(concurrency)))
        else:  # open loop: a request every 1/rate s, whether or not earlier ones finished
            pending: set[asyncio.Task[None]] = set()  # finished ones are dropped, not kept
            sent = 0
            while (now := time.perf_counter()) < deadline:
                due = started + sent / rate
                if now < due:
                    await asyncio.sleep(due - now)
                task = asyncio.create_task(one(due))
                pending.add(task)
                task.add_done_callback(pending.discard)
                sent += 1
            await asyncio.gather(*pending)
        elapsed = time.perf_counter() - started
    ordered = sorted(latencies) or [float("nan")]
    found = {
        "requests": len(latencies),
        "errors": errors,
        "rps": len(latencies) / elapsed,
        "p50_ms": ordered[len(ordered) // 2] * 1000,
        "p99_ms": _quantile(ordered, 0.99) * 1000,
    }
    if lags:  # the generator's own lateness, a share of each open-loop latency
        late = sorted(lags)
        found |= {
            "lag_p50_ms": _quantile(late, 0.5) * 1000,
            "lag_p99_ms": _quantile(late, 0.99) * 1000,
        }
        found["lag_max_ms"] = late[-1] * 1000
        found["p99_from_send_ms"] = _quantile(sorted(from_send), 0.99) * 1000 if from_send else 0.0
        found |= _windows(timeline, started)
    return found


def _windows(timeline: list[tuple[float, float]], started: float) -> dict[str, Any]:
    """Whether an open loop's tail is spread out or comes in bursts: its 1 s windows.

    A server that stalls now and then (a collection, a log flush) shows a few windows with a
    high p99 and the rest low; one that cannot keep up shows the p99 rising window by window.
    """
    by_second: dict[int, list[float]] = {}
    for due, latency in timeline:
        by_second.setdefault(int(due - started), []).append(latency)
    p99s = {second: _quantile(sorted(v), 0.99) * 1000 for second, v in by_second.items()}
    worst = max(p99s, key=p99s.__getitem__, default=0)
    return {
        "windows": len(p99s),
        "windows_p99_over_50ms": sum(1 for v in p99s.values() if v > 50),
        "worst_window_s": worst,
        "worst_window_p99_ms": p99s.get(worst, float("nan")),
    }


def _quantile(ordered: list[float], share: float) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def target(kind: str, base_url: str, model: str) -> tuple[str, str, dict[str, Any]]:
    """(label, URL, body) of one standard request: "adult" `:predict` or "minilm" embeddings."""
    if kind == "adult":
        url = f"{base_url}/v1/models/{model}:predict"
        return "adult-mlp :predict", url, {"instances": adult_rows(1)}
    return "minilm embeddings", f"{base_url}/v1/embeddings", {"model": model, "input": TEXT}


def load_rows(
    base_url: str,
    headers: dict[str, str],
    adult_model: str,
    text_model: str,
    concurrencies: list[int],
    seconds: float,
) -> list[dict[str, Any]]:
    """The standard load points against a server or a gateway at `base_url`.

    Adult: `POST /v1/models/{adult_model}:predict` with one raw record; MiniLM:
    `POST /v1/embeddings` with one text.
    """
    rows = []
    for kind, model in (("adult", adult_model), ("minilm", text_model)):
        label, url, body = target(kind, base_url, model)
        for concurrency in concurrencies:
            found = measure(url, body, headers, concurrency, seconds)
            rows.append({"target": label, "concurrency": concurrency, **found})
    return rows


def _inference_totals(base_url: str, model: str) -> tuple[float, float]:
    """The server's own `forgeml_inference_seconds` sum and count for `model`, so far."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    found = {"sum": 0.0, "count": 0.0}
    text = httpx.get(f"{base_url}/metrics", timeout=10).text
    for family in text_string_to_metric_families(text):
        if family.name != "forgeml_inference_seconds":
            continue
        for sample in family.samples:
            kind = sample.name.rsplit("_", 1)[-1]
            if sample.labels.get("model") == model and kind in found:
                found[kind] = sample.value
    return found["sum"], found["count"]


def server_adds(base_url: str, rounds: int, seconds: float) -> dict[str, Any]:
    """Adult `:predict` at concurrency 1: p50 minus the server's own inference time.

    Each round reads the server's inference-time histogram before and after a load point:
    the mean time of the batches it ran in that point (encode + forward + decode, at
    batch 1 here) is the model's own time at that moment, under the same load.
    """
    label, url, body = target("adult", base_url, "adult-mlp")
    per_round = []
    for _ in range(rounds):
        before = _inference_totals(base_url, "adult-mlp")
        point = measure(url, body, {}, 1, seconds)
        after = _inference_totals(base_url, "adult-mlp")
        model_ms = (after[0] - before[0]) / max(after[1] - before[1], 1) * 1000
        per_round.append({"p50_ms": point["p50_ms"], "model_ms": model_ms,
                          "adds_ms": point["p50_ms"] - model_ms})  # fmt: skip
    return {
        "target": label,
        "rounds": per_round,
        "adds_ms": statistics.median(r["adds_ms"] for r in per_round),
        "model_ms": statistics.median(r["model_ms"] for r in per_round),
    }


# --- the gateway --------------------------------------------------------------------------


def start_gateway(home: Path, deployments: int) -> tuple[subprocess.Popen[bytes], str]:
    """`forgeml gateway` in a child process; returns it once it routes `deployments`."""
    import httpx

    from forgeml.serve._supervisor import free_port

    def routing(url: str) -> bool:
        try:
            return bool(httpx.get(f"{url}/healthz", timeout=2).json()["deployments"] >= deployments)
        except httpx.HTTPError:
            return False

    port = free_port()
    command = [sys.executable, "-m", "forgeml.cli", "gateway", "--port", str(port)]
    return _start(command, home, port, routing, "forgeml gateway")


def _medians(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Median req/s, p50 and p99 of repeated load points, and their errors summed."""
    medians = {k: statistics.median(p[k] for p in points) for k in ("rps", "p50_ms", "p99_ms")}
    return {**medians, "errors": sum(p["errors"] for p in points)}


def gateway_rows(home: Path, plan: list[tuple[int, int, float]]) -> list[Any]:
    """Replica direct vs through the gateway: per (concurrency, rounds, seconds) of `plan`,
    each round sends each model's load point directly and then through the gateway, back to
    back, so "the gateway adds" is the median of per-round differences (a slow spell of a
    shared machine falls on both halves of a pair rather than on one path's median).
    """
    from forgeml.core.config import Settings
    from forgeml.core.workspace import Workspace
    from forgeml.gateway import create_key
    from forgeml.serve.deployments import delete, deploy

    workspace = Workspace(Settings(home=home, user="bench"))
    names = {"adult": "adult-mlp", "minilm": "sst2-minilm"}
    rows: list[dict[str, Any]] = []
    try:
        replicas = {
            name: deploy(workspace, name, ref, max_batch_size=32).replicas[0].url
            for name, ref in names.items()
        }
        _, key = create_key(workspace, "bench", scopes=list(names))
        gateway, gateway_url = start_gateway(home, len(names))
        auth = {"Authorization": f"Bearer {key}"}
        try:
            for concurrency, rounds, seconds in plan:
                found: dict[tuple[str, str], list[dict[str, Any]]] = {}
                for _ in range(rounds):
                    for name in names:
                        for path, headers in (("direct", {}), ("gateway", auth)):
                            base = gateway_url if path == "gateway" else replicas[name]
                            label, url, body = target(name, base, name)
                            point = measure(url, body, headers, concurrency, seconds)
                            found.setdefault((label, path), []).append(point)
                for (label, path), points in found.items():
                    row = {"target": label, "path": path, "concurrency": concurrency,
                           "rounds": rounds, **_medians(points)}  # fmt: skip
                    if path == "gateway":
                        pairs = zip(found[(label, "direct")], points, strict=True)
                        adds = [g["p50_ms"] - d["p50_ms"] for d, g in pairs]
                        row["adds_p50_ms"] = statistics.median(adds)
                        row["adds_p50_per_round"] = adds
                    rows.append(row)
        finally:
            stop_server(gateway)
    finally:
        for name in names:
            delete(workspace, name, grace_seconds=5.0)
        workspace.close()
    return rows


# --- the run ------------------------------------------------------------------------------


def run(quick: bool) -> dict[str, Any]:
    """Every figure of this benchmark, in one run."""
    seconds = 2.0 if quick else 10.0
    concurrencies = [1, 16] if quick else [1, 4, 16, 32, 64]
    saturation = 32
    with tempfile.TemporaryDirectory(prefix="forgeml-bench-serving-") as scratch:
        home = Path(scratch) / "home"
        home.mkdir()
        prepare(home)
        figures: dict[str, Any] = {"limit": _limit_in_child(home, quick)}
        server, url = start_server(home, "adult-mlp", "sst2-minilm", "--max-batch-size", "32")
        try:
            figures["direct"] = load_rows(
                url, {}, "adult-mlp", "sst2-minilm", concurrencies, seconds
            )
            figures["server_adds"] = server_adds(url, 1 if quick else 5, seconds / 4)
            adult = [r for r in figures["direct"] if r["target"].startswith("adult")]
            target = f"{url}/v1/models/adult-mlp:predict"
            body = {"instances": adult_rows(1)}
            sustained, probes = sustained_rate(target, body, adult, seconds / 2)
            at_80 = measure(target, body, {}, 0, seconds, 0.8 * sustained)
            figures["adult_sustained"] = {"rate": sustained, "probes": probes}
            figures["adult_at_80pct"] = {"rate": 0.8 * sustained, **at_80}
        finally:
            stop_server(server)
        rounds = 1 if quick else 3
        figures["batching"] = _batching(home, saturation, seconds / 2, rounds)
        plan = [(1, 1, 1.0), (16, 1, 1.0)] if quick else [(1, 7, 2.5), (16, 3, 5.0)]
        figures["gateway"] = gateway_rows(home, plan)
    figures["targets"] = _targets(figures)
    return figures


def sustained_rate(
    url: str, body: Any, closed: list[dict[str, Any]], seconds: float
) -> tuple[float, list[dict[str, Any]]]:
    """The highest open-loop rate the server keeps up with, and the probes that found it.

    A closed loop's peak is not sustained: at high concurrency its p99 has already blown up
    (requests queue behind each other). Open-loop rates from that peak down in 10% steps are
    probed; the first one served in full (>= 97% of the offered requests/s) with a p50 under
    10x the concurrency-1 p50 (no queue building up) is the maximum sustained throughput.
    """
    peak = max(row["rps"] for row in closed)
    floor = min(row["p50_ms"] for row in closed if row["concurrency"] == 1)
    probes = []
    for share in (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3):
        rate = share * peak
        found = measure(url, body, {}, 0, seconds, rate)
        kept_up = found["rps"] >= 0.97 * rate and found["p50_ms"] < 10 * floor
        probes.append({"rate": rate, "kept_up": kept_up, **found})
        if kept_up:
            return rate, probes
    return 0.3 * peak, probes


# the batching arms: label -> `forgeml serve` flags (the 20 ms arm trades latency at low load
# for fuller batches: with no wait a batch is what queued while the last one ran)
BATCHING_ARMS = {
    "batch1": ["--max-batch-size", "1"],
    "dynamic": ["--max-batch-size", "32"],
    "dynamic_wait20": ["--max-batch-size", "32", "--max-wait-ms", "20"],
}


def _batching(home: Path, concurrency: int, seconds: float, rounds: int) -> dict[str, Any]:
    """MiniLM embeddings at `concurrency` per batching arm, alternating, medians of rounds."""
    body = {"model": "sst2-minilm", "input": TEXT}
    servers = {
        label: start_server(home, "sst2-minilm", *flags) for label, flags in BATCHING_ARMS.items()
    }
    points: dict[str, list[dict[str, Any]]] = {label: [] for label in servers}
    try:
        for _ in range(rounds):
            for label, (_, url) in servers.items():
                points[label].append(
                    measure(f"{url}/v1/embeddings", body, {}, concurrency, seconds)
                )
    finally:
        for process, _ in servers.values():
            stop_server(process)
    found: dict[str, Any] = {label: _medians(found) for label, found in points.items()}
    found["speedup"] = found["dynamic"]["rps"] / max(found["batch1"]["rps"], 1e-9)
    found["speedup_wait20"] = found["dynamic_wait20"]["rps"] / max(found["batch1"]["rps"], 1e-9)
    found["concurrency"] = concurrency
    return found


def _targets(figures: dict[str, Any]) -> dict[str, Any]:
    def p50_at_1(prefix: str) -> float:
        return next(
            r["p50_ms"]
            for r in figures["direct"]
            if r["target"].startswith(prefix) and r["concurrency"] == 1
        )

    adult_overhead = p50_at_1("adult") - figures["limit"]["adult-mlp"]["batch1_ms"]
    text_overhead = p50_at_1("minilm") - figures["limit"]["sst2-minilm"]["batch1_ms"]

    def gateway_adds(prefix: str) -> float:
        adds: float = next(
            r["adds_p50_ms"]
            for r in figures["gateway"]
            if r["target"].startswith(prefix) and r["path"] == "gateway" and r["concurrency"] == 1
        )
        return adds

    return {
        "gateway_adds_adult_ms": gateway_adds("adult"),
        "gateway_adds_minilm_ms": gateway_adds("minilm"),
        "gateway_under_1ms": gateway_adds("adult") < 1.0,
        "adult_overhead_ms": adult_overhead,
        "minilm_overhead_ms": text_overhead,
        "adult_adds_over_served_model_ms": figures["server_adds"]["adds_ms"],
        "overhead_under_1ms": figures["server_adds"]["adds_ms"] < 1.0,
        "batching_speedup": figures["batching"]["speedup"],
        "batching_3x": figures["batching"]["speedup"] >= 3.0,
        "adult_p99_at_80pct_ms": figures["adult_at_80pct"]["p99_ms"],
        "p99_under_50ms": figures["adult_at_80pct"]["p99_ms"] < 50.0,
    }


def report(figures: dict[str, Any]) -> None:
    """Print the figures as tables."""
    print("the limit: the model's own time in-process (encode + forward + decode)")
    for name, found in figures["limit"].items():
        sizes = ", ".join(
            f"b{size}: {v['ms']:.2f} ms ({v['rows_per_s']:.0f} rows/s)"
            for size, v in found["sizes"].items()
        )
        print(f"  {name:12} {sizes}; best batch {found['best_batch']}")
    print("\nthe server direct (load generator in a second process, loopback)")
    print(f"  {'target':20} {'conc':>5} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6}")
    for row in figures["direct"]:
        print(
            f"  {row['target']:20} {row['concurrency']:>5} {row['rps']:>9.1f} "
            f"{row['p50_ms']:>8.2f} {row['p99_ms']:>8.2f} {row['errors']:>6}"
        )
    adds = figures["server_adds"]
    rounds = ", ".join(f"{r['p50_ms']:.2f} - {r['model_ms']:.2f}" for r in adds["rounds"])
    print(
        f"\nadult :predict at concurrency 1, p50 minus the server's own inference time in the "
        f"same point: {adds['adds_ms']:.2f} ms (median of rounds: {rounds})"
    )
    print("\nreplica direct vs through the gateway (medians of rounds; adds: of per-round pairs)")
    print(
        f"  {'target':20} {'path':>8} {'conc':>5} {'rounds':>6} {'req/s':>9} {'p50 ms':>8} "
        f"{'p99 ms':>8} {'adds p50':>9}"
    )
    for row in figures["gateway"]:
        adds = f"{row['adds_p50_ms']:>9.2f}" if "adds_p50_ms" in row else ""
        print(
            f"  {row['target']:20} {row['path']:>8} {row['concurrency']:>5} {row['rounds']:>6} "
            f"{row['rps']:>9.1f} {row['p50_ms']:>8.2f} {row['p99_ms']:>8.2f} {adds}"
        )
    print("\nadult :predict, open loop: the highest rate served in full without queueing")
    for probe in figures["adult_sustained"]["probes"]:
        print(
            f"  offered {probe['rate']:7.0f} req/s: served {probe['rps']:7.0f}, "
            f"p50 {probe['p50_ms']:7.2f} ms, p99 {probe['p99_ms']:7.2f} ms, "
            f"kept up: {probe['kept_up']}"
        )
    at_80 = figures["adult_at_80pct"]
    print(
        f"adult at 80% of the sustained rate ({at_80['rate']:.0f} req/s offered): "
        f"p50 {at_80['p50_ms']:.2f} ms, p99 {at_80['p99_ms']:.2f} ms"
    )
    batching = figures["batching"]
    print(
        f"minilm embeddings at concurrency {batching['concurrency']} (medians of alternating "
        f"rounds): batch-1 {batching['batch1']['rps']:.1f} req/s, dynamic "
        f"{batching['dynamic']['rps']:.1f} req/s ({batching['speedup']:.2f}x), dynamic with "
        f"--max-wait-ms 20 {batching['dynamic_wait20']['rps']:.1f} req/s "
        f"({batching['speedup_wait20']:.2f}x)"
    )
    targets = figures["targets"]
    print(
        f"\ntargets: server adds p50 {targets['adult_adds_over_served_model_ms']:.2f} ms over "
        f"its own inference time (< 1 ms: {targets['overhead_under_1ms']}; over the in-process "
        f"limit: {targets['adult_overhead_ms']:.2f} ms adult / "
        f"{targets['minilm_overhead_ms']:.2f} ms minilm); "
        f"gateway adds p50 {targets['gateway_adds_adult_ms']:.2f} ms adult / "
        f"{targets['gateway_adds_minilm_ms']:.2f} ms minilm "
        f"(< 1 ms: {targets['gateway_under_1ms']}); "
        f"batching {targets['batching_speedup']:.2f}x (>= 3x: {targets['batching_3x']}); "
        f"adult p99 at 80% {targets['adult_p99_at_80pct_ms']:.1f} ms "
        f"(< 50 ms: {targets['p99_under_50ms']})"
    )


def main(argv: list[str] | None = None) -> None:
    parser = make_parser(__doc__, "2 s per load point, fewer points")
    parser.add_argument("--load-worker", type=Path, help="run the load generator (internal)")
    parser.add_argument("--limit-worker", type=Path, help="time the models (internal)")
    parser.add_argument("--concurrency", type=int, default=1, help="load worker (internal)")
    parser.add_argument("--seconds", type=float, default=5.0, help="load worker (internal)")
    parser.add_argument("--rate", type=float, default=None, help="load worker (internal)")
    args = parser.parse_args(argv)
    if args.load_worker is not None:
        spec = json.loads(args.load_worker.read_text())
        print(json.dumps(asyncio.run(_generate(spec, args.concurrency, args.seconds, args.rate))))
        return
    if args.limit_worker is not None:
        print(json.dumps(limit(args.limit_worker, args.quick)))
        return
    started = time.perf_counter()
    figures = run(args.quick)
    figures["wall_s"] = time.perf_counter() - started
    report(figures)
    print_json(args, figures)


if __name__ == "__main__":
    main()
