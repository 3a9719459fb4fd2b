from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from tests.cli.conftest import assert_cli_error, assert_ok, json_out
from tests.conftest import CliResult
from tests.train.conftest import TRAINED_RUNS, copy_home, trained_adult_template

Cli = Callable[..., CliResult]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def trained(
    cli: Cli,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> Cli:
    """The `cli` fixture on a copy of the Adult workspace holding TRAINED_RUNS."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    copy_home(trained_adult_template(tmp_path_factory), tmp_path / "home")
    return cli


def runs(cli: Cli, *args: str) -> list[dict[str, Any]]:
    return json_out(cli("runs", "list", *args, "--json"))


def run_of(cli: Cli, model: str) -> str:
    return str(json_out(cli("models", "show", model, "--json"))["run_id"])


def test_runs_list_is_newest_first_with_status_metrics_and_error(trained: Cli) -> None:
    listed = runs(trained)

    expected = [(name, "FINISHED" if model else "FAILED") for name, _, model in TRAINED_RUNS]
    assert [(r["name"], r["status"]) for r in listed] == expected[::-1]
    assert [r["started_at"] for r in listed] == sorted(
        (r["started_at"] for r in listed), reverse=True
    )
    failed, *finished = listed
    assert failed["metrics"] == {}
    assert "nosuch" in failed["error"]
    assert all(r["error"] is None and "accuracy" in r["metrics"] for r in finished)
    assert all(r["parent_run_id"] is None for r in listed)


def test_runs_list_filters_by_name(trained: Cli) -> None:
    assert [r["name"] for r in runs(trained, "--name", "adult-small")] == ["adult-small"]
    assert len(runs(trained, "--name", "adult-mlp")) == 3
    assert runs(trained, "--name", "nosuch") == []


def test_runs_show_finds_a_run_by_id_prefix_or_latest_name(trained: Cli) -> None:
    run_id = run_of(trained, "adult-mlp@v1")

    by_prefix = json_out(trained("runs", "show", run_id[:6], "--json"))
    by_name = json_out(trained("runs", "show", "adult-small", "--json"))

    assert by_prefix["run_id"] == run_id
    assert by_prefix["dataset"] == "adult@v4"
    assert by_prefix["config"]["optimizer"]["lr"] == 0.01
    assert by_prefix["metrics"]["accuracy"] > 0.5
    assert by_name["run_id"] == run_of(trained, "adult-small@v1")
    assert by_name["config"]["model"]["params"]["hidden"] == [8]


def test_runs_list_and_show_for_people(trained: Cli) -> None:
    run_id = run_of(trained, "adult-mlp@v1")

    listed = trained("runs", "list")
    shown = trained("runs", "show", run_id)
    failed = trained("runs", "show", runs(trained)[0]["run_id"])

    assert_ok(listed)
    assert run_id[:12] in listed.stdout
    assert "FAILED" in listed.stdout
    assert_ok(shown)
    assert f"run {run_id}: FINISHED" in shown.stdout
    assert "dataset adult@v4" in shown.stdout
    assert "per-slice metrics" in shown.stdout
    assert "accuracy/sex" not in shown.stdout
    assert_ok(failed)
    assert "error: " in failed.stdout and "nosuch" in failed.stdout


def test_models_list_and_show_report_the_lineage(trained: Cli) -> None:
    listed = json_out(trained("models", "list", "--json"))
    only_small = json_out(trained("models", "list", "adult-small", "--json"))

    assert [m["ref"] for m in listed] == ["adult-mlp@v1", "adult-mlp@v2", "adult-small@v1"]
    assert only_small == [listed[2]]
    finished = [r for r in runs(trained) if r["status"] == "FINISHED"][::-1]
    for version, run in zip(listed, finished, strict=True):
        assert version["run_id"] == run["run_id"]
        assert version["dataset"] == "adult@v4"
        assert version["parent"] is None
        assert version["aliases"] == []
        assert len(version["digest"]) == 64
        assert version["metrics"]["accuracy"] == run["metrics"]["accuracy"]
        assert json_out(trained("models", "show", version["ref"], "--json")) == version
    assert json_out(trained("models", "show", "adult-mlp", "--json"))["version"] == 2
    digest = listed[0]["digest"]
    assert json_out(trained("models", "show", f"adult-mlp@{digest[:10]}", "--json"))["version"] == 1


def test_models_list_and_show_for_people(trained: Cli) -> None:
    run_id = run_of(trained, "adult-mlp@v1")

    listed = trained("models", "list")
    shown = trained("models", "show", "adult-mlp@v1")

    assert_ok(listed)
    assert "adult-small@v1" in listed.stdout
    assert_ok(shown)
    assert f"dataset adult@v4 -> run {run_id} -> model adult-mlp@v1" in shown.stdout
    assert "accuracy" in shown.stdout


def test_promotion_moves_the_alias_once_and_again_is_a_no_op(trained: Cli) -> None:
    first = json_out(trained("models", "promote", "adult-mlp", "1", "--alias", "staging", "--json"))
    again = json_out(trained("models", "promote", "adult-mlp", "1", "--alias", "staging", "--json"))
    people = trained("models", "promote", "adult-small", "1")

    assert (first["changed"], first["previous"]) == (True, None)
    assert (again["changed"], again["previous"]) == (False, "adult-mlp@v1")
    assert_ok(people)
    assert "@production -> adult-small@v1" in people.stdout
    aliases = {m["ref"]: m["aliases"] for m in json_out(trained("models", "list", "--json"))}
    assert aliases == {
        "adult-mlp@v1": ["staging"],
        "adult-mlp@v2": [],
        "adult-small@v1": ["production"],
    }
    assert json_out(trained("models", "show", "adult-mlp@staging", "--json"))["version"] == 1
    actions = [e["action"] for e in json_out(trained("audit", "log", "--json"))]
    assert actions.count("model.promote") == 2  # the no-op is not an event


def test_promoting_on_a_metric_the_model_lacks_needs_force(trained: Cli) -> None:
    rejected = trained("models", "promote", "adult-mlp", "1", "--metric", "bleu")
    forced = json_out(
        trained("models", "promote", "adult-mlp", "1", "--metric", "bleu", "--force", "--json")
    )

    assert_cli_error(rejected, "Model adult-mlp@v1 has no metric 'bleu' to compare")
    assert "accuracy" in rejected.stderr
    assert (forced["forced"], forced["value"]) == (True, None)
    events = json_out(trained("audit", "log", "--json"))
    assert events[-1]["action"] == "model.promote.forced"
    assert events[-1]["object"] == "adult-mlp@v1"


@pytest.mark.parametrize(
    ("args", "expected", "code"),
    [
        (["runs", "show", "nosuch"], "Run 'nosuch' does not exist", 1),
        (["runs", "compare", "adult-small", "nosuch"], "Run 'nosuch' does not exist", 1),
        (["models", "show", "nosuch"], "Model 'nosuch' is not registered", 1),
        (["models", "show", "adult-mlp@v9"], "has no version v9 (its versions are v1..v2)", 1),
        (["models", "show", "adult-mlp@staging"], "has no alias 'staging'", 1),
        (["models", "show", "Bad!Name"], "Invalid model name 'Bad!Name'", 1),
        (["models", "promote", "adult-mlp", "9"], "has no version v9", 1),
        (["models", "promote", "adult-mlp", "1", "--alias", "latest"], "Invalid alias", 2),
        (["models", "promote", "adult-mlp", "1", "--alias", "v2"], "Invalid alias", 2),
    ],
)
def test_unknown_or_bad_references_are_one_sentence_errors(
    trained: Cli, args: list[str], expected: str, code: int
) -> None:
    assert_cli_error(trained(*args), expected, code=code)


def test_runs_compare_writes_a_png_and_lists_the_metrics(trained: Cli, tmp_path: Path) -> None:
    first, second = run_of(trained, "adult-mlp@v1"), run_of(trained, "adult-mlp@v2")
    plot = tmp_path / "curves.png"

    compared = json_out(
        trained(
            "runs",
            "compare",
            first,
            second[:8],
            "--metric",
            "train_loss",
            "--metric",
            "eval_accuracy",
            "--plot",
            plot,
            "--json",
        )
    )

    assert [r["run_id"] for r in compared["runs"]] == [first, second]
    assert compared["plot"] == str(plot)
    assert {"accuracy", "loss", "test_accuracy", "accuracy/sex=Male"} <= set(compared["metrics"])
    assert "confusion_matrix" not in compared["metrics"]
    data = plot.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > 1024
    assert not list(tmp_path.glob(".*.part.png"))


def test_runs_compare_prints_the_final_metrics_side_by_side(
    trained: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    first, second = run_of(trained, "adult-mlp@v1"), run_of(trained, "adult-small@v1")

    result = trained("runs", "compare", first, second)

    assert_ok(result)
    assert f"adult-mlp {first[:8]}" in result.stdout
    assert f"adult-small {second[:8]}" in result.stdout
    assert "curves written to runs-compare.png" in result.stdout
    assert (tmp_path / "runs-compare.png").read_bytes()[:8] == PNG_MAGIC


def test_runs_compare_creates_the_plot_folder(trained: Cli, tmp_path: Path) -> None:
    first, second = run_of(trained, "adult-mlp@v1"), run_of(trained, "adult-mlp@v2")

    result = trained("runs", "compare", first, second, "--plot", tmp_path / "no" / "x.png")

    assert result.code == 0, result.stderr
    assert (tmp_path / "no" / "x.png").read_bytes().startswith(b"\x89PNG")


def test_the_default_compare_plot_shows_curves_not_the_final_dots(
    trained: Cli, tmp_path: Path
) -> None:
    from forgeml.tracking.history import metric_history

    first, second = run_of(trained, "adult-mlp@v1"), run_of(trained, "adult-mlp@v2")
    workspace = Workspace(Settings(home=tmp_path / "home"))
    assert len(metric_history(workspace, first, ["loss"])["loss"]) == 1
    # 30 steps, training metrics sent as means every log_every_steps (10)
    curve = metric_history(workspace, first, ["train_loss"])["train_loss"]
    assert [step for step, _ in curve] == [10, 20, 30]

    default = trained("runs", "compare", first, second, "--plot", tmp_path / "default.png")
    dots = trained(
        "runs", "compare", first, second, "--metric", "loss", "--plot", tmp_path / "dots.png"
    )

    assert_ok(default)
    assert_ok(dots)
    assert (tmp_path / "default.png").read_bytes() != (tmp_path / "dots.png").read_bytes()
