"""Atomic training checkpoints: everything needed to continue a run bit for bit.

Layout under `run_dir/checkpoints/`:

    step-000120/  model.safetensors   weights of the unwrapped model (tied weights once)
                  optimizer.pt        optimiser + scheduler state (torch.save of plain tensors;
                                      read back only with torch.load(weights_only=True))
                  rng.safetensors     torch/CUDA/numpy/python RNG states (no pickle)
                  state.json          step, data position, early-stopping state, config digest
    latest        the name of the newest complete checkpoint

A checkpoint is written into a temporary folder and renamed into place, then `latest` is
replaced the same way, so a crash at any moment leaves the previous checkpoint loadable.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pickle
import random
import re
import shutil
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, load_model, save_file, save_model
from torch import nn

from forgeml.core.errors import ForgemlError
from forgeml.train.config import CheckpointConfig, TrainConfig

CHECKPOINTS = "checkpoints"
LATEST = "latest"
FORMAT_VERSION = 1
_STEP_DIR = re.compile(r"^step-(\d+)$")
# what a corrupt, truncated or mismatched checkpoint raises while being read back
# what a failing write raises: OSError from Python, SafetensorError from safetensors' writer,
# RuntimeError from torch.save's zip writer (e.g. "File too large" on a full disk)
_WRITE_FAILURES = (OSError, SafetensorError, RuntimeError)
_UNREADABLE = (OSError, RuntimeError, KeyError, ValueError, SafetensorError, pickle.UnpicklingError)


class CheckpointError(ForgemlError):
    """A checkpoint cannot be written or read back."""


@dataclass
class TrainState:
    """Where the loop stands after an optimiser step (what resume needs besides tensors)."""

    step: int = 0  # optimiser steps done
    epoch: int = 0  # epochs fully done; the next batch comes from this epoch
    batch_in_epoch: int = 0  # global batches of `epoch` already consumed
    best_metric: float | None = None  # early stopping: best value seen
    bad_evals: int = 0  # early stopping: evaluations since the best one
    config_digest: str = ""


@dataclass
class Checkpoint:
    """A complete checkpoint on disk; `restore` loads it into live objects."""

    path: Path
    state: TrainState

    def restore(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
    ) -> None:
        """Load weights, optimiser, scheduler and RNG states from this checkpoint.

        Every rank of a distributed job calls it (all read the same files); an FSDP2 model
        takes the full weights and optimiser state and keeps its own shards.

        Args:
            model: The unwrapped model (not the DDP wrapper).
            optimizer: The optimiser built for `model`.
            scheduler: The LR scheduler built for `optimizer`.

        Raises:
            CheckpointError: A file is missing, corrupt, or does not fit the model.
        """
        try:
            saved = torch.load(self.path / "optimizer.pt", map_location="cpu", weights_only=True)
            if is_sharded(model):
                _set_full_state(model, optimizer, load_file(self.path / "model.safetensors"), saved)
            else:
                load_model(model, self.path / "model.safetensors", strict=True)
                optimizer.load_state_dict(saved["optimizer"])
            scheduler.load_state_dict(saved["scheduler"])
            _restore_rng(self.path / "rng.safetensors")
        except _UNREADABLE as error:
            raise self._unrestorable(error) from None

    def restore_rng(self) -> None:
        """Load only the RNG states (a DeepSpeed engine restores the rest from its shards).

        Raises:
            CheckpointError: rng.safetensors is missing or corrupt.
        """
        try:
            _restore_rng(self.path / "rng.safetensors")
        except _UNREADABLE as error:
            raise self._unrestorable(error) from None

    def _unrestorable(self, error: BaseException) -> CheckpointError:
        return CheckpointError(
            f"Checkpoint {self.path} cannot be restored ({_first_line(error)}); "
            "resume with the config and model that wrote it, or start a new run."
        )


def config_digest(config: TrainConfig) -> str:
    """Digest of the parts of `config` that change the numbers a run computes.

    Checkpointing, process count and registration do not (DDP with the same global batch
    computes the same steps), so a run may resume with other values for them.
    """
    relevant = config.model_dump(mode="json", exclude={"checkpoint", "workers", "register_model"})
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()


def save_checkpoint(
    run_dir: Path,
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    state: TrainState,
    keep: int,
    write: bool = True,
) -> Path | None:
    """Write a checkpoint of the current step atomically and prune old ones.

    In a distributed job every rank calls this and only rank 0 passes `write=True`:
    an FSDP2-sharded model gathers its full state with collectives all ranks must join;
    otherwise the other ranks return at once.

    Args:
        run_dir: The run's folder; checkpoints go to `run_dir/checkpoints/`.
        model: The unwrapped model.
        optimizer: Its optimiser.
        scheduler: Its LR scheduler.
        state: Loop position and early-stopping state after the step.
        keep: How many checkpoints to keep (the newest ones).
        write: Whether this process writes (rank 0).

    Returns:
        The checkpoint's folder; None where `write` is False.

    Raises:
        CheckpointError: The folder cannot be written; the previous checkpoint is intact.
    """
    full_state = _full_state(model, optimizer) if is_sharded(model) else None
    if not write:
        return None
    tmp = staging_folder(run_dir, state.step, clear=True, owner=os.getpid())
    with _writing(tmp, f"step-{state.step:06d}", run_dir / CHECKPOINTS):
        _write_contents(tmp, model, full_state, optimizer, scheduler)
        write_resume_files(tmp, state)
    return commit_checkpoint(run_dir, tmp, state, keep)


def staging_folder(run_dir: Path, step: int, *, clear: bool, owner: int | str = "shared") -> Path:
    """The temporary folder a checkpoint of `step` is written into before `commit_checkpoint`.

    Args:
        run_dir: The run's folder.
        step: The step the checkpoint is of.
        clear: Remove what a killed writer left and create the folder (the one writer, or
            rank 0 when every rank writes shards into it).
        owner: Makes the name unique to its writer; "shared" for a folder all ranks write.

    Raises:
        CheckpointError: The folder cannot be made.
    """
    root = run_dir / CHECKPOINTS
    tmp = root / f".tmp-step-{step:06d}-{owner}"
    if clear:
        with _writing(tmp, f"step-{step:06d}", root):
            root.mkdir(parents=True, exist_ok=True)
            _remove_stale_temporaries(root)
            tmp.mkdir()
    return tmp


def write_resume_files(folder: Path, state: TrainState) -> None:
    """The RNG states and `state.json` (written last: a folder holding it is complete)."""
    tensors, metadata = _capture_rng()
    save_file(tensors, str(folder / "rng.safetensors"), metadata=metadata)
    payload = {"format_version": FORMAT_VERSION, **asdict(state)}
    (folder / "state.json").write_text(json.dumps(payload, indent=2, sort_keys=True))


def commit_checkpoint(run_dir: Path, tmp: Path, state: TrainState, keep: int) -> Path:
    """Rename a complete staging folder into place as `step-N`, point `latest` at it, prune.

    Raises:
        CheckpointError: The folder cannot be moved; the previous checkpoint is intact.
    """
    root = run_dir / CHECKPOINTS
    name = f"step-{state.step:06d}"
    with _writing(tmp, name, root):
        _fsync(tmp)
        _move_into_place(tmp, root / name)
        _write_atomic(root / LATEST, name + "\n")
    _prune(root, keep, state.step)
    return root / name


@contextlib.contextmanager
def _writing(tmp: Path, name: str, root: Path) -> Iterator[None]:
    """Turn a failing write into one CheckpointError, never leaving a partial folder behind."""
    try:
        yield
    except BaseException as error:
        shutil.rmtree(tmp, ignore_errors=True)
        if not isinstance(error, _WRITE_FAILURES):
            raise
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise CheckpointError(
            f"Cannot write checkpoint {name} in {root} ({_first_line(reason)}); "
            "free disk space or fix the folder's permissions (the previous checkpoint is kept)."
        ) from None


def checkpoint_due(config: CheckpointConfig, step: int, seconds_since_last: float) -> bool:
    """Whether a checkpoint is due after optimiser step `step`.

    Args:
        config: The checkpoint cadence (every N steps and/or every N minutes).
        step: Optimiser steps done.
        seconds_since_last: Time since the last checkpoint was written (or the run began).
    """
    if config.every_steps is not None and step % config.every_steps == 0:
        return True
    return config.every_minutes is not None and seconds_since_last >= config.every_minutes * 60


def load_latest(run_dir: Path) -> Checkpoint | None:
    """The newest complete checkpoint of a run, or None when it has none.

    Follows the `latest` pointer; if it is missing or points nowhere (a crash between two
    renames), falls back to the highest-numbered complete checkpoint folder.

    Raises:
        CheckpointError: The checkpoint's state.json is unreadable or of another format.
    """
    root = run_dir / CHECKPOINTS
    if not root.is_dir():
        return None
    pointer = root / LATEST
    candidate: Path | None = None
    if pointer.is_file() and _STEP_DIR.match(named := pointer.read_text().strip()):
        candidate = root / named
    if candidate is None or not (candidate / "state.json").is_file():
        complete = [path for _, path in _step_dirs(root) if (path / "state.json").is_file()]
        candidate = complete[-1] if complete else None
    return None if candidate is None else _read_checkpoint(candidate)


def list_checkpoints(run_dir: Path) -> list[Path]:
    """The complete checkpoint folders of a run, oldest first."""
    root = run_dir / CHECKPOINTS
    if not root.is_dir():
        return []
    return [path for _, path in _step_dirs(root) if (path / "state.json").is_file()]


def _read_checkpoint(path: Path) -> Checkpoint:
    try:
        raw = json.loads((path / "state.json").read_text())
        if raw.pop("format_version", None) != FORMAT_VERSION:
            raise ValueError("unknown format version")
        return Checkpoint(path, TrainState(**raw))
    except (OSError, ValueError, TypeError) as error:
        raise CheckpointError(
            f"Checkpoint {path} cannot be read ({_first_line(error)}); "
            "delete it to resume from the one before, or start a new run."
        ) from None


def _write_contents(
    folder: Path,
    model: nn.Module,
    full_state: tuple[dict[str, Any], dict[str, Any]] | None,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
) -> None:
    if full_state is None:
        # save_model stores tied weights once and copies device tensors to contiguous CPU ones
        save_model(model, str(folder / "model.safetensors"))
        optimizer_state = optimizer.state_dict()
    else:
        weights, optimizer_state = full_state
        save_file(
            {k: v.contiguous() for k, v in weights.items()}, str(folder / "model.safetensors")
        )
    with open(folder / "optimizer.pt", "wb") as handle:
        torch.save({"optimizer": optimizer_state, "scheduler": scheduler.state_dict()}, handle)


def is_sharded(model: nn.Module) -> bool:
    """Whether `model` holds FSDP2 shards (DTensor parameters) rather than whole tensors."""
    if not torch.distributed.is_available():
        return False
    from torch.distributed.tensor import DTensor

    return any(isinstance(parameter, DTensor) for parameter in model.parameters())


def _full_state(
    model: nn.Module, optimizer: torch.optim.Optimizer
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Full (unsharded) CPU weights and optimiser state of an FSDP2 model; rank 0 gets them,
    the other ranks get empty dicts (a collective: every rank must call it)."""
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
        get_optimizer_state_dict,
    )

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    weights: dict[str, Any] = get_model_state_dict(model, options=options)
    optimizer_state: dict[str, Any] = get_optimizer_state_dict(model, optimizer, options=options)
    return weights, optimizer_state


def _set_full_state(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    weights: dict[str, Any],
    saved: dict[str, Any],
) -> None:
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    options = StateDictOptions(full_state_dict=True)
    set_model_state_dict(model, weights, options=options)
    set_optimizer_state_dict(model, optimizer, saved["optimizer"], options=options)


def _capture_rng() -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """RNG states as tensors + JSON metadata (safetensors holds both, no pickle)."""
    _, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state(legacy=True)
    py_version, py_internal, py_gauss = random.getstate()
    tensors = {
        "torch_cpu": torch.get_rng_state(),
        "numpy_keys": torch.from_numpy(np.asarray(np_keys, dtype=np.int64)),
        "python_internal": torch.tensor(py_internal, dtype=torch.int64),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for index, cuda_state in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"torch_cuda_{index}"] = cuda_state
    metadata = {
        "numpy": json.dumps([int(np_pos), int(np_has_gauss), float(np_gauss)]),
        "python": json.dumps([py_version, py_gauss]),
    }
    return tensors, metadata


def _restore_rng(path: Path) -> None:
    tensors = load_file(path)
    with safe_open(path, framework="pt") as handle:
        metadata = handle.metadata()
    torch.set_rng_state(tensors["torch_cpu"])
    cuda_names = sorted(
        (name for name in tensors if name.startswith("torch_cuda_")),
        key=lambda name: int(name.rsplit("_", 1)[1]),
    )
    if cuda_names and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([tensors[name] for name in cuda_names])
    np_pos, np_has_gauss, np_gauss = json.loads(metadata["numpy"])
    np_keys = tensors["numpy_keys"].numpy().astype(np.uint32)
    np.random.set_state(("MT19937", np_keys, np_pos, np_has_gauss, np_gauss))
    py_version, py_gauss = json.loads(metadata["python"])
    internal = tuple(int(v) for v in tensors["python_internal"].tolist())
    random.setstate((py_version, internal, py_gauss))


def _move_into_place(tmp: Path, final: Path) -> None:
    if final.exists():
        # the same step written again (a resumed run re-reaching it): swap, then drop the old
        old = final.with_name(f".old-{final.name}-{os.getpid()}")
        os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, final)
    _fsync(final.parent)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}")
    with open(tmp, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    _fsync(path.parent)


def _fsync(folder: Path) -> None:
    """Flush a folder's files and the folder entry itself (survives power loss)."""
    for child in folder.iterdir():
        if child.is_file():
            with open(child, "rb") as handle:
                os.fsync(handle.fileno())
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _step_dirs(root: Path) -> list[tuple[int, Path]]:
    found = []
    for child in root.iterdir():
        match = _STEP_DIR.match(child.name)
        if match and child.is_dir():
            found.append((int(match.group(1)), child))
    return sorted(found)


def _remove_stale_temporaries(root: Path) -> None:
    # left by a writer killed mid-checkpoint; only rank 0 of one run writes here
    for child in root.iterdir():
        if child.name.startswith((".tmp-", ".old-")):
            if child.is_dir():
                shutil.rmtree(child, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    child.unlink()


def _prune(root: Path, keep: int, newest: int) -> None:
    older = [path for step, path in _step_dirs(root) if step < newest]
    for path in older[: max(0, len(older) - (keep - 1))]:
        shutil.rmtree(path, ignore_errors=True)


def _first_line(error: object) -> str:
    """The first sentence of an inner error, short enough to sit inside ours."""
    text = str(error).strip().splitlines()
    first = text[0].split(". ")[0].rstrip(".") if text else type(error).__name__
    return first if len(first) <= 160 else first[:157] + "..."
