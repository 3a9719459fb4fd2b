from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from forgeml.core.workspace import Workspace
from tests.cli.conftest import assert_cli_error, json_out
from tests.pipelines.conftest import row_counts, write_pipeline
from tests.pipelines.test_load import BAD

PIPELINE = """
name: tiny
params:
  greeting: hello
steps:
  - name: write
    kind: command
    argv: [PYTHON, -c, "open('out.txt', 'w').write('${params.greeting}')"]
    outputs: {text: out.txt}
  - name: read
    kind: command
    argv: [PYTHON, -c, "print(open('${steps.write.text}').read())"]
  - name: alone
    kind: command
    argv: [PYTHON, -c, "pass"]
"""


def _run(cli: Any, path: Path, *args: str) -> Any:
    return json_out(cli("pipelines", "run", path, *args, "--json"))


def test_run_list_show_and_graph(cli: Any, tmp_path: Path) -> None:
    path = write_pipeline(tmp_path, PIPELINE)

    first = _run(cli, path)
    second = _run(cli, path)

    assert first["state"] == second["state"] == "SUCCEEDED"
    assert [s["cached"] for s in first["steps"]] == [False, False, False]
    assert [s["cached"] for s in second["steps"]] == [True, True, True]
    assert (tmp_path / "out.txt").read_text() == "hello"
    runs = json_out(cli("pipelines", "list", "--json"))
    assert [r["id"] for r in runs] == [second["id"], first["id"]]
    assert runs[0]["cached_steps"] == 3 and runs[1]["cached_steps"] == 0
    shown = json_out(cli("pipelines", "show", first["id"][:8], "--json"))
    write = shown["steps"][0]
    assert write["name"] == "write" and write["state"] == "SUCCEEDED"
    assert write["outputs"]["text"] == str((tmp_path / "out.txt").resolve())
    assert write["started_at"] and write["finished_at"] and write["seconds"] >= 0
    assert write["job_id"] and len(write["cache_key"]) == 64
    human = cli("pipelines", "show", "tiny")  # a name shows its latest run
    assert human.code == 0 and second["id"] in human.stdout
    graph = cli("pipelines", "graph", path)
    assert graph.code == 0
    assert graph.stdout.splitlines() == [
        "write (command)",
        "  read (command)  <- write",
        "alone (command)",
    ]


def test_graph_draws_a_file_or_a_run_with_its_states(cli: Any, tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    path = write_pipeline(tmp_path, PIPELINE)
    first = _run(cli, path)
    _run(cli, path, "--set", "params.greeting=bye")  # write and read re-run, alone cached

    run = cli("pipelines", "graph", "tiny", "--out", tmp_path / "run.svg")  # the latest run
    assert run.code == 0, run.stderr
    assert run.stdout.splitlines() == [
        "write (command) SUCCEEDED",
        "  read (command) SUCCEEDED  <- write",
        "alone (command) SUCCEEDED (cached)",
    ]
    svg = ET.parse(tmp_path / "run.svg").getroot()  # well-formed SVG, its labels as text
    texts = " ".join(
        "".join(node.itertext()) for node in svg.iter("{http://www.w3.org/2000/svg}text")
    )
    assert all(name in texts for name in ("write", "read", "alone", "succeeded (cached)"))
    older = cli("pipelines", "graph", first["id"][:8], "--out", tmp_path / "first.png")
    assert older.code == 0 and "alone (command) SUCCEEDED\n" in older.stdout + "\n"
    assert (tmp_path / "first.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    drawn = cli("pipelines", "graph", path, "--out", tmp_path / "file.png")
    assert drawn.code == 0 and (tmp_path / "file.png").stat().st_size > 1000


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (["nosuch"], "No pipeline run 'nosuch'", 1),
        (["missing.yaml"], "missing.yaml: no such file", 1),
        (["tiny", "--out", "x.jpg"], "--out x.jpg: draw to a .svg or .png file.", 2),
        (["tiny", "--set", "params.greeting=x"], "--set applies to a pipeline file", 2),
    ],
)
def test_graph_refuses_what_it_cannot_draw(
    cli: Any, args: list[str], message: str, code: int
) -> None:
    assert_cli_error(cli("pipelines", "graph", *args), message, code=code)


def test_set_overrides_a_parameter_and_reruns_what_depends_on_it(cli: Any, tmp_path: Path) -> None:
    path = write_pipeline(tmp_path, PIPELINE)
    _run(cli, path)

    changed = _run(cli, path, "--set", "params.greeting=bye")

    assert [s["cached"] for s in changed["steps"]] == [False, False, True]
    assert (tmp_path / "out.txt").read_text() == "bye"


@pytest.mark.parametrize("case", list(BAD))
def test_an_invalid_file_is_one_sentence_exit_1_and_records_nothing(
    cli: Any, tmp_path: Path, home_workspace: Workspace, case: str
) -> None:
    text, expected = BAD[case]
    path = write_pipeline(tmp_path, text)
    before = row_counts(home_workspace)

    result = cli("pipelines", "run", path)

    assert_cli_error(result, f"{path}: ")
    assert expected in result.stderr
    assert row_counts(home_workspace) == before


def test_a_failed_run_is_exit_1_naming_the_run_and_its_failed_step(
    cli: Any, tmp_path: Path
) -> None:
    path = write_pipeline(
        tmp_path,
        """
name: failing
steps:
  - {name: broken, kind: command, argv: [PYTHON, -c, "raise SystemExit(4)"]}
  - {name: fine, kind: command, argv: [PYTHON, -c, "pass"]}
""",
    )

    result = cli("pipelines", "run", path, "--json")

    summary = json.loads(result.stdout)
    assert summary["state"] == "FAILED"
    assert_cli_error(result, f"Pipeline run {summary['id'][:12]} failed: Step broken failed.")
    assert [s["state"] for s in summary["steps"]] == ["FAILED", "SUCCEEDED"]


def test_usage_errors_exit_2(cli: Any, tmp_path: Path) -> None:
    path = write_pipeline(tmp_path, PIPELINE)

    assert cli("pipelines", "run").code == 2
    assert_cli_error(
        cli("pipelines", "run", path, "--set", "params"),
        "--set 'params' is not of the form key.path=value.",
        code=2,
    )


def test_showing_an_unknown_run_is_one_sentence(cli: Any) -> None:
    assert_cli_error(cli("pipelines", "show", "nope"), "No pipeline run 'nope'")
