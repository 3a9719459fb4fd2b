"""Benchmark of issue 5's model server: the model's own time, then the server under load.

What is measured, in one run on this machine:

1. The limit: the model's own time in-process (`forgeml.serve.model.LoadedModel.run_rows`:
   raw rows -> FeatureSpec or tokenizer -> forward -> decoded outputs, i.e. all the work a
   server must do besides HTTP), at batch 1 and at the batch size with the most rows/s,
   for the Adult MLP and the SST-2 MiniLM classifier.
2. The server direct: `forgeml serve` in a child process, driven by a load generator in a
   SECOND child process (asyncio + httpx over loopback, closed loop, each point bounded in
   seconds): requests/s, p50 and p99 at several concurrencies, for the Adult MLP
   (`:predict`) and MiniLM embeddings (`/v1/embeddings`).
3. Batching: MiniLM embeddings at saturation with `--max-batch-size 1` vs dynamic batching.
4. Adult p99 at 80% of its highest measured requests/s (open-loop load at that rate).

Targets (issue 5): server p50 overhead at concurrency 1 under 1 ms over the model's own
batch-1 time; dynamic batching >= 3x batch-1 serving for MiniLM at saturation; Adult p99
under 50 ms at 80% of the maximum sustained throughput. `load_rows(base_url, headers,
...)` is the hook for the "through the gateway" rows: it runs the same load against any
base URL with any headers (e.g. `Authorization: Bearer <key>`).

The models are trained here (Adult MLP 20 steps, MiniLM 2 steps on 64 SST-2 rows):
latency does not depend on how long a model trained.

    PYTHONPATH=src .venv/bin/python benchmarks/serving.py            # 10 s per load point
    PYTHONPATH=src .venv/bin/python benchmarks/serving.py --quick    # 2 s per point
    PYTHONPATH=src .venv/bin/python benchmarks/serving.py --json     # JSON last line
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _adult import REPO, prepare_adult

SST2 = REPO.parent / "shared" / "data" / "sst2" / "train.tsv"
TEXT = "a gorgeous, witty, seductive movie that keeps you guessing."


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


def _limit_in_child(home: Path, quick: bool) -> dict[str, Any]:
    """`limit` in a fresh process, as a server runs: none of training's threads around."""
    command = [sys.executable, __file__, "--limit-worker", str(home), *(["--quick"] * quick)]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    env.pop("MLFLOW_TRACKING_URI", None)
    done = subprocess.run(command, capture_output=True, check=True, timeout=600, env=env)
    found: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return found


# --- the server and the load generator ---------------------------------------------------


def start_server(home: Path, ref: str, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    """`forgeml serve REF` in a child process; returns it and its base URL once ready."""
    from forgeml.serve._supervisor import free_port, probe, server_command

    port = free_port()
    env = {**os.environ, "FORGEML_HOME": str(home), "PYTHONPATH": str(REPO / "src")}
    env.pop("MLFLOW_TRACKING_URI", None)
    process = subprocess.Popen(
        server_command([ref, *args], port),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and process.poll() is None:
        if probe(url):
            return process, url
        time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"forgeml serve {ref} did not become ready")


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
        done = subprocess.run(command, capture_output=True, check=True, timeout=seconds + 120)
    finally:
        os.unlink(spec.name)
    result: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return result


async def _generate(
    spec: dict[str, Any], concurrency: int, seconds: float, rate: float | None
) -> dict[str, Any]:
    import httpx

    latencies: list[float] = []
    errors = 0
    limits = httpx.Limits(max_connections=max(concurrency, 1) if rate is None else 256)
    async with httpx.AsyncClient(timeout=60, limits=limits, headers=spec["headers"]) as client:
        content = json.dumps(spec["body"]).encode()
        headers = {"content-type": "application/json"}

        async def one() -> None:
            nonlocal errors
            started = time.perf_counter()
            response = await client.post(spec["url"], content=content, headers=headers)
            if response.status_code == 200:
                latencies.append(time.perf_counter() - started)
            else:
                errors += 1

        await one()  # warm the connection
        latencies.clear()
        started = time.perf_counter()
        deadline = started + seconds
        if rate is None:

            async def loop() -> None:
                while time.perf_counter() < deadline:
                    await one()

            await asyncio.gather(*(loop() for _ in range(concurrency)))
        else:  # open loop: a request every 1/rate s, whether or not earlier ones finished
            tasks, sent = [], 0
            while (now := time.perf_counter()) < deadline:
                due = started + sent / rate
                if now < due:
                    await asyncio.sleep(due - now)
                tasks.append(asyncio.create_task(one()))
                sent += 1
            await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - started
    ordered = sorted(latencies) or [float("nan")]
    return {
        "requests": len(latencies),
        "errors": errors,
        "rps": len(latencies) / elapsed,
        "p50_ms": ordered[len(ordered) // 2] * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
    }


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
    `POST /v1/embeddings` with one text. Pass the gateway URL, its key header and the
    deployment names to measure through the gateway.
    """
    rows = []
    adult_url = f"{base_url}/v1/models/{adult_model}:predict"
    text_url = f"{base_url}/v1/embeddings"
    targets = [
        ("adult-mlp :predict", adult_url, {"instances": adult_rows(1)}),
        ("minilm embeddings", text_url, {"model": text_model, "input": TEXT}),
    ]
    for label, url, body in targets:
        for concurrency in concurrencies:
            found = measure(url, body, headers, concurrency, seconds)
            rows.append({"target": label, "concurrency": concurrency, **found})
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
            adult = [r for r in figures["direct"] if r["target"].startswith("adult")]
            peak = max(row["rps"] for row in adult)
            body = {"instances": adult_rows(1)}
            at_80 = measure(f"{url}/v1/models/adult-mlp:predict", body, {}, 0, seconds, 0.8 * peak)
            figures["adult_at_80pct"] = {"rate": 0.8 * peak, **at_80}
        finally:
            stop_server(server)
        figures["batching"] = _batching(home, saturation, seconds)
    figures["targets"] = _targets(figures)
    return figures


def _batching(home: Path, concurrency: int, seconds: float) -> dict[str, Any]:
    body = {"model": "sst2-minilm", "input": TEXT}
    found = {}
    for label, size in (("batch1", "1"), ("dynamic", "32")):
        server, url = start_server(home, "sst2-minilm", "--max-batch-size", size)
        try:
            found[label] = measure(f"{url}/v1/embeddings", body, {}, concurrency, seconds)
        finally:
            stop_server(server)
    found["speedup"] = found["dynamic"]["rps"] / max(found["batch1"]["rps"], 1e-9)
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
    return {
        "adult_overhead_ms": adult_overhead,
        "minilm_overhead_ms": text_overhead,
        "overhead_under_1ms": adult_overhead < 1.0,
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
    at_80 = figures["adult_at_80pct"]
    print(
        f"\nadult at 80% of peak ({at_80['rate']:.0f} req/s offered): "
        f"p50 {at_80['p50_ms']:.2f} ms, p99 {at_80['p99_ms']:.2f} ms"
    )
    batching = figures["batching"]
    print(
        f"minilm embeddings at concurrency {batching['concurrency']}: batch-1 "
        f"{batching['batch1']['rps']:.1f} req/s, dynamic {batching['dynamic']['rps']:.1f} req/s "
        f"({batching['speedup']:.2f}x)"
    )
    targets = figures["targets"]
    print(
        f"\ntargets: server overhead p50 {targets['adult_overhead_ms']:.2f} ms adult / "
        f"{targets['minilm_overhead_ms']:.2f} ms minilm (< 1 ms: {targets['overhead_under_1ms']}); "
        f"batching {targets['batching_speedup']:.2f}x (>= 3x: {targets['batching_3x']}); "
        f"adult p99 at 80% {targets['adult_p99_at_80pct_ms']:.1f} ms "
        f"(< 50 ms: {targets['p99_under_50ms']})"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="2 s per load point, fewer points")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON last")
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
    if args.json:
        print(json.dumps(figures, default=str))


if __name__ == "__main__":
    main()
