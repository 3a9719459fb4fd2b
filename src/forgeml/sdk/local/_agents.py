"""The local side of the agent runs' seam (`forgeml.sdk.agents`, `forgeml agent`).

The server drives a run in the background and answers at once; here a run is driven in the
call, so `start` and `approve` answer once it has stopped (answered, waiting for approval,
or out of budget) and `wait` only shows it. Either way `wait` answers the stopped run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from forgeml.agents import RunState


def shown(state: RunState) -> dict[str, Any]:
    """A run as `forgeml agent show --json` prints it: its summary and its transcript."""
    from forgeml.agents.state import run_summary

    return run_summary(state) | {"messages": state.messages}


class LocalAgents:
    """Agent runs saved under the local workspace, as `forgeml.client.Agents` answers them
    remotely."""

    def start(
        self, spec: Mapping[str, Any], task: str, approve: Sequence[str] = ()
    ) -> dict[str, Any]:
        """Run the agent `spec` (its YAML's content) on `task` until it stops; its summary."""
        from forgeml.agents import parse_spec
        from forgeml.agents.runs import run
        from forgeml.agents.state import run_summary

        return run_summary(run(parse_spec(dict(spec), "spec"), task, approve_tools=approve))

    def show(self, run_id: str) -> dict[str, Any]:
        from forgeml.agents.runs import show

        return shown(show(run_id))

    def wait(
        self,
        run_id: str,
        *,
        poll_s: float = 0.2,
        sleep: Callable[[float], None] = time.sleep,
    ) -> dict[str, Any]:
        """The run, stopped already: a local run stops before `start` or `approve` answers."""
        return self.show(run_id)

    def approve(
        self,
        run_id: str,
        calls: Sequence[str] = (),
        deny: Sequence[str] = (),
        tools: Sequence[str] = (),
    ) -> dict[str, Any]:
        """Let held calls (or tools) run, refuse others, and resume the run until it stops."""
        from forgeml.agents.runs import approve
        from forgeml.agents.state import run_summary

        return run_summary(approve(run_id, calls, deny=deny, tools=tools))
