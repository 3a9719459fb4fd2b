"""`forgeml optimize MODEL_REF --onnx | --quantize int8 | --prune SPARSITY`."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

import typer

from forgeml.cli._output import print_json, print_table, say, step
from forgeml.core.devices import DeviceName, DeviceOptions, say_on_stderr
from forgeml.core.errors import UsageError

_DEVICE = DeviceOptions.model_fields["device"]  # one field: its help and default


def _mode(onnx: bool, quantize: str | None, prune: float | None) -> str:
    from forgeml.optimize.quantize import SUPPORTED

    chosen = [
        flag
        for flag, on in (
            ("--onnx", onnx),
            ("--quantize", quantize is not None),
            ("--prune", prune is not None),
        )
        if on
    ]
    if len(chosen) != 1:
        got = f" (got {' and '.join(chosen)})" if chosen else ""
        raise UsageError(f"Choose exactly one of --onnx, --quantize int8 or --prune SPARSITY{got}.")
    if quantize is not None and quantize not in SUPPORTED:
        raise UsageError(f"--quantize supports {', '.join(SUPPORTED)}, not '{quantize}'.")
    return "onnx" if onnx else "int8" if quantize else "prune"


def optimize(
    model_ref: Annotated[str, typer.Argument(help="Model version: NAME, NAME@vN or NAME@ALIAS.")],
    onnx: Annotated[
        bool, typer.Option("--onnx", help="Export to ONNX, verified against PyTorch.")
    ] = False,
    quantize: Annotated[
        str | None, typer.Option(help="Quantise the ONNX graph: int8 (dynamic).")
    ] = None,
    per_channel: Annotated[
        bool | None,
        typer.Option(
            "--per-channel/--per-tensor",
            help="int8 weight scales: one per output channel (the default) or one per tensor.",
            show_default=False,
        ),
    ] = None,
    prune: Annotated[
        float | None, typer.Option(help="Zero this fraction of Linear weights (0-1).")
    ] = None,
    finetune_steps: Annotated[
        int, typer.Option(help="Recovery fine-tuning steps after pruning.")
    ] = 0,
    name: Annotated[
        str | None, typer.Option(help="Registered name of the result (default: the source's).")
    ] = None,
    tolerance: Annotated[
        float, typer.Option(help="Max |PyTorch - ONNX| allowed on held-out rows.")
    ] = 1e-4,
    repeats: Annotated[int, typer.Option(help="Timed calls per batch size.")] = 20,
    device: Annotated[DeviceName, typer.Option(help=_DEVICE.description)] = _DEVICE.default,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON only.")] = False,
) -> None:
    """Make an optimised model version (ONNX, int8 or pruned) whose parent is MODEL_REF."""
    from forgeml.core.workspace import open_workspace
    from forgeml.optimize import OptimizeRequest

    request = OptimizeRequest(
        mode=_mode(onnx, quantize, prune),  # type: ignore[arg-type]
        name=name,
        tolerance=tolerance,
        sparsity=prune,
        finetune_steps=finetune_steps,
        per_channel=per_channel,
        latency_repeats=repeats,
        device=device,
    )
    request.check()
    say_on_stderr()  # a --device cuda that falls back says so in one line
    with step(f"Optimising {model_ref} ({request.mode})"):
        payload = _optimize(open_workspace(), model_ref, request)
    if as_json:
        print_json(payload)
        return
    _print_report(payload)


def _optimize(workspace: Any, model_ref: str, request: Any) -> dict[str, Any]:
    """As a scheduler job (`forgeml.optimize.job`), or here when inside a job already."""
    from forgeml.optimize.job import OptimizeJobSpec, optimize_job, submit_optimization
    from forgeml.scheduler.contract import JobContext

    if JobContext.from_environ() is not None:
        spec = OptimizeJobSpec(model_ref=model_ref, request=asdict(request))
        return optimize_job(workspace, spec)
    from forgeml.tracking import get_model_version

    get_model_version(workspace, model_ref)  # an unknown version fails here, not in a job
    _, result = submit_optimization(workspace, model_ref, request)
    assert result is not None  # it ran in the foreground or was followed to its end
    return result.outputs


def _print_report(payload: dict[str, Any]) -> None:
    report = payload["report"]
    say(
        f"[bold]{payload['model']}[/bold] <- {payload['parent']} "
        f"({report['mode']}, run {payload['run_id']})"
    )
    if report.get("max_abs_diff") is not None:
        say(
            f"max |PyTorch - ONNX| = {report['max_abs_diff']:.3g} on {report['verified_rows']} "
            f"{report['split']} rows (tolerance {report['tolerance']:g})"
        )
    if report.get("sparsity") is not None:
        say(f"sparsity {report['sparsity']:.4f} of Linear weights")
    before, after = report["latency_ms"]["before"], report["latency_ms"]["after"]
    rows: list[tuple[str, Any, Any]] = [
        ("runtime", report["runtime"]["before"], report["runtime"]["after"]),
        ("device", report["device"]["before"], report["device"]["after"]),
        ("size (bytes)", report["size_bytes"]["before"], report["size_bytes"]["after"]),
    ]
    if report.get("deflate_bytes"):
        rows.append(
            (
                "deflated (bytes)",
                report["deflate_bytes"]["before"],
                report["deflate_bytes"]["after"],
            )
        )
    for batch in before:
        for stat in ("p50_ms", "p99_ms"):
            rows.append(
                (f"{batch} {stat}", f"{before[batch][stat]:.3f}", f"{after[batch][stat]:.3f}")
            )
    metrics = report["metrics"]
    for key in sorted(metrics["after"]):
        rows.append((key, _fmt(metrics["before"].get(key)), _fmt(metrics["after"].get(key))))
    print_table("optimisation report", ["", "before", "after"], rows)


def _fmt(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)
