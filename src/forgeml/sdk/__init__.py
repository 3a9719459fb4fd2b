"""The Python SDK: the resources of `forgeml.client.Client`, following `FORGEML_SERVER`.

    from forgeml import sdk

    sdk.models.show("adult@production")["metrics"]
    sdk.datasets.upload("adult", Path("adult.csv"))

With `FORGEML_SERVER` set, each call goes to that server (as the user of `FORGEML_TOKEN`);
without it, to the local workspace (`FORGEML_HOME`, `FORGEML_DB_URL`). Both sides answer
the same values in the same shapes: what the matching `forgeml ... --json` prints and the
`Client` answers (`tests/sdk/test_following.py` holds each equal on one served workspace).
A method one side lacks raises `UsageError` naming what to do instead.

Resources: `runs`, `models`, `datasets`, `jobs`, `queues`, `audit`, `prompts`, `labels`,
`rag`, `pipelines`, `agents`, `keys` (the gateway's API keys), `cost`, `alerts`,
`deployments`, `users`, `projects`, `tokens`. The server drives an agent run in the
background and `agents.start` answers at once; locally the call drives it until it stops.
Either way `agents.wait` answers the stopped run.

Each call opens what it needs and closes it; many calls in a row against a server are
cheaper on one `forgeml.client.Client` (`forgeml.connect()`), which keeps its connections.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from forgeml.sdk._seam import Following, source
from forgeml.sdk.local import (
    LocalAgents,
    LocalAlerts,
    LocalAudit,
    LocalCost,
    LocalDatasets,
    LocalDeployments,
    LocalJobs,
    LocalKeys,
    LocalLabels,
    LocalModels,
    LocalPipelines,
    LocalProjects,
    LocalPrompts,
    LocalQueues,
    LocalRag,
    LocalRuns,
    LocalTokens,
    LocalUsers,
)

if TYPE_CHECKING:
    from forgeml.client import (
        Agents,
        Alerts,
        Audit,
        Cost,
        Datasets,
        Deployments,
        Jobs,
        Keys,
        Labels,
        Models,
        Pipelines,
        Projects,
        Prompts,
        Queues,
        Rag,
        Runs,
        Tokens,
        Users,
    )

__all__ = [
    "agents", "alerts", "audit", "cost", "datasets", "deployments", "jobs", "keys", "labels",
    "models", "pipelines", "projects", "prompts", "queues", "rag", "runs", "source", "tokens",
    "users",
]  # fmt: skip

# typed as the client's resources: both sides take the same arguments and answer alike
agents = cast("Agents", Following("agents", "Agents", LocalAgents))
alerts = cast("Alerts", Following("alerts", "Alerts", LocalAlerts))
audit = cast("Audit", Following("audit", "Audit", LocalAudit))
cost = cast("Cost", Following("cost", "Cost", LocalCost))
datasets = cast("Datasets", Following("datasets", "Datasets", LocalDatasets))
deployments = cast("Deployments", Following("deployments", "Deployments", LocalDeployments))
jobs = cast("Jobs", Following("jobs", "Jobs", LocalJobs))
keys = cast("Keys", Following("keys", "Keys", LocalKeys))
labels = cast("Labels", Following("labels", "Labels", LocalLabels))
models = cast("Models", Following("models", "Models", LocalModels))
pipelines = cast("Pipelines", Following("pipelines", "Pipelines", LocalPipelines))
projects = cast("Projects", Following("projects", "Projects", LocalProjects))
prompts = cast("Prompts", Following("prompts", "Prompts", LocalPrompts))
queues = cast("Queues", Following("queues", "Queues", LocalQueues))
rag = cast("Rag", Following("rag", "Rag", LocalRag))
runs = cast("Runs", Following("runs", "Runs", LocalRuns))
tokens = cast("Tokens", Following("tokens", "Tokens", LocalTokens))
users = cast("Users", Following("users", "Users", LocalUsers))
