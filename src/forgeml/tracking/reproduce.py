"""The config that reproduces a run: its recorded config, on its own data or newer data.

A run records the whole resolved `TrainConfig` and the exact dataset version it read, so
reproducing it needs nothing the user kept: the config is taken back, `data.dataset` is
pinned to the version the run read (or set to `data`, e.g. the newest version of the same
dataset, which is how the monitoring loop retrains a champion), and `key=value` overrides
apply last. The result trains through the same job contract as `forgeml train`.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from pydantic import ValidationError

from forgeml.core.errors import ConfigError

if TYPE_CHECKING:
    from forgeml.core.store import RunRecord
    from forgeml.core.workspace import Workspace
    from forgeml.train.config import TrainConfig


def source_run(workspace: Workspace, ref: str) -> RunRecord:
    """The run `ref` names: a run (id, prefix or name) or, with an '@', a model version's.

    Raises:
        NotFoundError: no such run or model version.
    """
    from forgeml.tracking.registry import get_model_version
    from forgeml.tracking.runs import get_run

    if "@" in ref:
        return get_model_version(workspace, ref).run
    return get_run(workspace, ref)


def reproduce_config(
    workspace: Workspace, ref: str, data: str | None = None, overrides: list[str] | None = None
) -> TrainConfig:
    """The training config that reproduces run `ref` (see the module docstring).

    Raises:
        NotFoundError: no such run, model version or dataset.
        ConfigError: the run was not a training run, or an override is invalid.
    """
    from forgeml.data import catalog
    from forgeml.train.config import TrainConfig, apply_overrides

    run = source_run(workspace, ref)
    try:
        TrainConfig.model_validate(run.config)
    except ValidationError:
        raise ConfigError(
            f"Run {run.id[:12]} ({run.name}) was not a training run, so it cannot be reproduced."
        ) from None
    fields = copy.deepcopy(dict(run.config))
    pinned = run.dataset_version.ref if run.dataset_version is not None else None
    chosen = data or pinned
    if chosen is not None:
        with workspace.store.session() as session:
            version = catalog.resolve(session, chosen)  # NotFoundError for an unknown one
        fields["data"] = {**fields["data"], "dataset": version.ref}
    fields = apply_overrides(fields, overrides or [])
    try:
        return TrainConfig.model_validate(fields)
    except ValidationError as error:
        first = error.errors()[0]
        key = ".".join(str(part) for part in first["loc"])
        raise ConfigError(f"Reproducing run {run.id[:12]}: key '{key}': {first['msg']}.") from None
