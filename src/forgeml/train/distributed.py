"""Distributed training: launch under torchrun, join the process group, wrap the model.

`workers: N` re-runs the training command as N processes through `torchrun` (the
launcher in `torch.distributed.run`). Each process calls `init_distributed()` (gloo on
CPU, NCCL on GPU), wraps its model with `wrap_model` (DDP, or FSDP2's `fully_shard` on
GPUs), trains its share of every global batch (`forgeml.train.loop.fit`), and only rank 0
logs and checkpoints; `cleanup()` leaves the group at the end and `exit_rank()` ends the
process.

Why a rank ends with `exit_rank` (`os._exit`) and not by returning: DDP (and FSDP2's
device mesh) keep a C++ reference to the gloo process group that nothing releases, so
`destroy_process_group` cannot stop gloo's threads (two `pt_gloo_runloop` workers and the
`gloo_tcp_loop` socket thread). A rank that returned would run interpreter shutdown and
the C++ static destructors with those threads alive, while its peer closes the sockets
they poll; about one run in ten then died with SIGABRT ("terminate called without an
active exception"). `os._exit` ends every thread at once, after the output is flushed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from datetime import timedelta
from typing import Literal, NoReturn

import torch
import torch.distributed as torch_dist
from torch import nn

from forgeml.core.errors import ConfigError
from forgeml.train.step import DistContext

Strategy = Literal["ddp", "fsdp", "deepspeed"]

# Set by torchrun in every worker; all four mean "this process is one rank of a job".
_TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")
# A rank that waits longer than this for the others (one crashed) fails instead of hanging.
_COLLECTIVE_TIMEOUT = timedelta(minutes=10)
# How long torchrun gets to stop its workers before it is killed.
_STOP_GRACE_S = 60.0


def under_torchrun() -> bool:
    """Whether this process was started by torchrun as one rank of a job."""
    return all(name in os.environ for name in _TORCHRUN_ENV)


def init_distributed() -> DistContext:
    """Join the job's process group when started by torchrun; else one process alone.

    Under torchrun: NCCL with one GPU per local rank when CUDA is available, gloo on CPU.
    Alone: rank 0 of 1, on the first GPU if there is one.

    Returns:
        This process's rank, the world size and the device it trains on.
    """
    cuda = torch.cuda.is_available()
    if not under_torchrun():
        return DistContext(0, 1, torch.device("cuda", 0) if cuda else torch.device("cpu"))
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    if cuda:
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    if not torch_dist.is_initialized():
        # MASTER_ADDR/PORT, RANK and WORLD_SIZE come from torchrun's environment
        torch_dist.init_process_group(
            backend="nccl" if cuda else "gloo",
            timeout=_COLLECTIVE_TIMEOUT,
            device_id=device if cuda else None,
        )
    return DistContext(rank, world_size, device)


def wrap_model(model: nn.Module, ctx: DistContext, strategy: Strategy = "ddp") -> nn.Module:
    """Place `model` on `ctx.device` and wrap it for data-parallel training.

    DDP keeps a full replica per rank and all-reduces gradients (CPU or GPU). FSDP2 shards
    parameters, gradients and optimiser state over the ranks (GPU only here): every block
    of each `nn.ModuleList` (a transformer's layers) is one shard unit, then the root.
    Without a process group (one process alone) the model is returned unwrapped. DeepSpeed
    (GPU only) is placed here and wrapped in its engine by `fit`, which owns the optimiser.

    Args:
        model: The model to train.
        ctx: This process's context from `init_distributed`.
        strategy: "ddp", "fsdp" or "deepspeed".

    Returns:
        The wrapped model (FSDP2 shards `model` in place and returns it).

    Raises:
        ConfigError: An unknown strategy, or fsdp or deepspeed without CUDA (or without
            the deepspeed package).
    """
    if strategy not in ("ddp", "fsdp", "deepspeed"):
        raise ConfigError(
            f"Unknown distributed strategy '{strategy}': choose ddp, fsdp or deepspeed."
        )
    if strategy == "deepspeed":
        from forgeml.train.deepspeed import check_deepspeed_runtime

        check_deepspeed_runtime(cuda=ctx.device.type == "cuda")
        # `fit` hands the placed model to deepspeed.initialize with its optimiser and LR
        # schedule, which only it builds; DeepSpeed's engine replaces the DDP wrapper
        return model.to(ctx.device)
    if strategy == "fsdp" and ctx.device.type != "cuda":
        raise ConfigError("fsdp needs GPUs; use strategy ddp on CPU.")
    model.to(ctx.device)
    if not torch_dist.is_initialized():
        return model
    if strategy == "fsdp":
        return _fully_shard(model, ctx)
    device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(model, device_ids=device_ids)


def _fully_shard(model: nn.Module, ctx: DistContext) -> nn.Module:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(ctx.device.type, (ctx.world_size,))
    # Sharding each repeated block separately lets FSDP gather one block's parameters at
    # a time (and overlap that with compute) instead of the whole model at once.
    for module in list(model.modules()):
        if isinstance(module, nn.ModuleList):
            for block in module:
                if any(parameter.requires_grad for parameter in block.parameters()):
                    fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def cleanup(*, completed: bool = True) -> None:
    """Leave the process group (a no-op when not distributed).

    Args:
        completed: This rank finished its work. All ranks then meet at a barrier first,
            so none tears its connections down while a peer is still inside a
            collective. A rank that failed skips it: its peers may never get there, and
            their next collective fails with "Connection closed by peer" when it exits.
    """
    if not torch_dist.is_initialized():
        return
    if completed and torch_dist.get_world_size() > 1:
        torch_dist.barrier()
    torch_dist.destroy_process_group()


def exit_rank(code: int) -> NoReturn:
    """End this rank's process with `code`, without interpreter shutdown.

    Call it after `cleanup()`, as a rank's last act: gloo's threads outlive the process
    group (see the module docstring), and only an immediate exit is safe with them
    running. Output is flushed first; nothing registered with `atexit` runs.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing to save
            stream.flush()
    os._exit(code)


def torchrun_command(nproc: int, module: str, args: list[str]) -> list[str]:
    """The command that runs `python -m module *args` as `nproc` local processes.

    `--standalone` starts a rendezvous store on a free port of this machine (it binds
    port 0), so concurrent jobs never collide and no port needs choosing.

    Raises:
        ConfigError: `nproc` is below 1.
    """
    if nproc < 1:
        raise ConfigError(f"workers must be at least 1 (got {nproc}).")
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        str(nproc),
        "-m",
        module,
        *args,
    ]


def launch(
    nproc: int,
    module: str,
    args: list[str],
    env: Mapping[str, str] | None = None,
    *,
    timeout: float | None = None,
) -> int:
    """Run `module` as `nproc` processes under torchrun and wait for them.

    The workers' output goes straight to this process's stdout/stderr as they write it.

    Args:
        nproc: Number of processes (ranks).
        module: Python module to run in each, e.g. "forgeml.train.worker".
        args: Its command-line arguments.
        env: Variables added to this process's environment for the job.
        timeout: Seconds after which the whole job is stopped (None: no limit).

    Returns:
        The job's exit code: 0 when every rank succeeded; -SIGKILL (-9) on timeout.

    Raises:
        ConfigError: `nproc` is below 1.
    """
    command = torchrun_command(nproc, module, args)
    job = subprocess.Popen(command, env={**os.environ, **(env or {})}, start_new_session=True)
    try:
        return job.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(job)
        return -signal.SIGKILL
    except BaseException:  # Ctrl-C: stop the workers too, then let it propagate
        _stop(job)
        raise


def _stop(job: subprocess.Popen[bytes]) -> None:
    # torchrun starts each worker in a session of its own and, on SIGTERM, stops them
    # (SIGTERM, then SIGKILL after its shutdown timeout); SIGKILL only if it hangs itself.
    os.killpg(job.pid, signal.SIGTERM)
    try:
        job.wait(timeout=_STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
