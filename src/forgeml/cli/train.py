"""`forgeml train|finetune|tune`: tracked training runs from a YAML config.

Each validates its config here, then runs it as a scheduler job through the SDK
(`forgeml.tracking.jobs`): the job is `python -m forgeml.tracking.jobs.train SPEC_JSON`,
and what it made (or its error) comes back in its result file. Inside a job already
(a `forgeml jobs submit -- forgeml train ...`), the command trains here instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from forgeml.cli._output import print_json, say
from forgeml.cli._summaries import print_run_summary, print_study_summary

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace
    from forgeml.scheduler.contract import JobContext
    from forgeml.scheduler.submit import JobOptions
    from forgeml.tracking.jobs import TrainJobSpec
    from forgeml.train.config import TrainConfig

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


def _load(
    workspace: Workspace, config_path: Path | None, overrides: list[str], resume: str | None
) -> TrainConfig:
    """The run's config, validated here before any job is recorded."""
    from forgeml.core.errors import UsageError
    from forgeml.train.config import TrainConfig, load_config

    if config_path is not None:
        return load_config(str(config_path), overrides)
    if resume is not None:
        from forgeml.tracking import get_run

        return TrainConfig.model_validate(get_run(workspace, resume).config)
    raise UsageError("Give a CONFIG file, or --resume RUN to continue a run.")


def _run(
    config_path: Path | None,
    overrides: list[str],
    resume: str | None,
    as_json: bool,
    kind: Literal["train", "finetune"],
    options: JobOptions | None = None,
) -> None:
    from forgeml.core.workspace import open_workspace
    from forgeml.tracking.jobs import TrainJobSpec

    workspace = open_workspace()
    config = _load(workspace, config_path, overrides, resume)
    if kind == "finetune" and config.lora is None and config.distill is None:
        from forgeml.cli._output import err_console

        err_console.print("note: no `lora` or `distill` section; fine-tuning every weight")
    spec = TrainJobSpec(
        config=config.model_dump(mode="json") if config_path is not None else None, resume=resume
    )
    submit_config(workspace, config, spec, as_json, kind, options)


def submit_config(
    workspace: Workspace,
    config: TrainConfig,
    spec: TrainJobSpec,
    as_json: bool,
    kind: Literal["train", "finetune"] = "train",
    options: JobOptions | None = None,
) -> None:
    """Train `spec` here when already inside a job, else as a job of its own; print it."""
    from forgeml.scheduler.contract import JobContext
    from forgeml.tracking.jobs import submit_training

    context = JobContext.from_environ()
    if context is not None:  # already inside a job: train here, not in a job of its own
        _train_here(workspace, spec, context, as_json)
        return
    job, result = submit_training(
        workspace, spec, name=config.name, workers=config.workers, kind=kind, options=options
    )
    if result is None:
        print_queued(job.id, job.state, as_json)
        return
    _print_summary(result.outputs, as_json)


def _train_here(
    workspace: Workspace, spec: TrainJobSpec, context: JobContext, as_json: bool
) -> None:
    from forgeml.scheduler.contract import PREEMPTED_EXIT_CODE, JobPreempted
    from forgeml.tracking.jobs import train_job

    bar = _progress_bar()
    try:
        if bar is None:
            outputs = train_job(workspace, spec, context)
        else:
            with bar:
                task_id = bar.add_task("train", total=None, status="")

                def progress(step: int, total: int, metrics: dict[str, float]) -> None:
                    shown = "  ".join(f"{k} {v:.4g}" for k, v in metrics.items() if k in _LIVE)
                    bar.update(task_id, completed=step, total=total, status=shown)

                outputs = train_job(workspace, spec, context, progress)
    except JobPreempted as stop:
        _print_summary(stop.outputs, as_json)
        raise SystemExit(PREEMPTED_EXIT_CODE) from None
    _print_summary(outputs, as_json)


def print_queued(job_id: str, state: str, as_json: bool) -> None:
    """What a training queued for the server prints (here or through the API)."""
    if as_json:
        print_json({"job_id": job_id, "state": state})
    else:
        say(f"job {job_id} queued for the server; `forgeml jobs logs -f {job_id[:12]}`")


_LIVE = ("train_loss", "samples_per_s", "lr")  # the names the trainer reports each step


def _print_summary(payload: dict[str, Any], as_json: bool) -> None:
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
    from forgeml.scheduler.submit import JobOptions

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
    from forgeml.scheduler.submit import JobOptions

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
    from forgeml.scheduler.contract import PREEMPTED_EXIT_CODE, JobContext, JobPreempted
    from forgeml.scheduler.submit import JobOptions
    from forgeml.tracking.jobs import TuneJobSpec, submit_tuning, tune_job

    workspace = open_workspace()
    spec = TuneJobSpec(
        config_path=str(config.resolve()), trials=trials, overrides=list(overrides or [])
    )
    if JobContext.from_environ() is not None:  # already inside a job: run the study here
        try:
            result = tune_job(workspace, spec)
        except JobPreempted:
            raise SystemExit(PREEMPTED_EXIT_CODE) from None
    else:
        options = JobOptions(detach, wait, queue, priority, cpus, memory, gpus)
        job, done = submit_tuning(workspace, spec, name=_config_name(config), options=options)
        if done is None:
            print_queued(job.id, job.state, as_json)
            return
        result = done.outputs
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
