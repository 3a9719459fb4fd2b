from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# the benchmarks are scripts run from the repository root, importing their helpers
# (`_cli`, `_bfcl`) as top-level modules; their tests import them the same way
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))


@pytest.fixture(scope="session")
def bfcl_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bfcl-eval's wheel, fetched by the benchmarks' own code once per session."""
    from _bfcl import BFCL_PIN, fetch_bfcl_wheel

    try:
        return fetch_bfcl_wheel(tmp_path_factory.mktemp("bfcl-wheel"))
    except (subprocess.SubprocessError, OSError) as error:
        pytest.skip(f"PyPI is unreachable, so {BFCL_PIN} could not be fetched: {error}")
