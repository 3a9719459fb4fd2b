"""Deployments: named sets of model-server processes the control plane starts and records.

`deploy` starts every replica of a spec (`forgeml serve MODEL --name NAME`, so each
replica serves the model under the deployment's name), waits until all are ready and only
then records them, with a new revision, in one transaction. Deploying an existing name
again is a rolling update: a ready replica the new spec would start exactly as it runs
(same role, model, `forgeml serve` arguments and environment) is kept, same process and
port (so starting or rolling back a canary leaves the primaries alone); the others start,
the old replicas not kept keep serving until the new ones are ready and recorded, are left
`drain_seconds` for callers that read the old records (the gateway refreshes every few
seconds), then stopped. Deploying the exact spec a deployment already runs is refused
unless `force` asks for a restart of every replica. A spec whose replicas do not all get
ready leaves nothing new running: a new deployment is recorded "failed" with the log
tail, a live one keeps serving its current revision. `rollback` re-applies an earlier
revision's spec as a new revision; `delete` stops everything; `check` probes replicas.

A spec with `autoscale` (min/max replicas and a target) starts with `replicas` primaries;
from then on the control loop in `forgeml server` (`forgeml.serve.autoscale_loop`) adds
and removes primary replicas one row at a time, without a new revision (`_replicas`), and
`request_replica` is how the gateway asks it for a cold start of a deployment at zero.
"""

from forgeml.serve.deployments._control import (
    apply_spec,
    check,
    delete,
    deploy,
    log_dir,
    rollback,
)
from forgeml.serve.deployments._records import (
    deployments_serving,
    get_deployment,
    list_deployments,
)
from forgeml.serve.deployments._replicas import (
    ScaledDeployment,
    ScaledReplica,
    StaleRevisionError,
    autoscaled,
    request_replica,
)
from forgeml.serve.deployments._spec import (
    AutoscaleSpec,
    CanarySpec,
    Deployment,
    DeploymentSpec,
    Replica,
    ShadowSpec,
    build_spec,
)

__all__ = [
    "AutoscaleSpec",
    "CanarySpec",
    "Deployment",
    "DeploymentSpec",
    "Replica",
    "ScaledDeployment",
    "ScaledReplica",
    "ShadowSpec",
    "StaleRevisionError",
    "apply_spec",
    "autoscaled",
    "build_spec",
    "check",
    "delete",
    "deploy",
    "deployments_serving",
    "get_deployment",
    "list_deployments",
    "log_dir",
    "request_replica",
    "rollback",
]
