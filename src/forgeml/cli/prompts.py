"""`forgeml prompts create|show|list|versions|alias|split|render|eval`: the prompt registry."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from forgeml.cli._output import print_json, print_table, say, when

if TYPE_CHECKING:
    from forgeml.prompts import PromptVersion

app = typer.Typer(
    help="Versioned prompt templates (sandboxed Jinja2), aliases, rendering and evaluation.",
    no_args_is_help=True,
)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]
RefArg = Annotated[str, typer.Argument(help="NAME, NAME@vN, NAME@ALIAS or NAME@<digest>.")]


def _workspace() -> Any:
    from forgeml.core.workspace import open_workspace

    return open_workspace()


def _print_versions(title: str, versions: list[PromptVersion], as_json: bool) -> None:
    from forgeml.prompts import prompt_summary

    items = [prompt_summary(version) for version in versions]
    if as_json:
        print_json(items)
        return
    rows = [
        (i["ref"], i["kind"], ", ".join(i["aliases"]), i["digest"][:12], when(i["created_at"]))
        for i in items
    ]
    print_table(title, ["version", "kind", "aliases", "digest", "created"], rows)


@app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="Prompt name.")],
    file: Annotated[Path, typer.Option("--file", help="PROMPT.yaml: template or messages.")],
    as_json: JsonFlag = False,
) -> None:
    """Store PROMPT.yaml as the next version of NAME (identical content: the same version)."""
    from forgeml.core.configfile import load_yaml_model
    from forgeml.prompts import PromptSpec, create_prompt, prompt_summary

    spec = load_yaml_model(file, PromptSpec)
    version, created = create_prompt(_workspace(), name, spec)
    if as_json:
        print_json({**prompt_summary(version), "created": created})
        return
    if created:
        say(f"created {version.ref} ({version.record.kind})")
    else:
        say(f"{version.ref} already holds this content; nothing was written")


@app.command("show")
def show(ref: RefArg, as_json: JsonFlag = False) -> None:
    """A prompt version: its template or messages, variables, examples, model defaults, and
    the prompt's traffic split."""
    from forgeml.prompts import get_prompt, get_split, prompt_detail

    workspace = _workspace()
    detail = prompt_detail(workspace, ref)
    if as_json:
        print_json(detail)
        return
    version = get_prompt(workspace, ref)
    split = get_split(workspace, version.record.name)
    aliases = " ".join("@" + alias for alias in version.aliases)
    say(f"[bold]{version.ref}[/bold] {aliases} {version.spec.description}".rstrip())
    if split is not None:
        say(f"split: {split}")
    for message in version.spec.messages or []:
        say(f"[{message.role}] {message.template}")
    if version.spec.template is not None:
        say(version.spec.template)
    rows = [
        (v.name, v.type, "yes" if v.required else "no", v.default, v.description)
        for v in version.spec.variables
    ]
    print_table("variables", ["name", "type", "required", "default", "description"], rows)


@app.command("list")
def list_(as_json: JsonFlag = False) -> None:
    """Every prompt, at its latest version."""
    from forgeml.prompts import list_prompts

    _print_versions("prompts", list_prompts(_workspace()), as_json)


@app.command("versions")
def versions(
    name: Annotated[str, typer.Argument(help="Prompt name.")], as_json: JsonFlag = False
) -> None:
    """Every version of a prompt, oldest first, with its aliases."""
    from forgeml.prompts import prompt_versions

    _print_versions(name, prompt_versions(_workspace(), name), as_json)


@app.command("alias")
def alias(
    ref: RefArg,
    alias_name: Annotated[str, typer.Argument(metavar="ALIAS", help="e.g. production.")],
    as_json: JsonFlag = False,
) -> None:
    """Point NAME@ALIAS at the version REF names (audited)."""
    from forgeml.prompts import prompt_summary, set_alias

    version = set_alias(_workspace(), ref, alias_name)
    if as_json:
        print_json(prompt_summary(version))
        return
    say(f"{version.record.name}@{alias_name} -> {version.ref}")


@app.command("split")
def split(
    name: Annotated[str, typer.Argument(help="Prompt name.")],
    weights: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="ALIAS=WEIGHT...",
            help="Two or more aliases and their weights in whole percent, summing to 100.",
        ),
    ] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Remove the prompt's split.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Split the traffic of callers who name only the prompt between aliases (audited)."""
    from forgeml.core.errors import UsageError
    from forgeml.prompts import clear_split, parse_weights, set_split

    if clear == bool(weights):
        raise UsageError("Give ALIAS=WEIGHT pairs or --clear, not both and not neither.")
    workspace = _workspace()
    if clear:
        removed = clear_split(workspace, name)
        if as_json:
            print_json({"name": name, "split": None, "removed": removed and removed.as_dict()})
        else:
            say(f"{name}: split removed ({removed})" if removed else f"{name} had no split")
        return
    result = set_split(workspace, name, parse_weights(weights or []))
    if as_json:
        print_json({"name": name, "split": result.as_dict()})
        return
    say(f"{name}: split {result}")


@app.command("render")
def render(
    ref: RefArg,
    var: Annotated[
        list[str] | None, typer.Option("--var", help="A variable as k=v (repeatable).")
    ] = None,
    vars_file: Annotated[
        Path | None, typer.Option("--vars-file", help="YAML or JSON mapping of variables.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Render a prompt version with variables: text, or chat messages."""
    from forgeml.prompts import render_prompt

    values, as_text = _values(var or [], vars_file)
    version, rendered = render_prompt(_workspace(), ref, values, as_text=as_text)
    if as_json:
        print_json({"ref": version.ref, "rendered": rendered})
    elif isinstance(rendered, str):
        typer.echo(rendered)
    else:
        for message in rendered:
            typer.echo(f"[{message['role']}] {message['content']}")


def _values(pairs: list[str], vars_file: Path | None) -> tuple[dict[str, Any], bool]:
    from forgeml.core.configfile import load_yaml
    from forgeml.core.errors import ConfigError, UsageError

    if vars_file is not None and pairs:
        raise UsageError("Give variables with --var or with --vars-file, not both.")
    if vars_file is not None:
        loaded = load_yaml(vars_file)
        if not isinstance(loaded, dict):
            raise ConfigError(f"{vars_file}: expected a mapping of variable names to values.")
        return loaded, False
    values = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--var takes k=v, not '{pair}'.")
        values[key] = value
    return values, True


@app.command("eval")
def eval_(
    refs: Annotated[
        list[str], typer.Argument(metavar="REF", help="Two or more prompt references.")
    ],
    data: Annotated[str, typer.Option("--data", help="A JSONL/JSON/CSV file or DATASET@vN.")],
    model_url: Annotated[str, typer.Option("--model-url", help="OpenAI base URL (…/v1).")],
    model: Annotated[str, typer.Option("--model", help="Model name at that endpoint.")],
    metric: Annotated[
        str, typer.Option("--metric", help="exact, contains, regex:PATTERN, json or judge.")
    ] = "exact",
    expected_column: Annotated[
        str | None, typer.Option("--expected-column", help="Column of expected answers.")
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option("--api-key-env", help="The environment variable holding the endpoint's key."),
    ] = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Longest reply.")] = 64,
    judge_model: Annotated[
        str | None,
        typer.Option("--judge-model", help="The judge (--metric judge) at the same URL."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Score prompt versions over a dataset with a metric; record it as a tracked run."""
    from forgeml.prompts import (
        ChatClient,
        api_key_from_env,
        evaluate_prompts,
        load_rows,
        parse_metric,
    )

    scoring = parse_metric(metric)
    api_key = api_key_from_env(api_key_env)
    workspace = _workspace()
    rows, dataset = load_rows(workspace, data)
    client = ChatClient(model_url, model, api_key)
    judge = ChatClient(model_url, judge_model, api_key) if judge_model else None
    result = evaluate_prompts(
        workspace,
        refs,
        rows,
        scoring,
        client,
        expected_column=expected_column,
        dataset=dataset,
        data_label=data,
        max_tokens=max_tokens,
        judge_model=judge,
    )
    scores = [{"ref": v.ref, "score": v.score, "rows": len(v.rows)} for v in result.versions]
    if as_json:
        print_json({"run_id": result.run_id, "metric": result.metric, "versions": scores})
        return
    for version in result.versions:
        rows_shown = [(r["output"][:60], r["expected"], r["score"]) for r in version.rows]
        print_table(
            f"{version.ref}: {result.metric} {version.score:.4f}",
            ["output", "expected", "score"],
            rows_shown,
        )
    say(f"recorded as run {result.run_id}")
