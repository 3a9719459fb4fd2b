"""The MLflow client: where it points, opened once per URI, quiet, with clear errors.

Embedded default: `sqlite:///<FORGEML_HOME>/mlflow.db` with artifacts in
`<FORGEML_HOME>/mlartifacts`; `MLFLOW_TRACKING_URI` points elsewhere. Every call goes
through an explicit `MlflowClient(tracking_uri=...)`, never MLflow's global state, so
several workspaces can live in one process. mlflow itself is imported lazily: commands
that only read forgeml's own records must not pay for it.
"""

from __future__ import annotations

import logging
import math
import os
import re
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit, urlunsplit

from forgeml.core import netguard
from forgeml.core.config import Settings
from forgeml.core.errors import ForgemlError

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from forgeml.core.workspace import Workspace

# MLflow's own limits (mlflow.utils.validation), applied here so nothing is refused.
MAX_KEY_LENGTH = 250
MAX_PARAM_VALUE_LENGTH = 6000
MAX_TAG_VALUE_LENGTH = 8000
MAX_DATASET_DIGEST_LENGTH = 36

_BAD_KEY_CHARS = re.compile(r"[^/\w.\- ]")
_PROBE_TIMEOUT_S = 5.0


class TrackingUnavailableError(ForgemlError):
    """The MLflow tracking store cannot be reached or opened."""

    http_status = 503


def tracking_uri(settings: Settings) -> str:
    """`MLFLOW_TRACKING_URI` if set, else SQLite in the workspace's home."""
    override = os.environ.get("MLFLOW_TRACKING_URI")
    if override:
        return override
    return f"sqlite:///{(settings.home / 'mlflow.db').resolve()}"


def artifact_location(settings: Settings) -> str | None:
    """Where new experiments keep files: `<home>/mlartifacts`, or the server's choice."""
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return None
    return (settings.home / "mlartifacts").resolve().as_uri()


def redact(uri: str) -> str:
    """`uri` without a password, for messages."""
    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def open_client(workspace: Workspace) -> MlflowClient:
    """The MLflow client for `workspace`'s tracking URI (one per URI per process).

    Raises:
        TrackingUnavailableError: the server does not answer or the database cannot be opened.
    """
    return _client_for(tracking_uri(workspace.settings))


@lru_cache(maxsize=16)
def _client_for(uri: str) -> MlflowClient:
    _probe(uri)
    # forgeml works offline; MLflow 3 would otherwise try to send usage telemetry
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    # a server reading a run's file (a fairness report) is no terminal to draw a bar on
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    with _quiet_imports():
        from mlflow import MlflowClient
        from mlflow.exceptions import MlflowException

        try:
            client = MlflowClient(tracking_uri=uri, registry_uri=uri)
            # the first call creates or migrates an embedded database: fail here, not mid-run
            client.search_experiments(max_results=1)
        except (MlflowException, OSError) as error:
            raise TrackingUnavailableError(
                f"Cannot open the MLflow tracking store at {redact(uri)} "
                f"({_first_line(error)}); fix or unset MLFLOW_TRACKING_URI."
            ) from None
    return client


def _health(uri: str) -> str | None:
    """Why `uri`'s /health does not answer, or None when it does.

    The operator chose the URI, so a private address is allowed; the probe still goes
    through `forgeml.core.netguard`: the connection to the address checked, a redirect
    answered but never followed (it could point at 169.254.169.254)."""
    import httpx

    parts = urlsplit(uri)
    # the guard refuses credentials in a URL: MLflow's basic auth goes in a header instead
    auth = (unquote(parts.username), unquote(parts.password or "")) if parts.username else None
    bare = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    policy = netguard.UrlPolicy(who="The MLflow probe", allow_private=True)
    try:
        with netguard.guarded_client(policy, timeout=_PROBE_TIMEOUT_S) as client:
            status = client.get(f"{bare.rstrip('/')}/health", auth=auth).status_code
    except (httpx.HTTPError, ForgemlError) as error:
        return str(error) or type(error).__name__
    return f"HTTP {status}" if status >= 400 else None


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:200].rstrip(".") if text else type(error).__name__


def _probe(uri: str) -> None:
    """Fail fast on a dead server (MLflow itself retries for minutes) or an unusable folder."""
    scheme = urlsplit(uri).scheme
    if scheme in ("http", "https"):
        reason = _health(uri)
        if reason is not None:
            raise TrackingUnavailableError(
                f"Cannot reach the MLflow tracking server at {redact(uri)} ({reason}); "
                "start it or unset MLFLOW_TRACKING_URI to use the embedded store."
            )
    elif uri.startswith("sqlite:///"):
        folder = Path(uri.removeprefix("sqlite:///")).parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise TrackingUnavailableError(
                f"Cannot create the MLflow database folder {folder} ({error.strerror}); "
                "choose a writable FORGEML_HOME or set MLFLOW_TRACKING_URI."
            ) from None


@contextmanager
def _quiet_imports() -> Iterator[None]:
    """Silence what MLflow says on import and first use that forgeml users cannot act on."""
    # "Creating initial MLflow database tables..." on every fresh embedded store
    for name in ("mlflow.store.db.utils", "alembic.runtime.migration"):
        logging.getLogger(name).setLevel(logging.WARNING)
    with warnings.catch_warnings():
        # MLflow's SQLAlchemy models use the `noload` strategy that SQLAlchemy 2.1
        # deprecates; it is MLflow's to change, and it fires once, when mappers configure.
        warnings.filterwarnings("ignore", message=r".*``noload`` loader strategy")
        import sqlalchemy.orm
        from mlflow.store.model_registry import sqlalchemy_store as _registry  # noqa: F401
        from mlflow.store.tracking import sqlalchemy_store as _tracking  # noqa: F401

        sqlalchemy.orm.configure_mappers()
        yield


def ensure_experiment(client: MlflowClient, name: str, location: str | None) -> str:
    """The id of experiment `name`, created (or restored from deletion) when needed."""
    from mlflow.exceptions import MlflowException

    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        try:
            return str(client.create_experiment(name, artifact_location=location))
        except MlflowException as error:
            # another process created it between our look-up and our insert
            if error.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
            experiment = client.get_experiment_by_name(name)
            if experiment is None:
                raise
    if experiment.lifecycle_stage == "deleted":
        client.restore_experiment(experiment.experiment_id)
    return str(experiment.experiment_id)


def sanitize_key(key: str) -> str:
    """`key` as a valid MLflow param/metric/tag name (no odd characters, no path tricks)."""
    cleaned = _BAD_KEY_CHARS.sub("_", key)
    parts = ["_" if part in (".", "..") else part for part in cleaned.split("/") if part]
    return "/".join(parts)[:MAX_KEY_LENGTH] or "_"


def flatten(payload: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Nested mappings as (`a.b.c`, leaf) pairs; lists stay leaves."""
    for key, value in payload.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from flatten(value, f"{name}.")
        else:
            yield name, value


def numeric_leaves(payload: Mapping[str, Any]) -> dict[str, float]:
    """The flattened numeric (non-bool) leaves of `payload`, keys sanitised."""
    return {
        sanitize_key(key): float(value)
        for key, value in flatten(payload)
        if isinstance(value, int | float) and not isinstance(value, bool)
    }


def json_safe(payload: Any) -> Any:
    """`payload` with NaN/inf floats as None (JSON columns on PostgreSQL refuse them)."""
    if isinstance(payload, float):
        return payload if math.isfinite(payload) else None
    if isinstance(payload, Mapping):
        return {str(key): json_safe(value) for key, value in payload.items()}
    if isinstance(payload, list | tuple):
        return [json_safe(value) for value in payload]
    return payload
