"""Executors by name: `local` (default), `ray`, `kubernetes`; each imported only when chosen.

`register_executor(name, factory)` adds one; `create_executor(name, **options)` builds it
(`address=` for Ray, `namespace=`/`kubeconfig=` for Kubernetes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from forgeml.core.errors import UsageError
from forgeml.scheduler.executors.base import (
    AttemptHandle,
    AttemptStatus,
    AttemptUsage,
    Executor,
    LaunchRequest,
)

ExecutorFactory = Callable[..., Executor]


def _local(**options: Any) -> Executor:
    from forgeml.scheduler.executors.local import LocalExecutor

    return LocalExecutor(**options)


def _ray(**options: Any) -> Executor:
    from forgeml.scheduler.executors.ray import RayExecutor

    if not options.get("address"):
        raise UsageError("The ray executor needs --address (e.g. 127.0.0.1:6379).")
    executor: Executor = RayExecutor(**options)
    return executor


def _kubernetes(**options: Any) -> Executor:
    from forgeml.scheduler.executors.kubernetes import KubernetesExecutor

    executor: Executor = KubernetesExecutor(**options)
    return executor


_REGISTRY: dict[str, ExecutorFactory] = {
    "local": _local,
    "ray": _ray,
    "kubernetes": _kubernetes,
}


def register_executor(name: str, factory: ExecutorFactory) -> None:
    """Make `create_executor(name)` build executors with `factory(**options)`."""
    _REGISTRY[name] = factory


def executor_names() -> list[str]:
    """The registered executor names."""
    return sorted(_REGISTRY)


def create_executor(name: str, **options: Any) -> Executor:
    """A new executor of kind `name`, built with `options`.

    Raises:
        UsageError: no executor of that name.
    """
    factory = _REGISTRY.get(name)
    if factory is None:
        raise UsageError(f"Unknown executor '{name}': use one of {', '.join(executor_names())}.")
    return factory(**{k: v for k, v in options.items() if v is not None})


__all__ = [
    "AttemptHandle",
    "AttemptStatus",
    "AttemptUsage",
    "Executor",
    "ExecutorFactory",
    "LaunchRequest",
    "create_executor",
    "executor_names",
    "register_executor",
]
