"""Operations: deployments (replicas, traffic split, canary), monitoring (alerts, with their
acknowledgement; drift per feature over time; accuracy from feedback), cost, the audit log
with its verification, gateway keys, and accounts."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import HTMLResponse

from forgeml.api import (
    _account_routes,
    _alerts,
    _audit,
    _cost,
    _deployments,
    _keys,
    _monitor,
    _token_routes,
)
from forgeml.api._pages import NEXT_HEADER, Page, pages
from forgeml.core.errors import ForgemlError
from forgeml.ui._authz import allowed, same_as
from forgeml.ui._render import render
from forgeml.ui._security import csrf_checked

router = APIRouter()
ALL = 500
OR_EMPTY = r"^([A-Za-z0-9][A-Za-z0-9._@-]*)?$"  # _monitor.NAME, or a form's field left empty


@router.get("/deployments", dependencies=[same_as(_deployments.router, _deployments.deployments)])
def deployments(request: Request) -> HTMLResponse:
    """Every live deployment: its models, replicas and where its traffic goes."""
    found = _deployments.deployments(request, Response(), Page(ALL, "name", descending=False))
    return render(request, "deployments.html", deployments=found)


@router.get("/monitoring", dependencies=[same_as(_alerts.router, _alerts.alerts)])
def monitoring(
    request: Request,
    state: Annotated[str, Query(pattern="^(pending|firing|resolved|all)$")] = "all",
    deployment: Annotated[str | None, Query(max_length=128, pattern=OR_EMPTY)] = None,
    model: Annotated[str | None, Query(max_length=160, pattern=OR_EMPTY)] = None,
    window: Annotated[int, Query(ge=_monitor.MIN_WINDOW_ROWS, le=_monitor.MAX_WINDOW_ROWS)] = 2000,
) -> HTMLResponse:
    """Recorded alerts, newest first, with the acknowledge button for those who may; and,
    for a deployment or model named, its drift per feature over time (`/api/v1/monitor/drift`)
    with the latest window's tests, and its accuracy from feedback over the latest window
    (`/api/v1/monitor/accuracy`) and window by window (`/api/v1/monitor/accuracy/windows`),
    each for those who may read it."""
    found = _alerts.alerts(request, state=state)["alerts"]
    may_ack = allowed(request, _alerts.router, _alerts.ack)
    may_drift = allowed(request, _monitor.router, _monitor.drift)
    may_accuracy = allowed(request, _monitor.router, _monitor.accuracy)
    target = {"deployment": deployment or None, "model": model or None, "window": window}
    readings: dict[str, Any] = {}
    if deployment or model:
        readings = _readings(request, target)
    drift = readings.get("drift")
    chart = None
    if drift is not None:
        names = list(dict.fromkeys(n for w in drift["windows"] for n in w["scores"]))
        chart = {
            "x": [w["end"] for w in drift["windows"]],
            "series": {n: [w["scores"].get(n) for w in drift["windows"]] for n in names},
        }
    shown = {"deployment": deployment or "", "model": model or "", "window": window}
    return render(
        request, "monitoring.html", alerts=found, state=state, may_ack=may_ack,
        may_drift=may_drift, may_accuracy=may_accuracy, drift=drift, chart=chart, target=shown,
        accuracy=readings.get("accuracy"), errors=readings.get("errors", {}),
        accuracy_windows=readings.get("accuracy_windows"),
        accuracy_chart=_accuracy_chart(readings.get("accuracy_windows")),
    )  # fmt: skip


def _readings(request: Request, target: dict[str, Any]) -> dict[str, Any]:
    """The target's drift, accuracy, and accuracy window by window, each read through its
    API route where the caller may. One that fails (no request log yet, a version without
    a calibration) leaves its sentence in `errors` while the others show; when every one
    asked fails, the first error is the page's.

    Raises:
        ForgemlError: every reading asked for failed (an unknown deployment or model).
    """
    # as many windows as the route reads at most, up to the drift chart's count
    windows = max(1, min(_monitor.MAX_WINDOWS, _monitor.MAX_LABELLED_ROWS // target["window"]))
    routes: dict[str, tuple[Any, dict[str, Any]]] = {
        "drift": (_monitor.drift, {"windows": _monitor.MAX_WINDOWS}),
        "accuracy": (_monitor.accuracy, {}),
        "accuracy_windows": (_monitor.accuracy_windows, {"windows": windows}),
    }
    asked = [
        name for name, (route, _) in routes.items() if allowed(request, _monitor.router, route)
    ]
    readings: dict[str, Any] = {"errors": {}}
    failures: list[ForgemlError] = []
    for name in asked:
        route, extra = routes[name]
        try:
            readings[name] = route(request, **target, **extra)
        except ForgemlError as error:
            failures.append(error)
            readings["errors"][name] = str(error)
    if asked and len(failures) == len(asked):
        raise failures[0]
    return readings


def _accuracy_chart(found: dict[str, Any] | None) -> dict[str, Any] | None:
    """uPlot's data for accuracy by window: x the windows' ends (epoch s), the measured and
    estimated accuracy (MAE for a regressor), and the validation's as the reference."""
    if not found or not found["windows"]:
        return None
    measure = "accuracy" if found["task"] == "classification" else "mae"
    series = {f"measured {measure}": [w[measure] for w in found["windows"]]}
    if measure == "accuracy":
        series["estimated accuracy"] = [w["estimated_accuracy"] for w in found["windows"]]
    return {
        "x": [datetime.fromisoformat(w["end"]).timestamp() for w in found["windows"]],
        "series": series,
        "reference": found[f"reference_{measure}"],
        "reference_label": f"validation {measure}",
    }


@router.post(
    "/monitoring/{alert_id}/ack",
    dependencies=[Depends(csrf_checked), same_as(_alerts.router, _alerts.ack)],
)
def ack(request: Request, alert_id: str) -> HTMLResponse:
    """Acknowledge an alert as `POST /api/v1/alerts/{id}/ack` does; answers its row."""
    alert = _alerts.ack(request, alert_id)
    return render(request, "alert_row.html", alert=alert, may_ack=True)


@router.get("/cost", dependencies=[same_as(_cost.router, _cost.report)])
def cost(
    request: Request,
    by: Annotated[str, Query(pattern="^(job|queue|owner|model|key)$")] = "queue",
    since: Annotated[str | None, Query(max_length=64)] = None,
) -> HTMLResponse:
    """The project's use and cost grouped `by`, costliest first, and each queue's budget for
    those who may read the (install-wide) queues."""
    report = _cost.report(request, by=by, since=since or None)
    budgets = _cost.budgets(request) if allowed(request, _cost.router, _cost.budgets) else None
    return render(request, "cost.html", report=report, budgets=budgets)


@router.get("/audit", dependencies=[same_as(_audit.router, _audit.events)])
def audit(
    request: Request,
    page: Annotated[Page, Depends(pages(["seq"], "seq", descending=True))],
    actor: Annotated[str | None, Query(max_length=128)] = None,
    action: Annotated[str | None, Query(max_length=64)] = None,
) -> HTMLResponse:
    """The audit log, newest first, and whether its hash chain verifies."""
    answer = Response()
    found = _audit.events(request, answer, page, actor=actor or None, action=action or None,
                          prefix=None)  # fmt: skip
    try:
        verified: dict[str, Any] = _audit.verify(request)
    except ForgemlError as error:  # a broken chain is what this page is for: show it
        verified = {"intact": False, "error": str(error)}
    return render(
        request, "audit.html", events=found, verified=verified, page=page,
        filters={"actor": actor or "", "action": action or ""},
        next_cursor=answer.headers.get(NEXT_HEADER),
    )  # fmt: skip


@router.get("/keys", dependencies=[same_as(_keys.router, _keys.keys)])
def keys(request: Request) -> HTMLResponse:
    """The project's gateway keys: prefix, scopes, limits, state (never a secret)."""
    found = _keys.keys(request, Response(), Page(ALL, "created_at", descending=True))
    return render(request, "keys.html", keys=found)


@router.get("/admin", dependencies=[same_as(_account_routes.router, _account_routes.users)])
def admin(request: Request) -> HTMLResponse:
    """Accounts, and the API tokens of those the caller may manage."""
    users = _account_routes.users(request)["users"]
    tokens = None
    if allowed(request, _token_routes.router, _token_routes.every_token):
        tokens = _token_routes.every_token(request)["tokens"]
    return render(request, "admin.html", users=users, tokens=tokens)
