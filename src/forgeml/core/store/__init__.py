"""The metadata store: SQLAlchemy models, engines and sessions, migrations."""

from forgeml.core.store._engine import Store, open_store
from forgeml.core.store._jobs import JobAttemptRecord, JobEventRecord, JobRecord, QueueRecord
from forgeml.core.store._models import (
    AuditEvent,
    Base,
    Dataset,
    DatasetVersion,
    FeatureSpecVersion,
    LineageEdge,
)
from forgeml.core.store._runs import ModelVersionRecord, RunRecord

__all__ = [
    "AuditEvent",
    "Base",
    "Dataset",
    "DatasetVersion",
    "FeatureSpecVersion",
    "JobAttemptRecord",
    "JobEventRecord",
    "JobRecord",
    "LineageEdge",
    "ModelVersionRecord",
    "QueueRecord",
    "RunRecord",
    "Store",
    "open_store",
]
