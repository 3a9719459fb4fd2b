"""The local side of the SDK's seam: one class per resource of `forgeml.client.Client`,
each method answering from the local workspace (`FORGEML_HOME`) what the client's answers
from the server, the same values in the same shapes (what `forgeml ... --json` prints).

The CLI's command groups and `forgeml.sdk` both take them through their seam.
"""

from forgeml.sdk.local._accounts import LocalProjects, LocalTokens, LocalUsers
from forgeml.sdk.local._agents import LocalAgents
from forgeml.sdk.local._audit import LocalAudit
from forgeml.sdk.local._datasets import LocalDatasets
from forgeml.sdk.local._keys import LocalKeys
from forgeml.sdk.local._labels import LocalLabels
from forgeml.sdk.local._operations import LocalAlerts, LocalCost, LocalDeployments
from forgeml.sdk.local._pipelines import LocalPipelines
from forgeml.sdk.local._prompts import LocalPrompts
from forgeml.sdk.local._rag import LocalRag
from forgeml.sdk.local._registry import LocalModels, LocalRuns
from forgeml.sdk.local._scheduler import LocalJobs, LocalQueues

__all__ = [
    "LocalAgents",
    "LocalAlerts",
    "LocalAudit",
    "LocalCost",
    "LocalDatasets",
    "LocalDeployments",
    "LocalJobs",
    "LocalKeys",
    "LocalLabels",
    "LocalModels",
    "LocalPipelines",
    "LocalProjects",
    "LocalPrompts",
    "LocalQueues",
    "LocalRag",
    "LocalRuns",
    "LocalTokens",
    "LocalUsers",
]
