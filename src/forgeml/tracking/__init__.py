"""Experiment tracking and the model registry: the one place forgeml talks to MLflow.

Runs (`start_run` ... `finish_run`) are recorded in MLflow and in forgeml's store, kept
honest by a heartbeat lease (`reap_expired`); metrics go to MLflow in batches off the
training loop (`MlflowMetricLogger`); model versions are registered in MLflow's registry
with their lineage in forgeml's store, and promoted to aliases through a metric gate.
mlflow itself is imported only when a function needs it.
"""

from forgeml.tracking._mlflow import TrackingUnavailableError, open_client, tracking_uri
from forgeml.tracking.fairness import FairnessBounds, FairnessVerdict, fairness_check
from forgeml.tracking.heartbeat import Heartbeat
from forgeml.tracking.logger import MlflowMetricLogger
from forgeml.tracking.previews import (
    CurvePreview,
    read_curve_previews,
    store_curve_previews,
)
from forgeml.tracking.registry import (
    Promotion,
    PromotionRejectedError,
    download_bundle,
    get_model_version,
    list_models,
    log_model_bundle,
    model_aliases,
    promote,
    promotion_summary,
    register_model,
    version_summary,
)
from forgeml.tracking.runs import (
    RunHandle,
    RunStatus,
    attach_run,
    finish_run,
    get_run,
    list_runs,
    log_json_artifact,
    read_json_artifact,
    reap_expired,
    resume_run,
    run_detail,
    run_summary,
    start_run,
)

__all__ = [
    "CurvePreview",
    "FairnessBounds",
    "FairnessVerdict",
    "Heartbeat",
    "MlflowMetricLogger",
    "Promotion",
    "PromotionRejectedError",
    "RunHandle",
    "RunStatus",
    "TrackingUnavailableError",
    "attach_run",
    "download_bundle",
    "fairness_check",
    "finish_run",
    "get_model_version",
    "get_run",
    "list_models",
    "list_runs",
    "log_json_artifact",
    "log_model_bundle",
    "model_aliases",
    "open_client",
    "promote",
    "promotion_summary",
    "read_curve_previews",
    "read_json_artifact",
    "reap_expired",
    "register_model",
    "resume_run",
    "run_detail",
    "run_summary",
    "start_run",
    "store_curve_previews",
    "tracking_uri",
    "version_summary",
]
