from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import assert_cli_error, json_out
from tests.train.conftest import copy_home, trained_adult_template


@pytest.fixture
def home(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `cli` fixture's FORGEML_HOME holding the trained Adult models."""
    return copy_home(trained_adult_template(tmp_path_factory), tmp_path / "home")


@pytest.mark.slow
def test_optimize_onnx_registers_a_child_version_and_compare_prints_rows(cli, home: Path) -> None:
    out = json_out(cli("optimize", "adult-mlp@v1", "--onnx", "--repeats", "2", "--json"))
    assert (out["model"], out["parent"]) == ("adult-mlp@v3", "adult-mlp@v1")
    assert out["report"]["max_abs_diff"] < 1e-4
    shown = json_out(cli("models", "show", "adult-mlp@v3", "--json"))
    assert shown["parent"] == "adult-mlp@v1"

    rows = json_out(
        cli("models", "compare", "adult-mlp@v1", "adult-mlp@v3", "--repeats", "2", "--json")
    )
    assert [(r["ref"], r["runtime"]) for r in rows] == [
        ("adult-mlp@v1", "torch"),
        ("adult-mlp@v3", "onnx"),
    ]
    table = cli("models", "compare", "adult-mlp@v1", "adult-mlp@v3", "--repeats", "1")
    assert table.code == 0, table.stderr
    # the table folds long cells on an 80-column terminal; runtimes fit their column
    assert ("torch" in table.stdout, "onnx" in table.stdout) == (True, True)


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (("nosuch@v1", "--onnx"), "is not registered", 1),
        (("adult-mlp@v1", "--prune", "1.5"), "strictly between 0 and 1", 2),
        (("adult-mlp@v1", "--onnx", "--prune", "0.5"), "exactly one of", 2),
        (("adult-mlp@v1",), "exactly one of", 2),
        (("adult-mlp@v1", "--quantize", "int4"), "supports int8, not 'int4'", 2),
        (("adult-mlp@v1", "--onnx", "--finetune-steps", "3"), "only to --prune", 2),
        (("adult-mlp@v1", "--onnx", "--per-tensor"), "only to --quantize int8", 2),
    ],
)
def test_bad_optimize_requests_exit_with_one_sentence(
    cli, home: Path, args: tuple[str, ...], message: str, code: int
) -> None:
    assert_cli_error(cli("optimize", *args), message, code)


def test_compare_rejects_a_split_the_model_lacks(cli, home: Path) -> None:
    assert_cli_error(cli("models", "compare", "adult-mlp@v1", "--split", "dev"), "Unknown split", 2)


def test_compare_on_cuda_without_a_gpu_says_so_once_and_scores_as_the_cpu(
    cli, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    from forgeml.core import devices

    if torch.cuda.is_available():
        pytest.skip("checks the fallback of a CPU machine")
    monkeypatch.setattr(devices, "_said", set())
    args = ("models", "compare", "adult-mlp@v1", "--repeats", "1", "--json", "--device")

    on_cpu = cli(*args, "cpu")
    on_cuda = cli(*args, "cuda")

    assert on_cpu.code == 0 and on_cpu.stderr == "", on_cpu.stderr
    assert on_cuda.code == 0, on_cuda.stderr
    assert on_cuda.stderr == "--device cuda: torch sees no CUDA GPU here; running on the CPU.\n"
    cpu_rows, cuda_rows = json_out(on_cpu), json_out(on_cuda)
    assert [(r["ref"], r["device"], r["value"]) for r in cuda_rows] == [
        (r["ref"], "cpu", r["value"]) for r in cpu_rows
    ]


def test_a_device_that_is_not_one_is_a_usage_error(cli, home: Path) -> None:
    assert_cli_error(cli("models", "compare", "adult-mlp@v1", "--device", "tpu"), "tpu", 2)
