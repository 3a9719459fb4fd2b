from __future__ import annotations

import json
import threading

import pytest

from forgeml.agents import (
    Approvals,
    Budgets,
    StopReason,
    ToolChoice,
    ToolRegistry,
    calculator_tool,
    make_tool,
    run_loop,
)
from forgeml.agents.tools import tool_time_left
from forgeml.core.errors import GeneratorError
from forgeml.prompts.client import ChatReply
from tests._wait import FakeClock
from tests.agents.conftest import BUDGETS, RecordingTracer, ScriptedModel, calls, new_state, text


def registry(*extra: object) -> ToolRegistry:
    return ToolRegistry([calculator_tool(), *extra])  # type: ignore[list-item]


def test_a_tool_call_then_text_is_answered_with_the_whole_transcript() -> None:
    model = ScriptedModel([calls(("calculator", {"expression": "2 + 2"})), text("4")])

    state = run_loop(model, registry(), new_state(), BUDGETS)

    assert (state.stop_reason, state.answer, state.steps, state.tokens) == (
        StopReason.ANSWERED, "4", 2, 30,
    )  # fmt: skip
    assert [m["role"] for m in state.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert state.messages[3] == {"role": "tool", "tool_call_id": "c1", "content": "4"}
    assert model.seen[0]["tools"][0]["function"]["name"] == "calculator"
    assert model.seen[1]["messages"][-1]["content"] == "4"


@pytest.mark.parametrize(
    ("choice", "first"),
    [
        (ToolChoice("calculator", False, 7),
         {"tool_choice": {"type": "function", "function": {"name": "calculator"}},
          "parallel_tool_calls": False, "seed": 7}),
        (ToolChoice("required"), {"tool_choice": "required"}),
        (ToolChoice("none", seed=0), {"tool_choice": "none", "seed": 0}),
        (ToolChoice(), {}),
    ],
)  # fmt: skip
def test_a_forced_tool_choice_holds_until_the_first_call_then_is_auto(
    choice: ToolChoice, first: dict[str, object]
) -> None:
    model = ScriptedModel([calls(("calculator", {"expression": "2 + 2"})), text("4")])

    state = run_loop(model, registry(), new_state(), BUDGETS, choice=choice)

    assert state.stop_reason is StopReason.ANSWERED
    keys = ("tool_choice", "parallel_tool_calls", "seed")
    sent = [{key: seen[key] for key in keys if key in seen} for seen in model.seen]
    then = {key: value for key, value in first.items() if key != "tool_choice"}
    assert sent == [first, then]


def test_a_run_without_tools_sends_no_tool_choice() -> None:
    model = ScriptedModel([text("4")])

    run_loop(model, ToolRegistry([]), new_state(), BUDGETS, choice=ToolChoice("required"))

    assert "tool_choice" not in model.seen[0] and model.seen[0]["tools"] is None


def test_parallel_calls_run_concurrently_and_results_follow_call_order() -> None:
    both_running = threading.Barrier(3, timeout=10)  # three calls that meet each other

    def slow_echo(word: str) -> str:
        """Echo a word once every call is running.

        Args:
            word: The word.
        """
        both_running.wait()  # a BrokenBarrierError if the calls ran one after another
        return word

    model = ScriptedModel(
        [calls(*(("slow_echo", {"word": w}) for w in ("a", "b", "c"))), text("done")]
    )

    state = run_loop(model, registry(make_tool(slow_echo)), new_state(), BUDGETS)

    assert state.stop_reason is StopReason.ANSWERED
    tool_messages = [m for m in state.messages if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages] == [
        ("c1", "a"), ("c2", "b"), ("c3", "c"),
    ]  # fmt: skip


def test_a_call_off_the_schema_is_not_run_and_the_model_is_told_why() -> None:
    ran: list[str] = []

    def record(note: str) -> str:
        """Record a note.

        Args:
            note: The note.
        """
        ran.append(note)
        return "ok"

    model = ScriptedModel(
        [
            calls(("record", {"note": 5, "extra": 1}), ("nope", "{}"), ("record", "{bad")),
            text("sorry"),
        ]
    )

    state = run_loop(model, registry(make_tool(record)), new_state(), BUDGETS)

    assert ran == []
    contents = [m["content"] for m in state.messages if m["role"] == "tool"]
    assert contents == [
        "error: The arguments for record are off its schema: note: Input should be a valid string.",
        "error: There is no tool named 'nope' (tools: calculator, record).",
        "error: The arguments for record are not valid JSON; send one JSON object.",
    ]
    assert state.stop_reason is StopReason.ANSWERED


def test_a_tool_error_is_one_sentence_for_the_model_and_the_run_goes_on() -> None:
    model = ScriptedModel([calls(("calculator", {"expression": "1 / 0"})), text("undefined")])

    state = run_loop(model, registry(), new_state(), BUDGETS)

    assert (
        state.messages[3]["content"]
        == "error: The expression cannot be computed: division by zero."
    )
    assert state.answer == "undefined"


def test_max_steps_stops_with_the_partial_transcript() -> None:
    model = ScriptedModel([calls(("calculator", {"expression": "1 + 1"}))] * 5)

    state = run_loop(model, registry(), new_state(), Budgets(max_steps=2))

    assert (state.stop_reason, state.steps, state.answer) == (StopReason.MAX_STEPS, 2, None)
    assert [m["role"] for m in state.messages][2:] == ["assistant", "tool", "assistant", "tool"]


def test_max_time_on_the_injected_clock_stops_the_run() -> None:
    clock = FakeClock()

    def tick(seconds: float) -> float:
        """Let time pass.

        Args:
            seconds: How long.
        """
        clock.advance(seconds)
        return seconds

    model = ScriptedModel([calls(("tick", {"seconds": 40}))] * 3 + [text("never")])

    state = run_loop(
        model, registry(make_tool(tick)), new_state(), Budgets(max_time_s=60), clock=clock
    )

    assert (state.stop_reason, state.steps, state.elapsed_s) == (StopReason.MAX_TIME, 2, 80)


def test_a_tool_blocking_past_the_time_budget_stops_the_run_with_the_transcript() -> None:
    clock = FakeClock()
    release = threading.Event()

    def hang() -> str:
        """Block until the test lets go."""
        clock.advance(61)  # the budget ends while the tool still runs
        release.wait()
        return "late"

    model = ScriptedModel([calls(("hang", "{}")), text("never")])
    try:
        state = run_loop(
            model, registry(make_tool(hang)), new_state(), Budgets(max_time_s=60), clock=clock
        )
    finally:
        release.set()

    assert (state.stop_reason, state.steps, state.elapsed_s) == (StopReason.MAX_TIME, 1, 61)
    assert [(c.name, c.result) for c in state.pending] == [("hang", None)]
    assert [m["role"] for m in state.messages] == ["system", "user", "assistant"]
    assert len(model.replies) == 1  # the model was not asked again


def test_each_tool_is_told_the_time_the_run_has_left() -> None:
    clock = FakeClock()
    told: list[float | None] = []

    def tick(seconds: float) -> float:
        """Let time pass.

        Args:
            seconds: How long.
        """
        told.append(tool_time_left())
        clock.advance(seconds)
        return seconds

    model = ScriptedModel([calls(("tick", {"seconds": 20})), calls(("tick", {"seconds": 5})),
                           text("done")])  # fmt: skip

    run_loop(model, registry(make_tool(tick)), new_state(), Budgets(max_time_s=60), clock=clock)

    assert told == [60, 40]
    assert tool_time_left() is None


def test_max_tokens_stops_the_run_and_caps_each_reply() -> None:
    model = ScriptedModel([calls(("calculator", {"expression": "1"}))] * 5)

    state = run_loop(model, registry(), new_state(), Budgets(max_tokens=40))

    assert (state.stop_reason, state.steps, state.tokens) == (StopReason.MAX_TOKENS, 3, 45)
    assert [seen["max_tokens"] for seen in model.seen] == [40, 25, 10]


def test_one_reply_never_asks_for_more_than_max_reply_tokens() -> None:
    model = ScriptedModel([calls(("calculator", {"expression": "1"})), text("1")])

    run_loop(model, registry(), new_state(), Budgets(max_tokens=16_000, max_reply_tokens=512))

    assert [seen["max_tokens"] for seen in model.seen] == [512, 512]


def test_a_failing_model_stops_the_run_with_its_sentence() -> None:
    model = ScriptedModel([GeneratorError("The language model at x could not be reached: boom")])

    state = run_loop(model, registry(), new_state(), BUDGETS)

    assert state.stop_reason is StopReason.ERROR
    assert state.error == "The language model at x could not be reached: boom"


def test_a_call_needing_approval_pauses_the_run_while_the_others_run() -> None:
    sent: list[str] = []

    def send_email(to: str) -> str:
        """Send an email.

        Args:
            to: The address.
        """
        sent.append(to)
        return "sent"

    tools = registry(make_tool(send_email, requires_approval=True))
    model = ScriptedModel(
        [calls(("send_email", {"to": "a@b.c"}), ("calculator", {"expression": "2"})), text("ok")]
    )

    state = run_loop(model, tools, new_state(), BUDGETS)

    assert (state.stop_reason, sent) == (StopReason.AWAITING_APPROVAL, [])
    assert [c.id for c in state.awaiting()] == ["c1"]
    assert state.pending[1].result == "2"  # the free call ran; its result waits in order

    state.stop_reason = None
    run_loop(model, tools, state, BUDGETS, approvals=Approvals(calls=frozenset({"c1"})))

    assert (state.stop_reason, sent, state.answer) == (StopReason.ANSWERED, ["a@b.c"], "ok")
    assert [m.get("tool_call_id") for m in state.messages if m["role"] == "tool"] == ["c1", "c2"]


def test_an_approved_tool_runs_without_pausing_and_a_denied_call_never_runs() -> None:
    sent: list[str] = []

    def send_email(to: str) -> str:
        """Send an email.

        Args:
            to: The address.
        """
        sent.append(to)
        return "sent"

    tools = registry(make_tool(send_email, requires_approval=True))
    model = ScriptedModel([calls(("send_email", {"to": "a"})), text("ok")])
    state = run_loop(
        model, tools, new_state(), BUDGETS, approvals=Approvals(tools=frozenset({"send_email"}))
    )
    assert (state.stop_reason, sent) == (StopReason.ANSWERED, ["a"])

    model = ScriptedModel([calls(("send_email", {"to": "b"})), text("not sent")])
    state = run_loop(model, tools, new_state(), BUDGETS)
    state.stop_reason = None
    run_loop(model, tools, state, BUDGETS, approvals=Approvals(denied=frozenset({"c1"})))
    assert sent == ["a"]
    assert state.messages[3]["content"] == "The operator did not approve this call; it was not run."


def test_every_step_is_a_span_with_gen_ai_attributes() -> None:
    tracer = RecordingTracer()
    model = ScriptedModel([calls(("calculator", {"expression": "6 * 7"})), text("42")])

    run_loop(model, registry(), new_state(), BUDGETS, model_name="smol", tracer=tracer)

    names = [(s["name"], s["kind"], s["parent"]) for s in tracer.spans]
    assert names == [
        ("invoke_agent", "AGENT", None),
        ("chat smol", "CHAT_MODEL", 0),
        ("execute_tool calculator", "TOOL", 0),
        ("chat smol", "CHAT_MODEL", 0),
    ]
    assert not any(s["open"] for s in tracer.spans)
    chat, tool = tracer.spans[1]["attributes"], tracer.spans[2]["attributes"]
    assert chat["gen_ai.operation.name"] == "chat"
    assert chat["gen_ai.request.model"] == "smol"
    assert (chat["gen_ai.usage.input_tokens"], chat["gen_ai.usage.output_tokens"]) == (10, 5)
    assert tool == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "calculator",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
    }
    assert tracer.spans[2]["outputs"] == "42"
    assert tracer.spans[0]["outputs"] == {"stop_reason": "answered", "answer": "42"}


@pytest.mark.parametrize("result", [{"a": [1, 2]}, [1, "x"], 3.5, None])
def test_a_tool_result_is_sent_as_json(result: object) -> None:
    def give() -> object:
        """Give the value."""
        return result

    model = ScriptedModel([calls(("give", "{}")), text("ok")])

    state = run_loop(model, registry(make_tool(give)), new_state(), BUDGETS)

    assert json.loads(state.messages[3]["content"]) == result


def test_a_reply_cut_at_max_reply_tokens_is_no_answer() -> None:
    """A forced call cut short comes back as text: it is not the agent's answer."""
    cut = ChatReply('<tool_call>{"name": "calculator", "argu', "length", 10, 128, [], "scripted")
    model = ScriptedModel([cut])

    state = run_loop(model, registry(), new_state(), BUDGETS)

    assert (state.stop_reason, state.answer, state.steps) == (StopReason.REPLY_CUT, None, 1)
    assert state.error == (
        f"The model's reply stopped at max_reply_tokens ({BUDGETS.max_reply_tokens}) "
        "unfinished; raise it in the budgets."
    )


@pytest.mark.parametrize("reason", list(StopReason))
def test_every_stop_but_an_answer_or_a_wait_for_approval_is_a_failure(reason: StopReason) -> None:
    """`agent run` exits 1 on these: a new stop reason is a failure unless said otherwise."""
    ongoing = {StopReason.ANSWERED, StopReason.AWAITING_APPROVAL}
    assert reason.failed is (reason not in ongoing)
