"""`forgeml label create|list|show|next|submit|import|agreement|export`: labelling tasks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from forgeml.cli._output import print_json, print_table, say, when
from forgeml.cli._remote import is_remote, source
from forgeml.sdk.local import LocalLabels

app = typer.Typer(
    help="Labelling tasks: active-learning order, agreement, import and export of labels.",
    no_args_is_help=True,
)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]
TaskArg = Annotated[str, typer.Argument(help="Label task name.")]
AnnotatorOpt = Annotated[
    str | None, typer.Option("--annotator", help="Who labels (default: FORGEML_USER).")
]


def _workspace() -> Any:
    from forgeml.core.workspace import open_workspace

    return open_workspace()


def _labels(annotator: str | None = None) -> Any:
    """The client's `Labels` in remote mode (where the annotator is the token's user), else
    the workspace's."""
    from forgeml.core.errors import UsageError

    if annotator is not None and is_remote():
        raise UsageError(
            "--annotator cannot be given in remote mode: the server labels as the user of "
            "the token (FORGEML_TOKEN or --token)."
        )
    return source(lambda client: client.labels, lambda: LocalLabels(annotator))


@app.command("create")
def create(
    name: TaskArg,
    dataset: Annotated[str, typer.Option("--dataset", help="The dataset version labelled.")],
    classes: Annotated[str, typer.Option("--classes", help="Comma-separated classes.")],
    kind: Annotated[str, typer.Option("--kind", help="classes, spans or boxes.")] = "classes",
    column: Annotated[
        str | None, typer.Option("--column", help="Column spans/boxes refer to.")
    ] = None,
    instructions: Annotated[str, typer.Option("--instructions", help="What annotators read.")] = "",
    assignee: Annotated[
        list[str] | None, typer.Option("--assignee", help="Repeat per person.")
    ] = None,
    overlap: Annotated[int, typer.Option("--overlap", help="Annotators per item.")] = 1,
    lease_seconds: Annotated[int, typer.Option("--lease-seconds", help="Lease length.")] = 900,
    strategy: Annotated[
        str, typer.Option("--strategy", help="random, least-confidence, margin, entropy.")
    ] = "random",
    model: Annotated[
        str | None, typer.Option("--model", help="Model version for uncertainty.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the order.")] = 0,
    as_json: JsonFlag = False,
) -> None:
    """Create a labelling task over a dataset version, its items in active-learning order."""
    from forgeml.core.configfile import parse_model
    from forgeml.label import TaskSpec

    fields = {
        "name": name,
        "dataset": dataset,
        "schema": {
            "kind": kind,
            "classes": [c.strip() for c in classes.split(",") if c.strip()],
            "column": column,
        },
        "instructions": instructions,
        "assignees": assignee or [],
        "overlap": overlap,
        "lease_seconds": lease_seconds,
        "strategy": strategy,
        "model": model,
        "seed": seed,
    }
    # checked here, so a bad spec is refused alike in remote mode
    spec = parse_model(TaskSpec, fields, "label task").model_dump(mode="json", by_alias=True)
    task = _labels().create(spec)
    if as_json:
        print_json(task)
        return
    say(
        f"label task {task['name']} created over {task['dataset']}: "
        f"{task['items']} items, {task['strategy']} order"
    )


@app.command("reorder")
def reorder(
    name: TaskArg,
    strategy: Annotated[
        str, typer.Option("--strategy", help="random, least-confidence, margin, entropy.")
    ],
    model: Annotated[
        str | None, typer.Option("--model", help="Model version for uncertainty.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the order.")] = 0,
    as_json: JsonFlag = False,
) -> None:
    """Rank the task's items again, e.g. by a model retrained on the labels so far."""
    from forgeml.core.configfile import parse_model
    from forgeml.label import Reorder

    change = parse_model(Reorder, {"strategy": strategy, "model": model, "seed": seed}, "reorder")
    task = _labels().reorder(name, change.strategy, change.model, change.seed)
    if as_json:
        print_json(task)
        return
    say(f"label task {task['name']} now serves items in {task['strategy']} order")


@app.command("list")
def list_(as_json: JsonFlag = False) -> None:
    """Every labelling task."""
    tasks = _labels().list()
    if as_json:
        print_json(tasks)
        return
    rows = [
        (
            t["name"],
            t["dataset"],
            t["schema"]["kind"],
            t["items"],
            t["strategy"],
            when(t["created_at"]),
        )
        for t in tasks
    ]
    print_table("label tasks", ["task", "dataset", "kind", "items", "order", "created"], rows)


@app.command("show")
def show(name: TaskArg, as_json: JsonFlag = False) -> None:
    """A task, its instructions and its progress per annotator."""
    detail = _labels().show(name)
    if as_json:
        print_json(detail)
        return
    progress = detail["progress"]
    say(
        f"[bold]{detail['name']}[/bold] over {detail['dataset']} ({detail['schema']['kind']}: "
        f"{', '.join(detail['schema']['classes'])}); {progress['items_done']} of "
        f"{detail['items']} items done, {progress['labels']} labels"
    )
    print_table(
        "labels by annotator", ["annotator", "labels"], sorted(progress["by_annotator"].items())
    )


@app.command("next")
def next_(name: TaskArg, annotator: AnnotatorOpt = None, as_json: JsonFlag = False) -> None:
    """Lease the next item to label (most informative first) and print it."""
    served = _labels(annotator).next(name)
    if as_json:
        print_json(served)
        return
    if served is None:
        say(f"nothing left to label in {name}")
        return
    say(f"item {served['item']} (yours until {when(served['expires_at'])})")
    print_table(None, ["column", "value"], list(served["row"].items()))


@app.command("submit")
def submit_(
    name: TaskArg,
    item: Annotated[int, typer.Argument(help="The item's number (from label next).")],
    label: Annotated[str, typer.Argument(help="A class, or JSON for spans and boxes.")],
    annotator: AnnotatorOpt = None,
    adjudicate: Annotated[bool, typer.Option("--adjudicate", help="Settle the item.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Record a label for an item (and release its lease)."""
    value = _label_value(label)
    stored = _labels(annotator).submit(name, item, value, adjudicate=adjudicate)
    if as_json:
        print_json(stored)
        return
    say(f"item {item} of {name} labelled {json.dumps(stored['label'])}")


def _label_value(text: str) -> Any:
    from forgeml.core.errors import InvalidLabelError

    if not text.lstrip().startswith("["):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidLabelError(f"The label is not valid JSON ({error.msg}).") from None


@app.command("import")
def import_(
    name: TaskArg,
    file: Annotated[Path, typer.Argument(help="CSV, JSONL or Label Studio JSON export.")],
    file_format: Annotated[
        str | None, typer.Option("--format", help="csv, jsonl or label-studio.")
    ] = None,
    annotator: Annotated[
        str | None, typer.Option("--annotator", help="For rows naming nobody.")
    ] = None,
    key: Annotated[
        str, typer.Option("--key", help="What names an item: item, or a column.")
    ] = "item",
    as_json: JsonFlag = False,
) -> None:
    """Import labels made elsewhere; all are checked first, and stored together or not at all."""
    from forgeml.core.errors import UsageError
    from forgeml.label import FORMATS, detect_format, read_labels

    chosen = file_format or detect_format(file)
    if chosen not in FORMATS:
        raise UsageError(f"Unknown format '{chosen}': choose one of {', '.join(FORMATS)}.")
    read_labels(file, chosen, annotator, key)  # the file's own errors, named after it
    content = file.read_text(encoding="utf-8")
    result = _labels().import_labels(name, content, chosen, key, annotator)
    if as_json:
        print_json(result)
        return
    say(f"imported {result['added']} labels into {name} ({result['skipped']} already there)")


@app.command("agreement")
def agreement(name: TaskArg, as_json: JsonFlag = False) -> None:
    """Agreement between annotators: Cohen's kappa per pair, Fleiss' kappa for all."""
    found = _labels().agreement(name)
    if as_json:
        print_json(found)
        return
    rows = [
        (" / ".join(p["annotators"]), p["items"], f"{p['observed']:.3f}", f"{p['cohen_kappa']:.3f}")
        for p in found["pairs"]
    ]
    print_table(f"agreement in {name}", ["annotators", "items", "observed", "Cohen's kappa"], rows)
    fleiss = found["fleiss"]
    say(
        f"Fleiss' kappa {fleiss['kappa']:.3f} over {fleiss['items']} items "
        f"with {fleiss['raters']} labels each"
    )


@app.command("export")
def export(
    name: TaskArg,
    dataset: Annotated[
        str | None, typer.Option("--dataset", help="Dataset to record into.")
    ] = None,
    column: Annotated[str, typer.Option("--column", help="The label column.")] = "label",
    resolve: Annotated[
        str, typer.Option("--resolve", help="adjudicated or majority.")
    ] = "adjudicated",
    as_json: JsonFlag = False,
) -> None:
    """Record the task's settled labels as a new dataset version whose lineage names it."""
    from forgeml.core.errors import UsageError
    from forgeml.label import RESOLVE_CHOICES

    if resolve not in RESOLVE_CHOICES:
        raise UsageError(
            f"Unknown --resolve '{resolve}': choose one of {', '.join(RESOLVE_CHOICES)}."
        )
    found = _labels().export(name, dataset, column, resolve)
    if as_json:
        print_json(found)
        return
    say(
        f"{found['ref']}: {found['labelled']} labelled rows from {name} "
        f"({found['tied']} tied, {found['unlabelled']} unlabelled)"
    )
