"""The FastAPI application: routes per concern, errors mapped to JSON in one place.

Every `ForgemlError` is answered with its `http_status` and `{"error": SENTENCE}`; a body
FastAPI's validation refuses gets 422 with the same shape (the first problem, named).
Handlers are plain `def`: they touch the store, so FastAPI runs them in its thread pool.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from forgeml.api._account_routes import router as accounts_router
from forgeml.api._accounts import AccountsAuthorizer, choose_authorizer
from forgeml.api._agents import agent_service
from forgeml.api._agents import router as agents_router
from forgeml.api._alerts import router as alerts_router
from forgeml.api._audit import router as audit_router
from forgeml.api._authz import Authorizer, api_routes
from forgeml.api._commands import router as commands_router
from forgeml.api._cost import router as cost_router
from forgeml.api._dataset_ops import router as dataset_ops_router
from forgeml.api._datasets import router as datasets_router
from forgeml.api._deployments import router as deployments_router
from forgeml.api._explain import router as explain_router
from forgeml.api._exports import router as exports_router
from forgeml.api._hosts import NOSNIFF, HostGuard, ServedHosts
from forgeml.api._job_logs import router as job_logs_router
from forgeml.api._jobs import router as jobs_router
from forgeml.api._keys import router as keys_router
from forgeml.api._labels import router as labels_router
from forgeml.api._limits import ApiLimits, StreamSlots
from forgeml.api._lineage import router as lineage_router
from forgeml.api._models import router as models_router
from forgeml.api._monitor import router as monitor_router
from forgeml.api._oidc import oidc_router
from forgeml.api._oidc_accounts import oidc_sign_in
from forgeml.api._openapi import with_path_patterns
from forgeml.api._pipelines import router as pipelines_router
from forgeml.api._prompts import router as prompts_router
from forgeml.api._queues import router as queues_router
from forgeml.api._rag import router as rag_router
from forgeml.api._reading import Cadence, ReadOnlyGets
from forgeml.api._run_jobs import router as run_jobs_router
from forgeml.api._runs import router as runs_router
from forgeml.api._token_routes import router as token_router
from forgeml.auth.oidc import OidcConfig
from forgeml.core.errors import ForgemlError, RateLimitedError, UsageError, error_code
from forgeml.core.workspace import Workspace

# one router per concern, in the order the OpenAPI document lists them
ROUTERS = [
    datasets_router, dataset_ops_router, jobs_router, job_logs_router, queues_router,
    runs_router, run_jobs_router, models_router, deployments_router, keys_router,
    prompts_router, rag_router, pipelines_router, cost_router, audit_router,
    labels_router, lineage_router, commands_router, exports_router, monitor_router,
    explain_router,
]  # fmt: skip


def create_app(
    workspace: Workspace,
    authorizer: Authorizer | None = None,
    *,
    limits: ApiLimits | None = None,
    oidc: OidcConfig | None = None,
    hosts: ServedHosts | None = None,
    reap_every: Cadence | None = None,
) -> FastAPI:
    """The control-plane app over `workspace` (shared with the caller; not closed here).

    `authorizer` decides every route's permission (`_authz`); None: the workspace's
    accounts once it has any (`_accounts.AccountsAuthorizer`: every caller signs in), else
    the embedded single-user default, which needs no login. `limits`: upload size and log
    streams (`ApiLimits()`). `oidc`: also sign people in through this identity provider
    (`/api/v1/auth/oidc/login`), which needs accounts. `hosts`: the names and origins it
    answers to (`ServedHosts()`: loopback only); requests for others are refused (`_hosts`).
    `reap_every`: how often a runs read first marks dead runs KILLED (`Cadence(15)`);
    GET requests otherwise only read (`_reading`).

    Raises:
        UsageError: `oidc` without accounts.
    """
    agents = agent_service(workspace)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        # runs being driven end within their budgets; queued ones are saved as stopped
        await asyncio.to_thread(agents.background.close)

    app = FastAPI(title="forgeml control plane", version="1", lifespan=lifespan)
    app.state.workspace = workspace
    app.state.agents = agents
    app.state.authorizer = authorizer or choose_authorizer(workspace)
    if oidc is not None and not isinstance(app.state.authorizer, AccountsAuthorizer):
        raise UsageError(
            "OIDC sign-in needs accounts: create one (forgeml users create NAME --role owner) "
            "or serve with --auth accounts."
        )
    app.state.limits = limits or ApiLimits()
    app.state.log_streams = StreamSlots(app.state.limits.max_log_streams)
    app.state.reap_every = reap_every or Cadence(15.0)
    app.state.trusted_proxies = (
        app.state.authorizer.settings.trusted_proxies
        if isinstance(app.state.authorizer, AccountsAuthorizer)
        else []
    )
    app.add_middleware(ReadOnlyGets)
    app.add_middleware(
        HostGuard, hosts=hosts or ServedHosts(), trusted_proxies=app.state.trusted_proxies
    )
    _map_errors(app)

    app.include_router(alerts_router)
    app.include_router(agents_router)
    app.include_router(token_router)  # before /tokens/{token_id} of the accounts' routes
    app.include_router(accounts_router)
    if oidc is not None:
        secure = oidc.redirect_uri.startswith("https://")
        app.include_router(oidc_router(oidc, oidc_sign_in(app.state.authorizer, secure=secure)))
    for router in ROUTERS:
        app.include_router(router)
    _declare_errors(app)
    with_path_patterns(app)
    return app


def _map_errors(app: FastAPI) -> None:
    """Every error answered as JSON: `{"error": SENTENCE}` with its status, and for a
    `ForgemlError` its `code` (`forgeml.core.errors.ERROR_CODES`), which the client raises
    again as the same class."""

    @app.exception_handler(ForgemlError)
    async def _forgeml_error(request: Request, error: ForgemlError) -> JSONResponse:
        headers = None
        if isinstance(error, RateLimitedError):  # login limits, log streams
            headers = {"Retry-After": str(max(1, math.ceil(error.retry_after)))}
        body = {"error": str(error), "code": error_code(error)}
        return JSONResponse(body, status_code=error.http_status, headers=headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        # no route for the path (a `%2F` in a name decodes to `/`), or not for the method
        sentence = {
            404: f"Nothing is served at {request.url.path}.",
            405: f"{request.method} is not allowed on {request.url.path}.",
        }.get(error.status_code, f"{str(error.detail).rstrip('.')}.")
        return JSONResponse(
            {"error": sentence}, status_code=error.status_code, headers=error.headers
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "the request"
        return JSONResponse({"error": f"{where}: {first.get('msg', 'invalid')}."}, status_code=422)

    @app.exception_handler(Exception)
    async def _bug(request: Request, error: Exception) -> JSONResponse:
        # answered outside the middleware (Starlette's ServerErrorMiddleware), so the
        # nosniff header is set here; the traceback still reaches the server's log
        return JSONResponse(
            {"error": "The server failed; its log says why."}, status_code=500, headers=NOSNIFF
        )


# what every 4xx answer carries (the handlers above); FastAPI would otherwise document a
# 422 of its own shape ({"detail": [...]}) that this app never sends, and no other 4xx
_ERROR = {
    "description": "The request was refused; `error` says why in one sentence.",
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {
                    "error": {"type": "string"},
                    "code": {
                        "type": "string",
                        "description": "What kind of error (a ForgemlError's).",
                    },
                },
                "required": ["error"],
            }
        }
    },
}


def _declare_errors(app: FastAPI) -> None:
    for route in api_routes(app.routes):
        route.responses.setdefault("4XX", _ERROR)
