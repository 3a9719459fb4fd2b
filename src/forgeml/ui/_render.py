"""Pages rendered from the package's Jinja2 templates, autoescaped; no template comes from a
user (DESIGN.md: prompts have their own sandboxed registry, pages do not)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson
from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from forgeml.api import (
    _account_routes,
    _alerts,
    _audit,
    _cost,
    _datasets,
    _deployments,
    _jobs,
    _keys,
    _lineage,
    _models,
    _runs,
)
from forgeml.api._accounts import AccountsAuthorizer
from forgeml.ui._authz import allowed
from forgeml.ui._projects import current_project, project_choices

# what the nav bar links to, in order: (path, label, the API route whose permission the
# page needs); a link its viewer may not follow is left out
NAV: list[tuple[str, str, Any, Callable[..., Any]]] = [
    ("/", "Home", _runs.router, _runs.runs),
    ("/runs", "Runs", _runs.router, _runs.runs),
    ("/jobs", "Jobs", _jobs.router, _jobs.list_jobs),
    ("/datasets", "Datasets", _datasets.router, _datasets.list_datasets),
    ("/models", "Models", _models.router, _models.models),
    ("/lineage", "Lineage", _lineage.router, _lineage.show_lineage),
    ("/deployments", "Deployments", _deployments.router, _deployments.deployments),
    ("/monitoring", "Monitoring", _alerts.router, _alerts.alerts),
    ("/cost", "Cost", _cost.router, _cost.report),
    ("/audit", "Audit", _audit.router, _audit.events),
    ("/keys", "Keys", _keys.router, _keys.keys),
    ("/admin", "Accounts", _account_routes.router, _account_routes.users),
]

_ENV = Environment(
    loader=PackageLoader("forgeml.ui", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


def _json_block(value: Any) -> Markup:
    """`value` as JSON safe inside `<script type="application/json">` (no `<`, `>` or `&`
    survives raw, so no payload can close the element)."""
    text = orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY).decode()
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Markup(text)  # escaped above: safe inside a JSON script element


def _when(value: Any) -> str:
    """A stored time as people read it (the API's ISO text, to the second)."""
    if value is None:
        return "-"
    if isinstance(value, datetime):
        value = value.isoformat()
    return str(value).replace("T", " ")[:19]


_ENV.filters["json_block"] = _json_block
_ENV.filters["when"] = _when


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """`template` rendered for `request`'s caller, with what `base.html` needs: the nav, the
    caller's name, the CSRF token, whether the server has accounts (a sign-out), and the
    project the page acts in with those its caller may switch to (the nav shows the project
    when there is a choice, or it is not `default`)."""
    principal = getattr(request.state, "principal", None)
    nav = (
        [(href, label) for href, label, router, route in NAV if allowed(request, router, route)]
        if principal is not None
        else []
    )
    html = _ENV.get_template(template).render(
        request=request,
        nav=nav,
        path=request.url.path,
        actor=principal.actor if principal is not None else None,
        accounts=isinstance(request.app.state.authorizer, AccountsAuthorizer),
        csrf=getattr(request.state, "csrf", ""),
        project=current_project(request),
        projects=project_choices(request),
        **context,
    )
    return HTMLResponse(html, status_code=status_code)
