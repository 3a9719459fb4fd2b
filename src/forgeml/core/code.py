"""What code is running: the git commit a folder has checked out (for runs and caches)."""

from __future__ import annotations

import subprocess
from pathlib import Path

_GIT_TIMEOUT_S = 5


def git_commit(cwd: Path | None = None) -> str | None:
    """The commit checked out in `cwd`'s git repository, or None when there is none."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else None
