from __future__ import annotations

import re
import subprocess
import sys
import types
from collections.abc import Iterator
from typing import Any, Union, get_args, get_origin

import pytest
import typer

from forgeml.cli import command_tree
from tests.conftest import CliResult

Cli = Any
# one line: what is wrong, then the help of the command that could not be parsed
USAGE_LINE = re.compile(r"^error: \S.*[.?] See '(forgeml[^']*) --help'\.$")


def _tree(command: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command and group under `command`, as the CLI itself lists them."""
    yield path, command
    if hasattr(command, "list_commands"):
        for name in command.list_commands(None):
            yield from _tree(command.get_command(None, name), (*path, name))


TREE = list(_tree(command_tree(), ()))
COMMANDS = [(path, command) for path, command in TREE if not hasattr(command, "list_commands")]
GROUPS = [(path, command) for path, command in TREE if hasattr(command, "list_commands")]


def _name(path: tuple[str, ...]) -> str:
    return " ".join(path) or "forgeml"


def _annotation(param: Any) -> Any:
    annotation = param.type_descriptor.annotation
    if get_origin(annotation) in (Union, types.UnionType):
        annotation = next(arg for arg in get_args(annotation) if arg is not type(None))
    return annotation


def _required_arguments() -> list[Any]:
    return [
        pytest.param(path, id=_name(path))
        for path, command in COMMANDS
        if any(p.param_type_name == "argument" and p.required for p in command.params)
    ]


def _number_options() -> list[Any]:
    return [
        pytest.param(path, param.opts[0], id=f"{_name(path)} {param.opts[0]}")
        for path, command in COMMANDS
        for param in command.params
        if param.param_type_name == "option" and _annotation(param) in (int, float)
    ]


def assert_usage_error(result: CliResult, path: tuple[str, ...], expected: str) -> None:
    """Exit 2, nothing on stdout, one line on stderr naming the problem and a --help."""
    assert result.code == 2, (result.code, result.stdout, result.stderr)
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    match = USAGE_LINE.match(lines[0])
    assert match, lines[0]
    assert match.group(1).startswith(" ".join(("forgeml", *path))), lines[0]
    assert expected in lines[0]


def test_the_tree_holds_every_registered_command_and_options_to_break() -> None:
    names = {path[0] for path, _ in TREE if path}
    assert {"init", "train", "serve", "data", "jobs", "deploy", "keys"} <= names
    assert len(COMMANDS) > 50
    assert len(_required_arguments()) > 30
    assert len(_number_options()) > 30


# `jobs submit` passes an option it does not know to the job as its program
# (`ignore_unknown_options` in cli/jobs.py), so `--gpu 1 -- cmd` starts a job named `--gpu`
_PASSES_UNKNOWN_OPTIONS = pytest.mark.xfail(
    strict=True, reason="jobs submit treats an unknown option as the job's program"
)


def _with_unknown_options() -> list[Any]:
    return [
        pytest.param(
            path,
            id=_name(path),
            marks=[_PASSES_UNKNOWN_OPTIONS] if path == ("jobs", "submit") else [],
        )
        for path, _ in TREE
    ]


@pytest.mark.parametrize("path", _with_unknown_options())
def test_an_unknown_option_is_one_line_and_exit_2(cli: Cli, path: tuple[str, ...]) -> None:
    result = cli(*path, "--no-such-option")

    assert_usage_error(result, path, "No such option: --no-such-option")


@pytest.mark.parametrize("path", _required_arguments())
def test_a_missing_argument_is_one_line_and_exit_2(cli: Cli, path: tuple[str, ...]) -> None:
    result = cli(*path)

    assert_usage_error(result, path, "Missing ")


@pytest.mark.parametrize(("path", "option"), _number_options())
def test_a_number_option_given_a_word_is_one_line_and_exit_2(
    cli: Cli, path: tuple[str, ...], option: str
) -> None:
    result = cli(*path, option, "abc")

    assert_usage_error(result, path, f"Invalid value for '{option}'")


@pytest.mark.parametrize(
    "path", [pytest.param(path, id=_name(path)) for path, _ in GROUPS if path != ("deploy",)]
)
def test_an_unknown_command_is_one_line_and_exit_2(cli: Cli, path: tuple[str, ...]) -> None:
    result = cli(*path, "no-such-command")

    assert_usage_error(result, path, "No such command 'no-such-command'.")


def test_a_bare_deploy_with_an_unknown_model_option_reads_as_deploy_create(cli: Cli) -> None:
    result = cli("deploy", "model@v1", "--no-such-option")

    assert_usage_error(result, ("deploy", "create"), "No such option: --no-such-option")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["jobs", "logs"], "error: Missing argument 'job'. See 'forgeml jobs logs --help'."),
        (["data", "bogus"], "error: No such command 'bogus'. See 'forgeml data --help'."),
        (
            ["jobs", "submit", "--gpus", "abc", "--", "echo"],
            "error: Invalid value for '--gpus': Input should be a valid integer, unable to "
            "parse string as an integer. See 'forgeml jobs submit --help'.",
        ),
        (["no-such-command"], "error: No such command 'no-such-command'. See 'forgeml --help'."),
    ],
)
def test_a_real_process_prints_the_one_line_and_exits_2(args: list[str], expected: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "forgeml.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert (done.returncode, done.stdout, done.stderr) == (2, "", expected + "\n")


def test_debug_shows_the_traceback_of_a_usage_error(cli: Cli) -> None:
    result = cli("jobs", "logs", "--debug")

    assert result.code == 2
    assert "Traceback" in result.stderr
    assert result.stderr.splitlines()[-1] == (
        "error: Missing argument 'job'. See 'forgeml jobs logs --help'."
    )


def test_debug_shows_the_traceback_of_a_forgeml_error(cli: Cli) -> None:
    result = cli("data", "show", "nosuch", "--debug")

    assert result.code == 1
    assert "Traceback" in result.stderr
    assert result.stderr.splitlines()[-1].startswith("error: ")
    assert "nosuch" in result.stderr.splitlines()[-1]


def test_a_forgeml_error_is_one_sentence_and_its_exit_code(cli: Cli) -> None:
    result = cli("data", "show", "nosuch")

    assert result.code == 1
    assert "Traceback" not in result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and "nosuch" in line


def test_ctrl_c_is_aborted_and_exit_130(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("forgeml.sdk.local._datasets.open_workspace", interrupted)

    result = cli("data", "list")

    assert (result.code, result.stdout, result.stderr) == (130, "", "Aborted.\n")


@pytest.mark.parametrize(
    ("stop", "code"), [(SystemExit(143), 143), (typer.Exit(3), 3)], ids=["SystemExit", "typer.Exit"]
)
def test_a_commands_own_exit_code_is_the_process_exit_code(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, stop: BaseException, code: int
) -> None:
    def stopped(*_: object) -> None:
        raise stop

    monkeypatch.setattr("forgeml.sdk.local._datasets.open_workspace", stopped)

    result = cli("data", "list")

    assert (result.code, result.stderr) == (code, "")


def test_help_exits_0_and_lists_every_command(cli: Cli) -> None:
    result = cli("--help")

    assert result.code == 0, result.stderr
    assert "Usage: forgeml" in result.stdout
    for path, _ in TREE:
        if len(path) == 1:
            assert f" {path[0]} " in result.stdout


@pytest.mark.parametrize("args", [[], ["data"]])
def test_a_bare_group_prints_its_help_and_exits_2(cli: Cli, args: list[str]) -> None:
    result = cli(*args)

    assert result.code == 2
    assert "Usage: forgeml" in result.stdout
    assert result.stderr == ""
