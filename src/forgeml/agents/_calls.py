"""Running one reply's tool calls: checked, approved or held, concurrent, in call order.

Each call runs on a daemon thread of its own (at most `MAX_WORKERS` at once), and the loop
waits for them only until the run's wall-time deadline on its injected clock. A Python
thread cannot be killed, so a tool still running then is left behind: daemon threads, so
it cannot keep the process alive either, and its late result is dropped. The tools
themselves are told the time left (`tools.tool_time_left`) so that they stop on their own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from typing import Any

import orjson

from forgeml.agents.state import PendingCall
from forgeml.agents.tools import ToolArgumentsError, ToolRegistry, time_limit
from forgeml.agents.trace import Tracer, span
from forgeml.core.errors import ForgemlError

MAX_WORKERS = 8
DENIED = "The operator did not approve this call; it was not run."
# how often the wait looks at the injected clock: responsiveness only, never a budget
_POLL_S = 0.05

Clock = Callable[[], float]


@dataclass(frozen=True)
class Approvals:
    """What an operator let through: whole tools by name, single calls by id, refusals."""

    tools: frozenset[str] = frozenset()
    calls: frozenset[str] = frozenset()
    denied: frozenset[str] = field(default_factory=frozenset)

    def allows(self, call: PendingCall) -> bool:
        return call.name in self.tools or call.id in self.calls


def hold_or_check(calls: list[PendingCall], registry: ToolRegistry) -> None:
    """Answer calls that cannot run (unknown tool, arguments off schema); mark approvals."""
    for call in calls:
        tool = registry.get(call.name)
        if tool is None:
            known = ", ".join(registry.names()) or "none"
            call.result = f"error: There is no tool named {call.name!r} (tools: {known})."
            continue
        try:
            tool.validate(call.arguments)
        except ToolArgumentsError as error:
            call.result = f"error: {error}"
            continue
        call.needs_approval = tool.requires_approval


@dataclass(frozen=True)
class _Runner:
    registry: ToolRegistry
    tracer: Tracer
    parent: Any
    deadline: float
    clock: Clock
    slots: threading.Semaphore

    def start(self, call: PendingCall) -> Future[str]:
        future: Future[str] = Future()

        def work() -> None:
            with self.slots:
                if not future.set_running_or_notify_cancel():
                    return  # the deadline passed while it queued
                try:
                    with time_limit(max(self.deadline - self.clock(), 0.0)):
                        future.set_result(_run_one(call, self.registry, self.tracer, self.parent))
                except BaseException as error:  # handed to the waiting loop, not lost here
                    future.set_exception(error)

        threading.Thread(target=work, name=f"agent-tool-{call.name}", daemon=True).start()
        return future


def run_calls(
    calls: list[PendingCall],
    registry: ToolRegistry,
    approvals: Approvals,
    tracer: Tracer,
    parent: Any,
    deadline: float,
    clock: Clock,
) -> bool:
    """Run every call that may run now, concurrently; False if `deadline` came first.

    Calls still waiting for approval keep `result` None; denied ones get `DENIED`; calls
    unfinished at `deadline` (on `clock`) keep `result` None.
    """
    runnable = []
    for call in calls:
        if call.result is not None:
            continue
        if call.id in approvals.denied:
            call.result = DENIED
        elif not call.needs_approval or approvals.allows(call):
            runnable.append(call)
    if not runnable:
        return True
    runner = _Runner(
        registry, tracer, parent, deadline, clock, threading.Semaphore(MAX_WORKERS)
    )  # fmt: skip
    futures = {runner.start(call): call for call in runnable}
    waiting = set(futures)
    while waiting:
        left = deadline - clock()
        if left <= 0:
            break
        _, waiting = wait(waiting, timeout=min(left, _POLL_S))
    for future in waiting:
        future.cancel()  # those still queued never start; running ones are left behind
    for future, call in futures.items():
        if future.done() and not future.cancelled():
            call.result = future.result()
    return not waiting


def _run_one(call: PendingCall, registry: ToolRegistry, tracer: Tracer, parent: Any) -> str:
    tool = registry.get(call.name)
    if tool is None:  # hold_or_check answered unknown tools already; never reached
        return f"error: There is no tool named {call.name!r}."
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id,
        "gen_ai.tool.type": "function",
    }
    with span(tracer, f"execute_tool {call.name}", "TOOL", parent, attributes, call.arguments) as s:
        content = _content(tool.function, tool.validate(call.arguments))
        s.outputs = content
        if content.startswith("error: "):
            s.error = content
    return content


def _content(function: Callable[..., Any], arguments: dict[str, Any]) -> str:
    """The tool message's text: the result as JSON, or `error: <sentence>`."""
    try:
        result = function(**arguments)
    except ForgemlError as error:
        return f"error: {error}"
    except Exception as error:  # a tool's bug must not end the run; the model is told
        return f"error: The tool failed ({type(error).__name__}: {error})."
    if isinstance(result, str):
        return result
    return orjson.dumps(result, default=str).decode()
