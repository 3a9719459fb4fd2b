from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from huggingface_hub import ModelCard

from tests.cli.conftest import assert_cli_error, assert_ok, json_out
from tests.conftest import CliResult
from tests.governance.conftest import CARD_MODEL, carded_template
from tests.train.conftest import copy_home

Cli = Callable[..., CliResult]


@pytest.fixture(autouse=True)
def card_home(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """The `cli` fixture's FORGEML_HOME: a copy of the carded workspace (tests/governance)."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return copy_home(carded_template(tmp_path_factory), tmp_path / "home")


def test_card_prints_markdown_whose_front_matter_the_hub_reads(cli: Cli) -> None:
    result = cli("models", "card", "adult-mlp")

    assert_ok(result)
    card = ModelCard(result.stdout)
    assert card.data.datasets == ["adult@v4"]
    assert "## Compute and cost" in card.text
    assert "| sex | Female |" in card.text


def test_card_json_and_output_file(cli: Cli, tmp_path: Path) -> None:
    target = tmp_path / "cards" / "adult.html"

    payload = json_out(cli("models", "card", CARD_MODEL, "--format", "html",
                           "--output", target, "--json"))  # fmt: skip

    assert (payload["ref"], payload["format"], payload["output"]) == (
        CARD_MODEL, "html", str(target),
    )  # fmt: skip
    assert target.read_text() == payload["card"]
    assert payload["card"].startswith("<!doctype html>")
    written = cli("models", "card", CARD_MODEL, "--output", tmp_path / "README.md")
    assert_ok(written)
    assert "md card written to" in written.stdout + written.stderr
    assert ModelCard.load(tmp_path / "README.md").data.model_name == CARD_MODEL


def test_intended_use_and_limitations_are_recorded_and_shown(cli: Cli) -> None:
    script = "<script>alert(1)</script>"
    set_use = cli("models", "card", CARD_MODEL, "--intended-use", f"Census research {script}")
    assert_ok(set_use)
    assert f"## Intended use\n\nCensus research {script}\n" in set_use.stdout

    page = json_out(cli("models", "card", "adult-mlp", "--limitations", "Not for hiring.",
                        "--format", "html", "--json"))["card"]  # fmt: skip

    assert "Census research &lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>" not in page
    assert "<p>Not for hiring.</p>" in page
    log = json_out(cli("audit", "log", "--json"))
    assert [e["payload"] for e in log if e["action"] == "model.card"] == [
        {"fields": ["intended_use"]},
        {"fields": ["limitations"]},
    ]


@pytest.mark.parametrize(
    ("args", "expected", "code"),
    [
        (["nosuch@v1"], "Model 'nosuch' is not registered", 1),
        (["adult-mlp@v7"], "Model 'adult-mlp' has no version v7", 1),
        (["adult-mlp@nosuch"], "Model 'adult-mlp' has no alias 'nosuch'", 1),
        ([CARD_MODEL, "--format", "pdf"], "Unknown card format 'pdf': use md or html.", 2),
        ([CARD_MODEL, "--intended-use", " "], "The intended use text is empty.", 2),
        ([CARD_MODEL, "--output", "{tmp}"], "is a folder; give a file name", 2),
    ],
)
def test_bad_input_is_one_sentence(
    cli: Cli, tmp_path: Path, args: list[str], expected: str, code: int
) -> None:
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in args]
    assert_cli_error(cli("models", "card", *args), expected, code=code)


def test_a_refused_output_records_no_note(cli: Cli, tmp_path: Path) -> None:
    refused = cli("models", "card", CARD_MODEL, "--intended-use", "x", "--output", tmp_path)

    assert refused.code == 2
    assert "## Intended use\n\nnot recorded\n" in cli("models", "card", CARD_MODEL).stdout


@pytest.mark.slow
def test_export_writes_the_card_beside_the_model_files(cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "edge"

    payload = json_out(cli("models", "export", CARD_MODEL, folder, "--precision", "fp32",
                           "--json"))  # fmt: skip

    assert payload["card"] == "README.md"
    card = ModelCard.load(folder / "README.md")
    assert card.data.model_name == CARD_MODEL
    manifest = json.loads((folder / "manifest.json").read_text())
    assert "README.md" not in manifest["files"]  # the runner checks the model files only
