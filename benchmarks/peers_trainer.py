"""The trainer figure of `benchmarks/peers.py`: forgeml's `fit` against Lightning's `Trainer`.

Both train the trainer benchmark's run (benchmarks/trainer_overhead.py: Adult MLP
87-512-256-2, batch 256, AdamW, the same initial weights and batches) with tracking on:
forgeml's `fit` in this process with its MLflow run (as trainer_overhead.py times it), and
Lightning in a worker process of the peers' venv (`_peers/lightning_worker.py`) with its
`MLFlowLogger`, at Lightning's default `log_every_n_steps` (50) and at every step, with the
`torch.optim.AdamW` a Lightning user writes (torch's default: on CPU the per-tensor loop);
one more arm gives Lightning the fused AdamW kernel forgeml's optimiser asks for, which
splits Lightning's cost into its optimiser's and its own. The arms alternate round by round
(the first round is an untimed warm-up) and medians of the timed rounds are compared.

The final weights say whether both did the same work: forgeml's equal the fused arm's
(the same batches, dropout stream and kernel); the per-tensor and fused kernels round
differently (1e-7 after 100 steps), a gap training amplifies (~0.08 after 600 steps).
"""

from __future__ import annotations

import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

from _adult import REPO, prepare_adult
from peers_setup import OFFLINE_ENV, VENVS
from trainer_overhead import BATCH_SIZE, SEED, bench_config, forgeml_fit

# Lightning's arms: label -> (log_every_n_steps, AdamW's `fused`); 50 is the Trainer's
# default and None torch's (the per-tensor loop on CPU)
LIGHTNING_ARMS: dict[str, tuple[int, bool | None]] = {
    "lightning_defaults": (50, None),
    "lightning_fused_adamw": (50, True),
    "lightning_log_every_step": (1, None),
}


class _LightningWorker:
    """`_peers/lightning_worker.py` in the peers' venv, one fit per request."""

    def __init__(self, home: Path, steps: int, log: IO[str]) -> None:
        env = {**os.environ, **OFFLINE_ENV, "FORGEML_HOME": str(home)}
        env["PYTHONPATH"] = f"{REPO / 'src'}:{REPO / 'benchmarks'}"
        env.pop("MLFLOW_TRACKING_URI", None)
        worker = REPO / "benchmarks" / "_peers" / "lightning_worker.py"
        self.process = subprocess.Popen(
            [str(VENVS["peers"].python), str(worker), str(home), str(steps)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, env=env,
        )  # fmt: skip
        self.hello = self._answer()

    def _answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the Lightning worker exited ({self.process.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def fit(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return self._answer()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()


def trainer_figure(scratch: Path, steps: int, rounds: int) -> dict[str, Any]:
    """forgeml's samples/s against each Lightning arm's, medians of alternating rounds."""
    missing = VENVS["peers"].missing()
    if missing:
        return {"error": missing}
    import torch

    from forgeml.train.data import load_task_data
    from forgeml.train.models import build_model

    torch.set_num_threads(os.cpu_count() or 1)
    os.environ.pop("MLFLOW_TRACKING_URI", None)  # the temp home's own MLflow database
    home = scratch / "trainer-home"
    workspace = prepare_adult(home)
    log_path = scratch / "lightning-worker.log"
    times: dict[str, list[dict[str, float]]] = {"forgeml": [], **{a: [] for a in LIGHTNING_ARMS}}
    with log_path.open("w") as log:
        try:
            worker = _LightningWorker(home, steps, log)
        except (RuntimeError, json.JSONDecodeError) as error:
            workspace.close()
            return {"error": f"{error}: {_tail(log_path)}"}
        try:
            config = bench_config(steps)
            task = load_task_data(workspace, config)
            torch.manual_seed(SEED)
            initial = build_model("mlp", task, config.model.params)
            arms = ["forgeml", *LIGHTNING_ARMS]
            for index in range(rounds + 1):  # round 0 is the untimed warm-up
                order = arms[index % len(arms) :] + arms[: index % len(arms)]
                for arm in order:
                    if arm == "forgeml":
                        model = copy.deepcopy(initial)
                        found = forgeml_fit(workspace, model, task, config, scratch / "runs")
                        final = model
                    else:
                        found = worker.fit(_lightning_request(scratch, arm, index))
                    if index:
                        times[arm].append({"wall": found["wall"], "cpu": found["cpu"]})
            gaps = {
                arm: _weight_gap(final, scratch / f"{arm}-weights.safetensors")
                for arm in ("lightning_defaults", "lightning_fused_adamw")
            }
        finally:
            worker.close()
            workspace.close()
    return _summary(times, steps, rounds, worker.hello, gaps)


def _lightning_request(scratch: Path, arm: str, index: int) -> dict[str, Any]:
    root = scratch / f"lightning-{arm}-{index}"
    log_every, fused = LIGHTNING_ARMS[arm]
    return {
        "log_every_n_steps": log_every,
        "fused": fused,
        "tracking_uri": f"sqlite:///{scratch / 'lightning-mlflow.db'}",
        "root": str(root),
        "weights": str(scratch / f"{arm}-weights.safetensors"),
    }


def _weight_gap(model: Any, lightning_weights: Path) -> float:
    """Largest |forgeml - Lightning| over the final weights: both did the same work."""
    from safetensors.torch import load_file

    theirs = load_file(str(lightning_weights))
    ours = model.state_dict()
    return max((ours[name] - value).abs().max().item() for name, value in theirs.items())


def _summary(
    times: dict[str, list[dict[str, float]]],
    steps: int,
    rounds: int,
    hello: dict[str, Any],
    gaps: dict[str, float],
) -> dict[str, Any]:
    samples = steps * BATCH_SIZE
    arms: dict[str, Any] = {}
    for arm, found in times.items():
        wall = statistics.median(f["wall"] for f in found)
        arms[arm] = {
            "seconds": [f["wall"] for f in found],
            "median_s": wall,
            "median_cpu_s": statistics.median(f["cpu"] for f in found),
            "samples_per_s": samples / wall,
        }
    ours = arms["forgeml"]["samples_per_s"]
    ratios = {arm: ours / arms[arm]["samples_per_s"] for arm in LIGHTNING_ARMS}
    return {
        "steps": steps,
        "batch_size": BATCH_SIZE,
        "rounds": rounds,
        "lightning_version": hello.get("lightning"),
        "arms": arms,
        "ratios": ratios,
        "max_weight_difference": gaps,
        "goal": ">= 1.5x Lightning at its defaults",
        "goal_met": ratios["lightning_defaults"] >= 1.5,
    }


def _tail(path: Path, lines: int = 15) -> str:
    return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])


def report(figure: dict[str, Any]) -> list[str]:
    """The trainer figure as table lines."""
    if "error" in figure:
        return [f"trainer vs Lightning: not measured: {figure['error']}"]
    lines = [
        f"trainer: Adult MLP, {figure['steps']} steps x batch {figure['batch_size']}, tracking "
        f"on (MLflow), median of {figure['rounds']} alternating rounds; Lightning "
        f"{figure['lightning_version']}",
        f"  {'arm':28} {'median s':>9} {'CPU s':>7} {'samples/s':>10} {'forgeml / arm':>14}",
    ]
    for arm, found in figure["arms"].items():
        ratio = figure["ratios"].get(arm)
        shown = f"{ratio:>13.2f}x" if ratio is not None else ""
        lines.append(
            f"  {arm:28} {found['median_s']:>9.3f} {found['median_cpu_s']:>7.2f} "
            f"{found['samples_per_s']:>10,.0f} {shown}"
        )
    met = "met" if figure["goal_met"] else "NOT met"
    gaps = ", ".join(f"{arm} {gap:.2e}" for arm, gap in figure["max_weight_difference"].items())
    lines.append(f"  goal {figure['goal']}: {met}; final weights, largest |forgeml - arm|: {gaps}")
    return lines


if __name__ == "__main__":  # one figure alone: python benchmarks/peers_trainer.py [STEPS ROUNDS]
    steps, rounds = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) > 2 else (100, 1)
    with tempfile.TemporaryDirectory(prefix="forgeml-bench-peers-") as where:
        print("\n".join(report(trainer_figure(Path(where), steps, rounds))))
