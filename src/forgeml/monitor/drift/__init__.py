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

Live: `read_window` takes the latest rows a model server logged, `model_reference` the
reference of the data a model version was trained on (built once, kept under FORGEML_HOME).
"""

from forgeml.monitor.drift._concept import (
    ConceptAlarm,
    ConceptDriftState,
    ErrorRateDetector,
    markov_arl,
)
from forgeml.monitor.drift._config import DriftConfig, ReferenceOptions
from forgeml.monitor.drift._detect import detect_drift
from forgeml.monitor.drift._live import model_reference, read_window, reference_path
from forgeml.monitor.drift._online import (
    OnlineAlarm,
    OnlineDriftDetector,
    OnlineDriftState,
)
from forgeml.monitor.drift._online_config import ConceptDriftConfig, OnlineDriftConfig
from forgeml.monitor.drift._reference import (
    CategoricalReference,
    NumericReference,
    ReferenceProfile,
    build_reference,
)
from forgeml.monitor.drift._replay import LoggedRows, read_log
from forgeml.monitor.drift._report import ColumnDrift, DriftReport, MissingShareCheck
from forgeml.monitor.drift._statistics import chi_square, js_distance, ks, psi, wasserstein

__all__ = [
    "CategoricalReference",
    "ColumnDrift",
    "ConceptAlarm",
    "ConceptDriftConfig",
    "ConceptDriftState",
    "DriftConfig",
    "DriftReport",
    "ErrorRateDetector",
    "LoggedRows",
    "MissingShareCheck",
    "NumericReference",
    "OnlineAlarm",
    "OnlineDriftConfig",
    "OnlineDriftDetector",
    "OnlineDriftState",
    "ReferenceOptions",
    "ReferenceProfile",
    "build_reference",
    "chi_square",
    "detect_drift",
    "js_distance",
    "ks",
    "markov_arl",
    "model_reference",
    "psi",
    "read_log",
    "read_window",
    "reference_path",
    "wasserstein",
]
