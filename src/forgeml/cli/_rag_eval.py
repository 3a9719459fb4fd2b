"""`forgeml rag eval` and `forgeml rag answer` (registered on `forgeml.cli.rag`'s app)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from forgeml.cli._output import print_json, print_table, say
from forgeml.core.errors import GateRejectedError, UsageError

if TYPE_CHECKING:
    from forgeml.rag.evaluation import Evaluation

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]
RefArg = Annotated[str, typer.Argument(help="NAME, NAME@vN or NAME@<digest prefix>.")]


def _minimums(pairs: list[str]) -> dict[str, float]:
    minimums = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        try:
            minimums[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep or not name.strip():
            raise UsageError(f"A minimum is METRIC=VALUE (e.g. ndcg@10=0.5), not '{pair}'.")
    return minimums


def eval_(
    ref: RefArg,
    labelled: Annotated[
        Path, typer.Option("--set", help='JSONL: {"query": ..., "relevant": [...]} a line.')
    ],
    k: Annotated[int, typer.Option("--k", help="The cut-off of recall and precision.")] = 10,
    mode: Annotated[str, typer.Option(help="hybrid, dense or bm25.")] = "hybrid",
    weight: Annotated[
        float | None, typer.Option(help="Convex hybrid with this dense weight (default: RRF).")
    ] = None,
    tune: Annotated[
        bool, typer.Option("--tune", help="Grid-search the convex hybrid's weight, and use it.")
    ] = False,
    match: Annotated[
        str,
        typer.Option(
            help="What a relevant id names: 'source' (a source's path, or its trailing part "
            "such as heapq.md) or 'chunk' (a chunk id)."
        ),
    ] = "source",
    minimum: Annotated[
        list[str] | None,
        typer.Option("--min", metavar="METRIC=VALUE", help="Fail (exit 1) below it; repeatable."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """recall@k, precision@k, MRR and nDCG@10 of an index on a labelled set; a gate with --min."""
    from forgeml.core.workspace import open_workspace
    from forgeml.rag.evaluation import MATCHES, evaluate_index
    from forgeml.rag.labelled import load_jsonl
    from forgeml.rag.versions import open_index

    minimums = _minimums(minimum or [])
    if match not in MATCHES:
        raise UsageError(f"--match is one of {', '.join(MATCHES)}, not '{match}'.")
    queries = load_jsonl(labelled)
    index = open_index(open_workspace(), ref)
    try:
        result = evaluate_index(
            index,
            queries,
            k=k,
            mode=mode,
            weight=weight,
            match=match,
            tune=tune,
        )
    finally:
        index.close()
    below = result.report.below(minimums)
    if as_json:
        print_json(_eval_summary(ref, match, result) | {"passed": not below})
    else:
        _say_eval(f"{ref} on {labelled.name}", result, minimums)
    if below:
        name, value = next(iter(below.items()))
        raise GateRejectedError(f"{name} is {value:.4f}, below its minimum {minimums[name]:g}.")


def _eval_summary(ref: str, match: str, result: Evaluation) -> dict[str, Any]:
    tuning = result.tuning
    return {
        "ref": ref,
        "queries": len(result.report.rows),
        "mode": result.mode,
        "weight": result.weight,
        "match": match,
        "metrics": result.report.means,
        "tuned": None if tuning is None else {"alpha": tuning.alpha, "ndcg@10": tuning.ndcg},
    }


def _say_eval(title: str, result: Evaluation, minimums: dict[str, float]) -> None:
    rows = [
        (name, f"{value:.4f}", minimums.get(name, ""))
        for name, value in result.report.means.items()
    ]
    title += f": {len(result.report.rows)} queries, {result.mode}"
    if result.mode == "hybrid":
        fusion = "RRF" if result.weight is None else f"convex, dense weight {result.weight:g}"
        title += f" ({fusion})"
    print_table(title, ["metric", "mean", "minimum"], rows)
    if result.tuning is not None:
        say(f"tuned dense weight {result.tuning.alpha:g} (nDCG@10 {result.tuning.ndcg:.4f})")


def answer(
    ref: RefArg,
    question: Annotated[str, typer.Argument(help="What to ask.")],
    model_url: Annotated[
        str, typer.Option(help="An OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1.")
    ],
    model: Annotated[str, typer.Option(help="The model name that endpoint serves.")],
    api_key_env: Annotated[
        str | None, typer.Option(help="The environment variable holding the endpoint's key.")
    ] = None,
    k: Annotated[int, typer.Option("--k", help="How many passages the model reads.")] = 5,
    max_tokens: Annotated[int, typer.Option(help="The most tokens the model may write.")] = 512,
    as_json: JsonFlag = False,
) -> None:
    """Answer from an index's passages, with citations checked verbatim (or say it cannot)."""
    from forgeml.core.workspace import open_workspace
    from forgeml.prompts.client import ChatClient, api_key_from_env
    from forgeml.rag.answer import answer as answer_from
    from forgeml.rag.passages import answer_record, passages_of
    from forgeml.rag.versions import open_index

    # an unset key variable is refused before the embedder loads and the index is read
    key = api_key_from_env(api_key_env)
    workspace = open_workspace()
    index = open_index(workspace, ref)
    try:
        passages = passages_of(index.search(question, k))
    finally:
        index.close()
    client = ChatClient(model_url, model, key)
    result = answer_from(question, passages, client, max_tokens=max_tokens)
    record = answer_record(ref, question, model, result, passages)
    with workspace.store.session() as session:
        payload = {key: record[key] for key in ("question", "supported", "prompt_ref", "model")}
        payload["chunks"] = [c["chunk_id"] for c in record["citations"]]
        workspace.audit(session, "rag.answer", f"rag:{ref}", payload)
    if as_json:
        print_json(record)
        return
    say(escape(result.text))
    if not result.supported:
        say(f"[dim]{escape(result.refused_reason or '')}[/dim]")
    for c in record["citations"]:
        number, source, quote = escape(f"[{c['n']}]"), escape(c["source"]), escape(c["quote"])
        say(f'{number} {c["chunk_id"]} {source}: "{quote}"')
    say(f"[dim]prompt {result.prompt_ref}, model {record['model']}[/dim]")
