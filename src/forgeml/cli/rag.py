"""`forgeml rag index|query|show|versions|rebuild`: versioned RAG indexes and their search."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from forgeml.cli import _rag_eval
from forgeml.cli._output import print_json, print_table, say, step
from forgeml.cli._remote import source
from forgeml.core.errors import UsageError
from forgeml.sdk.local import LocalRag

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

app = typer.Typer(help="RAG indexes: build, version, rebuild and search.", no_args_is_help=True)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]


def _workspace() -> Workspace:
    from forgeml.core.workspace import open_workspace

    return open_workspace()


def _help(name: str) -> str:
    from forgeml.rag.options import IndexOptions

    return IndexOptions.model_fields[name].description or ""


def _default(name: str) -> Any:
    from forgeml.rag.options import IndexOptions

    return IndexOptions.model_fields[name].default


def _rag() -> Any:
    return source(lambda client: client.rag, LocalRag)


@app.command("index")
def index(
    name: Annotated[str, typer.Argument(help="The index's name.")],
    sources: Annotated[
        list[str],
        typer.Argument(
            metavar="SOURCE...",
            help="Files (txt, md, html, pdf), folders, or dataset:NAME@vN:column.",
        ),
    ],
    chunk_tokens: Annotated[int, typer.Option(help=_help("chunk_tokens"))] = _default(
        "chunk_tokens"
    ),
    overlap: Annotated[int, typer.Option(help=_help("overlap"))] = _default("overlap"),
    hnsw: Annotated[bool, typer.Option("--hnsw", help=_help("hnsw"))] = False,
    hnsw_m: Annotated[int, typer.Option(help=_help("hnsw_m"))] = _default("hnsw_m"),
    ef_search: Annotated[int, typer.Option(help=_help("ef_search"))] = _default("ef_search"),
    as_json: JsonFlag = False,
) -> None:
    """Index SOURCE... as the next version of NAME (only changed text is embedded)."""
    from forgeml.rag.options import IndexOptions
    from forgeml.rag.versions import build_version, describe
    from forgeml.scheduler.contract import JobContext

    options = IndexOptions(
        chunk_tokens=chunk_tokens, overlap=overlap, hnsw=hnsw, hnsw_m=hnsw_m, ef_search=ef_search
    )
    # run as a command job (remote mode), its sources were uploaded into the job's scratch
    # folder, which is removed when the job ends: they are kept for `rag rebuild`
    job = JobContext.from_environ()
    uploads = job.scratch if job is not None else None
    with step(f"indexing {len(sources)} source(s) into {name}"):
        built = build_version(_workspace(), name, sources, options, uploads=uploads)
    if as_json:
        print_json(
            {**describe(built.version), "created": built.created, "run": built.stats.__dict__}
        )
        return
    stats = built.stats
    verb = "created" if built.created else "unchanged, still"
    say(
        f"{verb} {built.version.ref} ({built.version.digest[:12]}): "
        f"{built.version.chunks} chunks from {built.version.documents} documents; "
        f"{stats.embedded} embedded, {stats.reused} reused, {stats.chunks_tombstoned} removed"
    )


def _filters(pairs: list[str]) -> dict[str, str]:
    filters = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"A filter is KEY=VALUE, not '{pair}'.")
        filters[key] = value
    return filters


@app.command("query")
def query(
    ref: Annotated[str, typer.Argument(help="NAME, NAME@vN or NAME@<digest prefix>.")],
    text: Annotated[str, typer.Argument(help="What to search for.")],
    k: Annotated[int, typer.Option("--k", help="How many hits.")] = 5,
    mode: Annotated[str, typer.Option(help="hybrid, dense or bm25.")] = "hybrid",
    filters: Annotated[
        list[str] | None, typer.Option("--filter", help="KEY=VALUE a hit must have; repeatable.")
    ] = None,
    weight: Annotated[
        float | None,
        typer.Option(help="Hybrid by convex combination with this dense weight (default: RRF)."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Search an index version."""
    hits = _rag().query(ref, text, k, mode, _filters(filters or []), weight)
    if as_json:
        print_json(hits)
        return
    rows = [
        (
            n,
            f"{h['score']:.4f}",
            h["source"],
            h["metadata"].get("section", ""),
            " ".join(h["text"].split())[:80],
        )
        for n, h in enumerate(hits, start=1)
    ]
    print_table(f"{ref}: {text}", ["#", "score", "source", "section", "text"], rows)


@app.command("show")
def show(
    ref: Annotated[str, typer.Argument(help="NAME, NAME@vN or NAME@<digest prefix>.")],
    as_json: JsonFlag = False,
) -> None:
    """An index version: digest, config, and lineage to its sources and embedder."""
    detail = _rag().show(ref)
    if as_json:
        print_json(detail)
        return
    say(f"[bold]{detail['ref']}[/bold] digest {detail['digest']}")
    say(f"{detail['chunks']} chunks from {detail['documents']} documents")
    say(f"config {detail['config']}")
    rows = [(s["kind"], s["spec"], s["digest"][:12]) for s in detail["sources"]]
    print_table("sources", ["kind", "source", "digest"], rows)


@app.command("versions")
def versions(
    name: Annotated[str, typer.Argument(help="The index's name.")],
    as_json: JsonFlag = False,
) -> None:
    """Every version of an index, oldest first."""
    items = _rag().versions(name)
    if as_json:
        print_json(items)
        return
    rows = [
        (i["ref"], i["digest"][:12], i["chunks"], i["documents"], i["created_at"][:19])
        for i in items
    ]
    print_table(name, ["version", "digest", "chunks", "documents", "created"], rows)


@app.command("rebuild")
def rebuild(
    ref: Annotated[str, typer.Argument(help="NAME@vN (or NAME for the latest).")],
    as_json: JsonFlag = False,
) -> None:
    """Build a version again from its recorded sources and prove the digest is the same."""
    from forgeml.rag.versions import rebuild as rebuild_version

    with step(f"rebuilding {ref}"):
        version, digest = rebuild_version(_workspace(), ref)
    if as_json:
        print_json({"ref": version.ref, "digest": digest, "matches": True})
        return
    say(f"{version.ref} rebuilt from its sources: digest {digest[:12]} matches")


app.command("eval")(_rag_eval.eval_)
app.command("answer")(_rag_eval.answer)
