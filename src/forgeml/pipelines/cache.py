"""Caching by content: a step's key, and where a key's outputs are kept.

The key is sha256 over the canonical JSON of everything that can change what a step
makes: its kind, its resolved parameters (after `${...}` substitution), the digests of its
inputs (files, dataset and model versions, the outputs of the steps it needs), the code
version (forgeml's, and the git commit of the working directory), a digest of the
installed distributions, the values of the environment variables it declares, and the
project it runs in (a step of one project never reuses another's outputs).
Leaving any one out makes a stale hit possible: KFP's key ignores env vars (kfp#14339),
and Flyte missed DataFrame inputs (flyte#1581). `tests/pipelines/test_cache.py` changes
each part in turn.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from forgeml.core.artifacts import file_digest
from forgeml.core.code import git_commit
from forgeml.core.ids import json_digest, sha256_bytes
from forgeml.core.store import PipelineCacheRecord
from forgeml.pipelines.kinds import get_kind, params_of
from forgeml.pipelines.steps import DIGESTS_OUTPUT

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace
    from forgeml.pipelines.steps import StepBase

KEY_SCHEMA = 2  # bumped when what goes into a key changes: old entries then never match


@dataclass(frozen=True)
class CodeVersion:
    """What code ran: forgeml's version, the user's commit, the installed packages."""

    forgeml: str
    git_commit: str | None
    packages: str  # digest of `name==version` of every installed distribution

    @classmethod
    def current(cls, cwd: Path) -> CodeVersion:
        """This process's code version, for a pipeline whose files are in `cwd`."""
        from forgeml import __version__

        return cls(__version__, git_commit(cwd), packages_digest())


@dataclass(frozen=True)
class KeyParts:
    """Every part of a step's cache key (see the module docstring)."""

    kind: str
    params: Mapping[str, Any]
    inputs: Mapping[str, str]
    code: CodeVersion
    env: Mapping[str, str | None] = field(default_factory=dict)
    # the project the step runs in: a step of another project never reuses its outputs
    project: str = "default"

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": KEY_SCHEMA,
            "project": self.project,
            "kind": self.kind,
            "params": dict(self.params),
            "inputs": dict(self.inputs),
            "code": asdict(self.code),
            "env": dict(self.env),
        }


def cache_key(parts: KeyParts) -> str:
    """The step's key: sha256 of the canonical JSON of its parts."""
    return json_digest(parts.as_dict())


def step_key_parts(
    workspace: Workspace,
    step: StepBase,
    base: Path,
    needed: Mapping[str, Mapping[str, Any]],
    code: CodeVersion,
    environ: Mapping[str, str] | None = None,
) -> KeyParts:
    """The key parts of a resolved step.

    Args:
        workspace: where its dataset and model inputs are resolved.
        step: the step, its `${...}` already substituted.
        base: the folder its relative paths start from.
        needed: the outputs of each step it needs (their digests join its inputs).
        code: the code version.
        environ: where its declared variables are read (default: this process's).

    Raises:
        ForgemlError: an input the step reads is missing.
    """
    kind = get_kind(step.kind)
    inputs = kind.inputs(workspace, step, base)
    for name, outputs in needed.items():
        inputs[f"step:{name}"] = json_digest(dict(outputs))
    env = declared_env(step.env, environ)
    return KeyParts(kind.name, params_of(step), inputs, code, env, workspace.project)


def declared_env(names: list[str], environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The values of the variables a step declares (None for one that is unset)."""
    env = os.environ if environ is None else environ
    return {name: env.get(name) for name in names}


def packages_digest() -> str:
    """sha256 of the sorted `name==version` lines of every installed distribution."""
    lines = set()
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            lines.add(f"{name.lower()}=={dist.version}")
    return sha256_bytes("\n".join(sorted(lines)).encode())


def lookup(session: Session, key: str) -> dict[str, Any] | None:
    """The outputs recorded under `key`, or None on a miss.

    Output files (a command step's, listed with their digests) must still hold the bytes
    they held: one deleted or changed since makes the entry a miss.
    """
    entry = session.get(PipelineCacheRecord, key)
    if entry is None:
        return None
    outputs = dict(entry.outputs)
    for name, digest in outputs.get(DIGESTS_OUTPUT, {}).items():
        path = Path(outputs[name])
        if not path.is_file() or file_digest(path) != digest:
            return None
    return outputs


def remember(
    session: Session, key: str, parts: KeyParts, outputs: dict[str, Any], step_run_id: str
) -> None:
    """Record `outputs` under `key` (the first writer of a key keeps it)."""
    if session.get(PipelineCacheRecord, key) is not None:
        return
    session.add(
        PipelineCacheRecord(
            key=key,
            kind=parts.kind,
            outputs=outputs,
            parts=parts.as_dict(),
            step_run_id=step_run_id,
        )
    )
