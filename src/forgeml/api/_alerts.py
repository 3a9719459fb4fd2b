"""Alert routes: list, show, acknowledge, and Alertmanager's webhook receiver.

A list shows the request's project's alerts; an alert's route is authorized in the alert's
project, and an acknowledgement must act in it. The webhook serves the whole install
(`alerts:receive` is decided in `default`) and files each alert in the project of the
subject its labels name.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Query, Request

from forgeml.api._authz import require
from forgeml.api._context import acting, workspace
from forgeml.core.errors import InvalidDataError
from forgeml.monitor.alerts import (
    ack_alert,
    alert_summary,
    get_alert,
    list_alerts,
    parse_message,
    receive,
)

router = APIRouter(prefix="/api/v1")


@router.get("/alerts", dependencies=[require("alerts:read")])
def alerts(
    request: Request,
    state: Annotated[str, Query(pattern="^(pending|firing|resolved|all)$")] = "all",
) -> dict[str, Any]:
    """The request project's recorded alerts in `state`, newest first."""
    records = list_alerts(acting(request), state)
    return {"alerts": [alert_summary(record) for record in records]}


@router.get("/alerts/{alert_id}", dependencies=[require("alerts:read", resource="alert")])
def alert(request: Request, alert_id: str) -> dict[str, Any]:
    """One alert (404 when unknown)."""
    return alert_summary(get_alert(workspace(request), alert_id))


@router.post("/alerts/{alert_id}/ack", dependencies=[require("alerts:ack", resource="alert")])
def ack(request: Request, alert_id: str) -> dict[str, Any]:
    """Acknowledge an alert (idempotent: the first acknowledgement stays)."""
    return alert_summary(ack_alert(acting(request), alert_id))


@router.post("/alertmanager", dependencies=[require("alerts:receive")])
async def alertmanager(request: Request) -> dict[str, Any]:
    """Alertmanager's webhook (version 4): record firing alerts, resolve resolved ones.

    A body that is not a version-4 message is refused whole (422) and nothing is recorded.
    """
    body = await request.body()
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise InvalidDataError("The body is not JSON.") from None
    message = parse_message(payload)
    received = await asyncio.to_thread(receive, acting(request), message)
    return {"status": "ok", **received.__dict__}
