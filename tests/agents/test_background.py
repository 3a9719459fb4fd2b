from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forgeml.agents import StopReason, ToolContext, load_state, parse_spec, prepare_run
from forgeml.agents.background import BackgroundRuns
from forgeml.prompts.client import ChatReply
from tests._wait import wait_until
from tests.agents.conftest import text

SPEC = parse_spec({"model": {"url": "http://127.0.0.1:1/v1", "name": "smol"}}, "agent.yaml")


@dataclass
class HeldModel:
    """Answers once the test releases it; counts the replies it was asked for."""

    release: threading.Event = field(default_factory=threading.Event)
    asked: int = 0

    def chat(self, messages: list[dict[str, Any]], **options: Any) -> ChatReply:
        self.asked += 1
        self.release.wait()
        return text("done")


class BrokenModel:
    def chat(self, messages: list[dict[str, Any]], **options: Any) -> ChatReply:
        raise RuntimeError("a bug in the client")


def test_close_waits_for_the_run_being_driven_and_stops_the_queued_one(tmp_path: Path) -> None:
    model = HeldModel()
    runs = BackgroundRuns(tmp_path, max_workers=1)
    first = prepare_run(SPEC, "one", home=tmp_path, context=ToolContext(), model=model)
    second = prepare_run(SPEC, "two", home=tmp_path, context=ToolContext(), model=model)
    runs.submit(first)
    runs.submit(second)
    wait_until(lambda: model.asked == 1, what="the first run asking its model")

    closing = threading.Thread(target=runs.close)
    closing.start()
    stopped = lambda: load_state(tmp_path, second.state.run_id).stop_reason  # noqa: E731
    wait_until(lambda: stopped() is StopReason.ERROR, what="the queued run saved as stopped")
    model.release.set()
    closing.join()

    assert load_state(tmp_path, first.state.run_id).answer == "done"
    queued = load_state(tmp_path, second.state.run_id)
    assert (queued.stop_reason, queued.error) == (
        StopReason.ERROR, "The server stopped before the run was driven.",
    )  # fmt: skip
    assert model.asked == 1


def test_a_bug_while_driving_is_saved_as_the_runs_error(tmp_path: Path) -> None:
    runs = BackgroundRuns(tmp_path)
    run = prepare_run(SPEC, "one", home=tmp_path, context=ToolContext(), model=BrokenModel())

    runs.submit(run)
    runs.close()

    saved = load_state(tmp_path, run.state.run_id)
    assert (saved.stop_reason, saved.error) == (
        StopReason.ERROR, "The run failed (RuntimeError: a bug in the client).",
    )  # fmt: skip
