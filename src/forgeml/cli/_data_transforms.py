"""`forgeml data clean|validate|redact|split|augment|features`: versions from versions.

Each command builds the transform's params from a YAML recipe and/or flags (flags win),
runs it through `forgeml.data.pipeline.derive`, and prints what was recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from forgeml.cli._output import print_json, say, step

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]
NameOption = Annotated[
    str | None,
    typer.Option("--name", help="Record into this dataset (default: the parent's)."),
]
RefArgument = Annotated[str, typer.Argument(help="NAME, NAME@vN or NAME@<digest>.")]


def _recipe(path: Path | None) -> dict[str, Any]:
    from forgeml.core.configfile import load_yaml
    from forgeml.core.errors import ConfigError

    if path is None:
        return {}
    loaded = load_yaml(path)
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: expected a mapping of recipe keys at the top level.")
    return loaded


def _run(
    op: str,
    ref: str,
    params: Any,
    name: str | None,
    as_json: bool,
    source: str,
    spec_name: str | None = None,
) -> dict[str, Any]:
    from forgeml.cli._remote import source as mode
    from forgeml.core.configfile import parse_model
    from forgeml.data.transforms import get_transform

    if isinstance(params, dict):  # checked here: the same sentence locally and remotely
        params = parse_model(get_transform(op).params, params, source)
    fields = {"name": name, "spec_name": spec_name}
    with step(f"{op} {ref}"):
        summary: dict[str, Any] = mode(
            lambda client: client.datasets.derive(
                ref, op, params.model_dump(mode="json"), **fields
            ),
            lambda: _derive_here(op, ref, params, **fields),
        )
    _print_derived(op, summary, as_json)
    return summary


def _derive_here(op: str, ref: str, params: Any, **fields: Any) -> dict[str, Any]:
    from contextlib import closing

    from forgeml.core.workspace import open_workspace
    from forgeml.data.pipeline import derive, derived_summary

    with closing(open_workspace()) as workspace:
        return derived_summary(derive(workspace, op, ref, params, **fields))


def _print_derived(op: str, outputs: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(outputs)
        return
    if outputs["created"]:
        say(
            f"{op}: created {outputs['ref']} ({outputs['rows']} rows) "
            f"from {', '.join(outputs['parents'])}"
        )
    else:
        say(
            f"{op}: the result is identical to the existing {outputs['ref']} "
            f"({outputs['rows']} rows)"
        )
    for key, item in outputs["side_outputs"].items():
        say(f"  {key}: {item['ref']} ({item['rows']} rows)")
    if "feature_spec" in outputs:
        say(f"  feature spec: {outputs['feature_spec']['ref']}")
    from forgeml.cli._profile_view import print_report

    print_report(outputs["report"])


def clean(
    ref: RefArgument,
    recipe: Annotated[Path | None, typer.Option(help="YAML clean recipe.")] = None,
    rename: Annotated[
        list[str] | None,
        typer.Option("--rename", help="Rename a column, OLD=NEW (repeatable); runs first."),
    ] = None,
    select: Annotated[
        list[str] | None,
        typer.Option("--select", help="Keep only this column (repeatable, in order)."),
    ] = None,
    drop: Annotated[
        list[str] | None, typer.Option("--drop", help="Remove this column (repeatable).")
    ] = None,
    missing_marker: Annotated[
        list[str] | None,
        typer.Option("--missing-marker", help="A value meaning missing (repeatable)."),
    ] = None,
    impute: Annotated[
        str | None,
        typer.Option(help="Default for nulls: none, drop, mean, median, mode."),
    ] = None,
    drop_duplicates: Annotated[
        bool | None, typer.Option("--drop-duplicates", help="Drop exact duplicate rows.")
    ] = None,
    near_duplicates: Annotated[
        str | None, typer.Option(help="Drop near-duplicate texts of this column (MinHash).")
    ] = None,
    outliers: Annotated[
        list[str] | None, typer.Option("--outliers", help="Numeric column to filter (repeatable).")
    ] = None,
    outlier_method: Annotated[str, typer.Option(help="iqr or zscore.")] = "iqr",
    lowercase: Annotated[
        bool | None, typer.Option("--lowercase", help="Lowercase text columns.")
    ] = None,
    name: NameOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Column names, missing values, types, text normalisation, duplicates and outliers."""
    params = _recipe(recipe)
    if rename:
        params["rename"] = {**params.get("rename", {}), **_renames(rename)}
    if select:
        params["select"] = select
    if drop:
        params["drop"] = drop
    if missing_marker is not None:
        params["missing_markers"] = missing_marker
    if impute is not None:
        params["missing"] = {**params.get("missing", {}), "strategy": impute}
    if drop_duplicates:
        params["drop_duplicates"] = True
    if near_duplicates:
        params["near_duplicates"] = {"column": near_duplicates}
    if outliers:
        params["outliers"] = {"columns": outliers, "method": outlier_method}
    if lowercase:
        params["text"] = {**(params.get("text") or {}), "lowercase": True}
    _run("clean", ref, params, name, as_json, str(recipe or "clean flags"))


def _renames(pairs: list[str]) -> dict[str, str]:
    from forgeml.core.errors import UsageError

    renames: dict[str, str] = {}
    for pair in pairs:
        old, equals, new = pair.partition("=")
        if not equals or not old or not new:
            raise UsageError(
                f"--rename '{pair}' is not OLD=NEW; write e.g. --rename column_1=label."
            )
        renames[old] = new
    return renames


def validate(
    ref: RefArgument,
    expectations: Annotated[Path, typer.Option(help="YAML expectations (pandera checks).")],
    name: NameOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Check rows against expectations; failing rows go to NAME-quarantine with reasons."""
    _run("validate", ref, _recipe(expectations), name, as_json, str(expectations))


def redact(
    ref: RefArgument,
    recipe: Annotated[Path | None, typer.Option(help="YAML redact options.")] = None,
    columns: Annotated[
        list[str] | None, typer.Option("--column", help="Only this column (repeatable).")
    ] = None,
    kinds: Annotated[
        list[str] | None,
        typer.Option(
            "--kind",
            help="email, iban, national_id, credit_card, ip, phone (repeatable).",
        ),
    ] = None,
    region: Annotated[
        str | None,
        typer.Option(
            help="The data's country, ISO 3166-1 alpha-2 (GB, US, CN...): also find its "
            "national phone numbers (07912345678) and bare-digit national IDs."
        ),
    ] = None,
    name: NameOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Find and mask PII (e-mail, IBAN, national IDs, credit cards, IP addresses, phone)."""
    params = _recipe(recipe)
    if columns:
        params["columns"] = columns
    if kinds:
        params["kinds"] = kinds
    if region is not None:
        from forgeml.core.errors import UsageError
        from forgeml.data.pii import check_region

        try:
            params["region"] = check_region(region)
        except ValueError as error:
            raise UsageError(f"--region: {error}") from None
    _run("redact", ref, params, name, as_json, str(recipe or "redact flags"))


def split(
    ref: RefArgument,
    ratios: Annotated[str, typer.Option(help="Comma-separated, e.g. 0.8,0.1,0.1.")] = "0.8,0.1,0.1",
    stratify: Annotated[str | None, typer.Option(help="Keep this column's balance.")] = None,
    group: Annotated[str | None, typer.Option(help="Keep each value's rows together.")] = None,
    seed: Annotated[int, typer.Option(help="Seed; same seed, same split.")] = 0,
    name: NameOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Deterministic train/validation/test split; identical records never straddle splits."""
    from forgeml.core.errors import UsageError

    try:
        values = [float(part) for part in ratios.split(",")]
    except ValueError:
        raise UsageError(f"--ratios '{ratios}' is not a comma-separated list of numbers.") from None
    params = {"ratios": values, "stratify": stratify, "group": group, "seed": seed}
    _run("split", ref, params, name, as_json, "split options")


def augment(
    ref: RefArgument,
    recipe: Annotated[Path, typer.Option(help="YAML augment recipe (text/image/tabular).")],
    word_list: Annotated[
        Path | None, typer.Option(help="Synonym word list (`word: syn, syn` per line).")
    ] = None,
    name: NameOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Add augmented rows to the train split (marked, never in validation/test)."""
    from forgeml.core.configfile import parse_model
    from forgeml.core.errors import UsageError
    from forgeml.data.augment import AugmentParams, load_word_list

    params = parse_model(AugmentParams, _recipe(recipe), str(recipe))
    if word_list is not None:
        if params.text is None:
            raise UsageError("--word-list needs a `text` section in the augment recipe.")
        # inline the list so the stored recipe rebuilds without the file
        text = params.text.model_copy(update={"synonyms": load_word_list(word_list)})
        params = params.model_copy(update={"text": text})
    _run("augment", ref, params, name, as_json, str(recipe))


def features(
    ref: RefArgument,
    spec: Annotated[Path, typer.Option(help="YAML feature spec.")],
    spec_name: Annotated[
        str | None, typer.Option(help="FeatureSpec name (default: <dataset>-features).")
    ] = None,
    name: NameOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Fit a FeatureSpec on the train split; record it and the transformed version."""
    _run("features", ref, _recipe(spec), name, as_json, str(spec), spec_name=spec_name)


def register(app: typer.Typer) -> None:
    """Add the transform commands to the `data` group."""
    for command in (clean, validate, redact, split, augment, features):
        app.command(command.__name__)(command)
