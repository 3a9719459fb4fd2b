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

from forgeml.agents.spec import AgentSpec
from forgeml.cli import command_tree
from forgeml.core.configfile import load_yaml, load_yaml_model, parse_model
from forgeml.data.augment import AugmentParams
from forgeml.data.clean import CleanParams
from forgeml.data.features import FeatureSpecConfig
from forgeml.data.validate import Expectations
from forgeml.pipelines import load_pipeline
from forgeml.pipelines.steps import PipelineSpec
from forgeml.prompts import PromptSpec
from forgeml.tracking.tuning import TuneOptions
from forgeml.train.config import TrainConfig, apply_overrides, load_config
from forgeml.train.hpo import SearchSpace, to_overrides
from tests.cli.conftest import json_out
from tests.conftest import CliResult
from tests.train.conftest import EXAMPLES, REPO, copy_empty_home

Cli = Callable[..., CliResult]

CONFIG_MODELS: dict[str, type[BaseModel]] = {
    "train.yaml": TrainConfig,
    "lora.yaml": TrainConfig,
    "full.yaml": TrainConfig,
    "lstm.yaml": TrainConfig,
    "gru.yaml": TrainConfig,
    "rotate.yaml": TrainConfig,
    "clean.yaml": CleanParams,
    "expectations.yaml": Expectations,
    "features.yaml": FeatureSpecConfig,
    "augment.yaml": AugmentParams,
    "tune.yaml": TuneOptions,  # a training config with `tune` and `search` sections
    "adult-data.yaml": PipelineSpec,  # checked whole by `load_pipeline`
    "meters-stream.yaml": PipelineSpec,
    "qa.yaml": PromptSpec,
    "qa-module.yaml": PromptSpec,
    "agent.yaml": AgentSpec,
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
        "pipelines",
        "sst2",
        "sst2-rnn",
        "stdlib-rag",
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

    if model is TuneOptions:
        _check_tune_config(path)
        return
    if model is PipelineSpec:
        assert load_pipeline(path, []).spec.steps  # kinds, keys, references, no cycle
        return
    parsed = load_config(str(path)) if model is TrainConfig else load_yaml_model(path, model)

    assert isinstance(parsed, model)


def _check_tune_config(path: Path) -> None:
    """The `tune` section, the search space, and the training config at each bound."""
    data = load_yaml(path)
    parse_model(TuneOptions, data.pop("tune"), f"{path}: tune")
    space = SearchSpace.parse({"params": data.pop("search")}, f"{path}: search")
    for end in ("low", "high"):
        sample = {
            key: spec.choices[0 if end == "low" else -1] if spec.choices else getattr(spec, end)
            for key, spec in space.params.items()
        }
        sample = {k: int(v) if space.params[k].type == "int" else v for k, v in sample.items()}
        config = parse_model(TrainConfig, apply_overrides(data, to_overrides(sample)), str(path))
        assert all(_get(config, key) == value for key, value in sample.items()), sample


def _get(config: BaseModel, dotted: str) -> Any:
    value: Any = config
    for part in dotted.split("."):
        value = value[part] if isinstance(value, dict) else getattr(value, part)
    return value


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


# --- the project README ------------------------------------------------------------------


def expand_alternatives(tokens: list[str]) -> list[list[str]]:
    """README shorthand as the commands it stands for.

    `forgeml data list | versions adult` is `forgeml data list` and `forgeml data versions
    adult`; `a ; b` is two commands; `[--opt value]` is an optional part, written out.
    """
    tokens = [token.strip("[]") for token in tokens]
    commands: list[list[str]] = []
    for line in _split(tokens, ";"):
        first, *others = _split(line, "|")
        commands += [first, *([*first[:2], *other] for other in others)]
    return commands


def _split(tokens: list[str], separator: str) -> list[list[str]]:
    parts: list[list[str]] = [[]]
    for token in tokens:
        if token == separator:
            parts.append([])
        else:
            parts[-1].append(token)
    return [part for part in parts if part]


README_COMMANDS = [
    command for tokens in readme_commands(REPO) for command in expand_alternatives(tokens)
]


def _resolve(tokens: list[str]) -> tuple[Any, list[str]]:
    """The click command `forgeml ...` names, and the tokens after its name."""
    command: Any = command_tree()
    rest = tokens[1:]
    while hasattr(command, "list_commands") and rest and rest[0] in command.list_commands(None):
        command, rest = command.get_command(None, rest[0]), rest[1:]
    if command.name == "deploy" and hasattr(command, "list_commands"):
        command = command.get_command(None, "create")  # `deploy MODEL` is `deploy create MODEL`
    return command, rest


@pytest.mark.parametrize("tokens", README_COMMANDS, ids=" ".join)
def test_every_readme_command_names_real_commands_options_and_files(tokens: list[str]) -> None:
    if tokens[0] == "make":
        targets = re.findall(r"^([\w-]+):", (REPO / "Makefile").read_text(), re.M)
        assert tokens[1] in targets
        return
    assert tokens[0] == "forgeml", tokens
    command, rest = _resolve(tokens)
    assert not hasattr(command, "list_commands"), f"{tokens}: names a group, not a command"
    known = {opt for param in command.params for opt in [*param.opts, *param.secondary_opts]}
    own = rest[: rest.index("--")] if "--" in rest else rest  # after `--`: the job's command
    for token in own:
        if token.startswith("-") and not re.fullmatch(r"-\d.*", token):
            assert token.split("=")[0] in known | {"--help"}, f"{tokens}: unknown {token}"
        if token.endswith((".yaml", ".yml")):
            assert (REPO / token).is_file(), f"{tokens}: {token} does not exist"
    if tokens[1:3] == ["data", "add"] and "://" not in rest[1]:  # a URL: a source
        assert (REPO / rest[1]).exists(), f"{tokens}: {rest[1]} does not exist"


def test_the_readme_and_the_demo_need_nothing_beside_the_clone() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    demo = [REPO / "Makefile", *(REPO / "src" / "forgeml" / "cli").glob("*demo*.py")]
    for text in [readme, *(path.read_text(encoding="utf-8") for path in demo)]:
        assert "../shared" not in text
    linked = re.findall(r"\]\(((?!https?:)[^)#]+)\)", readme)
    assert "docs/architecture.md" in linked
    assert all((REPO / path).exists() for path in linked), linked


@pytest.mark.slow
def test_the_readme_dataset_commands_run_as_written(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Datasets\n+```sh\n(.*?)```", text, re.S)
    assert block is not None
    lines = [shlex.split(line, comments=True) for line in block.group(1).splitlines()]
    commands = [c for tokens in lines if tokens for c in expand_alternatives(tokens)]
    monkeypatch.chdir(tmp_path)  # outputs (train.csv) land here; inputs come from the clone

    for command in commands:
        args = [str(REPO / a) if (REPO / a).is_file() else a for a in command[1:]]
        result = cli(*args)
        assert result.code == 0, (command, result.stderr)

    assert len(commands) > 15
    assert (tmp_path / "train.csv").stat().st_size > 0


def test_the_architecture_document_names_every_package() -> None:
    document = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    packages = sorted(p.parent.name for p in (REPO / "src" / "forgeml").glob("*/__init__.py"))

    assert [name for name in packages if f"{name}/" not in document] == []


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
        if args[0] in ("train", "finetune", "tune"):
            overrides = [a for item in self.small[args[1]] for a in ("--set", item)]
            result = self.cli(*args, *overrides, "--json")
            assert result.code == 0, result.stderr
            # BUG (tests/cli/test_train_cli.py::test_finetune_json_output_is_json_only):
            # `finetune --json` without lora/distill prints a note before the JSON
            out = json.loads(result.stdout[result.stdout.index("{") :])
            self.runs[args[1]] = out["study_run" if args[0] == "tune" else "run_id"]
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
    config, tune = "examples/adult/train.yaml", "examples/adult/tune.yaml"
    small = ["epochs=null", "max_steps=20"]

    done = readme({config: small, tune: small}).run(EXAMPLES / "adult")

    metrics = done.metrics(config)
    assert done.runs[config] in done.shown
    assert 0.5 < metrics["accuracy"] <= 1
    assert {"accuracy/sex=Male", "accuracy/sex=Female", "test_accuracy"} <= set(metrics)
    registered = json_out(done.cli("models", "show", "adult-mlp@v1", "--json"))
    assert registered["dataset"] == "adult@v4"  # ingest, clean, validate, split
    assert json_out(done.cli("models", "show", "adult-mlp-tuned", "--json"))["version"] == 1
    augmented = json_out(done.cli("data", "show", "adult@v5", "--json"))
    assert (augmented["op"], augmented["parents"]) == ("augment", ["adult@v4"])


@pytest.mark.slow
def test_the_pipelines_example_runs_as_its_readme_says(readme: Any) -> None:
    done = readme({}).run(EXAMPLES / "pipelines")

    runs = json_out(done.cli("pipelines", "list", "--json"))  # newest first
    assert [run["state"] for run in runs] == ["SUCCEEDED"] * 3
    assert [run["cached_steps"] for run in runs] == [2, 3, 0]  # the new seed re-ran the split
    split = json_out(done.cli("data", "show", "adult@v4", "--json"))
    assert (split["op"], split["parents"]) == ("split", ["adult@v2"])


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
def test_the_sst2_example_runs_as_its_readme_says(
    readme: Any, tmp_path: Path, shared_data: Path
) -> None:
    _need(shared_data / "sst2")
    # the full dev set takes minutes to evaluate on a CPU; its first 32 sentences do here
    dev = tmp_path / "dev-sample.tsv"
    lines = (shared_data / "sst2" / "dev.tsv").read_text(encoding="utf-8").splitlines(True)
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
def test_the_sst2_rnn_example_runs_as_its_readme_says(
    readme: Any, tmp_path: Path, shared_data: Path
) -> None:
    _need(shared_data / "sst2")
    dev = tmp_path / "dev-sample.tsv"
    lines = (shared_data / "sst2" / "dev.tsv").read_text(encoding="utf-8").splitlines(True)
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


@pytest.mark.slow
def test_the_stdlib_rag_example_runs_as_its_readme_says(
    readme: Any, smollm2_server: Any, tmp_path: Path
) -> None:
    url = f"{smollm2_server.url}/v1"
    spec = load_yaml(EXAMPLES / "stdlib-rag" / "agent.yaml")
    spec["model"]["url"] = url
    agent = tmp_path / "agent.yaml"
    agent.write_text(json.dumps(spec), encoding="utf-8")
    run = readme({})
    run.replace = {"http://127.0.0.1:8000/v1": url, "examples/stdlib-rag/agent.yaml": str(agent)}

    done = run.run(EXAMPLES / "stdlib-rag")

    shown = json_out(done.cli("rag", "show", "stdlib", "--json"))
    assert shown["version"] == 1
    evaluated = json_out(
        done.cli("rag", "eval", "stdlib", "--set", tmp_path / "stdlib-docs-queries.jsonl", "--json")
    )
    assert evaluated["metrics"]["ndcg@10"] > 0.5
    versions = json_out(done.cli("prompts", "versions", "stdlib-qa", "--json"))
    assert [v["ref"] for v in versions] == ["stdlib-qa@v1", "stdlib-qa@v2"]
    (saved,) = (tmp_path / "home" / "agents" / "runs").glob("*.json")
    agent_run = json_out(done.cli("agent", "show", saved.stem, "--json"))
    assert agent_run["stop_reason"] == "answered"
    (trace_id,) = agent_run["trace_ids"]  # in this home's store, not a global one
    from forgeml.core.config import Settings
    from forgeml.core.workspace import Workspace
    from forgeml.tracking.traces import agent_traces

    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    try:
        assert agent_traces(workspace, trace_id)[0]["name"] == "invoke_agent"
    finally:
        workspace.close()
