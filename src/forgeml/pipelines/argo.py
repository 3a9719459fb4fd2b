"""`forgeml pipelines export FILE --format argo`: the same DAG as an Argo Workflow (hera).

Every step becomes a task of one container template, and every task runs the same command,
`forgeml pipelines run FILE --step NAME` (with the `--set` overrides given to the export):
the task runs its step, and the steps it needs, which ran in their own tasks before it,
come from the cache. The cache (the store and the artifacts) must therefore be shared by
the workflow's pods: they read `FORGEML_DB_URL`, `FORGEML_ARTIFACTS_URL` and the rest from
the Kubernetes secret named by `secret` (PostgreSQL and object storage, as on any cluster).
The pipeline file travels inside the workflow as a raw artifact, written to `workdir`;
paths the file names relative to its folder must exist there in the image.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from forgeml.core.errors import UsageError
from forgeml.pipelines.load import Pipeline

_TEMPLATE = "step"
_ENTRY = "pipeline"


@dataclass(frozen=True)
class ArgoOptions:
    """Where and how the workflow runs."""

    image: str
    secret: str | None = None
    namespace: str | None = None
    workdir: str = "/forgeml"
    service_account: str | None = None
    env: dict[str, str] = field(default_factory=dict)


def task_names(pipeline: Pipeline) -> dict[str, str]:
    """Each step's Argo task name: letters, digits and '-' (Argo's rule), unique."""
    names: dict[str, str] = {}
    for step in pipeline.order:
        base = re.sub(r"[^A-Za-z0-9-]", "-", step).strip("-").lower() or "step"
        name, n = base, 2
        while name in names.values():
            name, n = f"{base}-{n}", n + 1
        names[step] = name
    return names


def workflow_yaml(pipeline: Pipeline, overrides: list[str], options: ArgoOptions) -> str:
    """The Argo Workflow (YAML) that runs `pipeline` one step per task."""
    try:
        from hera.workflows import DAG, Container, Env, Parameter, RawArtifact, SecretEnvFrom
        from hera.workflows import Workflow as ArgoWorkflow
    except ImportError:
        raise UsageError(
            "The Argo export needs hera: pip install 'forgeml[argo]' (or hera) and try again."
        ) from None
    path = str(PurePosixPath(options.workdir) / pipeline.file.name)
    sets = [arg for item in overrides for arg in ("--set", item)]
    names = task_names(pipeline)
    workflow: dict[str, Any] = {"generate_name": f"{_dns(pipeline.name)}-", "entrypoint": _ENTRY}
    if options.namespace:
        workflow["namespace"] = options.namespace
    if options.service_account:
        workflow["service_account_name"] = options.service_account
    with ArgoWorkflow(**workflow) as argo:
        step = Container(
            name=_TEMPLATE,
            image=options.image,
            command=["forgeml"],
            args=["pipelines", "run", path, "--step", "{{inputs.parameters.step}}", *sets],
            working_dir=options.workdir,
            inputs=[
                Parameter(name="step"),
                RawArtifact(name="pipeline", path=path, data=pipeline.file.read_text("utf-8")),
            ],
            env=[Env(name=name, value=value) for name, value in sorted(options.env.items())],
            env_from=[SecretEnvFrom(name=options.secret)] if options.secret else None,
        )
        with DAG(name=_ENTRY):
            for name in pipeline.order:
                before = " && ".join(names[need] for need in pipeline.needs[name]) or None
                step(name=names[name], arguments={"step": name}, depends=before)
    text: str = argo.to_yaml()
    return text


def _dns(name: str) -> str:
    return re.sub(r"[^a-z0-9-]", "-", name.lower()).strip("-") or "pipeline"
