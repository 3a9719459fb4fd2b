"""Running one reply's tool calls: checked, approved or held, concurrent, in call order."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

import orjson

from forgeml.agents.state import PendingCall
from forgeml.agents.tools import ToolArgumentsError, ToolRegistry
from forgeml.agents.trace import Tracer, span
from forgeml.core.errors import ForgemlError

MAX_WORKERS = 8
DENIED = "The operator did not approve this call; it was not run."


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


def run_calls(
    calls: list[PendingCall],
    registry: ToolRegistry,
    approvals: Approvals,
    tracer: Tracer,
    parent: Any,
    timeout_s: float,
) -> bool:
    """Run every call that may run now, concurrently; False if time ran out first.

    Calls still waiting for approval keep `result` None; denied ones get `DENIED`.
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
    pool = ThreadPoolExecutor(max_workers=min(MAX_WORKERS, len(runnable)))
    futures: dict[Future[str], PendingCall] = {
        pool.submit(_run_one, call, registry, tracer, parent): call for call in runnable
    }
    done, not_done = wait(futures, timeout=max(timeout_s, 0.0))
    # a tool still running past the budget cannot be killed from here; it is left behind
    pool.shutdown(wait=False, cancel_futures=True)
    for future in done:
        futures[future].result = future.result()
    return not not_done


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
