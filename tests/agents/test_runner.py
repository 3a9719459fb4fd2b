from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest

from forgeml import agents
from forgeml.agents import (
    ApprovalRequestError,
    Approvals,
    CallNotWaitingError,
    RunNotWaitingError,
    StopReason,
    ToolContext,
    claim_run,
    load_state,
    parse_spec,
    prepare_run,
    resume_run,
    run_summary,
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

    with pytest.raises(CallNotWaitingError) as raised:
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


def test_two_approvals_at_once_resume_the_run_once(tmp_path: Path) -> None:
    model = ScriptedModel([calls(("calculator", {"expression": "6 * 7"})), text("42")])
    waiting = start_run(SPEC, "6 times 7?", home=tmp_path, context=ToolContext(), model=model)
    both_ready = threading.Barrier(2, timeout=10)
    outcomes: list[object] = []

    def approve() -> None:
        both_ready.wait()
        try:
            approvals = Approvals(calls=frozenset({"c1"}))
            resumed = resume_run(
                waiting.run_id, approvals, home=tmp_path, context=ToolContext(), model=model
            )
            outcomes.append(resumed)
        except RunNotWaitingError as error:
            outcomes.append(error)

    threads = [threading.Thread(target=approve) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    refused = [o for o in outcomes if isinstance(o, RunNotWaitingError)]
    assert len(refused) == 1
    assert "is not waiting for approval" in str(refused[0])
    saved = load_state(tmp_path, waiting.run_id)
    assert (saved.stop_reason, saved.answer) == (StopReason.ANSWERED, "42")
    assert [m["content"] for m in saved.messages if m["role"] == "tool"] == ["42"]


def test_a_run_being_driven_is_saved_as_running_and_cannot_be_approved(tmp_path: Path) -> None:
    run = prepare_run(SPEC, "1?", home=tmp_path, context=ToolContext(), model=ScriptedModel([]))

    assert load_state(tmp_path, run.state.run_id).stop_reason is None
    with pytest.raises(RunNotWaitingError) as raised:
        claim_run(run.state.run_id, Approvals(calls=frozenset({"c1"})), home=tmp_path,
                  context=ToolContext(), model=ScriptedModel([]))  # fmt: skip
    assert str(raised.value) == (
        f"Agent run {run.state.run_id} is not waiting for approval (it is running)."
    )


def test_approving_a_tool_the_agent_does_not_have_saves_nothing(tmp_path: Path) -> None:
    with pytest.raises(ApprovalRequestError) as raised:
        start_run(SPEC, "1?", home=tmp_path, context=ToolContext(), model=ScriptedModel([]),
                  approvals=Approvals(tools=frozenset({"shell"})))  # fmt: skip

    assert str(raised.value) == (
        "Cannot approve shell: the agent has no such tool (tools: calculator)."
    )
    assert not (tmp_path / "agents" / "runs").exists()


def test_the_sdk_runs_approves_and_shows_like_the_commands(
    workspace: Workspace, mlflow_template: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    home = workspace.settings.home
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(mlflow_template, home / "mlflow.db")
    model = ScriptedModel([calls(("calculator", {"expression": "2 ** 10"})), text("1024")])

    waiting = agents.run(SPEC, "2 to the 10th?", workspace=workspace, model=model)
    assert [c.id for c in waiting.awaiting()] == ["c1"]
    done = agents.approve(waiting.run_id, ["c1"], workspace=workspace, model=model)

    assert (done.stop_reason, done.answer) == (StopReason.ANSWERED, "1024")
    shown = agents.show(done.run_id, home=home)
    assert run_summary(shown) == run_summary(done)
    assert len(shown.trace_ids) == 2  # the run and its resumption, each traced
    with pytest.raises(ApprovalRequestError, match="Name a call to approve"):
        agents.approve(done.run_id, workspace=workspace)
    with pytest.raises(ApprovalRequestError, match="c1 is both approved and denied"):
        agents.approve(done.run_id, ["c1"], deny=["c1"], workspace=workspace)


def test_a_failure_the_loop_does_not_stop_on_is_raised_and_saved_as_the_runs_error(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([RuntimeError("a bug in the client")])

    with pytest.raises(RuntimeError, match="a bug in the client"):
        start_run(SPEC, "1?", home=tmp_path, context=ToolContext(), model=model)

    (saved,) = (tmp_path / "agents" / "runs").glob("*.json")
    state = load_state(tmp_path, saved.stem)
    assert (state.stop_reason, state.error) == (
        StopReason.ERROR, "The run failed (RuntimeError: a bug in the client).",
    )  # fmt: skip
