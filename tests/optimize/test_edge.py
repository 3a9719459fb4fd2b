from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from forgeml.core.workspace import Workspace
from forgeml.optimize.edge import export_edge
from forgeml.serve import ModelRepository, ServeOptions, build_app
from tests.cli.conftest import assert_cli_error
from tests.serve.conftest import adult_records

RUNTIME_ONLY = ("onnxruntime==1.32.0", "numpy==2.4.6")  # the pins of constraints.txt
TEXTS = [
    "a gorgeous, witty, seductive movie.",
    "The plot is nothing but boilerplate clichés; I hated it!!",
    "an UNFLINCHING look at grief — and at 1970s Berlin.",
    "[CLS] tokens in the text, naïve café déjà-vu, 東京 and emoji 🙂",
]


@pytest.fixture(scope="session")
def runtime_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding onnxruntime and numpy only (and their own dependencies)."""
    folder = tmp_path_factory.mktemp("edge-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    pip = [str(folder / "bin" / "python"), "-m", "pip", "install", "-q", *RUNTIME_ONLY]
    subprocess.run(pip, check=True, capture_output=True)
    return folder / "bin" / "python"


def _run_runner(python: Path, bundle: Path, rows: list[Any]) -> subprocess.CompletedProcess[str]:
    lines = "".join(json.dumps(row) + "\n" for row in rows)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(bundle.parent)}
    return subprocess.run(
        [str(python), "-I", str(bundle / "runner.py"), str(bundle)],
        input=lines, capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip


def _runner_answers(python: Path, bundle: Path, rows: list[Any]) -> list[Any]:
    done = _run_runner(python, bundle, rows)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def _server_answers(workspace: Workspace, ref: str, rows: list[Any]) -> list[Any]:
    repository = ModelRepository(workspace, [ref], ServeOptions())
    repository.load()
    name = ref.split("@", maxsplit=1)[0]

    async def post() -> httpx.Response:
        transport = httpx.ASGITransport(app=build_app(repository))
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
            return await client.post(f"/v1/models/{name}:predict", json={"instances": rows})

    try:
        response = asyncio.run(post())
    finally:
        repository.close()
    assert response.status_code == 200, response.text
    return list(response.json()["predictions"])


def _assert_same(runner: list[Any], server: list[Any]) -> None:
    assert [a["label"] for a in runner] == [a["label"] for a in server]
    classes = list(server[0]["probabilities"])
    got = np.array([[a["probabilities"][c] for c in classes] for a in runner])
    want = np.array([[a["probabilities"][c] for c in classes] for a in server])
    np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.slow
def test_the_tabular_edge_runner_answers_as_the_server_does(
    adult_workspace: Workspace, runtime_python: Path, tmp_path: Path
) -> None:
    bundle = export_edge(adult_workspace, "adult-mlp@v1", tmp_path / "edge", "fp32")
    assert set(bundle.files) == {"model.onnx", "model.json", "features.json", "runner.py"}
    rows = adult_records(24)
    answers = _runner_answers(runtime_python, bundle.folder, rows)
    _assert_same(answers, _server_answers(adult_workspace, "adult-mlp@v1", rows))

    chosen = export_edge(adult_workspace, "adult-mlp@v1", tmp_path / "auto").precision
    assert chosen.agreement is not None and chosen.rows > 100
    assert set(chosen.size_bytes) == {"fp32", "int8"}
    assert chosen.chosen == ("int8" if chosen.agreement >= 0.99 else "fp32")
    manifest = json.loads((tmp_path / "auto" / "manifest.json").read_text())
    assert manifest["precision"]["precision"] == chosen.chosen


@pytest.mark.slow
@pytest.mark.timeout(1800)  # the trained MiniLM template and its ONNX export, on a busy machine
def test_the_text_edge_runner_tokenizes_and_answers_as_the_server_does(
    text_workspace: Workspace, runtime_python: Path, tmp_path: Path
) -> None:
    bundle = export_edge(text_workspace, "sst2-minilm@v1", tmp_path / "edge", "fp32")
    assert "tokenizer.json" in bundle.files
    answers = _runner_answers(runtime_python, bundle.folder, TEXTS)
    _assert_same(answers, _server_answers(text_workspace, "sst2-minilm@v1", TEXTS))


@pytest.mark.slow
def test_the_runner_refuses_a_bundle_whose_files_were_altered(
    adult_workspace: Workspace, runtime_python: Path, tmp_path: Path
) -> None:
    bundle = export_edge(adult_workspace, "adult-mlp@v1", tmp_path / "edge", "fp32").folder
    features = json.loads((bundle / "features.json").read_text())
    features["steps"][0]["shift"] = 0.0
    (bundle / "features.json").write_text(json.dumps(features))
    done = _run_runner(runtime_python, bundle, adult_records(1))
    assert done.returncode == 1
    assert done.stderr == (
        "error: features.json does not match its manifest digest; the bundle was altered.\n"
    )


def test_export_into_a_folder_that_is_not_empty_is_one_sentence(cli: Any, tmp_path: Path) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    result = cli("models", "export", "adult@v1", "--target", "edge", str(tmp_path / "full"))
    assert_cli_error(result, "is not an empty folder")
    assert (tmp_path / "full" / "keep.txt").read_text() == "mine"


def test_export_of_a_model_that_does_not_exist_is_one_sentence(cli: Any, tmp_path: Path) -> None:
    result = cli("models", "export", "nothing@v3", "--target", "edge", str(tmp_path / "edge"))
    assert_cli_error(result, "nothing")
    assert not (tmp_path / "edge").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".forgeml-edge")] == []
