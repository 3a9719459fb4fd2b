"""`forgeml prompts create|show|list|versions|alias|split|render|eval`: the prompt registry."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from forgeml.cli._output import print_json, print_table, say, when
from forgeml.cli._remote import source
from forgeml.sdk.local import LocalPrompts

app = typer.Typer(
    help="Versioned prompt templates (sandboxed Jinja2), aliases, rendering and evaluation.",
    no_args_is_help=True,
)
# a list of answers; named so the `list` methods do not shadow the type in their classes
Items = list[dict[str, Any]]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]
RefArg = Annotated[str, typer.Argument(help="NAME, NAME@vN, NAME@ALIAS or NAME@<digest>.")]


def _workspace() -> Any:
    from forgeml.core.workspace import open_workspace

    return open_workspace()


def _prompts() -> Any:
    return source(lambda client: client.prompts, LocalPrompts)


def _print_versions(title: str, items: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print_json(items)
        return
    rows = [
        (i["ref"], i["kind"], ", ".join(i["aliases"]), i["digest"][:12], when(i["created_at"]))
        for i in items
    ]
    print_table(title, ["version", "kind", "aliases", "digest", "created"], rows)


def _weights(split: dict[str, int]) -> str:
    return " ".join(f"{alias}={weight}" for alias, weight in split.items())


@app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="Prompt name.")],
    file: Annotated[Path, typer.Option("--file", help="PROMPT.yaml: template or messages.")],
    as_json: JsonFlag = False,
) -> None:
    """Store PROMPT.yaml as the next version of NAME (identical content: the same version)."""
    from forgeml.core.configfile import load_yaml_model
    from forgeml.prompts import PromptSpec

    # read and checked here, so a bad file is refused alike in remote mode
    spec = load_yaml_model(file, PromptSpec).model_dump(mode="json", exclude_unset=True)
    summary = _prompts().create(name, spec)
    if as_json:
        print_json(summary)
        return
    if summary["created"]:
        say(f"created {summary['ref']} ({summary['kind']})")
    else:
        say(f"{summary['ref']} already holds this content; nothing was written")


@app.command("show")
def show(ref: RefArg, as_json: JsonFlag = False) -> None:
    """A prompt version: its template or messages, variables, examples, model defaults, and
    the prompt's traffic split."""
    detail = _prompts().show(ref)
    if as_json:
        print_json(detail)
        return
    content = detail["content"]
    aliases = " ".join("@" + alias for alias in detail["aliases"])
    say(f"[bold]{detail['ref']}[/bold] {aliases} {content['description']}".rstrip())
    if detail["split"] is not None:
        say(f"split: {_weights(detail['split'])}")
    for message in content["messages"] or []:
        say(f"[{message['role']}] {message['template']}")
    if content["template"] is not None:
        say(content["template"])
    rows = [
        (v["name"], v["type"], "yes" if v["required"] else "no", v["default"], v["description"])
        for v in content["variables"]
    ]
    print_table("variables", ["name", "type", "required", "default", "description"], rows)


@app.command("list")
def list_(as_json: JsonFlag = False) -> None:
    """Every prompt, at its latest version."""
    _print_versions("prompts", _prompts().list(), as_json)


@app.command("versions")
def versions(
    name: Annotated[str, typer.Argument(help="Prompt name.")], as_json: JsonFlag = False
) -> None:
    """Every version of a prompt, oldest first, with its aliases."""
    _print_versions(name, _prompts().versions(name), as_json)


@app.command("alias")
def alias(
    ref: RefArg,
    alias_name: Annotated[str, typer.Argument(metavar="ALIAS", help="e.g. production.")],
    as_json: JsonFlag = False,
) -> None:
    """Point NAME@ALIAS at the version REF names (audited)."""
    summary = _prompts().alias(ref, alias_name)
    if as_json:
        print_json(summary)
        return
    say(f"{summary['name']}@{alias_name} -> {summary['ref']}")


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
    from forgeml.prompts import parse_weights

    if clear == bool(weights):
        raise UsageError("Give ALIAS=WEIGHT pairs or --clear, not both and not neither.")
    if clear:
        cleared = _prompts().clear_split(name)
        removed = cleared["removed"]
        if as_json:
            print_json(cleared)
        else:
            say(
                f"{name}: split removed ({_weights(removed)})"
                if removed
                else f"{name} had no split"
            )
        return
    result = _prompts().split(name, parse_weights(weights or []))
    if as_json:
        print_json(result)
        return
    say(f"{name}: split {_weights(result['split'])}")


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
    values, as_text = _values(var or [], vars_file)
    answer = _prompts().render(ref, values, as_text)
    rendered = answer["rendered"]
    if as_json:
        print_json(answer)
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
