"""Adult prepared as examples/adult/README.md does, shared by the Adult benchmarks.

The benchmarks run as scripts from the repository root, so this module is imported as
`_adult` (the script's folder is first on sys.path).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

REPO = Path(__file__).resolve().parents[1]
ADULT = REPO.parent / "shared" / "data" / "adult" / "adult.data"
EXAMPLES = REPO / "examples" / "adult"


def prepare_adult(home: Path) -> Workspace:
    """A workspace in `home` holding Adult added, cleaned, split 0.8/0.1/0.1 and featurised.

    The split is stratified on the label `Y` with seed 0; clean.yaml and features.yaml are
    the example's own. MLflow's database is created here too, outside any timed run.
    """
    from forgeml.core.config import Settings
    from forgeml.core.configfile import load_yaml
    from forgeml.core.workspace import Workspace
    from forgeml.data import pipeline
    from forgeml.data.ingest import IngestOptions
    from forgeml.tracking import open_client

    workspace = Workspace(Settings(home=home, user="bench"))
    pipeline.add(workspace, "adult", ADULT, IngestOptions())
    pipeline.derive(workspace, "clean", "adult", load_yaml(EXAMPLES / "clean.yaml"))
    split = {"ratios": [0.8, 0.1, 0.1], "stratify": "Y", "seed": 0}
    pipeline.derive(workspace, "split", "adult", split)
    pipeline.derive(workspace, "features", "adult", load_yaml(EXAMPLES / "features.yaml"))
    open_client(workspace)
    return workspace
