from __future__ import annotations

import json
import os

import pytest

from forgeml.agents import ToolRegistry, calculator_tool, make_tool, run_loop
from forgeml.core.workspace import Workspace
from forgeml.tracking.traces import MlflowTracer, agent_traces
from tests.agents.conftest import BUDGETS, ScriptedModel, calls, new_state, text

LC_SECRET = {"lc": 1, "type": "secret", "id": ["OPENAI_API_KEY"]}


def test_an_agent_run_is_one_mlflow_trace_with_llm_and_tool_spans(
    tracking_workspace: Workspace,
) -> None:
    model = ScriptedModel(
        [calls(("calculator", {"expression": "6 * 7"}), ("calculator", {"expression": "1"})),
         text("42")]
    )  # fmt: skip
    tracer = MlflowTracer(tracking_workspace)

    state = run_loop(
        model, ToolRegistry([calculator_tool()]), new_state(), BUDGETS, model_name="smol",
        tracer=tracer,
    )  # fmt: skip

    (trace_id,) = state.trace_ids
    spans = agent_traces(tracking_workspace, trace_id)
    root = next(s for s in spans if s["parent_id"] is None)
    assert root["name"] == "invoke_agent"
    assert root["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert root["outputs"] == {"stop_reason": "answered", "answer": "42"}
    chats = [s for s in spans if s["name"] == "chat smol"]
    tools = [s for s in spans if s["name"] == "execute_tool calculator"]
    assert (len(chats), len(tools)) == (2, 2)
    assert chats[0]["span_type"] == "CHAT_MODEL"
    assert chats[0]["attributes"]["gen_ai.request.model"] == "smol"
    assert chats[0]["attributes"]["gen_ai.usage.input_tokens"] == 10
    assert chats[0]["attributes"]["gen_ai.usage.output_tokens"] == 5
    assert {t["attributes"]["gen_ai.tool.call.id"] for t in tools} == {"c1", "c2"}
    assert all(t["span_type"] == "TOOL" and t["parent_id"] for t in tools)
    assert sorted(t["outputs"] for t in tools) == ["1", "42"]


def test_a_runs_registry_prompt_version_is_on_its_mlflow_agent_and_chat_spans(
    tracking_workspace: Workspace,
) -> None:
    state = new_state()
    state.prompt_ref = "helper@v2"

    run_loop(
        ScriptedModel([text("4")]), ToolRegistry([]), state, BUDGETS, model_name="smol",
        tracer=MlflowTracer(tracking_workspace),
    )  # fmt: skip

    spans = agent_traces(tracking_workspace, state.trace_ids[0])
    assert sorted((s["name"], s["attributes"]["forgeml.prompt"]) for s in spans) == [
        ("chat smol", "helper@v2"),
        ("invoke_agent", "helper@v2"),
    ]


def test_a_serialised_secret_in_a_tool_result_stays_inert_in_the_trace(
    tracking_workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-must-never-appear")

    def lookup(key: str) -> dict[str, object]:
        """Look a record up.

        Args:
            key: The record's key.
        """
        return {"record": LC_SECRET}

    model = ScriptedModel([calls(("lookup", {"key": json.dumps(LC_SECRET)})), text("ok")])
    state = run_loop(
        model, ToolRegistry([make_tool(lookup)]), new_state(), BUDGETS,
        tracer=MlflowTracer(tracking_workspace),
    )  # fmt: skip

    spans = agent_traces(tracking_workspace, state.trace_ids[0])
    assert "sk-test-must-never-appear" not in json.dumps(spans, default=str)
    tool = next(s for s in spans if s["span_type"] == "TOOL")
    assert as_data(tool["outputs"]) == {"record": LC_SECRET}
    assert as_data(tool["inputs"]) == {"key": json.dumps(LC_SECRET)}


def as_data(value: object) -> object:
    """A span's stored JSON text (MLflow hands some back parsed, some as text)."""
    return json.loads(value) if isinstance(value, str) else value


@pytest.mark.parametrize("before", [None, "file:///elsewhere/mlruns"])
def test_a_traced_run_leaves_mlflows_global_tracking_uri_as_it_found_it(
    tracking_workspace: Workspace, before: str | None
) -> None:
    import mlflow
    from mlflow.tracking._tracking_service import utils

    tracer = MlflowTracer(tracking_workspace)
    mlflow.set_tracking_uri(before)  # type: ignore[arg-type]
    variable = os.environ.get("MLFLOW_TRACKING_URI")

    state = run_loop(
        ScriptedModel([text("done")]), ToolRegistry([]), new_state(), BUDGETS, tracer=tracer
    )

    assert (utils._tracking_uri, os.environ.get("MLFLOW_TRACKING_URI")) == (before, variable)
    mlflow.set_tracking_uri(None)  # type: ignore[arg-type]
    assert agent_traces(tracking_workspace, state.trace_ids[0])[0]["name"] == "invoke_agent"


def test_a_trace_that_fails_to_start_leaves_the_global_tracking_uri_as_it_was(
    tracking_workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.tracking._tracking_service import utils

    tracer = MlflowTracer(tracking_workspace)
    monkeypatch.setattr(tracer._client, "start_trace", _refuse)
    before = utils._tracking_uri

    with pytest.raises(RuntimeError, match="store down"):
        tracer.start_span("invoke_agent", "AGENT", None, {})

    assert utils._tracking_uri == before


def _refuse(*args: object, **kwargs: object) -> None:
    raise RuntimeError("store down")


def test_overlapping_traces_keep_the_store_until_the_last_one_ends(
    tracking_workspace: Workspace,
) -> None:
    from mlflow.tracking._tracking_service import utils

    tracer = MlflowTracer(tracking_workspace)
    before = utils._tracking_uri
    first = tracer.start_span("invoke_agent", "AGENT", None, {})
    second = tracer.start_span("invoke_agent", "AGENT", None, {})

    tracer.end_span(first, outputs="first")
    # the second trace's spans still reach the store after the first one has ended
    child = tracer.start_span("chat smol", "CHAT_MODEL", second, {})
    tracer.end_span(child, outputs="reply")
    tracer.end_span(second, outputs="second")

    assert utils._tracking_uri == before
    spans = agent_traces(tracking_workspace, second.trace_id)
    assert sorted(s["name"] for s in spans) == ["chat smol", "invoke_agent"]
    assert agent_traces(tracking_workspace, first.trace_id)[0]["outputs"] == "first"
