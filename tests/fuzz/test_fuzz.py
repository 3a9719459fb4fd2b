"""Each atheris target for a bounded number of runs on its committed seed corpus: a
target that lets an undocumented exception out fails the run (libFuzzer exits non-zero)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz.targets import TARGETS

CORPUS = Path(__file__).parent / "corpus"
ROOT = Path(__file__).parents[2]


@pytest.mark.slow
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_fuzz_target_raises_only_documented_errors(target: str, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"  # libFuzzer adds what it finds; the committed one stays
    shutil.copytree(CORPUS / target, corpus)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    # -rss_limit_mb=0: libFuzzer reads the peak RSS (getrusage), which Linux carries across
    # fork + exec, so under a pytest worker of 4 GB the target "ran out" before its first
    # input; -artifact_prefix: a crashing input is written here, not into the repository
    command = [
        sys.executable, "-m", "tests.fuzz.targets", target, "-runs=1000", "-seed=1",
        "-rss_limit_mb=0", f"-artifact_prefix={tmp_path}/",
    ]  # fmt: skip
    done = subprocess.run(
        [*command, str(corpus)],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
