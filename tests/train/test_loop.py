from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import forgeml
from forgeml.core.errors import ConfigError, UsageError
from forgeml.train.checkpoint import list_checkpoints, load_latest
from forgeml.train.config import TrainConfig
from forgeml.train.logger import MemoryLogger
from forgeml.train.loop import FitResult, TrainingDivergedError, fit
from forgeml.train.step import (
    BatchPlan,
    DistContext,
    accumulate_gradients,
    epoch_order,
    micro_batch_rows,
    plan_batches,
)
from forgeml.train.task import SplitData, TaskData, TaskKind
from tests._wait import FakeClock, wait_until

REPO = Path(__file__).resolve().parents[2]
SRC = Path(forgeml.__file__).resolve().parents[1]


def is_one_sentence(message: str) -> bool:
    return message.endswith(".") and "\n" not in message and len(message) < 400


class TinyNet(nn.Module):
    def __init__(self, features: int = 8, outputs: int = 2, dropout: float = 0.0) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(features, 16), nn.ReLU(), nn.Dropout(dropout), nn.Linear(16, outputs)
        )
        self.seen_dtypes: set[torch.dtype] = set()

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        hidden = self.net[0](features)
        self.seen_dtypes.add(hidden.dtype)
        return self.net[1:](hidden)


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 12) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, 16)
        self.head = nn.Linear(16, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(tokens))


def make_task(task: TaskKind = "classification", rows: int = 256, seed: int = 0) -> TaskData:
    generator = torch.Generator().manual_seed(seed)
    if task == "language_modeling":
        start = torch.randint(0, 12, (rows, 1), generator=generator)
        sequence = (start + torch.arange(9)) % 12  # next token = current + 1 (learnable)
        split = SplitData({"tokens": sequence[:, :-1]}, sequence[:, 1:])
        return TaskData("language_modeling", split, split, vocab_size=12, input_shape=(8,))
    features = torch.randn(rows, 8, generator=generator)
    if task == "regression":
        targets = features[:, 0] * 2 - features[:, 1]
    else:
        targets = (features[:, 0] + features[:, 1] > 0).long()
    cut = rows * 3 // 4
    train = SplitData({"features": features[:cut]}, targets[:cut])
    held_out = SplitData({"features": features[cut:]}, targets[cut:])
    names = ["neg", "pos"] if task == "classification" else []
    return TaskData(task, train, held_out, num_classes=len(names) or None, class_names=names)


def make_config(**overrides: Any) -> TrainConfig:
    values: dict[str, Any] = {
        "name": "test",
        "data": {"dataset": "toy", "target": "y"},
        "model": {"name": "mlp"},
        "epochs": 3,
        "batch_size": 16,
        "optimizer": {"lr": 0.01},
    }
    values.update(overrides)
    return TrainConfig.model_validate(values)


def train(
    tmp_path: Path, config: TrainConfig, task: TaskData | None = None, **kwargs: Any
) -> tuple[nn.Module, FitResult]:
    data = task or make_task()
    torch.manual_seed(0)  # the same initial weights for every run of a test
    build = kwargs.pop("net", None) or (
        lambda: TinyNet(outputs=2 if data.task == "classification" else 1)
    )
    model = build()
    run_dir = kwargs.pop("run_dir", tmp_path / "run")
    result = fit(model, data, config, run_dir=run_dir, logger=MemoryLogger(), **kwargs)
    return model, result


def train_losses(result: FitResult) -> list[float]:
    return [metrics["train_loss"] for _, metrics in result.history if "train_loss" in metrics]


@pytest.fixture(autouse=True)
def one_thread() -> None:
    torch.set_num_threads(1)


def test_classification_loss_decreases_and_reports_metrics(tmp_path: Path) -> None:
    _, result = train(tmp_path, make_config(epochs=5))
    losses = train_losses(result)
    assert result.steps == 5 * (192 // 16) == len(losses)
    assert sum(losses[-5:]) / 5 < 0.6 * sum(losses[:5]) / 5
    assert result.final_metrics["accuracy"] > 0.85
    assert {"loss", "f1_macro", "roc_auc"} <= result.final_metrics.keys()
    assert sum(map(sum, result.confusion_matrices["eval"])) == 64
    assert result.epochs_completed == 5
    assert not result.stopped_early
    assert not result.preempted


@pytest.mark.parametrize(
    ("task", "net", "metric"),
    [("regression", None, "rmse"), ("language_modeling", TinyLM, "perplexity")],
)
def test_regression_and_language_models_learn(
    tmp_path: Path, task: TaskKind, net: type[nn.Module] | None, metric: str
) -> None:
    config = make_config(epochs=6, optimizer={"lr": 0.03})
    _, result = train(tmp_path, config, make_task(task), net=net)
    losses = train_losses(result)
    assert sum(losses[-3:]) / 3 < 0.5 * sum(losses[:3]) / 3
    assert metric in result.final_metrics


def test_every_step_logs_loss_lr_and_throughput_and_reports_progress(tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    config = make_config(epochs=2, schedule={"name": "linear", "warmup_steps": 4})
    _, result = train(tmp_path, config, progress=lambda step, total, _: calls.append((step, total)))
    steps = [step for step, metrics in result.history if "train_loss" in metrics]
    assert steps == list(range(1, 25))
    assert calls == [(step, 24) for step in steps]
    first = result.history[0][1]
    assert first["lr"] == pytest.approx(0.01 / 4)
    assert first["samples_per_s"] > 0
    eval_steps = [step for step, metrics in result.history if "eval_accuracy" in metrics]
    assert eval_steps == [12, 24]  # once per epoch by default


def test_the_logger_gets_training_metrics_as_means_every_log_every_steps(
    tmp_path: Path,
) -> None:
    logger = MemoryLogger()
    config = make_config(
        epochs=2, log_every_steps=5, schedule={"name": "linear", "warmup_steps": 4}
    )
    result = fit(TinyNet(), make_task(), config, run_dir=tmp_path / "run", logger=logger)

    sent = [(step, metrics) for step, metrics in logger.history if "train_loss" in metrics]
    assert [step for step, _ in sent] == [5, 10, 15, 20, 24]  # and the last, partial window
    per_step = {step: metrics for step, metrics in result.history if "train_loss" in metrics}
    for step, metrics in sent:
        window = [per_step[s] for s in range(step - 4 if step % 5 == 0 else 21, step + 1)]
        assert metrics["train_loss"] == pytest.approx(
            sum(m["train_loss"] for m in window) / len(window)
        )
        assert (metrics["lr"], metrics["epoch"]) == (per_step[step]["lr"], per_step[step]["epoch"])
    evaluated = [step for step, metrics in logger.history if "eval_accuracy" in metrics]
    assert evaluated == [12, 24]


def test_grad_accumulation_of_4x16_equals_one_batch_of_64(tmp_path: Path) -> None:
    weights = []
    for accum in (1, 4):
        config = make_config(
            max_steps=2, epochs=None, batch_size=64, grad_accum=accum, optimizer={"name": "sgd"}
        )
        model, _ = train(tmp_path, config, run_dir=tmp_path / f"accum{accum}")
        weights.append(model.state_dict())
    for name, tensor in weights[0].items():
        assert torch.allclose(tensor, weights[1][name], atol=1e-6), name


def test_rank_shares_partition_every_global_batch() -> None:
    order = epoch_order(64, seed=3, epoch=0)
    plan = BatchPlan(steps_per_epoch=2, total_steps=2, micro_batch=8)  # 32 = 2 accum x 2 ranks x 8
    for batch in range(2):
        shares = [
            micro_batch_rows(order, batch, micro, plan, DistContext(rank=rank, world_size=2), 2)
            for micro in range(2)
            for rank in range(2)
        ]
        rows = torch.cat(shares)
        assert rows.tolist() == order[batch * 32 : (batch + 1) * 32].tolist()


def test_two_ranks_with_half_batches_average_to_the_one_rank_gradient() -> None:
    torch.manual_seed(0)
    model = TinyNet()
    data = make_task()
    order = epoch_order(len(data.train), seed=0, epoch=0)
    config = make_config(batch_size=32, grad_accum=2)

    def gradient(world: int, rank: int) -> list[torch.Tensor]:
        model.zero_grad()
        plan = plan_batches(config, len(data.train), world)
        dist = DistContext(rank=rank, world_size=world)
        accumulate_gradients(model, data, order, 1, plan, dist, config, None)
        return [p.grad.clone() for p in model.parameters() if p.grad is not None]

    single = gradient(1, 0)
    averaged = [(a + b) / 2 for a, b in zip(gradient(2, 0), gradient(2, 1), strict=True)]
    for one, two in zip(single, averaged, strict=True):
        assert torch.allclose(one, two, atol=1e-6)


def test_data_order_is_a_seeded_permutation_per_epoch() -> None:
    expected = torch.randperm(50, generator=torch.Generator().manual_seed(7 + 2))
    assert epoch_order(50, seed=7, epoch=2).tolist() == expected.tolist()
    assert epoch_order(50, 7, 1).tolist() != epoch_order(50, 7, 2).tolist()


def test_bf16_trains_under_autocast(tmp_path: Path) -> None:
    model, result = train(tmp_path, make_config(precision="bf16", epochs=4))
    assert torch.bfloat16 in model.seen_dtypes  # type: ignore[operator]
    losses = train_losses(result)
    assert all(map(torch.isfinite, torch.tensor(losses)))
    assert sum(losses[-5:]) < sum(losses[:5])
    assert next(model.parameters()).dtype == torch.float32  # master weights stay fp32


def test_early_stopping_ends_the_run_after_patience_runs_out(tmp_path: Path) -> None:
    # loss falls, so in "max" mode only the first evaluation is ever the best
    config = make_config(
        eval_every_steps=2, early_stopping={"metric": "loss", "mode": "max", "patience": 2}
    )
    _, result = train(tmp_path, config)
    assert result.stopped_early
    assert result.steps == 6  # evaluations at 2 (best), 4, 6 (patience 2 used up)
    assert load_latest(tmp_path / "run").state.step == 6  # type: ignore[union-attr]
    assert "accuracy" in result.final_metrics


def test_early_stopping_on_an_unknown_metric_names_the_choices(tmp_path: Path) -> None:
    config = make_config(early_stopping={"metric": "bleu"})
    with pytest.raises(ConfigError) as error:
        train(tmp_path, config)
    assert "'bleu'" in str(error.value) and "accuracy" in str(error.value)
    assert is_one_sentence(str(error.value))


def test_gradient_clipping_logs_the_norm_before_clipping(tmp_path: Path) -> None:
    _, result = train(tmp_path, make_config(clip_grad_norm=0.01, epochs=1))
    norms = [metrics["grad_norm"] for _, metrics in result.history if "grad_norm" in metrics]
    assert len(norms) == 12 and max(norms) > 0.01


def test_checkpoints_every_n_minutes(tmp_path: Path) -> None:
    config = make_config(
        max_steps=6, epochs=None, checkpoint={"every_minutes": 0.005, "keep": 10}
    )  # every 0.3 s; each step below takes 0.2 s
    clock = FakeClock()
    train(tmp_path, config, progress=lambda *_: clock.advance(0.2), clock=clock)
    steps = [int(p.name.removeprefix("step-")) for p in list_checkpoints(tmp_path / "run")]
    assert steps == [2, 4, 6]


def test_nan_loss_stops_with_a_clear_error_and_keeps_the_last_good_checkpoint(
    tmp_path: Path,
) -> None:
    config = make_config(
        optimizer={"name": "sgd", "lr": 1e4, "momentum": 0.0},
        checkpoint={"every_steps": 1, "keep": 2},
    )
    with pytest.raises(TrainingDivergedError) as error:
        train(tmp_path, config, make_task("regression"))
    message = str(error.value)
    assert "diverged at step" in message and "lower optimizer.lr" in message
    assert is_one_sentence(message)
    failed_step = int(message.split("at step ")[1].split(":", maxsplit=1)[0])
    checkpoint = load_latest(tmp_path / "run")
    assert checkpoint is not None and checkpoint.state.step == failed_step - 1
    restored = TinyNet(outputs=1)
    optimizer = torch.optim.SGD(restored.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    checkpoint.restore(restored, optimizer, scheduler)
    assert all(torch.isfinite(p).all() for p in restored.parameters())


def test_should_stop_writes_a_checkpoint_and_resume_finishes_the_same_run(
    tmp_path: Path,
) -> None:
    config = make_config(epochs=2, checkpoint={"every_steps": 100})
    task = make_task()
    polls = iter(range(1000))
    dropout_net = lambda: TinyNet(dropout=0.2)  # noqa: E731
    _, stopped = train(
        tmp_path, config, task, net=dropout_net, should_stop=lambda: next(polls) == 6
    )
    assert stopped.preempted and stopped.steps == 7
    assert [p.name for p in list_checkpoints(tmp_path / "run")] == ["step-000007"]
    assert stopped.final_metrics == {}
    resumed_model, resumed = train(tmp_path, config, task, net=dropout_net, resume=True)
    straight_model, straight = train(
        tmp_path, config, task, net=dropout_net, run_dir=tmp_path / "straight"
    )
    assert resumed.steps == straight.steps == 24
    assert resumed.history[0][0] == 8
    for name, tensor in straight_model.state_dict().items():
        assert torch.allclose(tensor, resumed_model.state_dict()[name], atol=1e-6), name
    assert resumed.final_metrics == pytest.approx(straight.final_metrics, abs=1e-6)


def test_resuming_a_finished_run_only_evaluates(tmp_path: Path) -> None:
    config = make_config(epochs=1)
    _, first = train(tmp_path, config)
    _, again = train(tmp_path, config, resume=True)
    assert again.steps == first.steps
    assert again.final_metrics == pytest.approx(first.final_metrics)
    assert not any("train_loss" in metrics for _, metrics in again.history)


def test_training_into_a_run_with_checkpoints_without_resume_is_refused(tmp_path: Path) -> None:
    train(tmp_path, make_config(epochs=1))
    with pytest.raises(UsageError) as error:
        train(tmp_path, make_config(epochs=1))
    assert "--resume" in str(error.value) and is_one_sentence(str(error.value))


def test_resuming_with_another_config_is_refused(tmp_path: Path) -> None:
    train(tmp_path, make_config(epochs=1))
    with pytest.raises(ConfigError) as error:
        train(tmp_path, make_config(epochs=1, optimizer={"lr": 0.5}), resume=True)
    assert "config differs" in str(error.value) and is_one_sentence(str(error.value))


@pytest.mark.parametrize(
    ("overrides", "world", "fragment"),
    [
        ({"batch_size": 512}, 1, "larger than the 192 training rows"),
        ({"batch_size": 18, "grad_accum": 3}, 4, "cannot be split evenly over 4 workers"),
    ],
)
def test_batch_sizes_that_do_not_fit_are_config_errors(
    overrides: dict[str, Any], world: int, fragment: str
) -> None:
    with pytest.raises(ConfigError) as error:
        plan_batches(make_config(**overrides), 192, world)
    assert fragment in str(error.value) and is_one_sentence(str(error.value))


def test_a_teacher_without_a_distill_section_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        train(tmp_path, make_config(), teacher=TinyNet())
    assert "distill" in str(error.value) and is_one_sentence(str(error.value))


def test_early_stopping_without_an_eval_split_is_a_config_error(tmp_path: Path) -> None:
    task = make_task()
    task.eval = None
    with pytest.raises(ConfigError) as error:
        train(tmp_path, make_config(early_stopping={"metric": "loss"}), task)
    assert "eval" in str(error.value) and is_one_sentence(str(error.value))


def test_distillation_trains_the_student_towards_the_teacher(tmp_path: Path) -> None:
    teacher, _ = train(tmp_path, make_config(epochs=5), run_dir=tmp_path / "teacher")
    config = make_config(epochs=5, distill={"teacher": "t@v1", "temperature": 2.0, "alpha": 0.7})
    _, student = train(tmp_path, config, teacher=teacher)
    assert student.final_metrics["accuracy"] > 0.8
    assert not teacher.training  # the teacher is only ever run in eval mode


def test_a_test_split_adds_test_metrics(tmp_path: Path) -> None:
    task = make_task()
    task.test = task.eval
    _, result = train(tmp_path, make_config(epochs=1), task)
    assert result.final_metrics["test_accuracy"] == result.final_metrics["accuracy"]
    assert result.confusion_matrices["test"] == result.confusion_matrices["eval"]
    assert "test_loss" in result.history[-1][1]


# --- resume after SIGKILL: a real process, really killed ---------------------------------

RESUME_CONFIG = {
    "epochs": 4,
    "batch_size": 16,
    "grad_accum": 2,
    "eval_every_steps": 7,
    "optimizer": {"name": "adamw", "lr": 0.01, "weight_decay": 0.01},
    "schedule": {"name": "cosine", "warmup_steps": 3},
    "checkpoint": {"every_steps": 5, "keep": 2},
}


def run_resume_job(
    run_dir: Path, resume: bool, step_delay: float = 0.0
) -> tuple[nn.Module, FitResult]:
    """The job of the SIGKILL test; the killed subprocess runs this very function."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = TinyNet(dropout=0.3)  # dropout: resume must restore the RNG to match
    delay = (lambda *_: time.sleep(step_delay)) if step_delay else None
    result = fit(
        model,
        make_task(rows=213),  # 159 train rows: batches of 16 leave rows out (drop_last)
        make_config(**RESUME_CONFIG),
        run_dir=run_dir,
        logger=MemoryLogger(),
        resume=resume,
        progress=delay,
    )
    return model, result


def latest_step(run_dir: Path) -> int:
    pointer = run_dir / "checkpoints" / "latest"
    try:
        return int(pointer.read_text().strip().removeprefix("step-"))
    except (OSError, ValueError):
        return 0


@pytest.mark.slow
def test_a_run_killed_with_sigkill_resumes_to_the_same_weights(tmp_path: Path) -> None:
    run_dir = tmp_path / "killed"
    script = (
        "import sys\nfrom pathlib import Path\n"
        "from tests.train.test_loop import run_resume_job\n"
        "run_resume_job(Path(sys.argv[1]), resume=False, step_delay=0.05)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(REPO)])}
    process = subprocess.Popen([sys.executable, "-c", script, str(run_dir)], env=env)
    try:
        wait_until(
            lambda: latest_step(run_dir) >= 10 or process.poll() is not None,
            timeout=120,
            what="the training subprocess's progress",
        )
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    killed_at = latest_step(run_dir)
    assert 10 <= killed_at < 36  # 4 epochs of 9 steps: killed mid-run

    resumed_model, resumed = run_resume_job(run_dir, resume=True)
    straight_model, straight = run_resume_job(tmp_path / "straight", resume=False)

    assert resumed.history[0][0] == killed_at + 1  # lost at most one checkpoint interval
    assert resumed.steps == straight.steps == 36
    for name, tensor in straight_model.state_dict().items():
        assert torch.allclose(tensor, resumed_model.state_dict()[name], atol=1e-6), name
    assert resumed.final_metrics == pytest.approx(straight.final_metrics, abs=1e-6)
