"""RAG over HTTP: `POST /v1/rag/{index}/query` and `POST /v1/rag/{index}/answer`.

`rag_router` builds the routes over indexes a server opened once (`forgeml.rag.serving`);
`forgeml serve --rag INDEX` adds them to the model server's app. `query` answers what
`rag query --json` prints (hits with chunk id, source, score, text and metadata);
`answer` what `rag answer --json` prints (the answer, each citation's chunk id, source and
verbatim quote, whether the sources support it, the prompt@version and the model). A
body may carry `model`: the gateway routes on it, and `answer` asks that model.

Errors are `{"error": SENTENCE}` (the serve app's handlers): an unknown index 404, a body
of the wrong shape (empty or oversized text, k out of range) 422, a filter on a field
the index lacks 400, an unreachable generator 502.

Answers run on a pool of their own: each waits seconds on the generator, which by
default is this same server over loopback, whose OpenAI routes need the server's
shared thread pool free to generate.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, field_validator
from starlette.concurrency import run_in_threadpool

from forgeml.core.errors import NotFoundError
from forgeml.rag.types import SearchMode

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace
    from forgeml.rag.serving import GeneratorEndpoint, ServedIndex

__all__ = ["AnswerRequest", "QueryRequest", "rag_router"]

MAX_TEXT_CHARS = 4000  # a query or question; longer is a document, not a question
MAX_K = 100
MAX_ANSWER_K = 20  # passages the model reads: each is up to a chunk's tokens
MAX_ANSWER_TOKENS = 4096
ANSWER_THREADS = 8
FilterValue = str | int | float | bool


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("it is empty")
    return value


class QueryRequest(BaseModel):
    """The body of `POST /v1/rag/{index}/query` (the options of `rag query`)."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    query: str = Field(max_length=MAX_TEXT_CHARS, description="What to search for.")
    k: int = Field(5, ge=1, le=MAX_K, description="How many hits.")
    mode: SearchMode = Field("hybrid", description="hybrid, dense or bm25.")
    filter: dict[str, FilterValue] = Field(
        default_factory=dict, description="Metadata field -> value every hit must have."
    )
    weight: float | None = Field(
        None, ge=0, le=1, description="Hybrid by convex combination with this dense weight."
    )
    model: str | None = Field(None, description="The deployment, for the gateway's routing.")

    _query_not_blank = field_validator("query")(_not_blank)


class AnswerRequest(BaseModel):
    """The body of `POST /v1/rag/{index}/answer` (the options of `rag answer`)."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    question: str = Field(max_length=MAX_TEXT_CHARS, description="What to ask.")
    k: int = Field(5, ge=1, le=MAX_ANSWER_K, description="How many passages the model reads.")
    mode: SearchMode = Field("hybrid", description="hybrid, dense or bm25.")
    filter: dict[str, FilterValue] = Field(
        default_factory=dict, description="Metadata field -> value every passage must have."
    )
    prompt: str | None = Field(
        None, description="A registered answer prompt (NAME, NAME@vN, NAME@ALIAS)."
    )
    max_tokens: int = Field(
        512, ge=1, le=MAX_ANSWER_TOKENS, description="The most tokens the model may write."
    )
    model: str | None = Field(None, description="The model that answers (the deployment).")

    _question_not_blank = field_validator("question")(_not_blank)


def rag_router(
    workspace: Workspace,
    indexes: Mapping[str, ServedIndex],
    generator: GeneratorEndpoint,
    answer_threads: int = ANSWER_THREADS,
) -> APIRouter:
    """The RAG routes over `indexes` (by name), answering through `generator`.

    Args:
        workspace: where answer prompts resolve and answers are audited.
        indexes: the opened indexes, by the name a path gives.
        generator: the OpenAI-compatible endpoint that writes answers.
        answer_threads: answers generated at once; more wait for a free thread.
    """
    router = APIRouter(prefix="/v1/rag", tags=["rag"])
    answers = ThreadPoolExecutor(answer_threads, thread_name_prefix="rag-answer")

    def served(name: str) -> ServedIndex:
        found = indexes.get(name)
        if found is None:
            serving = ", ".join(sorted(indexes)) or "none"
            raise NotFoundError(f"This server serves no RAG index '{name}' (it serves: {serving}).")
        return found

    @router.post("/{index}/query")
    async def query(index: str, body: QueryRequest) -> dict[str, Any]:
        item = served(index)
        hits = await run_in_threadpool(
            item.search, body.query, body.k, body.mode, body.filter, body.weight
        )
        return {"ref": item.ref, "query": body.query, "hits": [hit.__dict__ for hit in hits]}

    @router.post("/{index}/answer")
    async def answer(index: str, body: AnswerRequest) -> dict[str, Any]:
        item = served(index)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(answers, _answer, workspace, item, generator, body)

    return router


def _answer(
    workspace: Workspace, item: ServedIndex, generator: GeneratorEndpoint, body: AnswerRequest
) -> dict[str, Any]:
    """Retrieve, ask, check and audit one answer (blocking: runs on the answers' pool)."""
    from forgeml.rag.answer import BUILTIN_PROMPT, AnswerPrompt
    from forgeml.rag.answer import answer as answer_from
    from forgeml.rag.answer_prompts import registry_answer_prompt
    from forgeml.rag.passages import answer_record, passages_of

    client = generator.client(body.model)
    prompt: AnswerPrompt = BUILTIN_PROMPT
    if body.prompt is not None:
        prompt = registry_answer_prompt(workspace, body.prompt)
    passages = passages_of(item.search(body.question, body.k, body.mode, body.filter))
    result = answer_from(body.question, passages, client, prompt=prompt, max_tokens=body.max_tokens)
    record = answer_record(item.ref, body.question, client.model, result, passages)
    with workspace.store.session() as session:
        payload = {key: record[key] for key in ("question", "supported", "prompt_ref", "model")}
        payload["chunks"] = [c["chunk_id"] for c in record["citations"]]
        payload["via"] = "http"
        workspace.audit(session, "rag.answer", f"rag:{item.ref}", payload)
    return record
