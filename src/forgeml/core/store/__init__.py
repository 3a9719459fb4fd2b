"""The metadata store: SQLAlchemy models, engines and sessions, migrations."""

from forgeml.core.store._engine import Store, open_store
from forgeml.core.store._models import (
    AuditEvent,
    Base,
    Dataset,
    DatasetVersion,
    FeatureSpecVersion,
    LineageEdge,
)

__all__ = [
    "AuditEvent",
    "Base",
    "Dataset",
    "DatasetVersion",
    "FeatureSpecVersion",
    "LineageEdge",
    "Store",
    "open_store",
]
