"""The UI app: the control-plane API's app plus the pages at `/` and their `/static` files.

Pages read through the very functions the API's routes are, under the same permission
(`_authz.same_as`), so the UI decides nothing the API would not. Every page answer carries
the Content-Security-Policy of `_security`; every change a page sends carries its CSRF
token. An error on a page is a page (a sign-in is a redirect to `/login`); under `/api`
it stays the API's JSON.
"""

from __future__ import annotations

from importlib.resources import files
from typing import TYPE_CHECKING

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from forgeml.api import create_app as create_api_app
from forgeml.ui._curves import CurveCache
from forgeml.ui._errors import page_errors
from forgeml.ui._pages_datasets import router as datasets_router
from forgeml.ui._pages_explain import router as explain_router
from forgeml.ui._pages_home import router as home_router
from forgeml.ui._pages_jobs import router as jobs_router
from forgeml.ui._pages_lineage import router as lineage_router
from forgeml.ui._pages_login import router as login_router
from forgeml.ui._pages_models import router as models_router
from forgeml.ui._pages_operations import router as operations_router
from forgeml.ui._pages_runs import router as runs_router
from forgeml.ui._projects import router as projects_router
from forgeml.ui._security import PageSecurity

if TYPE_CHECKING:
    from forgeml.api._authz import Authorizer
    from forgeml.api._hosts import ServedHosts
    from forgeml.api._limits import ApiLimits
    from forgeml.api._reading import Cadence
    from forgeml.auth.oidc import OidcConfig
    from forgeml.core.workspace import Workspace

PAGE_ROUTERS = [
    home_router, login_router, runs_router, jobs_router, datasets_router, models_router,
    lineage_router, operations_router, explain_router, projects_router,
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
    """The control-plane API's app (`forgeml.api.create_app`, same parameters) with the web
    UI's pages at `/` and its static files at `/static`.

    Raises:
        UsageError: `oidc` without accounts.
    """
    app = create_api_app(
        workspace, authorizer, limits=limits, oidc=oidc, hosts=hosts, reap_every=reap_every
    )
    app.state.curve_cache = CurveCache()
    for router in PAGE_ROUTERS:
        app.include_router(router, include_in_schema=False)
    app.mount("/static", StaticFiles(directory=str(files("forgeml.ui") / "static")), "static")
    page_errors(app)
    app.add_middleware(PageSecurity)
    return app
