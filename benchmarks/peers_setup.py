"""The peers' own virtualenvs for `benchmarks/peers.py` (never forgeml's dependencies).

`benchmarks/.venv-peers` holds PyTorch Lightning, BentoML and Ray Serve beside forgeml's
own dependencies (so the peer servers run forgeml's encoding code on the same torch);
`benchmarks/.venv-litellm` holds LiteLLM's proxy alone, because its pins clash with Ray
Serve's (fastapi<0.116 against fastapi>=0.133).
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from _adult import REPO

BENCH = REPO / "benchmarks"
TORCH = "torch==2.13.0"


@dataclass(frozen=True)
class PeerVenv:
    """One peer virtualenv: where it lives, what it installs, and the peers it holds."""

    name: str
    path: Path
    requirements: Path
    with_forgeml: bool  # forgeml's dependencies (and torch) too, pinned by constraints.txt

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    def missing(self) -> str | None:
        """Why this venv cannot be used (None: it can)."""
        if not (self.path / ".installed").exists():
            where = self.path.relative_to(REPO)
            return f"{where} is not set up: run `python benchmarks/peers.py --setup`"
        return None


VENVS = {
    "peers": PeerVenv("peers", BENCH / ".venv-peers", BENCH / "peers-requirements.txt", True),
    "litellm": PeerVenv(
        "litellm", BENCH / ".venv-litellm", BENCH / "peers-litellm-requirements.txt", False
    ),
}

# the peers' environment: they phone home by default, and nothing here may reach past
# loopback
OFFLINE_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "BENTOML_DO_NOT_TRACK": "True",
    "DO_NOT_TRACK": "1",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_TELEMETRY": "False",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    # Ray starts its workers (the Serve replicas and proxy) at nice 15; no measured process
    # may run niced, or it loses the shared cores to the load generator
    "RAY_worker_niceness": "0",
}


def forgeml_dependencies() -> list[str]:
    """forgeml's runtime dependencies as pyproject.toml lists them."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return list(project["dependencies"])


def _constraints(venv: PeerVenv) -> Path:
    """constraints.txt less opentelemetry's lines (peers-requirements.txt pins that family)."""
    lines = (REPO / "constraints.txt").read_text().splitlines()
    path = venv.path / "constraints.txt"
    path.write_text("\n".join(line for line in lines if not line.startswith("opentelemetry")))
    return path


def setup(venv: PeerVenv) -> None:
    """Create `venv` and install its peers (torch first, so no other torch is pulled)."""
    if not venv.python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv.path)], check=True)
    pip = [str(venv.python), "-m", "pip", "install", "--disable-pip-version-check"]
    if venv.with_forgeml:
        subprocess.run([*pip, TORCH], check=True)
        constrained = [*pip, "-c", str(_constraints(venv)), TORCH, *forgeml_dependencies()]
        subprocess.run([*constrained, "-r", str(venv.requirements)], check=True)
    else:
        subprocess.run([*pip, "-r", str(venv.requirements)], check=True)
    (venv.path / ".installed").write_text(venv.requirements.read_text())
    print(f"{venv.path.relative_to(REPO)}: ready", flush=True)


def setup_all() -> None:
    """Set up every peer venv."""
    for venv in VENVS.values():
        setup(venv)
