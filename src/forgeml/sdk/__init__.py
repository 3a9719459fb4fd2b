"""The Python SDK: the resources of `forgeml.client.Client`, following `FORGEML_SERVER`.

    from forgeml import sdk

    sdk.models.show("adult@production")["metrics"]
    sdk.datasets.upload("adult", Path("adult.csv"))

With `FORGEML_SERVER` set, each call goes to that server (as the user of `FORGEML_TOKEN`);
without it, to the local workspace (`FORGEML_HOME`, `FORGEML_DB_URL`). Both sides answer
the same values in the same shapes: what the matching `forgeml ... --json` prints and the
`Client` answers (`tests/sdk/test_following.py` holds each equal on one served workspace).
A method one side lacks raises `UsageError` naming what to do instead.

Each call opens what it needs and closes it; many calls in a row against a server are
cheaper on one `forgeml.client.Client` (`forgeml.connect()`), which keeps its connections.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from forgeml.sdk._seam import Following, source
from forgeml.sdk.local import (
    LocalAudit,
    LocalDatasets,
    LocalJobs,
    LocalLabels,
    LocalModels,
    LocalProjects,
    LocalPrompts,
    LocalQueues,
    LocalRuns,
    LocalTokens,
    LocalUsers,
)

if TYPE_CHECKING:
    from forgeml.client import (
        Audit,
        Datasets,
        Jobs,
        Labels,
        Models,
        Projects,
        Prompts,
        Queues,
        Runs,
        Tokens,
        Users,
    )

__all__ = [
    "audit", "datasets", "jobs", "labels", "models", "projects", "prompts", "queues", "runs",
    "source", "tokens", "users",
]  # fmt: skip

# typed as the client's resources: both sides take the same arguments and answer alike
audit = cast("Audit", Following("audit", "Audit", LocalAudit))
datasets = cast("Datasets", Following("datasets", "Datasets", LocalDatasets))
jobs = cast("Jobs", Following("jobs", "Jobs", LocalJobs))
labels = cast("Labels", Following("labels", "Labels", LocalLabels))
models = cast("Models", Following("models", "Models", LocalModels))
projects = cast("Projects", Following("projects", "Projects", LocalProjects))
prompts = cast("Prompts", Following("prompts", "Prompts", LocalPrompts))
queues = cast("Queues", Following("queues", "Queues", LocalQueues))
runs = cast("Runs", Following("runs", "Runs", LocalRuns))
tokens = cast("Tokens", Following("tokens", "Tokens", LocalTokens))
users = cast("Users", Following("users", "Users", LocalUsers))
