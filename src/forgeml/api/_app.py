"""The FastAPI application: routes per concern, errors mapped to JSON in one place.

Every `ForgemlError` is answered with its `http_status` and `{"error": SENTENCE}`; a body
FastAPI's validation refuses gets 422 with the same shape (the first problem, named).
Handlers are plain `def`: they touch the store, so FastAPI runs them in its thread pool.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from forgeml.api._alerts import router as alerts_router
from forgeml.core.errors import ForgemlError
from forgeml.core.workspace import Workspace


def create_app(workspace: Workspace) -> FastAPI:
    """The control-plane app over `workspace` (shared with the caller; not closed here)."""
    app = FastAPI(title="forgeml control plane", version="1")
    app.state.workspace = workspace

    @app.exception_handler(ForgemlError)
    async def _forgeml_error(request: Request, error: ForgemlError) -> JSONResponse:
        return JSONResponse({"error": str(error)}, status_code=error.http_status)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "the request"
        return JSONResponse({"error": f"{where}: {first.get('msg', 'invalid')}."}, status_code=422)

    app.include_router(alerts_router)
    return app
