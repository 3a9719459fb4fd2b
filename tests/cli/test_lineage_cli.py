from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from forgeml.governance.lineage import lineage
from tests.cli._served import Forgeml, Served, assert_same_as_local
from tests.cli.conftest import assert_cli_error, assert_ok, json_out, table_columns
from tests.cli.test_startup import _probe
from tests.governance._chain import CHILD, DEPLOYMENT, MODEL
from tests.governance._served_chain import served_chain


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served_chain(tmp_path_factory) as home:
        yield home


def test_the_table_lists_every_record_with_what_it_came_from(forgeml: Forgeml) -> None:
    result = forgeml("lineage", MODEL)

    assert_ok(result)
    assert f"lineage of model:{MODEL}" in result.stdout
    # the terminal's width folds a long ref (a raw file's path) over lines
    text = "".join(table_columns(result.stdout))
    for word in ("adult.data", "adult@v1", "adult@v4", "mitigated", DEPLOYMENT, "(clean)"):
        assert word in text, word
    assert "* model" in result.stdout  # the root is marked


def test_json_is_the_lineage_nodes_and_edges(forgeml: Forgeml, served: Served) -> None:
    answer = json_out(forgeml("lineage", DEPLOYMENT, "--direction", "up", "--json"))

    assert answer == lineage(served.workspace, DEPLOYMENT, direction="up").to_dict()
    assert answer["root"] == f"deployment:{DEPLOYMENT}"
    assert {node["kind"] for node in answer["nodes"]} == {
        "source", "dataset", "run", "model", "deployment",
    }  # fmt: skip


def test_depth_limits_the_walk(forgeml: Forgeml) -> None:
    answer = json_out(forgeml("lineage", "adult@v4", "--depth", "1", "--json"))

    assert answer["depth"] == 1
    assert {node["kind"] for node in answer["nodes"]} == {"dataset", "run"}


def test_svg_png_and_dot_are_written_to_the_output_file(forgeml: Forgeml, tmp_path: Path) -> None:
    svg, png, dot = tmp_path / "l.svg", tmp_path / "out" / "l.png", tmp_path / "l.dot"

    assert_ok(forgeml("lineage", MODEL, "--format", "svg", "--output", str(svg)))
    assert_ok(forgeml("lineage", MODEL, "--output", str(png)))  # the suffix says png
    assert_ok(forgeml("lineage", MODEL, "--format", "dot", "--output", str(dot)))

    texts = {"".join(e.itertext()) for e in ET.fromstring(svg.read_bytes()).iter()}
    assert {MODEL, CHILD, DEPLOYMENT, "adult@v1"} <= texts
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert dot.read_text().startswith("digraph lineage {")
    assert f'"model:{MODEL}" -> "deployment:{DEPLOYMENT}"' in dot.read_text()


def test_dot_without_an_output_is_printed(forgeml: Forgeml) -> None:
    result = forgeml("lineage", MODEL, "--format", "dot")

    assert_ok(result)
    assert result.stdout.startswith("digraph lineage {") and result.stdout.endswith("}\n")


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["no-such-thing"], 1, "No dataset version, model version, run or deployment"),
        (["model:no-such-model"], 1, "Model 'no-such-model' is not registered"),
        (["adult-mlp"], 2, "write model:adult-mlp or run:adult-mlp"),
        ([MODEL, "--direction", "sideways"], 2, "sideways"),
        ([MODEL, "--depth", "-1"], 2, "--depth"),
        ([MODEL, "--format", "gif"], 2, "gif"),
        ([MODEL, "--json", "--format", "svg"], 2, "Give --json or --format, not both."),
        ([MODEL, "--format", "png"], 2, "A PNG is written to a file"),
        ([MODEL, "--output", "lineage.txt"], 2, "Cannot tell the format"),
    ],
)
def test_bad_input_is_one_sentence(
    forgeml: Forgeml, args: list[str], code: int, message: str
) -> None:
    assert_cli_error(forgeml("lineage", *args), message, code)


def test_an_output_that_is_a_folder_is_refused(forgeml: Forgeml, tmp_path: Path) -> None:
    result = forgeml("lineage", MODEL, "--format", "svg", "--output", str(tmp_path))

    assert_cli_error(result, "is a folder", 2)


@pytest.mark.parametrize(
    "args",
    [
        [MODEL],
        [MODEL, "--json"],
        ["adult@v2", "--direction", "down", "--depth", "3", "--json"],
        [f"deployment:{DEPLOYMENT}", "--format", "dot"],
        ["no-such-thing"],
        ["adult-mlp"],
        ["dataset:adult@v99"],
    ],
)
def test_remote_mode_prints_what_local_mode_prints(forgeml: Forgeml, args: list[str]) -> None:
    assert_same_as_local(forgeml("lineage", *args), forgeml.remote("lineage", *args), args)


def test_remote_mode_draws_the_same_svg(forgeml: Forgeml, tmp_path: Path) -> None:
    local, remote = tmp_path / "local.svg", tmp_path / "remote.svg"

    assert_ok(forgeml("lineage", MODEL, "--output", str(local)))
    assert_ok(forgeml.remote("lineage", MODEL, "--output", str(remote), token="victor"))

    assert remote.read_bytes() == local.read_bytes()


def test_remote_mode_needs_the_read_of_the_refs_kind(forgeml: Forgeml) -> None:
    allowed = forgeml.remote("lineage", "adult@v4", "--json", token="datasets_only")
    refused = forgeml.remote("lineage", MODEL, "--json", token="datasets_only")

    graph = json.loads(allowed.stdout)
    assert graph["root"] == "dataset:adult@v4"
    # the token reads datasets only: the runs and models that used adult@v4 are opaque
    shown = {node["kind"]: node["hidden"] for node in graph["nodes"]}
    assert shown == {"source": False, "dataset": False, "run": True}
    assert_cli_error(refused, "models:read", 1)


def test_the_command_loads_neither_torch_nor_matplotlib_unless_it_draws(
    forgeml: Forgeml, tmp_path: Path
) -> None:
    table = _probe(tmp_path, "lineage", MODEL, "--json")
    drawn = _probe(tmp_path, "lineage", MODEL, "--output", str(tmp_path / "l.svg"))

    assert table["codes"] == drawn["codes"] == [0]
    assert not {"torch", "matplotlib"} & set(table["modules"])
    assert "matplotlib" in drawn["modules"] and "torch" not in drawn["modules"]
