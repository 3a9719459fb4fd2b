"""How `forgeml train|finetune|tune` (and the demo) show a run's or a study's outputs."""

from __future__ import annotations

from typing import Any

from forgeml.cli._output import print_table, say


def print_run_summary(payload: dict[str, Any]) -> None:
    """The run's summary for a person."""
    if "run_id" not in payload:  # a study's summary, or a job that left none
        print_study_summary(payload)
        return
    say(f"run {payload['run_id']}: {payload['status']} after {payload['steps']} steps")
    rows = [
        (k, f"{v:.4f}")
        for k, v in payload["metrics"].items()
        if isinstance(v, int | float) and "/" not in k  # per-slice metrics: see --json
    ]
    print_table(
        "final metrics (per-slice metrics: runs show RUN --json)", ["metric", "value"], rows
    )
    if payload["status"] == "PREEMPTED":
        say(f"preempted: resume with `forgeml train --resume {payload['run_id']}`")
    if payload["model"]:
        say(f"registered model {payload['model']}")


def print_study_summary(result: dict[str, Any]) -> None:
    """A study's summary for a person."""
    if "study" not in result:
        print_table("summary", ["key", "value"], [(k, str(v)) for k, v in result.items()])
        return
    say(f"study {result['study']}: best {result['metric']} = {result['best_value']:.4f}")
    print_table("best parameters", ["key", "value"], list(result["best_params"].items()))
    say(
        f"best trial run {result['best_run']}"
        + (f" registered as {result['model']}" if result.get("model") else "")
    )
