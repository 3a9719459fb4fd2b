"""Helpers shared by the text-generation tests: the trained text bundles, one torch thread."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from forgeml.serve.generate import TextGenerator
from forgeml.tracking import download_bundle, get_model_version


def download_bundles(home: Path, refs: Iterable[str], root: Path) -> dict[str, Path]:
    """The unpacked bundle of each model version ref in `home`, under `root / ref`."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        workspace = Workspace(Settings(home=home, user="tester"))
        try:
            return {
                ref: download_bundle(workspace, get_model_version(workspace, ref), root / ref)
                for ref in refs
            }
        finally:
            workspace.close()


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread() -> Iterator[None]:
    """One intra-op thread: a tiny model's per-byte steps only lose time to thread hand-offs."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def complete(generator: TextGenerator, prompt: str, max_tokens: int, **options: Any) -> str:
    """The whole continuation `generator.stream` yields, joined."""
    return "".join(generator.stream(prompt, max_tokens, **options))
