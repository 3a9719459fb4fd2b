"""Monitoring reads: drift per feature over time, computed from a served model's request
log against its model version's training data (drift is not stored; it is scored on ask),
and live accuracy from feedback (`GET /monitor/accuracy`, what `monitor accuracy --json`
prints: at most `MAX_WINDOW_ROWS` labelled predictions; `GET /monitor/accuracy/windows`:
the same window by window, at most `MAX_LABELLED_ROWS` rows in all).

The answer holds what `forgeml monitor drift TARGET --window N --png F --json` prints as
`windows` (the latest windows, each feature's effect size over its threshold), and the
per-feature tests of the latest window (statistic, p-value, effect, drifted) as its
`columns`. Bounds: at most `MAX_WINDOWS` windows of at most `MAX_WINDOW_ROWS` rows are
scored; the log itself is read whole, as the CLI reads it.

Permission: `deployments:read`. The drift of a deployment (or a served model) is a reading
of its traffic, which is what that permission shows; `alerts:read` is about recorded alerts.
It is asked in the project of the deployment (or model) the query string names
(`resource="served"`), not the request's.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from forgeml.api._authz import require
from forgeml.core.errors import NotFoundError, UsageError
from forgeml.core.workspace import Workspace

router = APIRouter(prefix="/api/v1")

MAX_WINDOWS = 24  # as many as `monitor drift --png` draws
MAX_WINDOW_ROWS = 20_000
MIN_WINDOW_ROWS = 10  # fewer rows make every test's answer noise
MAX_LABELLED_ROWS = 100_000  # feedback rows one accuracy-by-window answer reads
NAME = r"^[A-Za-z0-9][A-Za-z0-9._@-]*$"


def _source(workspace: Workspace, deployment: str | None, model: str | None) -> Any:
    """The live source of `deployment` or of model version `model` (one of the two)."""
    from forgeml.monitor.drift import LiveSource, deployment_source, request_log_path
    from forgeml.tracking import get_model_version

    if (deployment is None) == (model is None):
        raise UsageError("Give deployment or model, one of the two.")
    if deployment is not None:
        found = deployment_source(workspace, deployment)
        if found is None:
            raise NotFoundError(f"No live deployment is called '{deployment}'.")
        return found
    record = get_model_version(workspace, model or "")
    logs = [request_log_path(workspace, record.name)]
    return LiveSource(f"{record.name}@v{record.version}", record.name, logs, version=None)


def drift_windows(
    workspace: Workspace, deployment: str | None, model: str | None, window: int, windows: int
) -> dict[str, Any]:
    """Drift per feature over the latest `windows` windows of `window` logged rows.

    Raises:
        UsageError: both or neither of `deployment` and `model`.
        NotFoundError: no such deployment or model version, or no request log.
        EmptyWindowError: the log holds no rows for it.
        ConfigError: the model version records no dataset version (no reference).
    """
    from forgeml.monitor.drift import (
        DriftConfig,
        detect_drift,
        latest_windows,
        model_reference,
        read_requests,
    )

    source = _source(workspace, deployment, model)
    # the route is authorized in the project of the deployment or model it names
    ref, profile = model_reference(workspace, source.model_ref, any_project=True)
    served = source.served or ref.partition("@")[0]
    requests = read_requests(source.logs, served, None, source.version)
    latest = requests.frame.tail(window)
    checked = [column for column in latest.columns if column in profile.columns]
    config = DriftConfig()
    found = latest_windows(profile, requests, window, windows, checked, config)
    report = detect_drift(profile, latest, config, checked)
    return {
        "reference": ref,
        "served": served,
        "deployment": source.deployment,
        "window": window,
        "logged_rows": requests.frame.height,
        "windows": [w.model_dump(mode="json") for w in found],
        "columns": [c.model_dump(mode="json") for c in report.columns],
        "drifted_columns": report.drifted_columns,
    }


@router.get("/monitor/drift", dependencies=[require("deployments:read", resource="served")])
def drift(
    request: Request,
    deployment: Annotated[str | None, Query(max_length=128, pattern=NAME)] = None,
    model: Annotated[str | None, Query(max_length=160, pattern=NAME)] = None,
    window: Annotated[int, Query(ge=MIN_WINDOW_ROWS, le=MAX_WINDOW_ROWS)] = 2000,
    windows: Annotated[int, Query(ge=1, le=MAX_WINDOWS)] = MAX_WINDOWS,
) -> dict[str, Any]:
    """Each feature's drift score per window of the request log, oldest window first, and
    the latest window's tests (404: unknown deployment or model, or no log yet)."""
    workspace: Workspace = request.app.state.workspace
    return drift_windows(workspace, deployment, model, window, windows)


def _served(workspace: Workspace, deployment: str | None, model: str | None) -> tuple[str, Any]:
    """The served name `deployment` or `model` names, and the version it pins (NAME@vN or
    NAME@alias; None: the version that answered).

    Raises:
        UsageError: both or neither.
        NotFoundError: no such deployment.
    """
    from forgeml.serve.deployments import get_deployment

    if (deployment is None) == (model is None):
        raise UsageError("Give deployment or model, one of the two.")
    if deployment is not None:
        get_deployment(workspace, deployment)  # 404 when there is none
    served = deployment or (model or "").partition("@")[0]
    return served, model if model and "@" in model else None


@router.get("/monitor/accuracy", dependencies=[require("deployments:read", resource="served")])
def accuracy(
    request: Request,
    deployment: Annotated[str | None, Query(max_length=128, pattern=NAME)] = None,
    model: Annotated[str | None, Query(max_length=160, pattern=NAME)] = None,
    window: Annotated[int, Query(ge=1, le=MAX_WINDOW_ROWS)] = 2000,
) -> dict[str, Any]:
    """Accuracy (MAE for regressors) of the latest `window` labelled predictions, beside the
    estimate without labels, as `forgeml monitor accuracy TARGET --json` prints it."""
    from forgeml.monitor.accuracy import live_accuracy
    from forgeml.monitor.drift import request_log_path

    workspace: Workspace = request.app.state.workspace
    served, model_ref = _served(workspace, deployment, model)
    log = request_log_path(workspace, served)
    # authorized in the project of the deployment or model named, as `drift`
    report = live_accuracy(workspace, served, model_ref, window, None, log, any_project=True)
    return report.model_dump(mode="json")


@router.get(
    "/monitor/accuracy/windows", dependencies=[require("deployments:read", resource="served")]
)
def accuracy_windows(
    request: Request,
    deployment: Annotated[str | None, Query(max_length=128, pattern=NAME)] = None,
    model: Annotated[str | None, Query(max_length=160, pattern=NAME)] = None,
    window: Annotated[int, Query(ge=1, le=MAX_WINDOW_ROWS)] = 2000,
    windows: Annotated[int, Query(ge=1, le=MAX_WINDOWS)] = MAX_WINDOWS,
) -> dict[str, Any]:
    """Accuracy (MAE for regressors) from feedback over the latest `windows` windows of
    `window` labelled predictions, oldest first, each beside its estimate without labels;
    an empty list when no prediction was labelled."""
    from forgeml.monitor.accuracy import accuracy_windows as measured_windows

    if window * windows > MAX_LABELLED_ROWS:
        raise UsageError(
            f"window x windows is {window * windows} labelled rows, over the limit of "
            f"{MAX_LABELLED_ROWS}; ask for fewer or smaller windows."
        )
    workspace: Workspace = request.app.state.workspace
    served, model_ref = _served(workspace, deployment, model)
    # authorized in the project of the deployment or model named, as `drift`
    found = measured_windows(workspace, served, model_ref, window, windows, any_project=True)
    return found.model_dump(mode="json")
