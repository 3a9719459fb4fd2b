"""Data and prediction drift: a reference profile, per-feature tests, a report.

    reference = build_reference(train_frame, prediction="predicted")
    report = detect_drift(reference, window_frame)
    report.drifted_columns, report.columns[0].p_value, report.columns[0].effect_size

A column drifts only when its test (KS for numeric columns, chi-square for categorical
ones) has a p-value below `DriftConfig.alpha` AND an effect size (PSI, Wasserstein in
reference standard deviations, Jensen-Shannon distance) reaches its threshold; a column
whose share of missing values moves is flagged too.

Online: `OnlineDriftDetector` (a CUSUM per numeric feature) and `ErrorRateDetector` (a
Bernoulli CUSUM on 0/1 prediction errors) take rows or errors as they arrive and alarm at
a false-alarm rate set as the expected run length between false alarms; their state is
JSON, so a restart resumes them. `read_log` reads a request log whole to replay it.
`OnlineWatch` runs the feature detector live (`forgeml server`): it follows each served
model's request log from where it last read, feeds each row to the detector of the version
that answered it, and keeps the read position and the detectors under FORGEML_HOME.

Live: `read_window` takes the latest rows a model server logged, `model_reference` the
reference of the data a model version was trained on (built once, kept under FORGEML_HOME).
Whole rows (`detect_drift(..., multivariate=True)`): a domain classifier tells the
reference's kept rows from the window's (cross-validated ROC AUC), and MMD compares the
embeddings of each text column (`minilm_embedder`, or a text model's own `model_embedder`).
Prediction drift: the model's answers in the window (`outputs=`) against its answers on the
validation split, kept in the reference as `predictions`.

Live: `read_requests` / `read_window` take the latest rows a model server logged,
`model_reference` the reference of the data a model version was trained on (built once,
kept under FORGEML_HOME; a profile of an older `FORMAT` is rebuilt). `drift_over_time`
scores consecutive windows of a log, `plot_drift` draws them.
"""

from forgeml.monitor.drift._concept import (
    ConceptAlarm,
    ConceptDriftState,
    ErrorRateDetector,
    markov_arl,
)
from forgeml.monitor.drift._config import DriftConfig, ReferenceOptions
from forgeml.monitor.drift._detect import detect_drift
from forgeml.monitor.drift._embed import minilm_embedder, model_embedder, text_embedder
from forgeml.monitor.drift._follow import LastAlarm, OnlineWatch, WatchedVersion, WatchState
from forgeml.monitor.drift._live import (
    LiveSource,
    LoggedRequests,
    deployment_source,
    model_reference,
    read_requests,
    read_window,
    reference_path,
    request_log_path,
)
from forgeml.monitor.drift._multivariate import (
    Embed,
    MultivariateDrift,
    domain_classifier,
    mmd_test,
    text_mmd,
)
from forgeml.monitor.drift._online import (
    OnlineAlarm,
    OnlineDriftDetector,
    OnlineDriftState,
)
from forgeml.monitor.drift._online_config import ConceptDriftConfig, OnlineDriftConfig
from forgeml.monitor.drift._predictions import output_frame
from forgeml.monitor.drift._reference import (
    FORMAT,
    CategoricalReference,
    NumericReference,
    ReferenceProfile,
    StaleReferenceError,
    build_reference,
)
from forgeml.monitor.drift._replay import LoggedRows, read_log
from forgeml.monitor.drift._report import ColumnDrift, DriftReport, MissingShareCheck
from forgeml.monitor.drift._statistics import chi_square, js_distance, ks, psi, wasserstein
from forgeml.monitor.drift._timeline import (
    PNG_KEY,
    WindowScores,
    drift_over_time,
    latest_windows,
    plot_drift,
)

__all__ = [
    "FORMAT",
    "PNG_KEY",
    "CategoricalReference",
    "ColumnDrift",
    "ConceptAlarm",
    "ConceptDriftConfig",
    "ConceptDriftState",
    "DriftConfig",
    "DriftReport",
    "Embed",
    "ErrorRateDetector",
    "LastAlarm",
    "LiveSource",
    "LoggedRequests",
    "LoggedRows",
    "MissingShareCheck",
    "MultivariateDrift",
    "NumericReference",
    "OnlineAlarm",
    "OnlineDriftConfig",
    "OnlineDriftDetector",
    "OnlineDriftState",
    "OnlineWatch",
    "ReferenceOptions",
    "ReferenceProfile",
    "StaleReferenceError",
    "WatchState",
    "WatchedVersion",
    "WindowScores",
    "build_reference",
    "chi_square",
    "deployment_source",
    "detect_drift",
    "domain_classifier",
    "drift_over_time",
    "js_distance",
    "ks",
    "latest_windows",
    "markov_arl",
    "minilm_embedder",
    "mmd_test",
    "model_embedder",
    "model_reference",
    "output_frame",
    "plot_drift",
    "psi",
    "read_log",
    "read_requests",
    "read_window",
    "reference_path",
    "request_log_path",
    "text_embedder",
    "text_mmd",
    "wasserstein",
]
