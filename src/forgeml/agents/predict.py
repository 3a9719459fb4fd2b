"""The `predict` tool: ask a model served by forgeml for predictions.

It posts to the server's TF-Serving-style route, `POST /v1/models/{name}:predict` with
`{"instances": [...]}` (serve/protocols/predict.py): one JSON object per row, answered
`{"predictions": [...]}`, which is the shape a model can write and read without the
tensor bookkeeping KServe v2 asks for. The server URL and model come from the agent's
spec, never from the model, so this tool reaches only the one server it was given; that
address still passes `forgeml.core.netguard` (an agent spec can be written over the API, and
TorchServe CVE-2023-43654 is a model server URL turned on 169.254.169.254): a private,
loopback or link-local server needs `allow_private`, and a redirect is a refusal, never a
hop to somewhere unchecked. A model that is a deployment of another project than the run's
is refused before the run starts (`check_deployment_project`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from forgeml.agents.tools import Tool, ToolRefusedError, make_tool
from forgeml.core import netguard
from forgeml.core.errors import NotFoundError, UnsafeUrlError

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

__all__ = ["PredictOptions", "check_deployment_project", "predict_tool"]


class PredictOptions(BaseModel):
    """Which served model `predict` asks, and where."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(description="The model server (or gateway), e.g. http://127.0.0.1:8080.")
    model: str = Field(min_length=1, description="The served model's name.")
    key_env: str | None = Field(
        default=None, description="Environment variable holding a gateway key, if any."
    )
    allow_private: bool = Field(
        default=False,
        description="Let it reach a private, loopback or link-local server (off by default).",
    )
    timeout_s: float = Field(default=30.0, gt=0, description="Seconds one request may take.")
    max_instances: int = Field(default=100, gt=0, description="Rows one call may send.")


def predict_tool(options: PredictOptions, requires_approval: bool = False) -> Tool:
    """The `predict` tool bound to one served model."""

    def predict(instances: list[Any]) -> Any:
        """Predict with the served model; one instance per row (a record or a text).

        Args:
            instances: The rows to predict, e.g. [{"age": 39, "education": "Bachelors"}].
        """
        return _post(options, instances)

    tool = make_tool(predict, requires_approval=requires_approval)
    described = f"{tool.description} Model: {options.model}."
    return Tool(tool.name, described, tool.function, tool.arguments, tool.requires_approval)


def check_deployment_project(workspace: Workspace, model: str) -> None:
    """Refuse a `model` that names a deployment of another project than `workspace`'s
    (deployment names are unique install-wide; a name no deployment has is a model server's
    own, outside the store, and passes).

    Raises:
        OtherProjectError: the deployment belongs to another project.
    """
    from forgeml.serve.deployments import get_deployment

    try:
        deployment = get_deployment(workspace, model)
    except NotFoundError:
        return
    workspace.check_own("Deployment", deployment.name, deployment.project)


def _post(options: PredictOptions, instances: list[Any]) -> Any:
    import httpx

    if not instances or len(instances) > options.max_instances:
        raise ToolRefusedError(f"predict takes 1 to {options.max_instances} instances.")
    headers = {}
    if options.key_env and os.environ.get(options.key_env):
        headers["Authorization"] = f"Bearer {os.environ[options.key_env]}"
    route = f"{options.url.rstrip('/')}/v1/models/{options.model}:predict"
    policy = netguard.UrlPolicy(who="predict", allow_private=options.allow_private)
    try:
        with netguard.guarded_client(policy, timeout=options.timeout_s) as client:
            reply = client.post(route, json={"instances": instances}, headers=headers)
    except UnsafeUrlError as error:
        raise ToolRefusedError(str(error)) from None
    except httpx.HTTPError as error:
        raise ToolRefusedError(
            f"The model server did not answer: {type(error).__name__}."
        ) from None
    body = _json(reply)
    if reply.status_code != 200:
        message = body.get("error", reply.reason_phrase) if isinstance(body, dict) else body
        raise ToolRefusedError(
            f"The model refused the request (HTTP {reply.status_code}): {message}"
        )
    return body.get("predictions", body) if isinstance(body, dict) else body


def _json(reply: Any) -> Any:
    try:
        return reply.json()
    except ValueError:
        return reply.text[:500]
