"""`forgeml train|finetune|tune`: tracked training runs from a YAML config."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from forgeml.cli._jobrun import (
    JobOptions,
    in_job,
    print_run_summary,
    print_study_summary,
    record_outcome,
    resume_for_job,
    submit_training,
    summary_is_printed_by_submitter,
    write_summary,
)
from forgeml.cli._output import print_json

if TYPE_CHECKING:
    from forgeml.tracking.runner import RunSummary

SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override a config key: --set optimizer.lr=1e-3 (repeatable)."),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]
DetachFlag = Annotated[
    bool, typer.Option("--detach", help="Queue the job for `forgeml server`; return at once.")
]
WaitFlag = Annotated[
    bool, typer.Option("--wait", help="With a server: stream the job's output until it ends.")
]
QueueOption = Annotated[str, typer.Option(help="The scheduler queue to wait in.")]
PriorityOption = Annotated[str, typer.Option(help="Priority class: low, normal, high, critical.")]
CpusOption = Annotated[float, typer.Option(help="CPU cores per worker.")]
MemoryOption = Annotated[
    float | None, typer.Option(help="Memory per worker (GB); default 4 or what there is.")
]
GpusOption = Annotated[
    int | None, typer.Option(help="GPUs per worker; default 1 when there are enough.")
]


def _progress_bar() -> Any:
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from forgeml.cli._output import err_console

    if not err_console.is_terminal:
        return None
    return Progress(
        TextColumn("[bold]training"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} steps"),
        TextColumn("{task.fields[status]}"),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
    )


def _run(
    config_path: Path | None,
    overrides: list[str],
    resume: str | None,
    as_json: bool,
    kind: str,
    options: JobOptions | None = None,
) -> RunSummary | None:
    from forgeml.core.errors import UsageError
    from forgeml.core.workspace import open_workspace
    from forgeml.tracking.runner import run_training
    from forgeml.train.config import TrainConfig, load_config

    if not in_job():
        _submit(config_path, overrides, resume, as_json, kind, options or JobOptions())
        return None
    resume = resume_for_job(resume)
    workspace = open_workspace()
    if config_path is not None:
        config = load_config(str(config_path), overrides)
    elif resume is not None:
        from forgeml.tracking import get_run

        config = TrainConfig.model_validate(get_run(workspace, resume).config)
    else:
        raise UsageError("Give a CONFIG file, or --resume RUN to continue a run.")
    if kind == "finetune" and config.lora is None and config.distill is None:
        from forgeml.cli._output import err_console

        err_console.print("note: no `lora` or `distill` section; fine-tuning every weight")
    bar = _progress_bar()
    if bar is None:
        summary = run_training(workspace, config, resume=resume)
    else:
        with bar:
            task_id = bar.add_task("train", total=None, status="")

            def progress(step: int, total: int, metrics: dict[str, float]) -> None:
                shown = "  ".join(f"{k} {v:.4g}" for k, v in metrics.items() if k in _LIVE)
                bar.update(task_id, completed=step, total=total, status=shown)

            summary = run_training(workspace, config, resume=resume, progress=progress)
    if not summary_is_printed_by_submitter():
        _print_summary(summary, as_json)
    record_outcome(_payload(summary), summary.preempted)
    return summary


def _submit(
    config_path: Path | None,
    overrides: list[str],
    resume: str | None,
    as_json: bool,
    kind: str,
    options: JobOptions,
) -> None:
    """Validate the config here, then run the same command as a scheduler job."""
    from forgeml.core.errors import UsageError
    from forgeml.core.workspace import open_workspace
    from forgeml.train.config import TrainConfig, load_config

    if config_path is not None:
        config = load_config(str(config_path), overrides)
    elif resume is not None:
        from forgeml.tracking import get_run

        config = TrainConfig.model_validate(get_run(open_workspace(), resume).config)
    else:
        raise UsageError("Give a CONFIG file, or --resume RUN to continue a run.")
    args = [str(config_path.resolve())] if config_path is not None else []
    args += [a for item in overrides for a in ("--set", item)]
    args += ["--resume", resume] if resume is not None else []
    submit_training(
        kind, args, name=config.name, workers=config.workers, as_json=as_json, options=options
    )


_LIVE = ("loss", "samples_per_second", "lr")


def _payload(summary: RunSummary) -> dict[str, Any]:
    return {
        "run_id": summary.run_id,
        "status": summary.status,
        "steps": summary.steps,
        "metrics": summary.metrics,
        "model": f"{summary.model.name}@v{summary.model.version}" if summary.model else None,
    }


def _print_summary(summary: RunSummary, as_json: bool) -> None:
    payload = _payload(summary)
    if as_json:
        print_json(payload)
        return
    print_run_summary(payload)


def train(
    config: Annotated[Path | None, typer.Argument(help="Training config (YAML).")] = None,
    overrides: SetOption = None,
    resume: Annotated[
        str | None, typer.Option(help="Continue this run from its last checkpoint.")
    ] = None,
    as_json: JsonFlag = False,
    detach: DetachFlag = False,
    wait: WaitFlag = False,
    queue: QueueOption = "default",
    priority: PriorityOption = "normal",
    cpus: CpusOption = 1.0,
    memory: MemoryOption = None,
    gpus: GpusOption = None,
) -> None:
    """Train a model on a dataset version; track the run and register the model."""
    options = JobOptions(detach, wait, queue, priority, cpus, memory, gpus)
    _run(config, overrides or [], resume, as_json, "train", options)


def finetune(
    config: Annotated[Path | None, typer.Argument(help="Fine-tuning config (YAML).")] = None,
    overrides: SetOption = None,
    resume: Annotated[
        str | None, typer.Option(help="Continue this run from its last checkpoint.")
    ] = None,
    as_json: JsonFlag = False,
    detach: DetachFlag = False,
    wait: WaitFlag = False,
    queue: QueueOption = "default",
    priority: PriorityOption = "normal",
    cpus: CpusOption = 1.0,
    memory: MemoryOption = None,
    gpus: GpusOption = None,
) -> None:
    """Fine-tune a pretrained model (LoRA through PEFT, or distillation from a teacher)."""
    options = JobOptions(detach, wait, queue, priority, cpus, memory, gpus)
    _run(config, overrides or [], resume, as_json, "finetune", options)


def tune(
    config: Annotated[Path, typer.Argument(help="Config with `search` and `tune` sections.")],
    trials: Annotated[int, typer.Option(help="Number of trials.")] = 10,
    overrides: SetOption = None,
    as_json: JsonFlag = False,
    detach: DetachFlag = False,
    wait: WaitFlag = False,
    queue: QueueOption = "default",
    priority: PriorityOption = "normal",
    cpus: CpusOption = 1.0,
    memory: MemoryOption = None,
    gpus: GpusOption = None,
) -> None:
    """Hyper-parameter search with Optuna; each trial is a child run."""
    from forgeml.core.workspace import open_workspace
    from forgeml.tracking.tuning import run_tuning

    if not in_job():
        name = _config_name(config)
        args = [str(config.resolve()), "--trials", str(trials)]
        args += [a for item in overrides or [] for a in ("--set", item)]
        options = JobOptions(detach, wait, queue, priority, cpus, memory, gpus)
        submit_training("tune", args, name=name, workers=1, as_json=as_json, options=options)
        return

    result = run_tuning(open_workspace(), str(config), trials, overrides or [])
    write_summary(result)
    if summary_is_printed_by_submitter():
        return
    if as_json:
        print_json(result)
        return
    print_study_summary(result)


def _config_name(path: Path) -> str:
    """The config's `name` (the study validates the rest inside the job)."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return path.stem
    return str(data["name"]) if isinstance(data, dict) and data.get("name") else path.stem
