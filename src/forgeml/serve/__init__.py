"""The model server: runtimes, dynamic batching, KServe v2, `:predict`, OpenAI routes, metrics.

`create_app(workspace, refs, options)` builds the ASGI app in-process; `forgeml serve`
runs it under uvicorn. Deployments (`forgeml.serve.deployments`) run servers as processes.
Names load on first use, so `forgeml --help` (which reads `ServeOptions`) never imports
FastAPI or torch.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from forgeml.serve.app import build_app, create_app
    from forgeml.serve.batcher import Batcher
    from forgeml.serve.options import ServeOptions
    from forgeml.serve.repository import ModelRepository, ServedModel
    from forgeml.serve.runtime import Runtime, load_runtime, register_runtime

_HOMES = {
    "Batcher": "forgeml.serve.batcher",
    "ModelRepository": "forgeml.serve.repository",
    "Runtime": "forgeml.serve.runtime",
    "ServeOptions": "forgeml.serve.options",
    "ServedModel": "forgeml.serve.repository",
    "build_app": "forgeml.serve.app",
    "create_app": "forgeml.serve.app",
    "load_runtime": "forgeml.serve.runtime",
    "register_runtime": "forgeml.serve.runtime",
}
__all__ = [
    "Batcher",
    "ModelRepository",
    "Runtime",
    "ServeOptions",
    "ServedModel",
    "build_app",
    "create_app",
    "load_runtime",
    "register_runtime",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'forgeml.serve' has no attribute '{name}'")
    return getattr(import_module(_HOMES[name]), name)
