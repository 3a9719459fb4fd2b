"""Benchmark of issue 4: forgeml's scheduling policy against FIFO, on a simulated cluster.

Pure Python over `forgeml.scheduler.policy` (no store, no executor, no subprocess).

1. Cycle time. One full `schedule` cycle over 10,000 pending jobs on 1,000 nodes of 8 GPUs,
   96 CPUs and 1,024 GB each, in two states: an empty cluster (the cycle places gangs until
   it is full) and a busy one (~90% of the GPUs held by running jobs of the same mix, so
   nearly every pending job is blocked and the cycle also searches for preemption victims
   and makes a reservation). Inputs are built once; the cycle is timed `--repeats` times and
   the median reported, beside FIFO's cycle on the same inputs. Figures: seconds per cycle,
   decisions/s ((placements + preemptions) / s) and jobs considered/s (10,000 / s).
   Target: under 1 s per cycle.

2. Policy quality. A discrete-event simulation of one trace, run once with `schedule` and once
   with `fifo_schedule` (strict submission order, no backfill, no preemption). The trace:
   - cluster: 16 nodes x (8 GPUs, 96 CPUs, 1,024 GB) = 128 GPUs (`--nodes` to change it);
   - jobs: 90% GPU jobs of 2^k GPUs, k = 0..6 (1..64 GPUs) with P(k) proportional to 0.6^k,
     run as ceil(size / 8) workers of min(size, 8) GPUs with 8 CPUs and 64 GB per GPU;
     10% CPU-only jobs of 4..32 CPUs, 8 GB per CPU;
   - durations: log-normal, median 30 min, sigma 1.5, clipped to [1 min, 48 h];
   - queues (weight, reclaimable, share of jobs, priority classes):
     prod (4, no, 20%, 10% critical / 50% high / 40% normal), research (3, yes, 35%,
     10% high / 70% normal / 20% low), dev (2, yes, 25%, 50% normal / 50% low),
     batch (1, yes, 20%, all low);
   - arrivals: Poisson, at the rate that offers 1.3x the cluster's GPU capacity, for 2,400
     jobs (~4.5 simulated days; `--quick`: 800); then it runs until every job has finished;
   - preemption: a victim keeps its room 30 s (checkpoint + exit), loses the work done since
     its last checkpoint (every 10 min), and pays 60 s of start-up when it resumes;
   - a scheduling cycle runs after each batch of simultaneous events (arrival, end, stop).
   Figures, over the window from 10% of the arrival period to its end (the cluster is
   overloaded then: work is always waiting, and GPUs idle only because of the policy's
   decisions or because what waits does not fit): GPU utilisation (GPU-seconds of useful
   work / capacity), mean and p95 wait (submission to first start) per queue and the mean
   and longest wait of the large gangs (>= 32 GPUs, those backfill could starve), each
   queue's share of the GPU-seconds against its weighted max-min fair share given its
   demand, preemptions and GPU-hours lost to them. A queue is starved when one of its jobs
   never starts or its share is under half its fair share. Target: utilisation >= 1.2x
   FIFO's with no queue starved. Several seeds run (`--seeds`) and medians are reported.

Run from the repository root:

    PYTHONPATH=src .venv/bin/python benchmarks/scheduler_sim.py            # 5 repeats, 3 seeds
    PYTHONPATH=src .venv/bin/python benchmarks/scheduler_sim.py --quick    # < 1 min
    PYTHONPATH=src .venv/bin/python benchmarks/scheduler_sim.py --json     # JSON last line
    PYTHONPATH=src .venv/bin/python benchmarks/scheduler_sim.py --profile  # cProfile a cycle
    PYTHONPATH=src .venv/bin/python benchmarks/scheduler_sim.py --reserve-after 3600  # other knob
"""

from __future__ import annotations

import argparse
import heapq
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from _cli import make_parser, print_json
from forgeml.scheduler.model import (
    PRIORITY_CLASSES,
    Decisions,
    NodeState,
    PendingJob,
    QueueState,
    Resources,
    RunningJob,
)
from forgeml.scheduler.policy import PolicyOptions, fifo_schedule, schedule

NODE = Resources(cpus=96, gpus=8, memory_gb=1024)
CYCLE_NODES, CYCLE_PENDING, BUSY_FRACTION = 1_000, 10_000, 0.9
CYCLE_TARGET_S, UTILISATION_TARGET, STARVED_BELOW = 1.0, 1.2, 0.5
OFFERED_LOAD, WINDOW_START = 1.3, 0.1
LARGE_GPUS = 32  # the gangs that backfill could starve
GRACE_S, CHECKPOINT_S, RESTART_S = 30.0, 600.0, 60.0
# name: (weight, reclaimable, share of jobs, {priority class: probability})
QUEUES: dict[str, tuple[int, bool, float, dict[str, float]]] = {
    "prod": (4, False, 0.20, {"critical": 0.1, "high": 0.5, "normal": 0.4}),
    "research": (3, True, 0.35, {"high": 0.1, "normal": 0.7, "low": 0.2}),
    "dev": (2, True, 0.25, {"normal": 0.5, "low": 0.5}),
    "batch": (1, True, 0.20, {"low": 1.0}),
}
Policy = Callable[..., Decisions]


# --- the job mix ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TraceJob:
    id: str
    queue: str
    priority: int
    demand: Resources  # per worker
    workers: int
    duration: float
    arrival: float = 0.0

    @property
    def gpus(self) -> int:
        return self.demand.gpus * self.workers


def queue_states() -> list[QueueState]:
    """The trace's queues."""
    return [QueueState(name, spec[0], None, spec[1]) for name, spec in QUEUES.items()]


def _pick(rng: random.Random, weights: dict[str, float]) -> str:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def _shape(rng: random.Random) -> tuple[Resources, int]:
    """A gang: (per-worker demand, workers)."""
    if rng.random() < 0.1:
        cpus = rng.choice([4, 8, 16, 32])
        return Resources(cpus, 0, 8.0 * cpus), 1
    size = 2 ** rng.choices(range(7), weights=[0.6**k for k in range(7)])[0]
    per_worker = min(size, 8)
    return Resources(8.0 * per_worker, per_worker, 64.0 * per_worker), size // per_worker


def make_jobs(count: int, seed: int) -> list[TraceJob]:
    """`count` jobs of the mix in the module docstring, all arriving at 0."""
    rng = random.Random(seed)
    shares = {name: spec[2] for name, spec in QUEUES.items()}
    jobs = []
    for number in range(count):
        queue = _pick(rng, shares)
        priority = PRIORITY_CLASSES[_pick(rng, QUEUES[queue][3])]
        demand, workers = _shape(rng)
        duration = min(max(rng.lognormvariate(math.log(1800), 1.5), 60.0), 48 * 3600.0)
        jobs.append(TraceJob(f"j{number:06d}", queue, priority, demand, workers, duration))
    return jobs


def make_trace(count: int, nodes: int, seed: int) -> list[TraceJob]:
    """Jobs with Poisson arrivals offering OFFERED_LOAD x the GPU capacity of `nodes`."""
    jobs = make_jobs(count, seed)
    gpu_seconds = sum(job.gpus * job.duration for job in jobs) / count
    rate = OFFERED_LOAD * nodes * NODE.gpus / gpu_seconds  # jobs per second
    rng = random.Random(seed + 1)
    now, timed = 0.0, []
    for job in jobs:
        now += rng.expovariate(rate)
        timed.append(TraceJob(**{**_fields(job), "arrival": now}))
    return timed


def _fields(job: TraceJob) -> dict[str, Any]:
    return {name: getattr(job, name) for name in TraceJob.__slots__}


# --- part 1: one cycle on a big cluster -----------------------------------------------------


def cycle_inputs(busy: bool, seed: int) -> dict[str, Any]:
    """10,000 pending jobs on 1,000 empty nodes, or with ~90% of the GPUs already held."""
    nodes = [NodeState(f"n{i:04d}", NODE, NODE) for i in range(CYCLE_NODES)]
    by_name = {node.name: node for node in nodes}
    running: list[RunningJob] = []
    if busy:
        fill = [job for job in make_jobs(CYCLE_PENDING, seed + 7) if job.gpus]
        capacity = CYCLE_NODES * NODE.gpus
        now = 0.0
        for job in fill:
            if sum(job.demand.gpus * len(r.placement) for r in running) >= BUSY_FRACTION * capacity:
                break
            placed = fifo_schedule(nodes, [], [_pending(job)], [], now=now).place
            if placed:
                _take(by_name, job.demand, placed[0].nodes, -1)
                running.append(_running(job, placed[0].nodes, started=-job.duration / 2))
    pending = [_pending(job) for job in make_jobs(CYCLE_PENDING, seed)]
    return {"nodes": nodes, "queues": queue_states(), "pending": pending, "running": running}


def _pending(job: TraceJob) -> PendingJob:
    return PendingJob(job.id, job.queue, job.priority, job.demand, job.workers, job.arrival)


def _running(job: TraceJob, nodes: tuple[str, ...], started: float) -> RunningJob:
    return RunningJob(job.id, job.queue, job.priority, job.demand, nodes, started)


def _take(
    by_name: dict[str, NodeState], demand: Resources, names: tuple[str, ...], sign: int
) -> None:
    """Give (sign=+1) or take (-1) `demand` once per worker named in `names`."""
    for name in names:
        node = by_name[name]
        node.free = node.free + demand if sign > 0 else node.free - demand


def time_cycle(policy: Policy, inputs: dict[str, Any], repeats: int) -> dict[str, Any]:
    """Median seconds of `repeats` cycles of `policy` on the same inputs."""
    seconds, decisions = [], Decisions()
    for _ in range(repeats):
        start = time.perf_counter()
        decisions = policy(**inputs, now=1e6)
        seconds.append(time.perf_counter() - start)
    median = statistics.median(seconds)
    count = len(decisions.place) + len(decisions.preempt)
    return {
        "cycle_s": median,
        "placed": len(decisions.place),
        "preempted": len(decisions.preempt),
        "decisions_per_s": count / median,
        "jobs_per_s": len(inputs["pending"]) / median,
    }


def measure_cycles(repeats: int, seed: int) -> dict[str, Any]:
    """Part 1, for the empty and the busy cluster, forgeml and FIFO."""
    report = {}
    for state in ("empty", "busy"):
        inputs = cycle_inputs(state == "busy", seed)
        report[state] = {
            "running": len(inputs["running"]),
            "forgeml": time_cycle(schedule, inputs, repeats),
            "fifo": time_cycle(fifo_schedule, inputs, repeats),
        }
    return report


# --- part 2: the discrete-event simulation --------------------------------------------------


@dataclass(slots=True)
class SimJob:
    trace: TraceJob
    remaining: float
    attempt: int = 0
    first_start: float | None = None
    started_at: float = 0.0
    overhead: float = 0.0
    stop_asked_at: float = 0.0
    nodes: tuple[str, ...] = ()


@dataclass(slots=True)
class Totals:
    useful: list[tuple[float, float, int, str]] = field(default_factory=list)  # start, end, GPUs
    preemptions: int = 0
    lost_gpu_s: float = 0.0
    cycles: int = 0
    policy_s: float = 0.0


class Simulation:
    """One policy over one trace, event by event, until every job has finished."""

    def __init__(
        self, trace: list[TraceJob], nodes: int, policy: str, options: PolicyOptions | None = None
    ) -> None:
        self.options = options
        self.nodes = [NodeState(f"n{i:03d}", NODE, NODE) for i in range(nodes)]
        self.by_name = {node.name: node for node in self.nodes}
        self.policy = policy
        self.queues = queue_states()
        self.jobs = {job.id: SimJob(job, job.duration) for job in trace}
        self.events: list[tuple[float, int, str, str, int]] = []  # time, seq, kind, job, attempt
        self.sequence = 0
        self.pending: dict[str, PendingJob] = {}
        self.running: dict[str, RunningJob] = {}
        self.stopping: set[str] = set()
        self.totals = Totals()
        for job in trace:
            self._at(job.arrival, "arrive", job.id, 0)

    def _at(self, when: float, kind: str, job: str, attempt: int) -> None:
        self.sequence += 1
        heapq.heappush(self.events, (when, self.sequence, kind, job, attempt))

    def run(self) -> Totals:
        """Process events in time order, one scheduling cycle after each batch."""
        while self.events:
            now = self.events[0][0]
            while self.events and self.events[0][0] == now:
                _, _, kind, job, attempt = heapq.heappop(self.events)
                getattr(self, f"_on_{kind}")(self.jobs[job], now, attempt)
            if self.pending:
                self._cycle(now)
        unfinished = [job for job in self.jobs.values() if job.remaining > 0]
        if unfinished:
            raise RuntimeError(f"{len(unfinished)} jobs never finished under {self.policy}")
        return self.totals

    def _cycle(self, now: float) -> None:
        args = (self.nodes, self.queues, list(self.pending.values()), list(self.running.values()))
        start = time.perf_counter()
        if self.policy == "forgeml":
            decisions = schedule(*args, now=now, stopping=self.stopping, options=self.options)
        else:
            decisions = fifo_schedule(*args, now=now)
        self.totals.policy_s += time.perf_counter() - start
        self.totals.cycles += 1
        for placement in decisions.place:
            self._start(self.jobs[placement.job_id], placement.nodes, now)
        for victim in decisions.preempt:
            if victim in self.stopping or victim not in self.running:
                raise RuntimeError(f"{self.policy} preempted {victim}, which is not running")
            self.stopping.add(victim)
            self.totals.preemptions += 1
            job = self.jobs[victim]
            job.stop_asked_at = now
            self._at(now + GRACE_S, "stopped", victim, job.attempt)

    def _start(self, job: SimJob, nodes: tuple[str, ...], now: float) -> None:
        pending = self.pending.pop(job.trace.id)
        if len(nodes) != job.trace.workers:
            raise RuntimeError(f"{job.trace.id} got {len(nodes)} nodes for {pending.workers}")
        _take(self.by_name, job.trace.demand, nodes, -1)
        for name in set(nodes):
            free = self.by_name[name].free
            if min(free.cpus, free.gpus, free.memory_gb) < -1e-9:
                raise RuntimeError(f"{self.policy} over-committed node {name}")
        job.attempt += 1
        job.first_start = now if job.first_start is None else job.first_start
        job.started_at, job.nodes = now, nodes
        job.overhead = RESTART_S if job.attempt > 1 else 0.0
        self.running[job.trace.id] = _running(job.trace, nodes, now)
        self._at(now + job.overhead + job.remaining, "finish", job.trace.id, job.attempt)

    def _on_arrive(self, job: SimJob, now: float, attempt: int) -> None:
        self.pending[job.trace.id] = _pending(job.trace)

    def _on_finish(self, job: SimJob, now: float, attempt: int) -> None:
        if attempt != job.attempt or job.trace.id not in self.running:
            return  # this attempt was preempted
        self._end(job, now, job.remaining)
        job.remaining = 0.0

    def _on_stopped(self, job: SimJob, now: float, attempt: int) -> None:
        if attempt != job.attempt or job.trace.id not in self.running:
            return  # it finished during its grace period
        worked = max(job.stop_asked_at - job.started_at - job.overhead, 0.0)
        saved = min(CHECKPOINT_S * math.floor(worked / CHECKPOINT_S), job.remaining)
        self._end(job, now, saved)
        job.remaining -= saved
        self.totals.lost_gpu_s += job.trace.gpus * (now - job.started_at - saved)
        self.pending[job.trace.id] = _pending(job.trace)

    def _end(self, job: SimJob, now: float, useful: float) -> None:
        """Free the job's nodes; `useful` seconds after its start-up were real progress."""
        del self.running[job.trace.id]
        self.stopping.discard(job.trace.id)
        _take(self.by_name, job.trace.demand, job.nodes, +1)
        begin = job.started_at + job.overhead
        self.totals.useful.append((begin, begin + useful, job.trace.gpus, job.trace.queue))


# --- part 2: figures ------------------------------------------------------------------------


def fair_shares(demand: dict[str, float]) -> dict[str, float]:
    """Weighted max-min fair shares of a capacity of 1 given each queue's demand.

    Water-filling: queues that ask for less than their weighted part get what they ask; the
    rest is split again by weight among the others.
    """
    shares: dict[str, float] = {}
    left, active = 1.0, set(demand)
    while active:
        weight = sum(QUEUES[name][0] for name in active)
        modest = {name for name in active if demand[name] <= left * QUEUES[name][0] / weight}
        if not modest:
            shares.update({name: left * QUEUES[name][0] / weight for name in active})
            break
        for name in modest:
            shares[name] = demand[name]
            left -= demand[name]
        active -= modest
    return shares


def _overlap(start: float, end: float, low: float, high: float) -> float:
    return max(min(end, high) - max(start, low), 0.0)


def summarise(sim: Simulation, trace: list[TraceJob]) -> dict[str, Any]:
    """Utilisation, waits, shares against fair shares, and preemptions of one run."""
    arrivals_end = max(job.arrival for job in trace)
    low, high = WINDOW_START * arrivals_end, arrivals_end
    capacity_s = len(sim.nodes) * NODE.gpus * (high - low)
    used = dict.fromkeys(QUEUES, 0.0)
    for start, end, gpus, queue in sim.totals.useful:
        used[queue] += gpus * _overlap(start, end, low, high)
    offered = dict.fromkeys(QUEUES, 0.0)
    for job in trace:
        offered[job.queue] += job.gpus * job.duration
    fair = fair_shares(
        {name: offered[name] / (len(sim.nodes) * NODE.gpus * arrivals_end) for name in QUEUES}
    )
    queues = {}
    for name in QUEUES:
        waits = [
            job.first_start - job.trace.arrival
            for job in sim.jobs.values()
            if job.trace.queue == name and job.first_start is not None
        ]
        share = used[name] / capacity_s
        queues[name] = {
            "jobs": len(waits),
            "mean_wait_h": statistics.fmean(waits) / 3600 if waits else 0.0,
            "p95_wait_h": _p95(waits) / 3600,
            "share": share,
            "fair_share": fair[name],
            "share_vs_fair": share / fair[name] if fair[name] else 1.0,
        }
    starved = [name for name, q in queues.items() if q["share_vs_fair"] < STARVED_BELOW]
    large = [
        job.first_start - job.trace.arrival
        for job in sim.jobs.values()
        if job.trace.gpus >= LARGE_GPUS and job.first_start is not None
    ]
    return {
        "utilisation": sum(used.values()) / capacity_s,
        "large_mean_wait_h": statistics.fmean(large) / 3600 if large else 0.0,
        "large_max_wait_h": max(large, default=0.0) / 3600,
        "queues": queues,
        "starved": starved,
        "preemptions": sim.totals.preemptions,
        "lost_gpu_h": sim.totals.lost_gpu_s / 3600,
        "cycles": sim.totals.cycles,
        "policy_s": sim.totals.policy_s,
    }


def _p95(values: list[float]) -> float:
    return sorted(values)[int(0.95 * (len(values) - 1))] if values else 0.0


def measure_quality(
    jobs: int, nodes: int, seeds: int, progress: bool, options: PolicyOptions | None = None
) -> dict[str, Any]:
    """Part 2 over `seeds` traces: each policy on the same trace, medians over the seeds.

    `options` are forgeml's policy knobs (default: the policy's defaults).
    """
    runs: dict[str, list[dict[str, Any]]] = {"forgeml": [], "fifo": []}
    for seed in range(seeds):
        trace = make_trace(jobs, nodes, seed)
        for policy, results in runs.items():
            start = time.perf_counter()
            sim = Simulation(trace, nodes, policy, options if policy == "forgeml" else None)
            sim.run()
            results.append(summarise(sim, trace))
            if progress:
                took = time.perf_counter() - start
                print(f"  seed {seed} {policy}: {took:.1f} s", file=sys.stderr)
    ratios = [
        ours["utilisation"] / fifo["utilisation"]
        for ours, fifo in zip(runs["forgeml"], runs["fifo"], strict=True)
    ]
    starved = sorted({name for run in runs["forgeml"] for name in run["starved"]})
    return {
        "jobs": jobs,
        "nodes": nodes,
        "gpus": nodes * NODE.gpus,
        "seeds": seeds,
        "forgeml": _medians(runs["forgeml"]),
        "fifo": _medians(runs["fifo"]),
        "utilisation_ratio": statistics.median(ratios),
        "utilisation_ratios": ratios,
        "starved": starved,
    }


def _medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over seeds of every figure (per queue too); `runs` keeps the raw ones."""
    scalar = ("utilisation", "preemptions", "lost_gpu_h", "cycles", "policy_s")
    scalar += ("large_mean_wait_h", "large_max_wait_h")
    summary: dict[str, Any] = {key: statistics.median(run[key] for run in runs) for key in scalar}
    summary["queues"] = {
        name: {key: statistics.median(run["queues"][name][key] for run in runs) for key in figures}
        for name, figures in runs[0]["queues"].items()
    }
    summary["runs"] = runs
    return summary


# --- driver ---------------------------------------------------------------------------------


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Both parts with the command line's sizes."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    cycles = measure_cycles(args.repeats, args.seed)
    options = (
        None if args.reserve_after is None else PolicyOptions(reserve_after_s=args.reserve_after)
    )
    quality = measure_quality(args.jobs, args.nodes, args.seeds, not args.json, options)
    worst = max(cycles[state]["forgeml"]["cycle_s"] for state in cycles)
    ratio = quality["utilisation_ratio"]
    return {
        "cpu_count": os.cpu_count(),
        "load_average_1min": load,
        "repeats": args.repeats,
        "reserve_after_s": (options or PolicyOptions()).reserve_after_s,
        "cycles": cycles,
        "quality": quality,
        "targets": {
            "cycle_s_max": CYCLE_TARGET_S,
            "utilisation_ratio_min": UTILISATION_TARGET,
            "starved_below_fair_share": STARVED_BELOW,
        },
        "meets_targets": worst < CYCLE_TARGET_S
        and ratio >= UTILISATION_TARGET
        and not quality["starved"],
    }


def format_table(report: dict[str, Any]) -> str:
    """The figures as plain-text tables."""
    verdict = {True: "met", False: "NOT met"}
    lines = [
        f"one cycle over {CYCLE_PENDING:,} pending jobs on {CYCLE_NODES:,} nodes x 8 GPUs, "
        f"median of {report['repeats']}; {report['cpu_count']} CPUs, "
        f"load {report['load_average_1min'] or 0:.1f} at start",
        f"{'cluster':<8}{'running':>9}{'policy':>9}{'cycle s':>10}{'placed':>8}"
        f"{'preempt':>9}{'decisions/s':>13}{'jobs/s':>10}",
    ]
    for state, figures in report["cycles"].items():
        for policy in ("forgeml", "fifo"):
            f = figures[policy]
            lines.append(
                f"{state:<8}{figures['running']:>9,}{policy:>9}{f['cycle_s']:>10.3f}"
                f"{f['placed']:>8,}{f['preempted']:>9,}{f['decisions_per_s']:>13,.0f}"
                f"{f['jobs_per_s']:>10,.0f}"
            )
    worst = max(figures["forgeml"]["cycle_s"] for figures in report["cycles"].values())
    lines.append(
        f"forgeml cycle {worst:.3f} s (target < {CYCLE_TARGET_S:g} s: "
        f"{verdict[worst < CYCLE_TARGET_S]})"
    )
    lines.append("")
    lines.extend(_quality_lines(report["quality"], verdict))
    return "\n".join(lines)


def _quality_lines(quality: dict[str, Any], verdict: dict[bool, str]) -> list[str]:
    lines = [
        f"simulated trace: {quality['jobs']:,} jobs on {quality['gpus']} GPUs, offered load "
        f"{OFFERED_LOAD:g}x, median over {quality['seeds']} seed(s)",
        f"{'policy':<9}{'queue':<10}{'mean wait h':>12}{'p95 wait h':>11}{'share':>7}"
        f"{'fair':>7}{'share/fair':>11}",
    ]
    for policy in ("forgeml", "fifo"):
        for name, q in quality[policy]["queues"].items():
            lines.append(
                f"{policy:<9}{name:<10}{q['mean_wait_h']:>12.2f}{q['p95_wait_h']:>11.2f}"
                f"{q['share']:>7.3f}{q['fair_share']:>7.3f}{q['share_vs_fair']:>11.2f}"
            )
    ours, fifo = quality["forgeml"], quality["fifo"]
    for policy, figures in (("forgeml", ours), ("fifo", fifo)):
        lines.append(
            f"{policy}: GPU utilisation {figures['utilisation']:.3f}, "
            f"{figures['preemptions']:g} preemptions ({figures['lost_gpu_h']:.1f} GPU-h lost), "
            f"gangs >= {LARGE_GPUS} GPUs wait {figures['large_mean_wait_h']:.1f} h "
            f"(longest {figures['large_max_wait_h']:.1f} h), "
            f"{figures['cycles']:,.0f} cycles in {figures['policy_s']:.1f} s"
        )
    ratio, starved = quality["utilisation_ratio"], quality["starved"]
    lines.append(
        f"utilisation forgeml/FIFO: {ratio:.2f}x (target >= {UTILISATION_TARGET:g}x: "
        f"{verdict[ratio >= UTILISATION_TARGET]}); starved queues: "
        f"{', '.join(starved) or 'none'} ({verdict[not starved]})"
    )
    return lines


def profile_cycle(seed: int) -> None:
    """cProfile one forgeml cycle on the busy and the empty cluster (top 25, to stderr)."""
    import cProfile
    import pstats

    for busy in (True, False):
        inputs = cycle_inputs(busy, seed)
        profiler = cProfile.Profile()
        profiler.runcall(schedule, **inputs, now=1e6)
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(25)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = make_parser(__doc__, "3 repeats, 800 jobs, 1 seed")
    parser.add_argument("--repeats", type=int, default=None, help="cycles timed (default 5)")
    parser.add_argument("--jobs", type=int, default=None, help="trace jobs (default 2,400)")
    parser.add_argument("--nodes", type=int, default=None, help="simulated nodes (default 16)")
    parser.add_argument("--seeds", type=int, default=None, help="traces (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="seed of part 1 (default 0)")
    parser.add_argument(
        "--reserve-after",
        type=float,
        default=None,
        help="forgeml's PolicyOptions.reserve_after_s in part 2 (default: the policy's)",
    )
    parser.add_argument("--profile", action="store_true", help="cProfile one cycle and stop")
    args = parser.parse_args(argv)
    quick = {"repeats": 3, "jobs": 800, "nodes": 16, "seeds": 1}
    full = {"repeats": 5, "jobs": 2_400, "nodes": 16, "seeds": 3}
    for name, value in (quick if args.quick else full).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if min(args.repeats, args.jobs, args.nodes, args.seeds) < 1:
        parser.error("--repeats, --jobs, --nodes and --seeds must be at least 1")
    if args.nodes < 8:
        parser.error("--nodes must be at least 8: the largest gang takes 64 GPUs")
    return args


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = parse_args(argv)
    if args.profile:
        profile_cycle(args.seed)
        return 0
    report = measure(args)
    print(format_table(report))
    print_json(args, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
