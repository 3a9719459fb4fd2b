"""Indexes opened once for a server, and the generator its answers ask.

A server opens each index it serves at start-up (`open_served`) and shares it across
requests. An opened snapshot holds one SQLite connection, an in-memory FAISS index, a
query-embedding cache (an unguarded `OrderedDict`) and the process's one embedder, whose
`embed` sets torch's process-wide thread count while it runs; so every search of every
served index takes one lock. A search takes milliseconds; generation, which takes
seconds, runs outside it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from forgeml.core.errors import MissingColumnError, UsageError
from forgeml.rag.types import Hit

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace
    from forgeml.prompts.client import ChatClient
    from forgeml.rag.embeddings import Embedder
    from forgeml.rag.index import Index

__all__ = ["GeneratorEndpoint", "ServedIndex", "close_served", "open_served"]


@dataclass
class ServedIndex:
    """One index version opened for a server: `ref` is the version it resolved to."""

    name: str
    ref: str
    index: Index
    lock: threading.Lock

    def search(
        self,
        query: str,
        k: int,
        mode: str = "hybrid",
        filters: Mapping[str, Any] | None = None,
        weight: float | None = None,
    ) -> list[Hit]:
        """`Index.search` under the servers' lock.

        Raises:
            UsageError: a bad mode, k or weight, or a filter on a field the index lacks
                (a request's fault: HTTP 400, with the sentence `rag query` prints).
        """
        with self.lock:
            try:
                return self.index.search(query, k, mode, filters, weight)
            except MissingColumnError as error:
                raise UsageError(str(error)) from None


def open_served(
    workspace: Workspace, refs: Sequence[str], embedder: Embedder | None = None
) -> dict[str, ServedIndex]:
    """Open every index `refs` names (`NAME`, `NAME@vN`), by name, read-only.

    Raises:
        NotFoundError: no such index or version.
        UsageError: two references name one index.
        OtherProjectError: an index belongs to another project than the workspace's (a
            deployment's replica acts in the deployment's).
    """
    from forgeml.core.ids import parse_ref
    from forgeml.rag.versions import open_index, resolve_own

    names = [parse_ref(ref, "index reference").name for ref in refs]
    if len(set(names)) < len(names):
        twice = next(name for name in names if names.count(name) > 1)
        raise UsageError(f"Index '{twice}' is given twice; serve each index once.")
    with workspace.store.session() as session:
        resolved = [resolve_own(session, workspace, ref).ref for ref in refs]
    lock = threading.Lock()
    served: dict[str, ServedIndex] = {}
    try:
        for name, ref in zip(names, resolved, strict=True):
            # the version resolved above: an index re-built meanwhile does not change it
            served[name] = ServedIndex(name, ref, open_index(workspace, ref, embedder), lock)
    except BaseException:
        close_served(served)
        raise
    return served


def close_served(served: Mapping[str, ServedIndex]) -> None:
    """Close every opened index."""
    for item in served.values():
        with item.lock:
            item.index.close()


@dataclass
class GeneratorEndpoint:
    """The OpenAI-compatible endpoint that writes a server's answers.

    By default the server's own OpenAI routes over loopback, asked for the model the
    request names (`default_model` when it names none); or any endpoint by URL, where
    `model` fixes the name that endpoint serves.
    """

    base_url: str
    model: str | None = None
    default_model: str | None = None
    api_key: str | None = None
    timeout_s: float = 120.0
    _clients: dict[str, ChatClient] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def client(self, requested: str | None) -> ChatClient:
        """The chat client for the model a request names (one client per name, reused).

        Raises:
            UsageError: the request names no model and there is no default.
        """
        from forgeml.prompts.client import ChatClient

        name = self.model or requested or self.default_model
        if not name:
            raise UsageError(
                "The request needs 'model': the model that should answer (this server has "
                "no default one)."
            )
        with self._lock:
            found = self._clients.get(name)
            if found is None:
                found = ChatClient(self.base_url, name, self.api_key, timeout_s=self.timeout_s)
                self._clients[name] = found
            return found
