"""Sign in and out with a password: the API's own sign-in and sign-out, from a form.

Without accounts (the embedded single-user default) there is nobody to sign in as: `/login`
goes home.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from forgeml.api import _account_routes
from forgeml.api._accounts import AccountsAuthorizer
from forgeml.api._authz import public
from forgeml.core.errors import AuthenticationError, RateLimitedError
from forgeml.ui._render import render
from forgeml.ui._security import csrf_checked, form_fields, local_path

router = APIRouter()


@router.get("/login", dependencies=[public()])
def login_page(
    request: Request, next_path: Annotated[str | None, Query(alias="next", max_length=512)] = None
) -> Response:
    """The sign-in form (home, when the server has no accounts)."""
    if not isinstance(request.app.state.authorizer, AccountsAuthorizer):
        return RedirectResponse("/", status_code=303)
    return render(request, "login.html", next_path=local_path(next_path), message=None)


@router.post("/login", dependencies=[public(), Depends(csrf_checked)])
async def login(request: Request) -> Response:
    """Sign in as `/api/v1/auth/login` does; back to the page that asked for it."""
    fields = await form_fields(request)
    target = local_path(fields.get("next"))
    if not isinstance(request.app.state.authorizer, AccountsAuthorizer):
        return RedirectResponse("/", status_code=303)
    answer = RedirectResponse(target, status_code=303)
    try:
        body = _account_routes.Login(
            name=fields.get("name", ""), password=fields.get("password", "")
        )
        await run_in_threadpool(_account_routes.login, request, answer, body)
    except ValidationError:
        return _again(request, target, "Give the account's name and its password.", 422)
    except (AuthenticationError, RateLimitedError) as error:
        return _again(request, target, str(error), error.http_status)
    return answer


def _again(request: Request, target: str, message: str, status: int) -> Response:
    return render(request, "login.html", status, next_path=target, message=message)


@router.post("/logout", dependencies=[public(), Depends(csrf_checked)])
def logout(request: Request) -> Response:
    """Sign out as `/api/v1/auth/logout` does (the session is revoked)."""
    answer = RedirectResponse("/login", status_code=303)
    _account_routes.logout(request, answer)
    return answer
