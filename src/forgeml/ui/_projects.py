"""The project the pages show and act in, chosen in the nav and kept in a cookie.

`POST /project` (a form with the CSRF token, like every change a page sends) sets the
`forgeml_project` cookie (SameSite=Strict, HttpOnly: no script reads it) to a project the
caller may switch to: with accounts, one it is a member of (else 403); single-user, one that
exists or `default` (else 404). The page middleware (`_security.PageSecurity`) hands a
well-formed cookie to `forgeml.api._projects.request_project` as
`request.state.page_project` for page routes only and ignores a malformed one, so the
API's answers never depend on it.
A membership lost after the choice is the API's own 403 on each page; its error page keeps
the switch, so the way back is one click.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from forgeml.api import _account_routes
from forgeml.api._accounts import AccountsAuthorizer, request_scheme
from forgeml.api._projects import request_project
from forgeml.auth import DEFAULT_PROJECT, Caller, list_projects, roles_of
from forgeml.core.errors import (
    AuthenticationError,
    ForgemlError,
    NotFoundError,
    PermissionDeniedError,
)
from forgeml.core.ids import validate_name
from forgeml.ui._authz import same_as
from forgeml.ui._security import PROJECT_COOKIE, csrf_checked, form_fields, local_path

# a choice outlives the browser session; a month unused and the pages are back in `default`
PROJECT_COOKIE_AGE_S = 30 * 24 * 3600

router = APIRouter()


def project_choices(request: Request) -> list[str]:
    """The projects `request`'s caller may switch the pages to, by name: with accounts, those
    it is a member of (none when it is not signed in); single-user, every project recorded
    and `default`."""
    authorizer = request.app.state.authorizer
    workspace = request.app.state.workspace
    if not isinstance(authorizer, AccountsAuthorizer):
        return sorted({DEFAULT_PROJECT, *(p["name"] for p in list_projects(workspace))})
    caller: Caller | None = getattr(request.state, "caller", None)
    if caller is None:  # an error page: the route's authorization stopped before naming it
        try:
            caller = authorizer.caller(request)
        except AuthenticationError:
            return []
    try:
        return sorted(roles_of(workspace, caller.name))
    except NotFoundError:
        return []


def current_project(request: Request) -> str:
    """The project the page acts in, `default` when the request names a malformed one (the
    page then shows that error, and must still render)."""
    try:
        return request_project(request)
    except ForgemlError:
        return DEFAULT_PROJECT


@router.post(
    "/project",
    dependencies=[Depends(csrf_checked), same_as(_account_routes.router, _account_routes.me)],
)
async def switch_project(request: Request) -> Response:
    """Show and act in the form's `project` from now on; back to the form's `next` page.

    Raises:
        InvalidNameError: `project` is no project name.
        PermissionDeniedError: the caller is not a member of it (accounts).
        NotFoundError: no such project (single-user).
    """
    fields = await form_fields(request)
    name = validate_name(fields.get("project", ""), "project")
    if name not in await run_in_threadpool(project_choices, request):
        if isinstance(request.app.state.authorizer, AccountsAuthorizer):
            raise PermissionDeniedError(
                f"{request.state.principal.actor} is not a member of the project {name!r}."
            )
        raise NotFoundError(f"No project is called {name!r}.")
    answer = RedirectResponse(local_path(fields.get("next")), status_code=303)
    answer.set_cookie(
        PROJECT_COOKIE,
        name,
        max_age=PROJECT_COOKIE_AGE_S,
        httponly=True,
        samesite="strict",
        secure=request_scheme(request) == "https",
        path="/",
    )
    return answer
