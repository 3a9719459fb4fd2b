"""`forgeml train|finetune|tune`: tracked training runs from a YAML config."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from forgeml.cli._output import print_json, print_table, say

if TYPE_CHECKING:
    from forgeml.tracking.runner import RunSummary

SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override a config key: --set optimizer.lr=1e-3 (repeatable)."),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]


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
    config_path: Path | None, overrides: list[str], resume: str | None, as_json: bool, kind: str
) -> RunSummary:
    from forgeml.core.errors import UsageError
    from forgeml.core.workspace import open_workspace
    from forgeml.tracking.runner import run_training
    from forgeml.train.config import TrainConfig, load_config

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
    _print_summary(summary, as_json)
    return summary


_LIVE = ("loss", "samples_per_second", "lr")


def _print_summary(summary: RunSummary, as_json: bool) -> None:
    payload: dict[str, Any] = {
        "run_id": summary.run_id,
        "status": summary.status,
        "steps": summary.steps,
        "metrics": summary.metrics,
        "model": f"{summary.model.name}@v{summary.model.version}" if summary.model else None,
    }
    if as_json:
        print_json(payload)
        return
    say(f"run {summary.run_id}: {summary.status} after {summary.steps} steps")
    rows = [
        (k, f"{v:.4f}")
        for k, v in summary.metrics.items()
        if isinstance(v, int | float) and "/" not in k  # per-slice metrics: see --json
    ]
    print_table(
        "final metrics (per-slice metrics: runs show RUN --json)", ["metric", "value"], rows
    )
    if summary.preempted:
        say(f"preempted: resume with `forgeml train --resume {summary.run_id}`")
    if payload["model"]:
        say(f"registered model {payload['model']}")


def train(
    config: Annotated[Path | None, typer.Argument(help="Training config (YAML).")] = None,
    overrides: SetOption = None,
    resume: Annotated[
        str | None, typer.Option(help="Continue this run from its last checkpoint.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Train a model on a dataset version; track the run and register the model."""
    _run(config, overrides or [], resume, as_json, "train")


def finetune(
    config: Annotated[Path | None, typer.Argument(help="Fine-tuning config (YAML).")] = None,
    overrides: SetOption = None,
    resume: Annotated[
        str | None, typer.Option(help="Continue this run from its last checkpoint.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Fine-tune a pretrained model (LoRA through PEFT, or distillation from a teacher)."""
    _run(config, overrides or [], resume, as_json, "finetune")


def tune(
    config: Annotated[Path, typer.Argument(help="Config with `search` and `tune` sections.")],
    trials: Annotated[int, typer.Option(help="Number of trials.")] = 10,
    overrides: SetOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Hyper-parameter search with Optuna; each trial is a child run."""
    from forgeml.core.workspace import open_workspace
    from forgeml.tracking.tuning import run_tuning

    result = run_tuning(open_workspace(), str(config), trials, overrides or [])
    if as_json:
        print_json(result)
        return
    say(f"study {result['study']}: best {result['metric']} = {result['best_value']:.4f}")
    print_table("best parameters", ["key", "value"], list(result["best_params"].items()))
    say(
        f"best trial run {result['best_run']}"
        + (f" registered as {result['model']}" if result.get("model") else "")
    )
