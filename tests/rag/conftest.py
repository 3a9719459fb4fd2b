from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from forgeml.rag.embeddings import MiniLMEmbedder, default_embedder

STDLIB_MODULES = ("bisect", "heapq", "json", "csv", "textwrap", "shlex")


@pytest.fixture(scope="session", autouse=True)
def _single_threaded() -> Iterator[None]:
    # these tests embed and search a few texts at a time, which gains nothing from more
    # threads; on a shared 2-core machine OpenMP's spinning threads made them 3-30x slower
    import faiss

    embedder, before = default_embedder(), faiss.omp_get_max_threads()
    embedder.threads = 1
    faiss.omp_set_num_threads(1)
    yield
    embedder.threads = None
    faiss.omp_set_num_threads(before)


@pytest.fixture(scope="session")
def embedder() -> MiniLMEmbedder:
    """The process's one MiniLM embedder (the CLI in-process uses the same)."""
    return default_embedder()


def module_markdown(module: ModuleType) -> str:
    """A module's documentation as markdown: its docstring, then one section per public object."""
    parts = [f"# {module.__name__}\n\n{inspect.getdoc(module)}\n"]
    for name, value in inspect.getmembers(module):
        if name.startswith("_") or not callable(value):
            continue
        doc = inspect.getdoc(value)
        owner = getattr(value, "__module__", None) or ""
        if doc and owner.lstrip("_") == module.__name__:
            parts.append(f"## {name}\n\n{doc}\n")
    return "\n".join(parts)


def write_stdlib_docs(folder: Path, names: tuple[str, ...] = STDLIB_MODULES) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        module = __import__(name)
        (folder / f"{name}.md").write_text(module_markdown(module), encoding="utf-8")
    return folder


@pytest.fixture
def stdlib_docs(tmp_path: Path) -> Path:
    return write_stdlib_docs(tmp_path / "docs")


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    try:
        yield workspace
    finally:
        workspace.close()
