"""`forgeml serve --rag INDEX`: RAG's routes composed into the model server's app.

Serving does not know RAG (RAG sits above it); the CLI opens the indexes, builds
`forgeml.rag.http.rag_router` and hands it to `build_app(extra_routers=...)`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from forgeml.core.errors import UsageError

if TYPE_CHECKING:
    from fastapi import APIRouter

    from forgeml.core.workspace import Workspace
    from forgeml.rag.options import RagServeOptions
    from forgeml.rag.serving import ServedIndex
    from forgeml.serve import ModelRepository

_WARM_QUERY = "warm up"


@dataclass
class RagServing:
    """The indexes `--rag` opened, and the generator options, until the app is built."""

    workspace: Workspace
    indexes: dict[str, ServedIndex]
    options: RagServeOptions
    api_key: str | None

    def router(self, repository: ModelRepository, host: str, port: int) -> APIRouter:
        """The RAG routes; answers go to `--rag-generator`, or to this server on loopback."""
        from forgeml.rag.http import rag_router
        from forgeml.rag.serving import GeneratorEndpoint

        options = self.options
        names = repository.names()
        if options.rag_generator is not None:
            generator = GeneratorEndpoint(
                options.rag_generator, options.rag_generator_model, api_key=self.api_key
            )
        else:
            generator = GeneratorEndpoint(
                f"http://{loopback(host)}:{port}/v1",
                default_model=names[0] if len(names) == 1 else None,
            )
        return rag_router(self.workspace, self.indexes, generator)

    def warm(self) -> None:
        """Embed one query, so the first request does not wait for the embedder to load."""
        next(iter(self.indexes.values())).search(_WARM_QUERY, 1)  # they share the embedder
        served = ", ".join(item.ref for item in self.indexes.values())
        logging.info("forgeml serve: RAG indexes %s on /v1/rag/NAME/query|answer", served)

    def close(self) -> None:
        from forgeml.rag.serving import close_served

        close_served(self.indexes)


def open_rag(workspace: Workspace, options: RagServeOptions) -> RagServing | None:
    """The indexes `options.rag` names, opened (None when there are none).

    Raises:
        NotFoundError: no such index or version.
        UsageError: a generator option without --rag, or a model name without its URL.
        ConfigError: the key's environment variable is not set.
    """
    from forgeml.prompts.client import api_key_from_env
    from forgeml.rag.serving import open_served

    generator_flags = (options.rag_generator_model, options.rag_generator_key_env)
    if not options.rag:
        if options.rag_generator is not None or any(generator_flags):
            raise UsageError("--rag-generator and its options need --rag INDEX.")
        return None
    if options.rag_generator is None and any(generator_flags):
        raise UsageError(
            "--rag-generator-model and --rag-generator-key-env need --rag-generator URL."
        )
    api_key = api_key_from_env(options.rag_generator_key_env)
    return RagServing(workspace, open_served(workspace, options.rag), options, api_key)


def loopback(host: str) -> str:
    """The address this machine reaches a server listening on `host` at."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host
