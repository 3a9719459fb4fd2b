from __future__ import annotations

import json
from pathlib import Path

import pytest

from forgeml.agents import (
    Approvals,
    RunNotWaitingError,
    StopReason,
    ToolContext,
    load_state,
    parse_spec,
    resume_run,
    start_run,
)
from forgeml.agents.state import state_path
from forgeml.core.errors import InvalidNameError, NotFoundError
from forgeml.core.workspace import Workspace
from tests.agents.conftest import ScriptedModel, calls, text
from tests.data.conftest import audit_events

SPEC = parse_spec(
    {
        "model": {"url": "http://127.0.0.1:1/v1", "name": "smol"},
        "tools": [{"name": "calculator", "requires_approval": True}],
        "budgets": {"max_steps": 4},
    },
    "agent.yaml",
)


def test_a_run_is_saved_however_it_stops(tmp_path: Path) -> None:
    model = ScriptedModel([text("hello")])

    state = start_run(SPEC, "hi", home=tmp_path, context=ToolContext(), model=model)

    saved = load_state(tmp_path, state.run_id)
    assert (saved.stop_reason, saved.answer) == (StopReason.ANSWERED, "hello")
    assert saved.spec["model"]["name"] == "smol"
    assert saved.messages[1] == {"role": "user", "content": "hi"}


def test_a_run_waiting_for_approval_resumes_from_its_saved_state(tmp_path: Path) -> None:
    first = ScriptedModel([calls(("calculator", {"expression": "6 * 7"}))])
    waiting = start_run(SPEC, "6 times 7?", home=tmp_path, context=ToolContext(), model=first)
    assert waiting.stop_reason is StopReason.AWAITING_APPROVAL
    assert [(c.id, c.name) for c in load_state(tmp_path, waiting.run_id).awaiting()] == [
        ("c1", "calculator")
    ]

    second = ScriptedModel([text("42")])
    done = resume_run(
        waiting.run_id,
        Approvals(calls=frozenset({"c1"})),
        home=tmp_path,
        context=ToolContext(),
        model=second,
    )

    assert (done.stop_reason, done.answer, done.steps) == (StopReason.ANSWERED, "42", 2)
    assert second.seen[0]["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "42"}
    assert load_state(tmp_path, waiting.run_id).stop_reason is StopReason.ANSWERED


def test_approving_what_a_run_does_not_wait_on_is_refused(tmp_path: Path) -> None:
    model = ScriptedModel([calls(("calculator", {"expression": "1"}))])
    waiting = start_run(SPEC, "1?", home=tmp_path, context=ToolContext(), model=model)

    with pytest.raises(NotFoundError) as raised:
        resume_run(waiting.run_id, Approvals(calls=frozenset({"c9"})), home=tmp_path,
                   context=ToolContext(), model=model)  # fmt: skip
    assert str(raised.value) == f"Agent run {waiting.run_id} waits on no call c9 (it waits on: c1)."

    answered = start_run(SPEC, "hi", home=tmp_path, context=ToolContext(),
                         model=ScriptedModel([text("hello")]))  # fmt: skip
    with pytest.raises(RunNotWaitingError, match="is not waiting for approval"):
        resume_run(answered.run_id, Approvals(calls=frozenset({"c1"})), home=tmp_path,
                   context=ToolContext(), model=model)  # fmt: skip


def test_an_unknown_or_path_like_run_id_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=r"There is no saved agent run abc\."):
        load_state(tmp_path, "abc")
    with pytest.raises(InvalidNameError):
        state_path(tmp_path, "../../etc/passwd")


def test_the_saved_state_is_plain_json(tmp_path: Path) -> None:
    model = ScriptedModel([calls(("calculator", {"expression": "1"}))])
    state = start_run(SPEC, "1?", home=tmp_path, context=ToolContext(), model=model)

    saved = json.loads(state_path(tmp_path, state.run_id).read_text())

    assert saved["stop_reason"] == "awaiting_approval"
    assert saved["pending"][0]["needs_approval"] is True


def test_an_approval_is_written_to_the_audit_log(workspace: Workspace) -> None:
    home, context = workspace.settings.home, ToolContext(workspace=workspace)
    model = ScriptedModel([calls(("calculator", {"expression": "1"})), text("1")])
    waiting = start_run(SPEC, "1?", home=home, context=context, model=model)

    resume_run(waiting.run_id, Approvals(calls=frozenset({"c1"})), home=home, context=context,
               model=model)  # fmt: skip

    (event,) = audit_events(workspace)
    assert (event.action, event.object_ref, event.actor) == (
        "agent.approve", f"agent-run:{waiting.run_id}", "tester",
    )  # fmt: skip
    assert event.payload == {"calls": ["c1"], "tools": [], "denied": []}
