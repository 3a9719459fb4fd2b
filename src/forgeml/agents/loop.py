"""The function-calling loop: ask the model, run the tools it calls, until it answers.

Each step sends the transcript and the tools' schemas through a `ChatModel`; a reply
with tool calls has them checked (unknown tool, arguments off schema: the model is told
in one sentence and the tool never runs), held if they need approval, and the rest run
concurrently, their results appended in the order the model made the calls. The run
stops on the first of: a text answer, a call waiting for approval, or a budget spent
(steps, wall time on the injected clock, tokens), and always says which (`StopReason`)
with the transcript so far. The wall-time budget holds for tool calls too: the loop waits
for a tool only until the budget ends, and tells each tool the time it has left. A
`tool_choice` that forces a call holds until the run's first tool call and is "auto"
after it, so a forced run can still answer (OpenAI's Agents SDK resets it the same way,
`reset_tool_choice`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from forgeml.agents._calls import Approvals, Clock, hold_or_check, run_calls
from forgeml.agents.spec import Budgets
from forgeml.agents.state import PendingCall, RunState, StopReason
from forgeml.agents.tools import ToolRegistry
from forgeml.agents.trace import NullTracer, Tracer, span
from forgeml.core.errors import ForgemlError
from forgeml.prompts.client import ChatModel, ChatReply

__all__ = ["PROMPT_ATTRIBUTE", "Approvals", "Clock", "ToolChoice", "run_loop"]

# a span's registry prompt version (`NAME@vN`); GenAI conventions have no name for it yet
PROMPT_ATTRIBUTE = "forgeml.prompt"


def run_loop(
    model: ChatModel,
    registry: ToolRegistry,
    state: RunState,
    budgets: Budgets,
    *,
    model_name: str = "",
    temperature: float = 0.0,
    approvals: Approvals | None = None,
    clock: Clock = time.monotonic,
    tracer: Tracer | None = None,
    choice: ToolChoice | None = None,
) -> RunState:
    """Run (or resume) `state` until the model answers, a call waits, or a budget is spent.

    Args:
        model: The chat model.
        registry: The tools the model may call.
        state: The run so far (a new one holds the system and user messages).
        budgets: Steps, seconds and tokens the whole run may spend (resumes included).
        model_name: The model's name, for the trace.
        temperature: Sampling temperature.
        approvals: The tools and calls an operator approved.
        clock: Seconds, monotonic; tests pass a fake.
        tracer: Where spans go (default nowhere).
        choice: Tool choice, parallel calls and seed of each model call (default:
            "auto", parallel, no seed).

    Returns:
        `state`, updated, with `stop_reason` set (and `answer` or `error` where they apply).
    """
    loop = _Loop(
        model, registry, budgets, approvals or Approvals(), tracer or NullTracer(),
        model_name, temperature, clock, clock() - state.elapsed_s, choice or ToolChoice(),
    )  # fmt: skip
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.request.model": model_name}
    attributes |= _prompt_attributes(state)
    with span(loop.tracer, "invoke_agent", "AGENT", None, attributes, state.messages[-1]) as root:
        trace_id = getattr(root.handle, "trace_id", None)
        if trace_id:
            state.trace_ids.append(trace_id)
        loop.parent = root.handle
        while state.stop_reason is None:
            loop.step(state)
            state.elapsed_s = loop.elapsed()
        root.outputs = {"stop_reason": state.stop_reason.value, "answer": state.answer}
        root.attributes = {"forgeml.agent.stop_reason": state.stop_reason.value}
    return state


@dataclass(frozen=True)
class ToolChoice:
    """How each model call of a run may call tools: `tool_choice` ("auto", "required",
    "none" or a tool's name; forced only until the run's first call), parallel calls, seed."""

    tool_choice: str = "auto"
    parallel_tool_calls: bool = True
    seed: int | None = None

    def options(self, state: RunState, has_tools: bool) -> dict[str, Any]:
        """The tool and seed options of the next model call of `state`."""
        options: dict[str, Any] = {} if self.seed is None else {"seed": self.seed}
        if not has_tools:
            return options
        called = any(m.get("tool_calls") for m in state.messages if m["role"] == "assistant")
        choice = "auto" if called else self.tool_choice
        if choice in ("required", "none"):
            options["tool_choice"] = choice
        elif choice != "auto":
            options["tool_choice"] = {"type": "function", "function": {"name": choice}}
        if not self.parallel_tool_calls:
            options["parallel_tool_calls"] = False
        return options


@dataclass
class _Loop:
    model: ChatModel
    registry: ToolRegistry
    budgets: Budgets
    approvals: Approvals
    tracer: Tracer
    model_name: str
    temperature: float
    clock: Clock
    # the clock's reading when the run (counting earlier parts of it) began
    origin: float
    choice: ToolChoice
    parent: Any = None

    def elapsed(self) -> float:
        return self.clock() - self.origin

    def step(self, state: RunState) -> None:
        """One turn: finish the pending calls, or else ask the model once."""
        if state.pending:
            self.finish_calls(state)
            return
        state.stop_reason = _over_budget(state, self.budgets, self.elapsed())
        if state.stop_reason is not None:
            return
        try:
            reply = self.ask(state)
        except ForgemlError as error:
            state.stop_reason, state.error = StopReason.ERROR, str(error)
            return
        state.steps += 1
        state.tokens += reply.prompt_tokens + reply.completion_tokens
        state.messages.append(_assistant_message(reply))
        if not reply.tool_calls:
            if reply.finish_reason == "length":
                # cut at the reply's bound: half an answer, or a call whose JSON never closed
                state.stop_reason = StopReason.REPLY_CUT
                state.error = (
                    f"The model's reply stopped at max_reply_tokens "
                    f"({self.budgets.max_reply_tokens}) unfinished; raise it in the budgets."
                )
                return
            state.stop_reason, state.answer = StopReason.ANSWERED, reply.content or ""
            return
        state.pending = [PendingCall(c.id, c.name, c.arguments) for c in reply.tool_calls]
        hold_or_check(state.pending, self.registry)

    def finish_calls(self, state: RunState) -> None:
        # a tool still running at the budget's end stops the run (it cannot be killed)
        deadline = self.origin + self.budgets.max_time_s
        done = run_calls(
            state.pending,
            self.registry,
            self.approvals,
            self.tracer,
            self.parent,
            deadline,
            self.clock,
        )
        if not done:
            state.stop_reason = StopReason.MAX_TIME
        elif state.awaiting():
            state.stop_reason = StopReason.AWAITING_APPROVAL
        else:
            for call in state.pending:
                state.messages.append(
                    {"role": "tool", "tool_call_id": call.id, "content": call.result}
                )
            state.pending = []

    def ask(self, state: RunState) -> ChatReply:
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": self.model_name,
            "gen_ai.request.temperature": self.temperature,
            **_prompt_attributes(state),
        }
        name = f"chat {self.model_name}".strip()
        inputs = {"messages": state.messages}
        with span(self.tracer, name, "CHAT_MODEL", self.parent, attributes, inputs) as s:
            tools = self.registry.schemas() or None
            reply = self.model.chat(
                state.messages,
                tools=tools,
                temperature=self.temperature,
                # one reply may not spend more than the run has left, nor more than a
                # reply's own bound (servers cap max_tokens: forgeml's at 4,096)
                max_tokens=min(
                    self.budgets.max_tokens - state.tokens, self.budgets.max_reply_tokens
                ),
                prompt=state.prompt_ref,
                **self.choice.options(state, tools is not None),
            )
            s.outputs = _assistant_message(reply)
            s.attributes = {
                "gen_ai.response.model": reply.model,
                "gen_ai.response.finish_reasons": [reply.finish_reason],
                "gen_ai.usage.input_tokens": reply.prompt_tokens,
                "gen_ai.usage.output_tokens": reply.completion_tokens,
            }
        return reply


def _prompt_attributes(state: RunState) -> dict[str, Any]:
    """The registry prompt version the run's messages began from, when they did."""
    return {PROMPT_ATTRIBUTE: state.prompt_ref} if state.prompt_ref else {}


def _over_budget(state: RunState, budgets: Budgets, elapsed_s: float) -> StopReason | None:
    if state.steps >= budgets.max_steps:
        return StopReason.MAX_STEPS
    if elapsed_s >= budgets.max_time_s:
        return StopReason.MAX_TIME
    if state.tokens >= budgets.max_tokens:
        return StopReason.MAX_TOKENS
    return None


def _assistant_message(reply: ChatReply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.tool_calls
        ]
    return message
