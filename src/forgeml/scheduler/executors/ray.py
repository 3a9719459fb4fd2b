"""The Ray executor: each attempt is a placement group and one detached actor per worker.

`launch` creates a placement group with one bundle per worker (`{"CPU", "GPU", "memory"}`;
PACK when the policy placed every worker on one node, SPREAD otherwise). Ray reserves all
bundles or none, which is gang scheduling; each worker actor (`_ray_worker.RayWorker`)
waits for its bundle, then runs the job command with torchrun's environment: MASTER_ADDR is
rank 0's node IP, MASTER_PORT a port rank 0 found free there. Workers may be on other
machines, so their output travels back through Ray: `poll` reads each actor's new lines
and appends them, prefixed with the rank, to the attempt's log on this machine.

The placement group and the actors are detached and named after the attempt
(`forgeml-<job>-<attempt>-<salt>` in the `forgeml` namespace); the handle's `external_id`
is `"<name>:<workers>"`, so a restarted control plane finds them again by name and reads
on from the last line it acknowledged. `poll` releases them once every worker has ended.

The executor connects to a running cluster (`ray.init(address=...)`) and never starts one.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from forgeml.core.errors import ForgemlError
from forgeml.scheduler.executors._ray_attempt import RayAttempt
from forgeml.scheduler.executors._ray_worker import (
    STOP_REQUESTED,
    RayWorker,
    WorkerReport,
    WorkerSpec,
)
from forgeml.scheduler.executors.base import AttemptHandle, AttemptStatus, Gang, LaunchRequest
from forgeml.scheduler.model import NodeState, Resources

NAMESPACE = "forgeml"
_GB = 1e9  # decimal GB, as in resource requests
_READ_WAIT_SECONDS = 1.0  # how long one poll waits for workers to answer
_FAILED_GRACE_SECONDS = 10.0  # when one worker fails, the others get this long to exit
_UNPLACED_STATES = {"PENDING", "PREPARED"}  # the placement group is not reserved yet
_GONE = "the attempt is gone from the Ray cluster"
_CONNECT_SECONDS = 5.0  # ray.init retries an unreachable address for minutes; fail first


class RayUnavailableError(ForgemlError):
    """Ray is not installed, or the cluster at the given address cannot be reached."""

    http_status = 503


_connection: dict[str, str] = {}  # "address": the cluster this process connected to


def _connect(address: str, token_file: Path | None = None) -> Any:
    """The `ray` module, connected to the cluster at `address` (one cluster per process),
    with the token in `token_file` when given (else Ray's own places, see
    `_use_token_auth_when_a_token_exists`).

    Raises:
        RayUnavailableError: Ray is not installed, `token_file` is missing, nothing
            answers at `address`, the cluster refuses this process's token, or this
            process is already connected to another cluster.
    """
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except ImportError:
        raise RayUnavailableError(
            "The ray executor needs Ray: install it with pip install 'forgeml[ray]'."
        ) from None
    # reuse our connection, or one the embedding program made itself
    if ray.is_initialized() and _connection.get("address", address) == address:
        return ray
    if token_file is not None:
        _use_token_file(token_file)
    _check_reachable(address)
    _use_token_auth_when_a_token_exists()
    if ray.is_initialized():
        raise RayUnavailableError(
            f"This process is already connected to the Ray cluster at "
            f"{_connection['address']}; it cannot use {address} as well."
        )
    try:
        ray.init(
            address=address,
            namespace=NAMESPACE,
            log_to_driver=False,  # workers' output goes to the attempt logs, not ours
            logging_level=logging.WARNING,
        )
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
        raise _unavailable(address, exc) from None
    except ray.exceptions.AuthenticationError as exc:
        raise _unavailable(address, exc) from None
    _connection["address"] = address
    return ray


def _unavailable(address: str, exc: Exception) -> RayUnavailableError:
    """The sentence for a failed `ray.init`: a cluster that refused this process's token
    (Ray's own words are in the cause: `Unauthenticated`, `InvalidAuthToken`), or one
    that cannot be reached."""
    import ray

    said = f"{exc} {exc.__cause__ or ''}"
    if isinstance(exc, ray.exceptions.AuthenticationError) or any(
        word in said for word in ("Unauthenticated", "InvalidAuthToken")
    ):
        return RayUnavailableError(
            f"The Ray cluster at {address} refused this process: it has token "
            "authentication on and this process holds no token, or another; give the "
            "cluster's token as the file RAY_AUTH_TOKEN_PATH names, as RAY_AUTH_TOKEN, or "
            "in ~/.ray/auth_token."
        )
    return RayUnavailableError(
        f"Cannot reach the Ray cluster at {address} ({exc}); start one with "
        "`ray start --head` or pass the address of a running one."
    )


def _check_reachable(address: str) -> None:
    """Raise at once when nothing listens at `host:port` (`auto` and the like pass)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), _CONNECT_SECONDS).close()
    except OSError as exc:
        raise RayUnavailableError(
            f"Cannot reach the Ray cluster at {address} ({exc.strerror or exc}); start one "
            "with `ray start --head` or pass the address of a running one."
        ) from None


def _use_token_file(path: Path) -> None:
    """Authenticate with the token in `path` (`forgeml server --ray-token-file`).

    Ray reads the file itself from `RAY_AUTH_TOKEN_PATH`, so the token is never in this
    process's arguments, settings or logs; it replaces a `RAY_AUTH_TOKEN`, which Ray would
    otherwise prefer.

    Raises:
        RayUnavailableError: no file at `path`.
    """
    if not path.is_file():
        raise RayUnavailableError(
            f"The Ray token file {path} does not exist: give the file holding the cluster's "
            "token (`ray get-auth-token` prints it on the head)."
        )
    os.environ.pop("RAY_AUTH_TOKEN", None)
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(path.resolve())


def _use_token_auth_when_a_token_exists() -> None:
    """Authenticate as `ray start` would on this machine.

    Since Ray 2.5x, `ray start` turns token authentication on when `RAY_AUTH_MODE` is unset
    and a token exists (`RAY_AUTH_TOKEN`, the file at `RAY_AUTH_TOKEN_PATH`, or
    `~/.ray/auth_token`, which any local `ray.init()` writes), but `ray.init(address=...)`
    does not: the driver is then refused ("Authentication token is missing or incorrect")
    by a cluster started on the same machine. Ray's own rule is applied (it also refreshes
    Ray's cached config, which an environment variable alone would not); an explicit
    `RAY_AUTH_MODE` is left alone.
    """
    try:
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )
    except ImportError:  # a Ray from before token authentication
        return
    maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


@functools.cache
def _worker_actor(ray: Any) -> Any:
    # threaded: `read` and `terminate` must answer while `terminate` waits out its grace
    return ray.remote(max_concurrency=4, max_restarts=0)(RayWorker)


def _bundle(per_worker: Resources) -> dict[str, float]:
    bundle = {
        "CPU": per_worker.cpus,
        "GPU": float(per_worker.gpus),
        "memory": float(int(per_worker.memory_gb * _GB)),
    }
    bundle = {key: value for key, value in bundle.items() if value > 0}
    return bundle or {"CPU": 0.001}  # Ray refuses an empty bundle


def _parse(external_id: str) -> tuple[str, int]:
    name, _, count = external_id.rpartition(":")
    return name, int(count)


class RayExecutor:
    """Runs attempts on a Ray cluster; gang jobs through placement groups."""

    name = "ray"

    def __init__(self, address: str, token_file: Path | None = None) -> None:
        """Use the Ray cluster at `address` (e.g. `127.0.0.1:6379`); connects on first use,
        authenticating with the token in `token_file` when given (else wherever Ray looks:
        `RAY_AUTH_TOKEN`, `RAY_AUTH_TOKEN_PATH`, `~/.ray/auth_token`)."""
        self.address = address
        self.token_file = token_file
        self._attempts: dict[str, RayAttempt] = {}
        self._final: dict[str, AttemptStatus] = {}
        self._lock = threading.Lock()

    def _ray(self) -> Any:
        return _connect(self.address, self.token_file)

    def nodes(self) -> list[NodeState]:
        """The cluster's live nodes (named by Ray node id) with their whole capacity."""
        nodes = []
        for node in self._ray().nodes():
            if not node.get("Alive"):
                continue
            have = node.get("Resources", {})
            capacity = Resources(
                float(have.get("CPU", 0)), int(have.get("GPU", 0)), have.get("memory", 0) / _GB
            )
            nodes.append(NodeState(node["NodeID"], capacity, capacity))
        return nodes

    def report_demand(self, gangs: list[Gang]) -> None:
        """Ask Ray's autoscaler for room for `gangs` (`ray.autoscaler.sdk.request_resources`).

        One bundle per shape, the same bundles `launch` reserves. Ray counts what already
        runs against the request ("ensure this set of resource shapes can fit"), so the
        service passes the running gangs along with the waiting ones; an empty list
        withdraws the request. Each call replaces the one before.
        """
        self._ray()
        from ray.autoscaler.sdk import request_resources

        request_resources(bundles=[_bundle(shape) for gang in gangs for shape in gang.shapes])

    # ---- the Executor protocol

    def launch(self, request: LaunchRequest) -> AttemptHandle:
        """Create the placement group and the worker actors; returns at once."""
        ray = self._ray()
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        count = 1 if request.launch_once else request.workers
        per_worker = (
            request.resources.times(request.workers) if request.launch_once else request.resources
        )
        name = f"forgeml-{request.job_id}-{request.attempt}-{uuid.uuid4().hex[:6]}"
        strategy = "PACK" if len(set(request.nodes)) <= 1 else "SPREAD"
        group = ray.util.placement_group(
            [_bundle(per_worker)] * count, strategy=strategy, name=name, lifetime="detached"
        )
        request.log_path.parent.mkdir(parents=True, exist_ok=True)
        request.log_path.touch()
        actors: list[Any] = []
        for rank in range(count):
            spec = WorkerSpec(
                rank=rank,
                world_size=count,
                command=list(request.command),
                env=dict(request.env),
                cwd=str(request.cwd) if request.cwd else None,
                log_path=str(request.log_path),
                memory_limit_gb=per_worker.memory_gb or None,
                torchrun_env=count > 1,
            )
            options = _worker_actor(ray).options(
                name=f"{name}-rank{rank}",
                namespace=NAMESPACE,
                lifetime="detached",
                num_cpus=per_worker.cpus,
                num_gpus=per_worker.gpus,
                memory=int(per_worker.memory_gb * _GB) or None,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    group, placement_group_bundle_index=rank
                ),
            )
            actors.append(options.remote(spec, actors[0] if actors else None))
        handle = AttemptHandle(self.name, f"{name}:{count}")
        with self._lock:
            self._attempts[handle.external_id] = RayAttempt(name, group, actors, request.log_path)
        return handle

    def poll(self, handle: AttemptHandle) -> AttemptStatus:
        """Append new output to the log; still running, or ended (released) with its code."""
        with self._lock:
            final = self._final.get(handle.external_id)
            if final is not None:
                return final
            attempt = self._find(handle.external_id)
            if attempt is None:
                return AttemptStatus(running=False, reason=_GONE)
            if not self._placed(attempt):
                return AttemptStatus(running=True)
            self._collect(attempt)
            status = self._status(attempt)
            if not status.running:
                self._release(attempt)
                self._final[handle.external_id] = status
                self._attempts.pop(handle.external_id, None)
            return status

    def terminate(self, handle: AttemptHandle, grace_seconds: float) -> None:
        """Each worker SIGTERMs its command and SIGKILLs it after the grace; returns at once."""
        with self._lock:
            if handle.external_id in self._final:
                return
            attempt = self._find(handle.external_id)
            if attempt is None:
                return
            attempt.stop_requested = True
            if not self._placed(attempt):  # nothing started yet: give the resources back
                self._release(attempt)
                self._final[handle.external_id] = AttemptStatus(False, -signal.SIGTERM)
                self._attempts.pop(handle.external_id, None)
                return
            for actor in attempt.running_actors():
                actor.terminate.remote(grace_seconds, STOP_REQUESTED)

    def adopt(self, handle: AttemptHandle) -> bool:
        """True when the attempt's actors or placement group are still on the cluster."""
        with self._lock:
            return handle.external_id in self._final or self._find(handle.external_id) is not None

    # ---- helpers (called with the lock held)

    def _find(self, external_id: str) -> RayAttempt | None:
        """The attempt, looked up by name on the cluster when this process did not start it."""
        attempt = self._attempts.get(external_id)
        if attempt is not None:
            return attempt
        ray = self._ray()
        name, count = _parse(external_id)
        actors: list[Any] = []
        for rank in range(count):
            try:
                actors.append(ray.get_actor(f"{name}-rank{rank}", namespace=NAMESPACE))
            except ValueError:
                actors.append(None)
        try:
            group = ray.util.get_placement_group(name)
        except ValueError:
            group = None
        if group is None and all(actor is None for actor in actors):
            return None
        attempt = RayAttempt(name, group, actors, log_path=None)
        gone = (time.time(), "is gone from the Ray cluster")
        attempt.lost = {rank: gone for rank, actor in enumerate(actors) if actor is None}
        self._attempts[external_id] = attempt
        return attempt

    def _placed(self, attempt: RayAttempt) -> bool:
        if not attempt.placed:
            table = self._ray().util.placement_group_table(attempt.group) if attempt.group else {}
            attempt.placed = table.get("state") not in _UNPLACED_STATES
        return attempt.placed

    def _collect(self, attempt: RayAttempt) -> None:
        """Read every running worker's new output and state; append the output to the log."""
        ray = self._ray()
        for rank, actor in enumerate(attempt.actors):
            if actor is not None and not attempt.ended(rank) and rank not in attempt.pending:
                attempt.pending[rank] = actor.read.remote(attempt.offsets[rank])
        if not attempt.pending:
            return
        refs = list(attempt.pending.values())
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=_READ_WAIT_SECONDS)
        answered = {ref.hex() for ref in ready}
        for rank, ref in list(attempt.pending.items()):
            if ref.hex() not in answered:
                continue  # still starting (or busy): ask again next poll
            del attempt.pending[rank]
            try:
                report: WorkerReport = ray.get(ref)
            except ray.exceptions.RayError as exc:
                first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                attempt.lost[rank] = (time.time(), f"was lost ({first_line})")
                continue
            attempt.append_log(report)
            attempt.reports[rank] = report

    def _status(self, attempt: RayAttempt) -> AttemptStatus:
        if attempt.all_ended():
            return attempt.outcome()
        failures = attempt.failures()
        if failures and not attempt.stopping_others:  # a gang lives and dies together
            attempt.stopping_others = True
            for actor in attempt.running_actors():
                actor.terminate.remote(_FAILED_GRACE_SECONDS, f"rank {failures[0].rank} failed")
        return AttemptStatus(running=True, usage=attempt.usage())

    def _release(self, attempt: RayAttempt) -> None:
        """Kill the actors (their commands have ended) and remove the placement group."""
        ray = self._ray()
        for actor in attempt.actors:
            if actor is not None:
                with contextlib.suppress(Exception):  # already gone
                    ray.kill(actor, no_restart=True)
        if attempt.group is not None:
            with contextlib.suppress(Exception):
                ray.util.remove_placement_group(attempt.group)
