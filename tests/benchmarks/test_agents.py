from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from _bfcl import openai_tools
from agents import (
    ModelCall,
    RecordingModel,
    judge_run,
    recording_tool,
    validate_calls,
    with_tools_prompt,
)
from forgeml.agents import (
    Budgets,
    RunState,
    StopReason,
    ToolArgumentsError,
    ToolRegistry,
    run_loop,
)
from forgeml.prompts.client import ChatReply, ToolCall

PLAY = {
    "name": "spotify.play",
    "description": "Play tracks from an artist for a time.",
    "parameters": {
        "type": "dict",
        "properties": {
            "artist": {"type": "string", "description": "The artist."},
            "duration": {"type": "integer", "description": "Minutes."},
        },
        "required": ["artist", "duration"],
    },
}
TOOLS = openai_tools([PLAY])


@pytest.mark.parametrize(
    ("written", "calls", "reason"),
    [
        (
            [("spotify_play", '{"artist": "Maroon 5", "duration": 15}')],
            [{"spotify_play": {"artist": "Maroon 5", "duration": 15}}],
            "",
        ),
        ([], [], "no call"),
        ([("play", "{}")], [], "called play, which is not declared"),
        ([("spotify_play", "{artist")], [], "the arguments of spotify_play are not JSON"),
        (
            [("spotify_play", '{"artist": "Maroon 5", "duration": "15"}')],
            [],
            "the arguments of spotify_play are off its schema: '15' is not of type 'integer'",
        ),
        (
            [("spotify_play", '{"artist": "Maroon 5"}')],
            [],
            "the arguments of spotify_play are off its schema: 'duration' is a required property",
        ),
    ],
)
def test_validate_calls_checks_each_call_against_its_tool(
    written: list[tuple[str, str]], calls: list[Any], reason: str
) -> None:
    assert validate_calls(written, TOOLS) == (calls, reason)


def test_the_recording_tool_shows_the_bfcl_schema_and_refuses_calls_off_it() -> None:
    tool = recording_tool(TOOLS[0])
    assert tool.schema() == TOOLS[0]
    with pytest.raises(ToolArgumentsError, match="'duration' is a required property"):
        tool.validate('{"artist": "Maroon 5"}')
    arguments = tool.validate('{"artist": "Maroon 5", "duration": 15}')
    assert json.loads(tool.function(**arguments)) == {
        "recorded": "spotify_play",
        "arguments": {"artist": "Maroon 5", "duration": 15},
    }


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class CallingModel:
    """Calls spotify_play every time, spending `seconds` on the fake clock and 300 tokens."""

    def __init__(self, clock: FakeClock, seconds: float) -> None:
        self.clock, self.seconds = clock, seconds

    def chat(self, messages: list[dict[str, Any]], **options: Any) -> ChatReply:
        assert options["tool_choice"] == "required"  # the recorder forces a call each turn
        self.clock.now += self.seconds
        call = ToolCall("call_1", "spotify_play", '{"artist": "Maroon 5", "duration": 15}')
        return ChatReply(None, "tool_calls", 250, 50, [call])


@pytest.mark.parametrize(
    ("limits", "seconds", "stop"),
    [
        ({"max_steps": 2}, 1.0, StopReason.MAX_STEPS),
        ({"max_time_s": 5.0}, 2.0, StopReason.MAX_TIME),
        ({"max_tokens": 1_000, "max_reply_tokens": 128}, 1.0, StopReason.MAX_TOKENS),
    ],
)
def test_a_run_that_never_answers_stops_on_its_budget_and_is_judged_within_it(
    limits: dict[str, Any], seconds: float, stop: StopReason
) -> None:
    clock = FakeClock()
    model = RecordingModel(CallingModel(clock, seconds), clock, tool_choice="required")
    budgets = Budgets(**limits)
    state = RunState(run_id="r", spec={}, messages=[{"role": "user", "content": "Play."}])
    registry = ToolRegistry([recording_tool(TOOLS[0])])
    state = run_loop(model, registry, state, budgets, clock=clock)
    assert state.stop_reason is stop
    judged = judge_run(state, budgets, model.calls)
    assert judged["within_budgets"], judged["broken"]
    assert model.calls[0] == ModelCall(
        0.0, 0, min(budgets.max_tokens, budgets.max_reply_tokens), 50
    )


def _state(reason: StopReason | None, steps: int = 1, tokens: int = 0, elapsed: float = 0.0) -> Any:
    state = RunState(
        run_id="r", spec={}, messages=[], steps=steps, tokens=tokens, elapsed_s=elapsed
    )
    state.stop_reason = reason
    return state


BUDGETS = Budgets(max_steps=3, max_time_s=10.0, max_tokens=1_000, max_reply_tokens=100)


@pytest.mark.parametrize(
    ("state", "calls", "broken"),
    [
        (_state(None), [ModelCall(0.0, 0, 100, 10)], "no structured stop reason"),
        (
            _state(StopReason.ANSWERED, steps=4),
            [ModelCall(0.0, 0, 100, 10)] * 4,
            "4 model calls for 3 steps",
        ),
        (
            _state(StopReason.ANSWERED, steps=2, elapsed=12.0),
            [ModelCall(0.0, 0, 100, 10), ModelCall(11.0, 300, 100, 10)],
            "model call 2 started after a budget was spent",
        ),
        (
            _state(StopReason.ANSWERED, steps=2, tokens=1_000),
            [ModelCall(0.0, 0, 100, 10), ModelCall(1.0, 950, 100, 10)],
            "model call 2 asked for 100 of 50 tokens",
        ),
        (
            _state(StopReason.ANSWERED),
            [ModelCall(0.0, 0, 100, 101)],
            "model call 1 spent 101 tokens",
        ),
        (
            _state(StopReason.MAX_TOKENS, tokens=500),
            [ModelCall(0.0, 0, 100, 10)],
            "stopped for max_tokens with that budget unspent",
        ),
    ],
)
def test_judge_run_names_the_broken_budget(state: Any, calls: list[ModelCall], broken: str) -> None:
    judged = judge_run(state, BUDGETS, calls)
    assert not judged["within_budgets"]
    assert broken in judged["broken"]


@pytest.mark.slow
def test_the_free_text_prompt_is_the_servers_tools_prompt(smollm2_bundle: Path) -> None:
    from transformers import AutoTokenizer

    from forgeml.serve.tool_prompt import render_chat

    tokenizer = AutoTokenizer.from_pretrained(str(smollm2_bundle))
    for messages in (
        [{"role": "user", "content": "Play Maroon 5 for 15 minutes."}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Play."}],
    ):
        served = render_chat(tokenizer, messages, TOOLS)
        assert render_chat(tokenizer, with_tools_prompt(messages, TOOLS), None) == served
        assert "spotify_play" in served
