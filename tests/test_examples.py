"""Every shipped example config validates, and every example runs as its README says."""

from __future__ import annotations

import json
import math
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from forgeml.core.configfile import load_yaml_model
from forgeml.data.clean import CleanParams
from forgeml.data.features import FeatureSpecConfig
from forgeml.data.validate import Expectations
from forgeml.train.config import TrainConfig, load_config
from tests.cli.conftest import json_out
from tests.conftest import CliResult
from tests.train.conftest import EXAMPLES, REPO, SHARED_DATA, copy_empty_home

Cli = Callable[..., CliResult]

CONFIG_MODELS: dict[str, type[BaseModel]] = {
    "train.yaml": TrainConfig,
    "lora.yaml": TrainConfig,
    "full.yaml": TrainConfig,
    "lstm.yaml": TrainConfig,
    "gru.yaml": TrainConfig,
    "clean.yaml": CleanParams,
    "expectations.yaml": Expectations,
    "features.yaml": FeatureSpecConfig,
}
EXAMPLE_CONFIGS = sorted(EXAMPLES.rglob("*.yaml"))
TRAIN_CONFIGS = [path for path in EXAMPLE_CONFIGS if CONFIG_MODELS.get(path.name) is TrainConfig]


def _name(path: Path) -> str:
    return str(path.relative_to(EXAMPLES))


def readme_commands(folder: Path) -> list[list[str]]:
    """The shell commands of the README's ```sh blocks, one token list per line."""
    text = (folder / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    lines = [line for block in blocks for line in block.splitlines()]
    return [tokens for line in lines if (tokens := shlex.split(line, comments=True))]


def test_every_example_has_a_readme_with_commands() -> None:
    folders = sorted(path for path in EXAMPLES.iterdir() if path.is_dir())

    assert [f.name for f in folders] == [
        "adult",
        "digits",
        "sst2",
        "sst2-rnn",
        "tinygpt",
        "wordnet",
    ]
    for folder in folders:
        commands = readme_commands(folder)
        assert commands, folder
        assert all(tokens[0] in ("forgeml", "python") for tokens in commands), folder


@pytest.mark.parametrize("path", EXAMPLE_CONFIGS, ids=_name)
def test_every_example_config_validates_against_its_model(path: Path) -> None:
    assert path.name in CONFIG_MODELS, f"{path}: no model known to validate it against"
    model = CONFIG_MODELS[path.name]

    parsed = load_config(str(path)) if model is TrainConfig else load_yaml_model(path, model)

    assert isinstance(parsed, model)


@pytest.mark.parametrize("path", EXAMPLE_CONFIGS, ids=_name)
def test_every_example_config_is_used_by_its_readme(path: Path) -> None:
    used = [token for tokens in readme_commands(path.parent) for token in tokens]

    assert str(path.relative_to(REPO)) in used


@pytest.mark.parametrize("path", TRAIN_CONFIGS, ids=_name)
def test_the_datasets_a_training_example_reads_are_added_by_its_readme(path: Path) -> None:
    config = load_config(str(path))
    added = {tokens[3] for tokens in readme_commands(path.parent) if tokens[1:3] == ["data", "add"]}
    wanted = {config.data.dataset.partition("@")[0]}
    if config.data.eval_dataset:
        wanted.add(config.data.eval_dataset.partition("@")[0])

    assert wanted <= added


# --- running the READMEs ------------------------------------------------------------------


class ReadmeRun:
    """Runs a README's commands in-process from the repository root, on small settings."""

    def __init__(self, cli: Cli, tmp_path: Path, small: dict[str, list[str]]) -> None:
        self.cli = cli
        self.tmp_path = tmp_path
        self.small = small  # config path -> `key=value` overrides
        self.replace: dict[str, str] = {}
        self.runs: dict[str, str] = {}  # config path -> run id
        self.shown: dict[str, dict[str, Any]] = {}  # run id -> `runs show --json`
        self.compared: dict[str, Any] | None = None

    def path(self, token: str) -> str:
        """README paths under /tmp/ go to this test's folder; `replace` swaps whole tokens."""
        if token in self.replace:
            return self.replace[token]
        return (
            str(self.tmp_path / token.removeprefix("/tmp/")) if token.startswith("/tmp/") else token
        )

    def run(self, folder: Path) -> ReadmeRun:
        for tokens in readme_commands(folder):
            args = [self.path(token) for token in tokens]
            if args[0] == "python":
                subprocess.run([sys.executable, *args[1:]], check=True, cwd=REPO, timeout=300)
            else:
                self.forgeml(args[1:])
        return self

    def forgeml(self, args: list[str]) -> None:
        if args[0] in ("train", "finetune"):
            overrides = [a for item in self.small[args[1]] for a in ("--set", item)]
            result = self.cli(*args, *overrides, "--json")
            assert result.code == 0, result.stderr
            # BUG (tests/cli/test_train_cli.py::test_finetune_json_output_is_json_only):
            # `finetune --json` without lora/distill prints a note before the JSON
            self.runs[args[1]] = json.loads(result.stdout[result.stdout.index("{") :])["run_id"]
            return
        args = [self._run_id(arg) for arg in args]
        if args[:2] == ["runs", "show"]:
            self.shown[args[2]] = json_out(self.cli(*args))
        elif args[:2] == ["runs", "compare"]:
            plot = self.tmp_path / "compare.png"
            self.compared = json_out(self.cli(*args, "--plot", plot, "--json"))
        else:
            json_out(self.cli(*args, "--json"))

    def _run_id(self, arg: str) -> str:
        """`<RUN>` is the latest run; `<LORA_RUN>` the run of the config named lora.yaml."""
        match = re.fullmatch(r"<(?:(\w+)_)?RUN>", arg)
        if match is None:
            return arg
        if match.group(1) is None:
            return list(self.runs.values())[-1]
        stem = match.group(1).lower()
        return next(run for config, run in self.runs.items() if Path(config).stem == stem)

    def metrics(self, config: str) -> dict[str, Any]:
        run_id = self.runs[config]
        shown = self.shown.get(run_id) or json_out(self.cli("runs", "show", run_id, "--json"))
        assert shown["status"] == "FINISHED"
        return dict(shown["metrics"])


@pytest.fixture
def readme(
    cli: Cli,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[[dict[str, list[str]]], ReadmeRun]:
    monkeypatch.chdir(REPO)  # README paths are relative to the repository root
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    copy_empty_home(tmp_path_factory, tmp_path / "home")
    return lambda small: ReadmeRun(cli, tmp_path, small)


def _need(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"shared data {path} is missing")


@pytest.mark.slow
def test_the_adult_example_runs_as_its_readme_says(readme: Any) -> None:
    _need(SHARED_DATA / "adult")
    config = "examples/adult/train.yaml"

    done = readme({config: ["epochs=null", "max_steps=20"]}).run(EXAMPLES / "adult")

    metrics = done.metrics(config)
    assert done.runs[config] in done.shown
    assert 0.5 < metrics["accuracy"] <= 1
    assert {"accuracy/sex=Male", "accuracy/sex=Female", "test_accuracy"} <= set(metrics)
    registered = json_out(done.cli("models", "show", "adult-mlp@v1", "--json"))
    assert registered["dataset"] == "adult@v4"  # ingest, clean, validate, split


@pytest.mark.slow
def test_the_digits_example_runs_as_its_readme_says(readme: Any) -> None:
    pytest.importorskip("sklearn", reason="make_images.py reads scikit-learn's digits")
    config = "examples/digits/train.yaml"

    done = readme({config: ["epochs=1"]}).run(EXAMPLES / "digits")

    metrics = done.metrics(config)
    assert done.runs[config] in done.shown
    assert 0 <= metrics["accuracy"] <= 1
    assert len(metrics["confusion_matrix"]["eval"]) == 10
    assert "test_accuracy" in metrics
    assert json_out(done.cli("models", "show", "digits-cnn", "--json"))["version"] == 1


@pytest.mark.slow
def test_the_tinygpt_example_runs_as_its_readme_says(readme: Any) -> None:
    config = "examples/tinygpt/train.yaml"

    done = readme({config: ["max_steps=5"]}).run(EXAMPLES / "tinygpt")

    metrics = done.metrics(config)
    assert done.runs[config] in done.shown
    # the README splits 0.9,0.1 (train and test): there is no validation split to evaluate
    perplexity = metrics["test_perplexity"]
    assert perplexity == pytest.approx(math.exp(metrics["test_loss"]), rel=1e-4)
    assert 1 < perplexity < 300  # bytes: 256 choices, about uniform after 5 steps
    assert json_out(done.cli("models", "show", "pydoc-gpt", "--json"))["version"] == 1


@pytest.mark.slow
def test_the_sst2_example_runs_as_its_readme_says(readme: Any, tmp_path: Path) -> None:
    _need(SHARED_DATA / "sst2")
    # the full dev set takes minutes to evaluate on a CPU; its first 32 sentences do here
    dev = tmp_path / "dev-sample.tsv"
    lines = (SHARED_DATA / "sst2" / "dev.tsv").read_text(encoding="utf-8").splitlines(True)
    dev.write_text("".join(lines[:33]), encoding="utf-8")
    small = ["data.max_rows=32", "epochs=null", "max_steps=2"]
    lora, full = "examples/sst2/lora.yaml", "examples/sst2/full.yaml"
    run = readme({lora: small, full: small})
    run.replace["../shared/data/sst2/dev.tsv"] = str(dev)

    done = run.run(EXAMPLES / "sst2")

    for config in (lora, full):
        metrics = done.metrics(config)
        assert 0 <= metrics["accuracy"] <= 1
        assert "test_accuracy" not in metrics  # test_split: null
    assert done.compared is not None
    assert [r["run_id"] for r in done.compared["runs"]] == [done.runs[lora], done.runs[full]]
    assert "accuracy" in done.compared["metrics"]
    assert (tmp_path / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lora_model = json_out(done.cli("models", "show", "sst2-minilm-lora", "--json"))
    assert lora_model["parent"].startswith("hf:")
    assert json_out(done.cli("models", "show", "sst2-minilm-full", "--json"))["version"] == 1


@pytest.mark.slow
def test_the_sst2_rnn_example_runs_as_its_readme_says(readme: Any, tmp_path: Path) -> None:
    _need(SHARED_DATA / "sst2")
    dev = tmp_path / "dev-sample.tsv"
    lines = (SHARED_DATA / "sst2" / "dev.tsv").read_text(encoding="utf-8").splitlines(True)
    dev.write_text("".join(lines[:65]), encoding="utf-8")
    small = ["data.max_rows=256", "epochs=null", "max_steps=4", "model.params.hidden_size=16"]
    lstm, gru = "examples/sst2-rnn/lstm.yaml", "examples/sst2-rnn/gru.yaml"
    run = readme({lstm: small, gru: small})
    run.replace["../shared/data/sst2/dev.tsv"] = str(dev)

    done = run.run(EXAMPLES / "sst2-rnn")

    for config in (lstm, gru):
        assert 0 <= done.metrics(config)["accuracy"] <= 1
    assert done.compared is not None
    assert [r["run_id"] for r in done.compared["runs"]] == [done.runs[lstm], done.runs[gru]]
    exported = json_out(done.cli("models", "show", "sst2-lstm@v2", "--json"))
    assert exported["parent"] == "sst2-lstm@v1"
