"""`forgeml monitor online`: a request log replayed through the online drift detector."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.cli.conftest import assert_cli_error, json_out
from tests.conftest import CliResult

Cli = Callable[..., CliResult]
START = 1_780_000_000.0  # the first request's time (Unix seconds)
FAST = ("--run-length", "2000", "--calibration-runs", "100")


def _log(path: Path, rows: int = 2600, shift_from: int = 2000, model: str = "adult") -> Path:
    """Requests of 4 rows each, one a second: `age` and `hours` normal, `hours` up by one
    deviation from row `shift_from`; a categorical column the detector leaves out."""
    rng = np.random.default_rng(0)
    age, hours = rng.normal(40, 10, rows), rng.normal(40, 5, rows)
    hours[shift_from:] += 5
    lines = []
    for first in range(0, rows, 4):
        instances = [
            {"age": float(age[i]), "hours": float(hours[i]), "sex": "f"}
            for i in range(first, first + 4)
        ]
        entry = {"ts": START + first // 4, "model": model, "instances": instances}
        lines.append(orjson.dumps(entry))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_the_log_s_first_rows_are_the_reference_and_the_shift_is_found(
    cli: Cli, tmp_path: Path
) -> None:
    log = _log(tmp_path / "requests.jsonl")

    found = json_out(cli("monitor", "online", "--log", str(log), *FAST, "--json"))

    assert found["model"] == "adult"
    assert found["features"] == ["age", "hours"]
    assert found["rows"] == 600  # after the 2,000 reference rows
    first = found["alarms"][0]
    assert first["feature"] == "hours" and first["direction"] == "up"
    assert 2000 <= first["row"] < 2100
    assert first["time"] == START + first["row"] // 4


def test_the_table_lists_each_alarm_with_its_time(cli: Cli, tmp_path: Path) -> None:
    log = _log(tmp_path / "requests.jsonl")

    result = cli("monitor", "online", "--log", str(log), *FAST)

    assert result.code == 0, result.stderr
    assert "hours" in result.stdout and "2026-05-28" in result.stdout
    assert "alarm(s) in 600 rows over 2 numeric features" in result.stdout + result.stderr


def test_no_alarm_without_a_shift(cli: Cli, tmp_path: Path) -> None:
    log = _log(tmp_path / "requests.jsonl", shift_from=2600)
    rare = ("--run-length", "20000", "--calibration-runs", "50")  # P(false alarm) ~ 3%

    found = json_out(cli("monitor", "online", "--log", str(log), *rare, "--json"))

    assert found["alarms"] == []


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        ((), "Give MODEL (a model version) or --log FILE", 2),
        (("--log", "missing.jsonl"), "No request log at missing.jsonl", 1),
        (("--log", "{log}", "--reference-rows", "5000"), "no more than the 5000 reference", 1),
        (("--log", "{log}", "--calibration-runs", "5"), "--calibration-runs: Input should", 2),
        (("--log", "{log}", "--name", "other"), "holds no rows for model 'other'", 1),
        (("--log", "{log}", "--shift", "0"), "--shift: Input should be greater than 0.", 2),
        (("ghost@v1",), "ghost", 1),
    ],
)
def test_bad_input_is_one_sentence(
    cli: Cli, tmp_path: Path, args: tuple[str, ...], message: str, code: int
) -> None:
    log = str(_log(tmp_path / "requests.jsonl", rows=2200))
    filled = [arg.replace("{log}", log) for arg in args]

    assert_cli_error(cli("monitor", "online", *FAST, *filled), message, code)


def test_a_log_of_several_models_needs_a_name(cli: Cli, tmp_path: Path) -> None:
    log = _log(tmp_path / "a.jsonl", rows=2200)
    other = _log(tmp_path / "b.jsonl", rows=8, model="other")
    log.write_bytes(log.read_bytes() + other.read_bytes())

    result = cli("monitor", "online", "--log", str(log), *FAST)
    assert_cli_error(result, "holds requests for 2 models (adult, other): name one", 2)
    named = cli("monitor", "online", "--log", str(log), "--name", "adult", *FAST)
    assert named.code == 0, named.stderr


def test_the_options_help_is_the_config_s_field_descriptions() -> None:
    from forgeml.cli import command_tree
    from forgeml.monitor.drift import OnlineDriftConfig

    online = command_tree().get_command(None, "monitor").get_command(None, "online")  # type: ignore[attr-defined]
    helps = {param.name: param.help for param in online.params}
    for name in ("run_length", "shift", "calibration_runs"):
        assert helps[name] == OnlineDriftConfig.model_fields[name].description
