"""Where each server's CPU goes under load: the profile behind peers.py's unmet goals.

On this 2-core machine a server at saturation is CPU-bound, so its rate is the CPU it can
get over the CPU each request costs. This script measures that cost, and what it is spent
on, for the figures benchmarks/peers.py reports as not met:

- `minilm`: MiniLM embeddings at concurrency 16 on `forgeml serve`, Ray Serve and BentoML
  (the same model object and forward inside each, peers_serving.py's servers);
- `gateway`: MiniLM `/v1/embeddings` at concurrency 8 on one forgeml replica, reached
  directly and through `forgeml gateway` (peers_gateway.py's paths).

For each server it loads, for `--seconds`, the load generator of benchmarks/serving.py
while (1) psutil reads the CPU time of every thread of every process of the server's tree
before and after, and (2) py-spy samples the Python threads (`record --subprocesses
--threads --nonblocking`, raw stacks). Each thread's CPU is split by what its samples were
doing: the model's forward (a frame in `torch/nn/modules`), tokenising, or the server
itself (HTTP, routing, serialising, the framework); threads py-spy never saw are native
(torch's intra-op pool in a process that runs the forward: forward; Ray's raylet and GCS:
the framework). The answer is CPU milliseconds per request by part, beside the rate, and
each process's hottest frames (the innermost frames most of its samples were in).

    PYTHONPATH=src .venv/bin/python benchmarks/serving_profile.py [--quick] [--json]

Needs the peers' venvs for Ray Serve and BentoML (`benchmarks/peers.py --setup`); a peer
that is not set up is reported with the reason instead.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from _cli import make_parser, print_json
from peers_serving import PEER_SERVERS, PeerError, Server, start_forgeml, stop
from peers_setup import VENVS
from serving import TEXT, measure, prepare, start_gateway, stop_server

PY_SPY = Path(sys.executable).parent / "py-spy"
PARTS = ("forward", "tokenize", "server", "native other")
_THREAD = re.compile(r"thread \((0x[0-9a-fA-F]+|\d+)\)")
_PROCESS = re.compile(r"process (\d+):")


@dataclass
class Target:
    """One server under load: the processes whose CPU counts and the request it answers."""

    name: str
    roots: list[int]  # each root's whole process tree is measured
    url: str
    body: Any
    headers: dict[str, str]
    concurrency: int
    metrics_url: str | None = None  # a forgeml server's /metrics: its mean batch size


def _tree(roots: list[int]) -> list[psutil.Process]:
    found: dict[int, psutil.Process] = {}
    for pid in roots:
        try:
            root = psutil.Process(pid)
            for process in [root, *root.children(recursive=True)]:
                found[process.pid] = process
        except psutil.NoSuchProcess:
            continue
    return list(found.values())


def _thread_times(processes: list[psutil.Process]) -> dict[tuple[int, int], float]:
    """CPU seconds of every thread: (pid, tid) -> user + system."""
    times: dict[tuple[int, int], float] = {}
    for process in processes:
        try:
            for thread in process.threads():
                times[(process.pid, thread.id)] = thread.user_time + thread.system_time
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return times


def _labels(processes: list[psutil.Process]) -> dict[int, str]:
    labels: dict[int, str] = {}
    for process in processes:
        try:
            words = process.cmdline() or [process.name()]
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        name = process.name()
        if name.startswith("ray::") or "raylet" in name or "gcs_server" in name:
            labels[process.pid] = name
        else:
            labels[process.pid] = " ".join(Path(words[0]).name if i == 0 else w for i, w in
                                           enumerate(words[:6]))  # fmt: skip
    return labels


def _batch_totals(metrics_url: str) -> tuple[float, float]:
    """`forgeml_batch_size`'s sum and count for MiniLM, so far."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    found = {"sum": 0.0, "count": 0.0}
    for family in text_string_to_metric_families(httpx.get(metrics_url, timeout=10).text):
        if family.name == "forgeml_batch_size":
            for sample in family.samples:
                kind = sample.name.rsplit("_", 1)[-1]
                if sample.labels.get("model", "").startswith("sst2-minilm") and kind in found:
                    found[kind] += sample.value
    return found["sum"], found["count"]


def _part(frames: list[str]) -> str:
    if any("torch/nn/modules" in frame for frame in frames):
        return "forward"
    if any("tokeniz" in frame.lower() for frame in frames):
        return "tokenize"
    return "server"


def _samples(raw: Path, found: Samples) -> None:
    """Add py-spy's raw stacks to `found`: per (pid, tid) samples by part, and per pid the
    frame each sample was in (its innermost, where the time went)."""
    if not raw.exists():
        return
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        processes, thread = _PROCESS.findall(stack), _THREAD.search(stack)
        if not (processes and thread and count.isdigit()):
            continue
        # the stack names each ancestor process first; the sampled one is the last
        pid, frames = int(processes[-1]), stack.split(";")
        found.parts[(pid, int(thread.group(1), 0))][_part(frames)] += int(count)
        found.leaves[pid][frames[-1]] += int(count)


@dataclass
class Samples:
    """What py-spy saw: samples by part per thread, by innermost frame per process."""

    parts: dict[tuple[int, int], Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    leaves: dict[int, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))

    def hottest(self, pid: int, count: int = 3) -> list[tuple[str, float]]:
        """The `count` frames most of `pid`'s samples were in, with their shares."""
        total = sum(self.leaves[pid].values())
        return [(frame, n / total) for frame, n in self.leaves[pid].most_common(count)]


@contextmanager
def _py_spy(roots: list[int], seconds: float, scratch: Path) -> Iterator[list[Path]]:
    """py-spy on each root's tree for `seconds`; yields the raw files it will write."""
    spies, files = [], []
    for pid in roots:
        out = scratch / f"py-spy-{pid}.txt"
        command = [str(PY_SPY), "record", "--subprocesses", "--threads", "--nonblocking"]
        command += ["--format", "raw", "--rate", "50", "--duration", str(int(seconds))]
        command += ["--pid", str(pid), "--output", str(out)]
        spies.append(
            subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        )
        files.append(out)
    try:
        yield files
    finally:
        for spy in spies:
            try:
                spy.wait(seconds + 60)
            except subprocess.TimeoutExpired:
                spy.kill()


def profile(target: Target, seconds: float, scratch: Path) -> dict[str, Any]:
    """CPU ms per request by part, per process, over `seconds` of closed-loop load."""
    measure(target.url, target.body, target.headers, target.concurrency, 2.0)  # warm-up
    processes = _tree(target.roots)
    labels = _labels(processes)
    before = _thread_times(processes)
    rows = _batch_totals(target.metrics_url) if target.metrics_url else None
    with _py_spy(target.roots, seconds, scratch) as raws:
        load = measure(target.url, target.body, target.headers, target.concurrency, seconds)
    after = _thread_times(_tree(target.roots))
    if rows is not None and target.metrics_url:
        done = _batch_totals(target.metrics_url)
        rows = (done[0] - rows[0]) / max(done[1] - rows[1], 1.0)
    seen = Samples()
    for raw in raws:
        _samples(raw, seen)
    samples = seen.parts
    forward_pids = {pid for (pid, _), parts in samples.items() if parts["forward"]}
    requests = load["requests"]
    by_process: dict[str, Counter[str]] = defaultdict(Counter)
    for key, end in after.items():
        used = end - before.get(key, 0.0)
        if used <= 0:
            continue
        pid = key[0]
        label = labels.get(pid, str(pid))
        parts = samples.get(key)
        if parts:  # a Python thread: its CPU split as its samples were
            total = sum(parts.values())
            for part, count in parts.items():
                by_process[label][part] += used * count / total
        else:  # native: torch's intra-op pool beside a forward, else the runtime's own
            by_process[label]["forward" if pid in forward_pids else "native other"] += used
    per_request = {
        label: {part: 1000 * parts[part] / requests for part in PARTS if parts[part]}
        for label, parts in by_process.items()
    }
    totals = {part: sum(p.get(part, 0.0) for p in per_request.values()) for part in PARTS}
    hottest = {labels.get(pid, str(pid)): seen.hottest(pid) for pid in seen.leaves}
    return {
        "concurrency": target.concurrency,
        "rps": load["rps"],
        "p50_ms": load["p50_ms"],
        "requests": requests,
        "mean_batch_rows": rows,
        "cpu_ms_per_request": {**totals, "all": sum(totals.values())},
        "by_process": per_request,
        "hottest_frames": {label: hottest[label] for label in per_request if label in hottest},
    }


def _minilm_targets(home: Path, scratch: Path) -> Iterator[tuple[str, Target | str]]:
    """forgeml serve, then each peer, one at a time (alone on the machine)."""
    starts: dict[str, Any] = {"forgeml": lambda: start_forgeml(home)}
    for peer, start in PEER_SERVERS.items():
        starts[peer] = lambda start=start: start(home, scratch)
    missing = VENVS["peers"].missing()
    for name, start in starts.items():
        if missing and name != "forgeml":
            yield name, missing
            continue
        try:
            server: Server = start()
        except PeerError as error:
            yield name, str(error)
            continue
        assert server.process is not None
        try:
            url, body = server.requests["minilm"]
            metrics = f"{server.url}/metrics" if name == "forgeml" else None
            yield name, Target(name, [server.process.pid], url, body, server.headers, 16, metrics)
        finally:
            if name == "forgeml":
                stop_server(server.process)
            else:
                stop(server.process)


def _gateway_targets(home: Path) -> Iterator[tuple[str, Target | str]]:
    """One MiniLM replica, reached directly and through `forgeml gateway` (both measured)."""
    from forgeml.core.config import Settings
    from forgeml.core.workspace import Workspace
    from forgeml.gateway import create_key
    from forgeml.serve.deployments import delete, deploy

    workspace = Workspace(Settings(home=home, user="bench"))
    try:
        replica = deploy(workspace, "sst2-minilm", "sst2-minilm", max_batch_size=32).replicas[0]
        assert replica.pid is not None
        _, key = create_key(workspace, "bench-profile", scopes=["sst2-minilm"])
        body = {"model": "sst2-minilm", "input": TEXT}
        process, url = start_gateway(home, 1)
        try:
            metrics = f"{replica.url}/metrics"
            direct = f"{replica.url}/v1/embeddings"
            yield "direct", Target("direct", [replica.pid], direct, body, {}, 8, metrics)
            auth = {"Authorization": f"Bearer {key}"}
            through = f"{url}/v1/embeddings"
            roots = [replica.pid, process.pid]
            yield "gateway", Target("gateway", roots, through, body, auth, 8, metrics)
        finally:
            stop_server(process)
    finally:
        delete(workspace, "sst2-minilm", grace_seconds=5.0)
        workspace.close()


def forward_cost(home: Path, repeats: int) -> dict[str, float]:
    """CPU ms per row of the MiniLM forward alone, in this process, by batch size.

    The yardstick for the servers' `forward` part: a server whose forward costs more per
    request than forgeml's ran the same forward on smaller batches.
    """
    sys.path.insert(0, str(Path(__file__).parent / "_peers"))
    from model import embeddings, served

    model = served(home, "sst2-minilm")
    cost: dict[str, float] = {}
    for batch in (1, 2, 4, 8, 16, 32):
        texts = [TEXT] * batch
        embeddings(model, texts)  # warm-up: the first call of a shape builds its kernels
        calls = []
        for _ in range(repeats):
            started = time.process_time()  # every thread of this process
            embeddings(model, texts)
            calls.append(time.process_time() - started)
        # the least disturbed call: under load torch's waiting threads spin, costing CPU
        cost[str(batch)] = 1000 * min(calls) / batch
    return cost


def run(quick: bool) -> dict[str, Any]:
    """Every target's profile, one server at a time."""
    seconds = 3.0 if quick else 20.0
    figures: dict[str, Any] = {"quick": quick, "seconds": seconds, "load_average_1min": {}}
    figures["load_average_1min"]["start"] = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="forgeml-bench-profile-") as where:
        scratch = Path(where)
        home = scratch / "home"
        home.mkdir()
        prepare(home)
        figures["forward_cpu_ms_per_row"] = forward_cost(home, 5 if quick else 20)
        for group, targets in (
            ("minilm", _minilm_targets(home, scratch)),
            ("gateway", _gateway_targets(home)),
        ):
            figures[group] = {}
            for name, target in targets:
                if isinstance(target, str):
                    figures[group][name] = {"error": target}
                else:
                    figures[group][name] = profile(target, seconds, scratch)
    figures["load_average_1min"]["end"] = os.getloadavg()[0]
    return figures


def report(figures: dict[str, Any]) -> None:
    """One table per group: rate, p50 and CPU ms per request by part."""
    load = figures["load_average_1min"]
    print(
        f"{os.cpu_count()} CPUs, {figures['seconds']:.0f} s per server, "
        f"load {load['start']:.1f} -> {load['end']:.1f}"
    )
    cost = figures["forward_cpu_ms_per_row"]
    print("MiniLM forward alone, CPU ms per row by batch size: "
          + ", ".join(f"{batch}: {ms:.2f}" for batch, ms in cost.items()))  # fmt: skip
    for group in ("minilm", "gateway"):
        print(f"\n{group}: CPU ms per request (all processes of the server)")
        print(f"  {'server':10} {'c':>3} {'req/s':>7} {'p50 ms':>7} {'rows':>5} "
              + " ".join(f"{part:>12}" for part in (*PARTS, "all")))  # fmt: skip
        for name, found in figures[group].items():
            if "error" in found:
                print(f"  {name:10} not measured: {found['error']}")
                continue
            cpu = found["cpu_ms_per_request"]
            print(f"  {name:10} {found['concurrency']:>3} {found['rps']:>7.1f} "
                  f"{found['p50_ms']:>7.1f} {_rows(found['mean_batch_rows']):>5} "
                  + " ".join(f"{cpu[part]:>12.2f}" for part in (*PARTS, "all")))  # fmt: skip
            for label, parts in sorted(
                found["by_process"].items(), key=lambda kv: -sum(kv[1].values())
            ):
                shown = ", ".join(f"{part} {ms:.2f}" for part, ms in parts.items())
                print(f"      {label[:60]:60} {shown}")
                for frame, share in found["hottest_frames"].get(label, []):
                    print(f"          {share:>5.0%} in {frame[:90]}")


def _rows(mean: float | None) -> str:
    return "-" if mean is None else f"{mean:.1f}"


def main(argv: list[str] | None = None) -> None:
    parser = make_parser(__doc__, "3 s per server")
    args = parser.parse_args(argv)
    figures = run(args.quick)
    report(figures)
    print_json(args, figures)


if __name__ == "__main__":
    main()
