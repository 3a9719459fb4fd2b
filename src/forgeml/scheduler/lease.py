"""The server lease: `FORGEML_HOME/scheduler.json` says a `forgeml server` is running.

It holds the server's pid and process create time, so a file left behind by a server that
died (SIGKILL, power loss) is recognised as stale: its pid is gone or belongs to another
process. One server per home; commands that find none run their job in the foreground.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from forgeml.core.config import Settings
from forgeml.core.errors import UsageError
from forgeml.core.processes import create_time, is_alive

LEASE_FILE = "scheduler.json"


@dataclass(frozen=True)
class ServerInfo:
    """Who holds the lease."""

    pid: int
    create_time: float
    executor: str
    started_at: float


def lease_path(settings: Settings) -> Path:
    return settings.home.resolve() / LEASE_FILE


def _alive(info: ServerInfo) -> bool:
    return is_alive(info.pid, info.create_time)


def running_server(settings: Settings) -> ServerInfo | None:
    """The live server of this home, or None (no lease file, or a stale one)."""
    try:
        info = ServerInfo(**json.loads(lease_path(settings).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return info if _alive(info) else None


@contextmanager
def hold_lease(settings: Settings, executor: str) -> Iterator[ServerInfo]:
    """Write the lease for this process while the block runs; removed on the way out.

    Raises:
        UsageError: another live server holds this home's lease.
    """
    other = running_server(settings)
    if other is not None and other.pid != os.getpid():
        raise UsageError(f"A forgeml server is already running for this home (pid {other.pid}).")
    me = ServerInfo(os.getpid(), create_time(os.getpid()), executor, time.time())
    path = lease_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_suffix(f".{os.getpid()}.tmp")
    temp.write_text(json.dumps(asdict(me)))
    os.replace(temp, path)
    try:
        yield me
    finally:
        if running_server(settings) == me:
            path.unlink(missing_ok=True)
