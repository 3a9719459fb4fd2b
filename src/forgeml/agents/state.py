"""A run's state: the transcript, what it spent, the calls it waits on; saved as JSON.

A run that stops for approval is saved under `FORGEML_HOME/agents/runs/RUN_ID.json`
(atomic write), so `forgeml agent approve RUN_ID CALL_ID` can resume it in another
process. A run belongs to the project it was started in (`project`; a run saved before
runs had projects belongs to `default`), and only that project resumes it. A run being
driven is saved with no stop reason; `claim_state` is the compare-and-set that turns a
waiting run into a running one, under a lock every process shares, so two approvals of
one run cannot both resume it. Everything in it is plain
JSON written and read with orjson: a value shaped like a serialised object (LangChain's
`{"lc": 1, "type": "secret", ...}`, CVE-2025-68664) is read back as the same dict, never
revived into anything.
"""

from __future__ import annotations

import fcntl
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import orjson

from forgeml.core.atomic import atomic_write_text
from forgeml.core.errors import NotFoundError
from forgeml.core.ids import validate_name

__all__ = [
    "PendingCall",
    "RunState",
    "StopReason",
    "claim_state",
    "load_state",
    "run_summary",
    "save_state",
    "state_path",
]


class StopReason(StrEnum):
    """Why a run stopped; every stop is one of these, with the transcript so far."""

    ANSWERED = "answered"
    MAX_STEPS = "max_steps"
    MAX_TIME = "max_time"
    MAX_TOKENS = "max_tokens"
    # a reply stopped at `max_reply_tokens` unfinished: a call cut short, or half an answer
    REPLY_CUT = "reply_cut"
    AWAITING_APPROVAL = "awaiting_approval"
    ERROR = "error"

    @property
    def failed(self) -> bool:
        """Whether the run stopped without an answer and will not go on (not answered,
        not waiting for approval): a budget, a cut reply or an error."""
        return self not in (StopReason.ANSWERED, StopReason.AWAITING_APPROVAL)


@dataclass
class PendingCall:
    """A tool call the model made; `result` is the tool message's text once it has run."""

    id: str
    name: str
    arguments: str
    needs_approval: bool = False
    result: str | None = None


@dataclass
class RunState:
    """Everything a run needs to be resumed or reported."""

    run_id: str
    spec: dict[str, Any]
    messages: list[dict[str, Any]]
    steps: int = 0
    tokens: int = 0
    elapsed_s: float = 0.0
    pending: list[PendingCall] = field(default_factory=list)
    stop_reason: StopReason | None = None
    answer: str | None = None
    error: str | None = None
    trace_ids: list[str] = field(default_factory=list)
    # the registry prompt version (`NAME@vN`) the system message came from, if one did
    prompt_ref: str | None = None
    # the project it was started in, whose datasets, indexes and deployments its tools use;
    # a run saved before runs had projects has none in its file: `default`
    project: str = "default"

    def awaiting(self) -> list[PendingCall]:
        """The calls that wait for an operator's approval."""
        return [call for call in self.pending if call.result is None and call.needs_approval]

    def to_json(self) -> dict[str, Any]:
        """The state as JSON-able data."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunState:
        """The state `to_json` wrote."""
        fields = dict(data)
        fields["pending"] = [PendingCall(**call) for call in data.get("pending", [])]
        reason = data.get("stop_reason")
        fields["stop_reason"] = StopReason(reason) if reason else None
        return cls(**fields)


def state_path(home: Path, run_id: str) -> Path:
    """Where run `run_id` is saved under FORGEML_HOME."""
    return home / "agents" / "runs" / f"{validate_name(run_id, 'run id')}.json"


def save_state(home: Path, state: RunState) -> Path:
    """Write `state` atomically; returns its path."""
    path = state_path(home, state.run_id)
    atomic_write_text(path, orjson.dumps(state.to_json(), option=orjson.OPT_INDENT_2).decode())
    return path


def load_state(home: Path, run_id: str) -> RunState:
    """The saved run `run_id`.

    Raises:
        NotFoundError: no run of that id was saved.
    """
    path = state_path(home, run_id)
    try:
        return RunState.from_json(orjson.loads(path.read_bytes()))
    except FileNotFoundError:
        raise NotFoundError(f"There is no saved agent run {run_id}.") from None


@contextmanager
def _runs_locked(home: Path) -> Iterator[None]:
    """Hold the lock over every saved run (an flock: threads and processes alike)."""
    folder = home / "agents" / "runs"
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".claims.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def claim_state(home: Path, run_id: str, check: Callable[[RunState], None]) -> RunState:
    """Load run `run_id`, let `check` refuse it, and save it as running, all under one lock.

    Whoever claims a waiting run is the one who resumes it: a second claim made at the same
    time sees the first one's running state, and `check` refuses it.

    Raises:
        NotFoundError: no run of that id was saved.
        ForgemlError: whatever `check` raises; the saved state is left as it was.
    """
    with _runs_locked(home):
        state = load_state(home, run_id)
        check(state)
        state.stop_reason = None
        save_state(home, state)
    return state


def run_summary(state: RunState) -> dict[str, Any]:
    """How a run stands, as JSON (`agent show --json` and the API, less the transcript)."""
    return {
        "run_id": state.run_id,
        "stop_reason": state.stop_reason.value if state.stop_reason else None,
        "answer": state.answer,
        "error": state.error,
        "steps": state.steps,
        "tokens": state.tokens,
        "elapsed_s": round(state.elapsed_s, 3),
        "awaiting": [
            {"call_id": c.id, "tool": c.name, "arguments": c.arguments} for c in state.awaiting()
        ],
        "trace_ids": state.trace_ids,
        "prompt_ref": state.prompt_ref,
        "project": state.project,
    }
