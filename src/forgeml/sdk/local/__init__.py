"""The local side of the SDK's seam: one class per resource of `forgeml.client.Client`,
each method answering from the local workspace (`FORGEML_HOME`) what the client's answers
from the server, the same values in the same shapes (what `forgeml ... --json` prints).

The CLI's command groups and `forgeml.sdk` both take them through their seam.
"""

from forgeml.sdk.local._accounts import LocalProjects, LocalTokens, LocalUsers
from forgeml.sdk.local._audit import LocalAudit
from forgeml.sdk.local._datasets import LocalDatasets
from forgeml.sdk.local._labels import LocalLabels
from forgeml.sdk.local._prompts import LocalPrompts
from forgeml.sdk.local._registry import LocalModels, LocalRuns
from forgeml.sdk.local._scheduler import LocalJobs, LocalQueues

__all__ = [
    "LocalAudit",
    "LocalDatasets",
    "LocalJobs",
    "LocalLabels",
    "LocalModels",
    "LocalProjects",
    "LocalPrompts",
    "LocalQueues",
    "LocalRuns",
    "LocalTokens",
    "LocalUsers",
]
