"""The metadata store: SQLAlchemy models, engines and sessions, migrations."""

from forgeml.core.reading import reading
from forgeml.core.store._alerts import AlertDeliveryRecord, AlertRecord
from forgeml.core.store._auth import (
    LoginAttemptRecord,
    MembershipRecord,
    ProjectRecord,
    TokenRecord,
    UserRecord,
)
from forgeml.core.store._engine import Store, open_store
from forgeml.core.store._feedback import FeedbackRecord
from forgeml.core.store._jobs import JobAttemptRecord, JobEventRecord, JobRecord, QueueRecord
from forgeml.core.store._keys import InstallKeyRecord
from forgeml.core.store._labels import (
    LabelAnnotationRecord,
    LabelLeaseRecord,
    LabelTaskRecord,
)
from forgeml.core.store._models import (
    AuditEvent,
    Base,
    Dataset,
    DatasetVersion,
    FeatureSpecVersion,
    LineageEdge,
)
from forgeml.core.store._owners import dataset_project, deployment_project, model_project
from forgeml.core.store._pipelines import (
    PipelineCacheRecord,
    PipelineFiringRecord,
    PipelineRunRecord,
    PipelineStepRunRecord,
    PipelineTriggerRecord,
)
from forgeml.core.store._previews import CurvePreviewRecord
from forgeml.core.store._prompts import (
    PromptAliasRecord,
    PromptSplitRecord,
    PromptVersionRecord,
)
from forgeml.core.store._rag import RagIndexRecord, RagIndexVersionRecord
from forgeml.core.store._runs import ModelVersionRecord, RunRecord
from forgeml.core.store._serving import (
    ApiKeyRecord,
    DeploymentRecord,
    DeploymentReplicaRecord,
    DeploymentRevisionRecord,
    KeyUsageRecord,
)

__all__ = [
    "AlertDeliveryRecord",
    "AlertRecord",
    "ApiKeyRecord",
    "AuditEvent",
    "Base",
    "CurvePreviewRecord",
    "Dataset",
    "DatasetVersion",
    "DeploymentRecord",
    "DeploymentReplicaRecord",
    "DeploymentRevisionRecord",
    "FeatureSpecVersion",
    "FeedbackRecord",
    "InstallKeyRecord",
    "JobAttemptRecord",
    "JobEventRecord",
    "JobRecord",
    "KeyUsageRecord",
    "LabelAnnotationRecord",
    "LabelLeaseRecord",
    "LabelTaskRecord",
    "LineageEdge",
    "LoginAttemptRecord",
    "MembershipRecord",
    "ModelVersionRecord",
    "PipelineCacheRecord",
    "PipelineFiringRecord",
    "PipelineRunRecord",
    "PipelineStepRunRecord",
    "PipelineTriggerRecord",
    "ProjectRecord",
    "PromptAliasRecord",
    "PromptSplitRecord",
    "PromptVersionRecord",
    "QueueRecord",
    "RagIndexRecord",
    "RagIndexVersionRecord",
    "RunRecord",
    "Store",
    "TokenRecord",
    "UserRecord",
    "dataset_project",
    "deployment_project",
    "model_project",
    "open_store",
    "reading",
]
