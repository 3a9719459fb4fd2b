"""`forgeml models explain REF --input ROWS`: per-feature (or per-word) attributions.

Rows are a JSON record, a JSON list of records (or texts), or a .json / .csv file of them;
`--text` gives one text for a text model. The table is sorted by |attribution|.
"""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path
from typing import Annotated, Any

import typer

from forgeml.cli._output import print_json, print_table, say
from forgeml.core.errors import InvalidDataError, UsageError

_METHODS = ("kernel_shap", "integrated_gradients")


def read_rows(value: str) -> list[Any]:
    """The rows `--input` gives: JSON (a record, a text or a list), or a .json/.csv file.

    Raises:
        UsageError: it is neither JSON nor an existing .json or .csv file.
        InvalidDataError: the file cannot be read as rows.
    """
    path = Path(value)
    if path.suffix.lower() in (".json", ".csv") and path.is_file():
        if path.suffix.lower() == ".csv":
            import polars as pl

            try:
                return pl.read_csv(path).to_dicts()
            except (pl.exceptions.PolarsError, UnicodeDecodeError) as error:
                raise InvalidDataError(f"{path} is not a readable CSV file ({error}).") from None
        value = path.read_text(encoding="utf-8")
        where = str(path)
    else:
        where = "--input"
    try:
        found = json.loads(value)
    except json.JSONDecodeError:
        raise UsageError(
            f"{where} is not JSON nor a .json or .csv file; give a JSON record such as "
            "'{\"age\": 39, ...}', a JSON list of rows, or a file of them."
        ) from None
    return found if isinstance(found, list) else [found]


def explain(
    ref: Annotated[str, typer.Argument(help="NAME, NAME@vN or NAME@ALIAS.")],
    input_: Annotated[
        str | None,
        typer.Option("--input", help="A JSON row or list of rows, or a .json/.csv file."),
    ] = None,
    text: Annotated[str | None, typer.Option(help="One text to explain (text models).")] = None,
    top: Annotated[
        int | None, typer.Option(min=1, help="Show only the N largest attributions.")
    ] = None,
    method: Annotated[
        str | None,
        typer.Option(help="kernel_shap (tabular default) or integrated_gradients."),
    ] = None,
    background: Annotated[
        int,
        typer.Option(min=1, max=1000, help="Training rows a tabular model is explained against."),
    ] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON only.")] = False,
) -> None:
    """Why the model answered what it did: attributions per feature (or word), largest first."""
    from forgeml.cli._remote import source
    from forgeml.core.workspace import open_workspace
    from forgeml.governance.explain import explain_model

    if (input_ is None) == (text is None):
        raise UsageError("Give the rows to explain with --input or one text with --text.")
    if method is not None and method not in _METHODS:
        raise UsageError(f"Unknown method '{method}': use one of {', '.join(_METHODS)}.")
    rows = [text] if text is not None else read_rows(input_ or "")

    def here() -> dict[str, Any]:
        with closing(open_workspace()) as workspace:
            found = explain_model(workspace, ref, rows, method, background)  # type: ignore[arg-type]
        return found.to_dict(top)

    answer = source(
        lambda client: client.models.explain(
            ref, rows if text is None else None, text, top, method, background
        ),
        here,
    )
    if as_json:
        print_json(answer)
        return
    for position, explained in enumerate(answer["explanations"]):
        _print_answer(answer["model"], position, explained)


def _print_answer(model: str, position: int, answer: dict[str, Any]) -> None:
    say(
        f"{model} row {position}: {answer['output']} = {answer['prediction']:.4f}, base value "
        f"{answer['base_value']:.4f} ({answer['method']})"
    )
    rows = [(a["feature"], f"{a['value']:+.4f}") for a in answer["attributions"]]
    print_table(None, ["feature", "attribution"], rows)
