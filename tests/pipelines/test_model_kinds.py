"""The finetune, tune and evaluate kinds: real jobs through the local scheduler, the cache,
and bad input refused before anything is recorded."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import func, select

from forgeml.core.config import Settings
from forgeml.core.errors import ConfigError, NotFoundError
from forgeml.core.store import RunRecord
from forgeml.core.workspace import Workspace
from forgeml.pipelines import load_pipeline
from forgeml.pipelines.evaluate import run_evaluate
from forgeml.pipelines.steps import EvaluateStep
from forgeml.tracking import get_model_version, get_run
from tests.cli.conftest import assert_cli_error, json_out
from tests.conftest import CliResult
from tests.pipelines.conftest import row_counts, run, steps_by_name, write_pipeline
from tests.train.conftest import (
    ADULT_CONFIG,
    EXAMPLES,
    SST2_DIR,
    copy_empty_home,
    copy_home,
    trained_adult_template,
)

Cli = Callable[..., CliResult]
TUNE_CONFIG = EXAMPLES / "adult" / "tune.yaml"
SHORT = "[epochs=null, max_steps=3, schedule.warmup_steps=0, early_stopping=null]"

# train -> evaluate -> gate, a student distilled from the trained model, and a 2-trial study
PIPELINE = f"""
name: adult-models
params:
  steps: 3
steps:
  - name: train
    kind: train
    config: {ADULT_CONFIG}
    overrides: {SHORT}
  - name: evaluate
    kind: evaluate
    model: ${{steps.train.model}}
    slices: [sex]
  - name: gate
    kind: gate
    challenger: ${{steps.evaluate.model}}
    champion: adult-mlp@production
    metric: ${{steps.evaluate.metric}}
  - name: student
    kind: finetune
    config: {ADULT_CONFIG}
    overrides:
      - name=adult-student
      - model.params.hidden=[16]
      - distill.teacher=${{steps.train.model}}
      - epochs=null
      - max_steps=${{params.steps}}
      - schedule.warmup_steps=0
  - name: tune
    kind: tune
    config: {TUNE_CONFIG}
    trials: 2
    overrides: {SHORT}
"""


# PIPELINE and, after the train step, its ONNX export and a command step naming the model:
# one pipeline (one train job) for every kind, rather than a train job per kind's test
ALL_KINDS = (
    PIPELINE
    + """  - name: onnx
    kind: optimize
    model: ${steps.train.model}
    mode: onnx
  - name: announce
    kind: command
    argv: [PYTHON, -c, "open('model.txt', 'w').write('${steps.train.model}')"]
    outputs: {model: model.txt}
"""
)


def _runs(workspace: Workspace) -> int:
    with workspace.store.session() as session:
        return session.scalar(select(func.count()).select_from(RunRecord)) or 0


@pytest.mark.slow
def test_train_optimize_command_finetune_tune_and_evaluate_steps_run_as_jobs_and_rerun_cached(
    adult_cli: Cli, tmp_path: Path
) -> None:
    cli = adult_cli
    path = write_pipeline(tmp_path, ALL_KINDS)

    first = steps_by_name(json_out(cli("pipelines", "run", path, "--json")))
    models = json_out(cli("models", "list", "--json"))
    again = steps_by_name(json_out(cli("pipelines", "run", path, "--json")))
    models_again = json_out(cli("models", "list", "--json"))
    moved = cli("pipelines", "run", path, "--set", "steps.evaluate.split=validation", "--json")
    changed = steps_by_name(json_out(moved))
    jobs = {j["name"]: j["kind"] for j in json_out(cli("jobs", "list", "--json"))}

    assert {name: step["state"] for name, step in first.items()} == dict.fromkeys(
        first, "SUCCEEDED"
    )
    trained, student, tune = (first[n]["outputs"] for n in ("train", "student", "tune"))
    assert "@v" in trained["model"]
    # the command step read the train step's output; the optimize step's model is its child
    assert (tmp_path / "model.txt").read_text() == trained["model"]
    assert first["onnx"]["outputs"]["parent"] == trained["model"]
    assert first["announce"]["outputs"]["model"] == str((tmp_path / "model.txt").resolve())
    assert student["model"] == "adult-student@v1"
    shown = json_out(cli("models", "show", "adult-student@v1", "--json"))
    assert shown["parent"] == trained["model"]  # distilled from the train step's model
    # the best of the 2 trials, registered; its value is the best trial's
    assert tune["model"] == "adult-mlp-tuned@v1"
    assert tune["study"].startswith("adult-mlp-tuned-study-")  # its own study, not the CLI's
    assert [t["state"] for t in tune["trials"]] == ["COMPLETE", "COMPLETE"]
    assert tune["best_value"] == max(t["value"] for t in tune["trials"])
    best = json_out(cli("runs", "show", tune["best_run"], "--json"))
    assert best["metrics"]["accuracy"] == pytest.approx(tune["best_value"])
    assert json_out(cli("models", "show", tune["model"], "--json"))["run_id"] == tune["best_run"]
    evaluation = first["evaluate"]["outputs"]
    assert evaluation["model"] == trained["model"] and evaluation["split"] == "test"
    assert evaluation["score"] == evaluation["metrics"]["accuracy"]
    assert {k for k in evaluation["metrics"] if k.startswith("accuracy/sex=")} == {
        "accuracy/sex=Female",
        "accuracy/sex=Male",
    }
    recorded = json_out(cli("runs", "show", evaluation["run_id"], "--json"))
    assert recorded["metrics"] == evaluation["metrics"]
    assert first["gate"]["outputs"]["challenger_value"] == evaluation["score"]
    assert jobs == {
        "adult-models.train": "train",
        "adult-models.evaluate": "evaluate",
        "adult-models.gate": "release",
        "adult-models.student": "finetune",
        "adult-models.tune": "tune",
        "adult-models.onnx": "optimize",
        "adult-models.announce": "command",
    }
    assert all(step["cached"] for step in again.values())
    assert models_again == models  # the re-run registered no model
    assert {name: step["outputs"] for name, step in again.items()} == {
        name: step["outputs"] for name, step in first.items()
    }
    assert {name for name, step in changed.items() if not step["cached"]} == {"evaluate", "gate"}
    assert changed["evaluate"]["outputs"]["split"] == "validation"
    assert changed["evaluate"]["outputs"]["run_id"] != evaluation["run_id"]


def test_graph_and_the_argo_export_carry_the_new_kinds(cli: Cli, tmp_path: Path) -> None:
    pytest.importorskip("hera", reason="the Argo export needs hera (the argo extra)")
    path = write_pipeline(tmp_path, PIPELINE)

    drawn = cli("pipelines", "graph", path)
    exported = cli("pipelines", "export", path, "--image", "registry.local/forgeml:1")

    assert drawn.code == 0, drawn.stderr
    assert drawn.stdout.splitlines() == [
        "train (train)",
        "  evaluate (evaluate)  <- train",
        "    gate (gate)  <- evaluate",
        "  student (finetune)  <- train",
        "tune (tune)",
    ]
    assert exported.code == 0, exported.stderr
    templates = {t["name"]: t for t in yaml.safe_load(exported.stdout)["spec"]["templates"]}
    tasks = {t["name"]: t.get("depends") for t in templates["pipeline"]["dag"]["tasks"]}
    assert tasks == {
        "train": None,
        "evaluate": "train",
        "gate": "evaluate",
        "student": "train",
        "tune": None,
    }


def _config(folder: Path, source: Path, name: str, **changes: Any) -> str:
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    for key, value in changes.items():
        section, _, field = key.partition("__")
        if field:
            data[section][field] = value
        elif value is None:
            data.pop(section)
        else:
            data[section] = value
    path = folder / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return name


def _bad_files(folder: Path) -> dict[str, tuple[str, str]]:
    """Case -> (a step, what the sentence says)."""
    no_search = _config(folder, TUNE_CONFIG, "no-search.yaml", search=None)
    keeps_none = _config(folder, TUNE_CONFIG, "keeps-none.yaml", tune__register_best=False)
    return {
        "tune without search": (
            f"{{name: t, kind: tune, config: {no_search}, trials: 2}}",
            "missing required key 'search' (the parameters to tune)",
        ),
        "tune that registers nothing": (
            f"{{name: t, kind: tune, config: {keeps_none}}}",
            "tune.register_best is false, but a tune step's output is the best trial's",
        ),
        "tune config missing": (
            "{name: t, kind: tune, config: nowhere.yaml}",
            "nowhere.yaml: no such file",
        ),
        "finetune without lora or distill": (
            f"{{name: f, kind: finetune, config: {ADULT_CONFIG}}}",
            "has neither a `lora` nor a `distill` section, so there is nothing to fine-tune",
        ),
        "finetune with a bad override": (
            f"{{name: f, kind: finetune, config: {ADULT_CONFIG}, "
            "overrides: ['distill.teacher=a@v1', 'optimizer.lrr=${params.lr}']}",
            "unknown key 'optimizer.lrr'",
        ),
        "evaluate with a bad split": (
            "{name: e, kind: evaluate, model: a@v1, split: holdout}",
            "key 'split': Input should be 'train', 'validation' or 'test'",
        ),
        "tune with no trials": (
            f"{{name: t, kind: tune, config: {TUNE_CONFIG}, trials: 0}}",
            "key 'trials': Input should be greater than 0",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "tune without search",
        "tune that registers nothing",
        "tune config missing",
        "finetune without lora or distill",
        "finetune with a bad override",
        "evaluate with a bad split",
        "tune with no trials",
    ],
)
def test_a_bad_step_is_one_sentence_when_loaded_and_records_nothing(
    cli: Cli, tmp_path: Path, case: str
) -> None:
    step, expected = _bad_files(tmp_path)[case]
    name = step.split(",", 1)[0].removeprefix("{name: ")
    path = write_pipeline(tmp_path, f"name: bad\nparams: {{lr: 0.1}}\nsteps:\n  - {step}\n")

    with pytest.raises(ConfigError) as raised:
        load_pipeline(path)
    result = cli("pipelines", "run", path)

    message = str(raised.value)
    assert message.startswith(f"{path}: step '{name}'") and "\n" not in message, message
    assert expected in message
    assert_cli_error(result, expected)
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    try:
        assert set(row_counts(workspace).values()) == {0}
    finally:
        workspace.close()


def test_a_config_whose_overrides_name_a_steps_output_is_checked_when_the_step_runs(
    tmp_path: Path,
) -> None:
    path = write_pipeline(
        tmp_path,
        f"""
name: later
steps:
  - {{name: train, kind: train, config: {ADULT_CONFIG}}}
  - name: student
    kind: finetune
    config: {ADULT_CONFIG}
    overrides: ["distill.teacher=${{steps.train.model}}"]
""",
    )

    assert load_pipeline(path).needs["student"] == ["train"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    home = copy_home(
        trained_adult_template(tmp_path_factory), tmp_path_factory.mktemp("kinds") / "home"
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        workspace = Workspace(Settings(home=home, user="tester"))
        try:
            yield workspace
        finally:
            workspace.close()


def _evaluate(**fields: Any) -> EvaluateStep:
    return EvaluateStep.model_validate({"name": "eval", "kind": "evaluate"} | fields)


@pytest.mark.slow
def test_an_evaluation_scores_as_the_gate_does_and_is_recorded_as_a_run(
    trained: Workspace,
) -> None:
    from forgeml.optimize import score_on_split

    done = run_evaluate(trained, _evaluate(model="adult-mlp@v1", slices=["sex"]))

    # the gate's scorer, on the data v1 was trained on: its own recorded test metric
    assert done["dataset"] == "adult@v4" and done["split"] == "test"
    assert done["metrics"] == score_on_split(trained, "adult-mlp@v1", "adult@v4", "test", ["sex"])
    recorded = get_model_version(trained, "adult-mlp@v1").run.metrics["test_accuracy"]
    assert done["score"] == pytest.approx(recorded, abs=1e-6)
    run_record = get_run(trained, done["run_id"])
    assert run_record.status == "FINISHED" and run_record.experiment == "evaluate"
    assert run_record.metrics == done["metrics"]
    assert run_record.config["evaluate"]["model_digest"] == (
        get_model_version(trained, "adult-mlp@v1").artifact_digest
    )
    assert run_record.dataset_version is not None
    assert run_record.dataset_version.ref == "adult@v4"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fields", "error", "expected"),
    [
        (
            {"metric": "bleu"},
            ConfigError,
            "Step 'eval': adult-mlp@v1 has no metric 'bleu' on adult@v4 (test) (its metrics: "
            "accuracy, f1_macro, loss, roc_auc).",
        ),
        ({"model": "adult-mlp@v9"}, NotFoundError, "has no version v9"),
        ({"data": "nosuch@v1"}, NotFoundError, "Dataset 'nosuch' does not exist"),
    ],
)
def test_a_failed_evaluation_records_no_run(
    trained: Workspace, fields: dict[str, Any], error: type[Exception], expected: str
) -> None:
    before = _runs(trained)

    with pytest.raises(error) as raised:
        run_evaluate(trained, _evaluate(**({"model": "adult-mlp@v1"} | fields)))

    assert expected in str(raised.value)
    assert _runs(trained) == before


@pytest.mark.slow
@pytest.mark.parametrize(
    ("step", "expected"),
    [
        ("{name: e, kind: evaluate, model: nosuch@v1}", "Model 'nosuch"),
        ("{name: e, kind: evaluate, model: adult-mlp@v1, data: nosuch}", "Dataset 'nosuch'"),
        (
            f"{{name: t, kind: tune, config: {TUNE_CONFIG}, data: nosuch@v2}}",
            "Dataset 'nosuch' does not exist",
        ),
        (
            f"{{name: f, kind: finetune, config: {ADULT_CONFIG}, "
            "overrides: [distill.teacher=adult-mlp@v7]}",
            "Model 'adult-mlp' has no version v7",
        ),
    ],
)
def test_an_unknown_model_or_dataset_fails_the_step_before_any_job(
    trained: Workspace, tmp_path: Path, step: str, expected: str
) -> None:
    path = write_pipeline(tmp_path, f"name: unknown\nsteps:\n  - {step}\n")
    before, runs = row_counts(trained), _runs(trained)

    (failed,) = run(trained, path)["steps"]

    assert failed["state"] == "FAILED" and failed["job_id"] is None
    assert expected in failed["error"] and "\n" not in failed["error"]
    after = row_counts(trained)
    assert after["jobs"] == before["jobs"]
    assert after["pipeline_cache"] == before["pipeline_cache"]
    assert _runs(trained) == runs


def _key(workspace: Workspace, folder: Path, step: dict[str, Any]) -> str:
    from forgeml.pipelines.cache import CodeVersion, cache_key, step_key_parts
    from forgeml.pipelines.steps import PipelineSpec

    parsed = PipelineSpec.model_validate({"name": "k", "steps": [step]}).steps[0]
    code = CodeVersion(forgeml="0.1.0", git_commit="a" * 40, packages="b" * 64)
    return cache_key(step_key_parts(workspace, parsed, folder, {}, code, {}))


@pytest.mark.slow
def test_each_input_of_the_new_kinds_is_in_its_key(trained: Workspace, tmp_path: Path) -> None:
    from forgeml.data import pipeline as data_pipeline
    from forgeml.data.ingest import IngestOptions
    from forgeml.tracking import promote

    promote(trained, "adult-mlp", 1, "keyed", "accuracy", force=True)
    (tmp_path / "tune.yaml").write_text(TUNE_CONFIG.read_text(encoding="utf-8"))
    (tmp_path / "rows.csv").write_text("a,b\n1,2\n")
    data_pipeline.add(trained, "keyed-rows", tmp_path / "rows.csv", IngestOptions())
    evaluate = {"name": "e", "kind": "evaluate", "model": "adult-mlp@keyed", "data": "keyed-rows"}
    tune = {"name": "t", "kind": "tune", "config": "tune.yaml", "trials": 2}
    finetune = {
        "name": "f",
        "kind": "finetune",
        "config": str(ADULT_CONFIG),
        "overrides": ["distill.teacher=adult-mlp@keyed"],
    }
    train = finetune | {"name": "r", "kind": "train"}  # a train step distilling too
    steps = (evaluate, tune, finetune, train)
    before = [_key(trained, tmp_path, step) for step in steps]

    same = [_key(trained, tmp_path, step) for step in steps]
    changed_fields = [
        _key(trained, tmp_path, evaluate | {"split": "validation"}),
        _key(trained, tmp_path, evaluate | {"metric": "f1_macro"}),
        _key(trained, tmp_path, evaluate | {"slices": ["sex"]}),
        _key(trained, tmp_path, tune | {"trials": 3}),
        _key(trained, tmp_path, tune | {"data": "keyed-rows"}),
        _key(trained, tmp_path, finetune | {"overrides": [*finetune["overrides"], "seed=1"]}),
    ]
    (tmp_path / "rows.csv").write_text("a,b\n1,2\n3,4\n")
    data_pipeline.add(trained, "keyed-rows", tmp_path / "rows.csv", IngestOptions())
    new_data = _key(trained, tmp_path, evaluate)
    edited = (tmp_path / "tune.yaml").read_text().replace("high: 1.0e-2", "high: 2.0e-2")
    (tmp_path / "tune.yaml").write_text(edited)
    new_search = _key(trained, tmp_path, tune)
    promote(trained, "adult-mlp", 2, "keyed", "accuracy", force=True)
    moved = [_key(trained, tmp_path, step) for step in (evaluate, finetune, train)]

    assert same == before
    keys = [*before, *changed_fields, new_data, new_search, *moved]
    assert len(set(keys)) == len(keys)


@pytest.mark.slow
def test_a_lora_finetune_step_registers_an_adapter_whose_parent_is_its_base(
    cli: Cli,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not (SST2_DIR / "train.tsv").is_file():
        pytest.skip(f"the SST-2 data set is missing at {SST2_DIR}")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    copy_empty_home(tmp_path_factory, tmp_path / "home")
    dev = tmp_path / "dev.tsv"
    dev.write_text("".join((SST2_DIR / "dev.tsv").read_text().splitlines(True)[:33]))
    json_out(cli("data", "add", "sst2", SST2_DIR / "train.tsv", "--json"))
    json_out(cli("data", "add", "sst2-dev", dev, "--json"))
    split = json_out(cli("data", "split", "sst2", "--ratios", "0.95,0.05", "--json"))
    path = write_pipeline(
        tmp_path,
        f"""
name: lora
steps:
  - name: lora
    kind: finetune
    config: {EXAMPLES / "sst2" / "lora.yaml"}
    data: {split["ref"]}
    overrides: [data.max_rows=32, epochs=null, max_steps=2, lora.merge=false]
""",
    )

    (step,) = json_out(cli("pipelines", "run", path, "--json"))["steps"]

    assert step["state"] == "SUCCEEDED" and step["outputs"]["model"] == "sst2-minilm-lora@v1"
    shown = json_out(cli("models", "show", "sst2-minilm-lora@v1", "--json"))
    assert shown["parent"].startswith("hf:") and shown["dataset"] == split["ref"]
    assert json_out(cli("jobs", "list", "--json"))[0]["kind"] == "finetune"


def test_the_readme_s_pipeline_example_loads(tmp_path: Path) -> None:
    readme = (EXAMPLES.parent / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(name: adult-release\n.*?)```", readme, re.S)
    assert block is not None
    text = block.group(1).replace("../adult/", f"{EXAMPLES / 'adult'}/")

    pipeline = load_pipeline(write_pipeline(tmp_path, text))

    assert pipeline.kinds == {
        "train": "train",
        "student": "finetune",
        "tune": "tune",
        "evaluate": "evaluate",
        "gate": "gate",
        "promote": "promote",
    }
    assert pipeline.needs["gate"] == ["evaluate"] and pipeline.needs["student"] == ["train"]
