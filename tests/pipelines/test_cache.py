"""The mutation test of the step cache key: each part changed alone changes the key."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from forgeml.core.workspace import Workspace
from forgeml.data import pipeline as data_pipeline
from forgeml.data.ingest import IngestOptions
from forgeml.pipelines import cache
from forgeml.pipelines.cache import CodeVersion, cache_key, step_key_parts
from forgeml.pipelines.steps import CommandStep, DataStep, StepBase
from tests.data.conftest import write_table_csv

CODE = CodeVersion(forgeml="0.1.0", git_commit="a" * 40, packages="b" * 64)
ENV = {"SEED": "1"}


def command(**fields: Any) -> CommandStep:
    base: dict[str, Any] = {
        "name": "report",
        "kind": "command",
        "argv": ["python", "report.py", "--rows", "10"],
        "reads": ["input.txt"],
        "env": ["SEED"],
    }
    return CommandStep.model_validate(base | fields)


def key(
    workspace: Workspace,
    folder: Path,
    step: StepBase,
    *,
    needed: dict[str, dict[str, Any]] | None = None,
    code: CodeVersion = CODE,
    environ: dict[str, str] | None = None,
) -> str:
    env = ENV if environ is None else environ
    parts = step_key_parts(workspace, step, folder, needed or {}, code, env)
    return cache_key(parts)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "input.txt").write_text("first\n")
    return tmp_path


def test_recomputing_with_nothing_changed_gives_the_same_key(
    workspace: Workspace, folder: Path
) -> None:
    first = key(workspace, folder, command(), needed={"up": {"x": 1}})
    # a rewrite with the same content, a fresh step object, a copied environment
    (folder / "input.txt").write_text("first\n")

    assert key(workspace, folder, command(), needed={"up": {"x": 1}}, environ=dict(ENV)) == first


def test_the_steps_name_and_how_it_is_scheduled_are_not_part_of_the_key(
    workspace: Workspace, folder: Path
) -> None:
    first = key(workspace, folder, command())

    assert key(workspace, folder, command(name="other", retries=3, timeout=9.0)) == first


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("argv", ["python", "report.py", "--rows", "11"]),
        ("argv", ["python", "report.py", "--rows"]),
        ("outputs", {"report": "report.txt"}),
        ("reads", []),
    ],
)
def test_changing_a_parameter_changes_the_key(
    workspace: Workspace, folder: Path, field: str, value: Any
) -> None:
    assert key(workspace, folder, command(**{field: value})) != key(workspace, folder, command())


def test_changing_the_kind_changes_the_key(workspace: Workspace, folder: Path) -> None:
    first = key(workspace, folder, command())
    parts = step_key_parts(workspace, command(), folder, {}, CODE, ENV)

    assert cache_key(replace(parts, kind="train")) != first
    assert cache_key(parts) == first


def test_changing_a_read_files_content_changes_the_key(workspace: Workspace, folder: Path) -> None:
    first = key(workspace, folder, command())
    (folder / "input.txt").write_text("second\n")

    assert key(workspace, folder, command()) != first


def test_changing_an_upstream_steps_outputs_changes_the_key(
    workspace: Workspace, folder: Path
) -> None:
    first = key(workspace, folder, command(), needed={"split": {"dataset": "d@v1"}})

    assert key(workspace, folder, command(), needed={"split": {"dataset": "d@v2"}}) != first


def test_changing_the_input_dataset_version_changes_the_key_flyte_1581(
    workspace: Workspace, tmp_path: Path
) -> None:
    """Flyte missed DataFrame inputs in its key (flyte#1581): here `small` is the same
    reference before and after, but its latest version's content differs."""
    source = write_table_csv(tmp_path / "small.csv", rows=40)
    data_pipeline.add(workspace, "small", source, IngestOptions())
    step = DataStep(name="clean", kind="data", derive="clean", dataset="small")
    first = key(workspace, tmp_path, step)
    assert key(workspace, tmp_path, step) == first

    write_table_csv(source, rows=41)
    data_pipeline.add(workspace, "small", source, IngestOptions())

    assert key(workspace, tmp_path, step) != first


def test_changing_an_added_files_content_changes_the_key(
    workspace: Workspace, tmp_path: Path
) -> None:
    write_table_csv(tmp_path / "small.csv", rows=40)
    step = DataStep(name="ingest", kind="data", add="small.csv", dataset="small")
    first = key(workspace, tmp_path, step)

    write_table_csv(tmp_path / "small.csv", rows=40, offset=1)

    assert key(workspace, tmp_path, step) != first


@pytest.mark.parametrize(
    "code",
    [
        replace(CODE, forgeml="0.1.1"),
        replace(CODE, git_commit="c" * 40),
        replace(CODE, git_commit=None),
        replace(CODE, packages="d" * 64),
    ],
    ids=["forgeml-version", "git-commit", "no-git-commit", "packages-digest"],
)
def test_changing_the_code_version_changes_the_key(
    workspace: Workspace, folder: Path, code: CodeVersion
) -> None:
    assert key(workspace, folder, command(), code=code) != key(workspace, folder, command())


@pytest.mark.parametrize("environ", [{"SEED": "2"}, {}, {"SEED": ""}])
def test_changing_a_declared_env_var_changes_the_key_kfp_14339(
    workspace: Workspace, folder: Path, environ: dict[str, str]
) -> None:
    """KFP's key ignores env vars (kfp#14339): a step declaring SEED must miss when it changes."""
    assert key(workspace, folder, command(), environ=environ) != key(workspace, folder, command())


def test_an_undeclared_env_var_is_not_part_of_the_key(workspace: Workspace, folder: Path) -> None:
    first = key(workspace, folder, command())

    assert key(workspace, folder, command(), environ=ENV | {"OTHER": "x"}) == first


def test_the_code_version_reads_forgeml_the_git_commit_and_the_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", str(tmp_path)], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "one"], cwd=tmp_path, check=True)
    first = CodeVersion.current(tmp_path)
    assert CodeVersion.current(tmp_path) == first
    assert first.git_commit is not None and len(first.git_commit) == 40

    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "two"], cwd=tmp_path, check=True)
    assert CodeVersion.current(tmp_path).git_commit != first.git_commit

    monkeypatch.setattr("forgeml.__version__", "9.9.9")
    assert CodeVersion.current(tmp_path).forgeml == "9.9.9"


def test_the_packages_digest_changes_with_any_distributions_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Dist:
        def __init__(self, name: str, version: str) -> None:
            self.metadata = {"Name": name}
            self.version = version

    installed = [Dist("polars", "1.0.0"), Dist("numpy", "2.0.0")]
    monkeypatch.setattr(cache.importlib.metadata, "distributions", lambda: iter(installed))
    first = cache.packages_digest()
    installed.reverse()
    assert cache.packages_digest() == first  # sorted: the order found does not matter

    installed[0] = Dist("numpy", "2.0.1")
    assert cache.packages_digest() != first


def test_the_packages_digest_of_this_environment_is_stable() -> None:
    assert cache.packages_digest() == cache.packages_digest()
