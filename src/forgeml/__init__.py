"""forgeml: an AI training platform in one Python package.

The SDK mirrors the CLI: `forgeml.data` holds the dataset operations
(`add`, `derive`, `rebuild`, `catalog.resolve`, `catalog.read_frame`, `catalog.profile_of`,
`run_query`) and `forgeml.open_workspace()` opens the store the environment describes.
"""

from forgeml.core.workspace import Workspace, open_workspace

__all__ = ["Workspace", "open_workspace"]
__version__ = "0.1.0"
