from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from tests.cli.conftest import assert_cli_error, assert_ok, json_out
from tests.conftest import CliResult

Cli = Callable[..., CliResult]


@pytest.fixture
def adult(cli: Cli, shared_data: Path) -> Cli:
    """adult@v1 (adult.data) and adult-test@v1 (adult.test: the same census, labels with '.')."""
    assert_ok(cli("data", "add", "adult", shared_data / "adult" / "adult.data"))
    assert_ok(cli("data", "add", "adult-test", shared_data / "adult" / "adult.test"))
    return cli


def _columns(payload: dict[str, object]) -> dict[str, dict[str, object]]:
    columns = payload["columns"]
    assert isinstance(columns, list)
    return {column["column"]: column for column in columns}


def test_two_versions_of_the_census_differ_only_in_how_the_label_is_written(adult: Cli) -> None:
    payload = json_out(
        adult("monitor", "drift", "--reference", "adult", "--current", "adult-test", "--json")
    )

    columns = _columns(payload)
    assert payload["reference"] == "adult@v1"
    assert payload["current"] == "adult-test@v1"
    assert payload["drifted_columns"] == ["Y"]
    assert columns["Y"]["unseen_share"] == 1.0
    assert columns["age"]["test"] == "ks"
    assert columns["workclass"]["test"] == "chi2"
    assert payload["reference_rows"] == 32_561
    assert payload["current_rows"] == 16_281


def test_an_older_population_is_flagged_in_age(
    adult: Cli, shared_data: Path, tmp_path: Path
) -> None:
    frame = pl.read_csv(shared_data / "adult" / "adult.data").rename(str.strip)
    older = tmp_path / "older.csv"
    frame.with_columns(age=pl.col("age") + 8).write_csv(older)
    assert_ok(adult("data", "add", "adult-older", older))

    payload = json_out(
        adult(
            "monitor", "drift", "--reference", "adult", "--current", "adult-older",
            "--columns", "age,hours-per-week", "--json",
        )
    )  # fmt: skip

    assert list(_columns(payload)) == ["age", "hours-per-week"]
    assert payload["drifted_columns"] == ["age"]


def test_a_prediction_column_is_judged_apart_from_the_features(adult: Cli) -> None:
    payload = json_out(
        adult(
            "monitor", "drift", "--reference", "adult", "--current", "adult-test",
            "--prediction", "Y", "--json",
        )
    )  # fmt: skip
    table = adult(
        "monitor", "drift", "--reference", "adult", "--current", "adult-test", "--prediction", "Y"
    )

    assert payload["prediction"]["column"] == "Y"
    assert payload["prediction"]["drifted"]
    assert "Y" not in _columns(payload)
    assert payload["drifted_columns"] == []
    # the table folds long cells at the captured console's 80 columns
    first_cells = [line.split("│")[1].strip() for line in table.stdout.splitlines() if "│" in line]
    assert "Y(prediction)" in "".join(first_cells)


def test_the_splits_of_one_version_do_not_drift(adult: Cli) -> None:
    assert_ok(adult("data", "split", "adult", "--stratify", "Y", "--seed", "0"))

    payload = json_out(
        adult(
            "monitor", "drift", "--reference", "adult@v2", "--reference-split", "train",
            "--current", "adult@v2", "--current-split", "test", "--json",
        )
    )  # fmt: skip

    assert payload["drifted_columns"] == []
    assert "__split__" not in _columns(payload)


def test_the_table_names_both_versions_and_the_verdict(adult: Cli) -> None:
    result = adult("monitor", "drift", "--reference", "adult", "--current", "adult-test")

    assert_ok(result)
    assert "drift of adult-test@v1 against adult@v1" in result.stdout
    assert "drifted: 1 of 15 columns (7%); dataset drift: no" in result.stdout


def test_thresholds_come_from_a_config_file(adult: Cli, tmp_path: Path) -> None:
    config = tmp_path / "drift.yaml"
    # thresholds no sampling noise stays under: columns of one census drift too
    config.write_text("alpha: 0.9\npsi_threshold: 1e-9\nwasserstein_threshold: 1e-9\n")

    payload = json_out(
        adult(
            "monitor", "drift", "--reference", "adult", "--current", "adult-test",
            "--config", config, "--json",
        )
    )  # fmt: skip

    assert payload["config"]["alpha"] == 0.9
    assert len(payload["drifted_columns"]) > 5


def test_an_unknown_dataset_is_one_sentence(cli: Cli) -> None:
    result = cli("monitor", "drift", "--reference", "nope", "--current", "nope")

    assert_cli_error(result, "Dataset 'nope' does not exist")


def test_an_unknown_column_is_one_sentence(adult: Cli) -> None:
    result = adult(
        "monitor", "drift", "--reference", "adult", "--current", "adult-test", "--columns", "nope"
    )

    assert_cli_error(result, "Column 'nope' is not in the reference profile")


def test_an_empty_split_is_one_sentence(adult: Cli) -> None:
    # train and test only: the validation split holds no rows
    assert_ok(adult("data", "split", "adult", "--ratios", "0.9,0.1", "--seed", "0"))

    result = adult(
        "monitor", "drift", "--reference", "adult@v2", "--reference-split", "train",
        "--current", "adult@v2", "--current-split", "validation",
    )  # fmt: skip

    assert_cli_error(result, "The current window has no rows")


def test_a_bad_config_key_is_one_sentence(adult: Cli, tmp_path: Path) -> None:
    config = tmp_path / "drift.yaml"
    config.write_text("alpha: 0.01\npsi: 0.2\n")

    result = adult(
        "monitor", "drift", "--reference", "adult", "--current", "adult-test", "--config", config
    )

    assert_cli_error(result, "unknown key 'psi'")


@pytest.mark.parametrize(
    "args",
    [("--reference", "adult"), ("--reference", "a", "--current", "b", "--columns", " , ")],
    ids=["no current", "no column named"],
)
def test_usage_errors_exit_2(cli: Cli, args: tuple[str, ...]) -> None:
    result = cli("monitor", "drift", *args)

    assert result.code == 2, result.stderr
    assert "Traceback" not in result.stderr
