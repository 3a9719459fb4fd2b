from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from forgeml.cli import COMMANDS, command_tree

# the libraries a command that does not train, track or read data must not load; the
# import-linter contracts forbid only direct imports, this catches the indirect ones too
HEAVY = {"torch", "mlflow", "sqlalchemy", "polars"}
COMMAND_MODULES = {entry.target.split(":")[0] for entry in COMMANDS}
# runs the CLI in a fresh interpreter, then writes the modules it loaded to argv[1]
_PROBE = """
import io, json, sys
from contextlib import redirect_stdout
from forgeml.cli import command_tree, main

def run(args):
    try:
        main(args)
    except SystemExit as done:
        return done.code or 0
    return 0

def paths(command, path):
    yield path
    for name in getattr(command, "list_commands", lambda _: [])(None):
        yield from paths(command.get_command(None, name), [*path, name])

out, args = sys.argv[1], sys.argv[2:]
if args == ["--every-help"]:
    with redirect_stdout(io.StringIO()):
        codes = [run([*path, "--help"]) for path in paths(command_tree(), [])]
else:
    codes = [run(args)]
with open(out, "w") as file:
    json.dump({"codes": codes, "modules": sorted(sys.modules)}, file)
"""


def _probe(tmp_path: Path, *args: str) -> dict[str, Any]:
    out = tmp_path / "probe.json"
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(out), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    probe: dict[str, Any] = json.loads(out.read_text())
    probe["stdout"] = done.stdout
    return probe


def _roots(modules: list[str]) -> set[str]:
    return {module.split(".")[0] for module in modules}


def test_help_loads_no_command_module_and_no_heavy_library(tmp_path: Path) -> None:
    probe = _probe(tmp_path, "--help")

    assert probe["codes"] == [0]
    assert "Usage: forgeml" in probe["stdout"]
    # pydantic too: typer loads it only to convert the values of a command that runs
    assert _roots(probe["modules"]) & (HEAVY | {"pydantic"}) == set()
    assert COMMAND_MODULES & set(probe["modules"]) == set()


def test_data_list_help_loads_only_the_data_commands_and_no_heavy_library(
    tmp_path: Path,
) -> None:
    probe = _probe(tmp_path, "data", "list", "--help")

    assert probe["codes"] == [0]
    assert "Usage: forgeml data list" in probe["stdout"]
    assert _roots(probe["modules"]) & HEAVY == set()
    assert COMMAND_MODULES & set(probe["modules"]) == {"forgeml.cli.data"}


def test_every_help_page_builds_without_a_heavy_library(tmp_path: Path) -> None:
    probe = _probe(tmp_path, "--every-help")

    assert len(probe["codes"]) > 60
    assert set(probe["codes"]) == {0}
    assert _roots(probe["modules"]) & HEAVY == set()
    assert set(probe["modules"]) >= COMMAND_MODULES


@pytest.mark.parametrize("entry", COMMANDS, ids=lambda entry: entry.name)
def test_the_listed_summary_is_the_first_paragraph_of_the_commands_help(entry: Any) -> None:
    command = command_tree().get_command(None, entry.name)
    first_paragraph = (command.help or "").split("\n\n")[0]

    assert entry.summary == " ".join(first_paragraph.split())
