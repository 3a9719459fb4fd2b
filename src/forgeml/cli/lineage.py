"""`forgeml lineage REF`: raw files -> dataset versions -> runs -> model versions ->
deployments, around one record, as a table, JSON or a picture."""

from __future__ import annotations

import os
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from forgeml.cli._output import print_json, print_table, say
from forgeml.cli._remote import remote_client
from forgeml.core.errors import UsageError
from forgeml.governance.lineage_options import Direction, LineageOptions
from forgeml.governance.lineage_options import PictureFormat as Picture

if TYPE_CHECKING:
    from forgeml.governance.lineage import Lineage, Node

_FIELDS = LineageOptions.model_fields  # one source for the options' help


def lineage(
    ref: Annotated[
        str,
        typer.Argument(
            help="A dataset version, model version, run or deployment; KIND:REF (dataset:, "
            "model:, run:, deployment:) when a bare REF names two kinds."
        ),
    ],
    depth: Annotated[int | None, typer.Option(help=_FIELDS["depth"].description, min=0)] = None,
    direction: Annotated[Direction, typer.Option(help=_FIELDS["direction"].description)] = "both",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON only.")] = False,
    picture: Annotated[
        Picture | None,
        typer.Option("--format", help="Draw it: svg or png (matplotlib), or dot (Graphviz)."),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(help="Write the picture to this file (its suffix gives the format)."),
    ] = None,
) -> None:
    """Where a record came from and what used it: raw files, dataset versions, runs,
    model versions and deployments.

    From a dataset version, model version, run or deployment, it walks back
    to the raw files (source URI and digest) and forward to the runs, models
    and deployments that used it, reading the records only.
    """
    picture = _picture(picture, output, as_json)
    found = _lineage(ref, depth, direction)
    if as_json:
        print_json(found.to_dict())
    elif picture is None:
        _print_table(found)
    else:
        _write_picture(found, picture, output)


def _picture(picture: Picture | None, output: Path | None, as_json: bool) -> Picture | None:
    if picture is None and output is not None:
        suffix = output.suffix.lstrip(".").lower()
        if suffix not in ("svg", "png", "dot"):
            raise UsageError(
                f"Cannot tell the format of '{output}' from its suffix; give --format svg, "
                "png or dot."
            )
        picture = "svg" if suffix == "svg" else "png" if suffix == "png" else "dot"
    if picture is not None and as_json:
        raise UsageError("Give --json or --format, not both.")
    if picture == "png" and output is None:
        raise UsageError("A PNG is written to a file: give --output FILE.png.")
    return picture


def _lineage(ref: str, depth: int | None, direction: Direction) -> Lineage:
    from forgeml.governance.lineage import Lineage

    client = remote_client()
    if client is not None:
        return Lineage.from_dict(client.lineage(ref, depth=depth, direction=direction))
    from forgeml.core.workspace import open_workspace
    from forgeml.governance.lineage import lineage as read_lineage

    with closing(open_workspace()) as workspace:
        return read_lineage(workspace, ref, depth, direction)


def _print_table(found: Lineage) -> None:
    incoming: dict[str, list[str]] = {}
    refs = {node.key: _shown_ref(node) for node in found.nodes}
    for edge in found.edges:
        from forgeml.governance.lineage_draw import edge_label

        incoming.setdefault(edge.target, []).append(f"{edge_label(edge)} <- {refs[edge.source]}")
    rows = [
        (
            ("* " if node.key == found.root else "") + node.kind,
            refs[node.key],
            _detail(node.attrs),
            "\n".join(incoming.get(node.key, [])),
        )
        for node in found.nodes
    ]
    print_table(f"lineage of {found.root}", ["kind", "ref", "detail", "from"], rows)


def _shown_ref(node: Node) -> str:
    # a record of a project the caller may not read: its handle names nothing
    return f"({node.label})" if node.hidden else node.ref


def _detail(attrs: dict[str, Any]) -> str:
    shown = []
    for key in ("status", "rows", "source_kind", "digest"):
        if attrs.get(key) is not None:
            value = attrs[key]
            shown.append(f"{key} {value[:12] if key == 'digest' else value}")
    return ", ".join(shown)


def _write_picture(found: Lineage, picture: Picture, output: Path | None) -> None:
    from forgeml.governance.lineage_draw import to_dot, to_image

    content = to_dot(found).encode() if picture == "dot" else to_image(found, picture)
    if output is None:
        typer.echo(content.decode(), nl=False)
        return
    _write_atomically(output, content)
    say(f"wrote the lineage of {found.root} ({len(found.nodes)} nodes) to {output}")


def _write_atomically(path: Path, content: bytes) -> None:
    if path.is_dir():
        raise UsageError(f"'{path}' is a folder; give --output a file name.")
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temp.write_bytes(content)
        os.replace(temp, path)
    except OSError as error:
        raise UsageError(f"Cannot write '{path}': {error.strerror or error}.") from None
    finally:
        temp.unlink(missing_ok=True)
