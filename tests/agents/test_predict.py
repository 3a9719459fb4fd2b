from __future__ import annotations

import json

import pytest

from forgeml.agents import PredictOptions, ToolRefusedError, predict_tool
from forgeml.agents.predict import check_deployment_project
from forgeml.core.errors import OtherProjectError
from forgeml.core.workspace import Workspace
from tests.agents.conftest import Web

ROUTE = "/v1/models/adult:predict"


def test_predict_posts_instances_to_the_served_models_predict_route(
    web: Web, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADULT_KEY", "fml_secret")
    answer = {"predictions": [{"label": ">50K"}], "model_version": "1"}
    web.routes[ROUTE] = (200, {"Content-Type": "application/json"}, json.dumps(answer).encode())
    tool = predict_tool(
        PredictOptions(url=web.url, model="adult", allow_private=True, key_env="ADULT_KEY")
    )

    reply = tool.function(**tool.validate('{"instances": [{"age": 39}]}'))

    assert reply == [{"label": ">50K"}]
    ((path, headers, body),) = web.posted
    assert (path, body) == (ROUTE, {"instances": [{"age": 39}]})
    assert headers["Authorization"] == "Bearer fml_secret"
    assert tool.description.endswith("Model: adult.")


def test_a_refusal_from_the_server_is_one_sentence(web: Web) -> None:
    error = {"error": "Instance 0 lacks the input 'age'."}
    web.routes[ROUTE] = (422, {"Content-Type": "application/json"}, json.dumps(error).encode())
    tool = predict_tool(PredictOptions(url=web.url, model="adult", allow_private=True))

    with pytest.raises(ToolRefusedError) as raised:
        tool.function(instances=[{}])

    assert str(raised.value) == (
        "The model refused the request (HTTP 422): Instance 0 lacks the input 'age'."
    )


def test_too_many_instances_are_refused_before_any_request(web: Web) -> None:
    tool = predict_tool(
        PredictOptions(url=web.url, model="adult", allow_private=True, max_instances=2)
    )

    with pytest.raises(ToolRefusedError, match="predict takes 1 to 2 instances"):
        tool.function(instances=[1, 2, 3])
    assert web.posted == []


def test_a_deployment_of_another_project_than_the_runs_is_refused(workspace: Workspace) -> None:
    from forgeml.serve.deployments import DeploymentSpec, _records

    spec = DeploymentSpec(model="adult-mlp@v2", model_ref="adult-mlp@v2", replicas=1)
    in_a = workspace.in_project("team-a")
    with workspace.store.session() as session:
        _records._add_record(session, in_a, "web", spec, "failed", _records.now())

    check_deployment_project(in_a, "web")
    # a name no deployment has is a model server's own, outside the store
    check_deployment_project(workspace.in_project("team-b"), "adult")
    with pytest.raises(
        OtherProjectError, match=r"^Deployment 'web' belongs to the project 'team-a', not 'team-b'"
    ):
        check_deployment_project(workspace.in_project("team-b"), "web")
