from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from forgeml.core.config import Settings
from forgeml.core.errors import NotFoundError, UsageError
from forgeml.core.workspace import Workspace
from forgeml.governance.lineage import Lineage, lineage
from forgeml.governance.lineage_draw import to_dot, to_image
from forgeml.tracking import get_model_version
from tests.governance._chain import CHILD, DEPLOYMENT, MODEL, adult_digest, copy_chain
from tests.train.conftest import ADULT_CSV


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    home = copy_chain(tmp_path_factory, tmp_path_factory.mktemp("lineage") / "home")
    workspace = Workspace(Settings(home=home, user="tester"))
    try:
        yield workspace
    finally:
        workspace.close()


@pytest.fixture(scope="module")
def run_id(chain: Workspace) -> str:
    return get_model_version(chain, MODEL).run_id


def _edges(found: Lineage) -> set[tuple[str, str, str]]:
    return {(edge.source, edge.target, edge.relation) for edge in found.edges}


def _keys(found: Lineage) -> set[str]:
    return {node.key for node in found.nodes}


def _source_key() -> str:
    return f"source:{ADULT_CSV.resolve()}@{adult_digest()[:12]}"


def test_from_a_model_it_walks_back_to_the_raw_file_and_forward_to_the_deployment(
    chain: Workspace, run_id: str
) -> None:
    found = lineage(chain, MODEL)

    assert found.root == f"model:{MODEL}"
    source = next(node for node in found.nodes if node.kind == "source")
    assert source.attrs["uri"] == str(ADULT_CSV.resolve())
    assert source.attrs["digest"] == adult_digest()
    assert [n.ref for n in found.nodes if n.kind == "dataset"] == [
        "adult@v1", "adult@v2", "adult@v3", "adult@v4",
    ]  # fmt: skip
    assert _edges(found) == {
        (_source_key(), "dataset:adult@v1", "ingested"),
        ("dataset:adult@v1", "dataset:adult@v2", "derived"),
        ("dataset:adult@v2", "dataset:adult@v3", "derived"),
        ("dataset:adult@v3", "dataset:adult@v4", "derived"),
        ("dataset:adult@v4", f"run:{run_id}", "trained"),
        (f"run:{run_id}", f"model:{MODEL}", "registered"),
        (f"run:{run_id}", f"model:{CHILD}", "registered"),
        (f"model:{MODEL}", f"model:{CHILD}", "derived"),
        (f"model:{MODEL}", f"deployment:{DEPLOYMENT}", "served"),
        (f"model:{CHILD}", f"deployment:{DEPLOYMENT}", "served"),
    }
    ops = [e.attrs["op"] for e in found.edges if e.relation == "derived" and "op" in e.attrs]
    assert ops == ["clean", "validate", "split"]
    roles = {e.source: e.attrs["role"] for e in found.edges if e.relation == "served"}
    assert roles == {f"model:{MODEL}": "primary", f"model:{CHILD}": "canary"}


def test_a_record_the_caller_may_not_read_is_an_opaque_node_the_walk_stops_at(
    chain: Workspace, run_id: str
) -> None:
    asked: set[tuple[str, str]] = set()

    def may_read(kind: str, project: str) -> bool:
        asked.add((kind, project))
        return kind not in ("dataset", "deployment")

    found = lineage(chain, MODEL, may_read=may_read)

    assert _keys(found) == {
        "dataset:~1", f"run:{run_id}", f"model:{MODEL}", f"model:{CHILD}", "deployment:~1",
    }  # fmt: skip
    hidden = [node for node in found.nodes if node.hidden]
    assert [(n.kind, n.label, n.attrs) for n in hidden] == [
        ("dataset", "in another project", {}), ("deployment", "in another project", {}),
    ]  # fmt: skip
    # adult@v4's parents and raw file are not reached through it; both served edges stay,
    # without the deployment's roles
    assert {(e.source, e.target, e.relation, str(e.attrs)) for e in found.edges} >= {
        ("dataset:~1", f"run:{run_id}", "trained", "{}"),
        (f"model:{MODEL}", "deployment:~1", "served", "{}"),
        (f"model:{CHILD}", "deployment:~1", "served", "{}"),
    }  # fmt: skip
    assert len(found.edges) == 6
    assert {project for _, project in asked} == {"default"}
    assert Lineage.from_dict(found.to_dict()) == found


def test_nodes_are_ordered_from_raw_files_to_deployments(chain: Workspace) -> None:
    kinds = [node.kind for node in lineage(chain, MODEL).nodes]

    assert kinds == sorted(kinds, key=["source", "dataset", "run", "model", "deployment"].index)
    assert kinds[0] == "source" and kinds[-1] == "deployment"


def test_up_stops_at_the_ref_and_down_leaves_out_what_it_was_made_from(
    chain: Workspace, run_id: str
) -> None:
    up = lineage(chain, MODEL, direction="up")
    down = lineage(chain, MODEL, direction="down")

    assert _keys(up) == {
        _source_key(), "dataset:adult@v1", "dataset:adult@v2", "dataset:adult@v3",
        "dataset:adult@v4", f"run:{run_id}", f"model:{MODEL}",
    }  # fmt: skip
    assert _keys(down) == {f"model:{MODEL}", f"model:{CHILD}", f"deployment:{DEPLOYMENT}"}


def test_depth_counts_links_from_the_ref(chain: Workspace, run_id: str) -> None:
    assert _keys(lineage(chain, MODEL, depth=0)) == {f"model:{MODEL}"}
    assert _keys(lineage(chain, MODEL, depth=1)) == {
        f"run:{run_id}", f"model:{MODEL}", f"model:{CHILD}", f"deployment:{DEPLOYMENT}",
    }  # fmt: skip
    assert "dataset:adult@v4" in _keys(lineage(chain, MODEL, depth=2, direction="up"))
    assert "dataset:adult@v3" not in _keys(lineage(chain, MODEL, depth=2, direction="up"))


def test_from_a_dataset_version_down_reaches_the_runs_models_and_deployment(
    chain: Workspace, run_id: str
) -> None:
    found = lineage(chain, "adult@v2", direction="down")

    assert found.root == "dataset:adult@v2"
    assert {f"run:{run_id}", f"model:{MODEL}", f"model:{CHILD}"} <= _keys(found)
    assert f"deployment:{DEPLOYMENT}" in _keys(found)
    assert "dataset:adult@v1" not in _keys(found)
    assert _source_key() not in _keys(found)


def test_from_a_run_by_id_prefix_or_kind_and_name(chain: Workspace, run_id: str) -> None:
    by_prefix = lineage(chain, run_id[:10])
    by_name = lineage(chain, "run:adult-mlp")

    assert by_prefix.root == by_name.root == f"run:{run_id}"
    assert _keys(by_prefix) == _keys(by_name)
    assert {_source_key(), f"model:{MODEL}", f"deployment:{DEPLOYMENT}"} <= _keys(by_name)


@pytest.mark.parametrize("ref", [DEPLOYMENT, f"deployment:{DEPLOYMENT}"])
def test_from_a_deployment_up_reaches_the_raw_file(chain: Workspace, ref: str) -> None:
    found = lineage(chain, ref, direction="up")

    assert found.root == f"deployment:{DEPLOYMENT}"
    assert {_source_key(), f"model:{MODEL}", f"model:{CHILD}"} <= _keys(found)


def test_a_bare_ref_naming_two_kinds_is_refused_with_the_forms_that_say_which(
    chain: Workspace,
) -> None:
    # the run and its model are both called adult-mlp
    with pytest.raises(UsageError, match="write model:adult-mlp or run:adult-mlp"):
        lineage(chain, "adult-mlp")
    assert lineage(chain, "model:adult-mlp").root == f"model:{MODEL}"


@pytest.mark.parametrize(
    ("ref", "error", "message"),
    [
        ("no-such-thing", NotFoundError, "No dataset version, model version, run or deployment"),
        ("adult@v99", NotFoundError, "run or deployment is named 'adult@v99'"),
        ("dataset:adult@v99", NotFoundError, "has no version v99"),
        ("model:no-such-model", NotFoundError, "Model 'no-such-model' is not registered"),
        ("deployment:nowhere", NotFoundError, "No deployment is named 'nowhere'"),
    ],
)
def test_an_unknown_ref_is_one_sentence(
    chain: Workspace, ref: str, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        lineage(chain, ref)


def test_a_bad_depth_or_direction_is_a_usage_error(chain: Workspace) -> None:
    with pytest.raises(UsageError, match="0 or more"):
        lineage(chain, MODEL, depth=-1)
    with pytest.raises(UsageError, match="use up, down or both"):
        lineage(chain, MODEL, direction="sideways")  # type: ignore[arg-type]


def test_reading_the_lineage_writes_nothing(chain: Workspace) -> None:
    before = chain.verify_audit()
    lineage(chain, MODEL)
    lineage(chain, DEPLOYMENT)

    assert chain.verify_audit() == before


def test_the_json_form_reads_back_as_the_same_lineage(chain: Workspace) -> None:
    found = lineage(chain, MODEL)
    payload = found.to_dict()

    assert set(payload) == {"root", "depth", "direction", "nodes", "edges"}
    assert {tuple(sorted(node)) for node in payload["nodes"]} == {
        ("attrs", "hidden", "id", "kind", "label", "ref")
    }
    assert {tuple(sorted(edge)) for edge in payload["edges"]} == {
        ("attrs", "relation", "source", "target")
    }
    assert Lineage.from_dict(payload) == found


def test_the_svg_is_xml_naming_every_node(chain: Workspace) -> None:
    found = lineage(chain, MODEL)
    root = ET.fromstring(to_image(found, "svg"))

    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    texts = {"".join(element.itertext()) for element in root.iter() if element.tag.endswith("text")}
    assert {node.label for node in found.nodes} <= texts


def test_the_png_is_a_png(chain: Workspace) -> None:
    assert to_image(lineage(chain, MODEL), "png").startswith(b"\x89PNG\r\n\x1a\n")


def test_the_dot_text_has_every_node_and_edge_quoted(chain: Workspace, tmp_path: Path) -> None:
    found = lineage(chain, MODEL)
    dot = to_dot(found)

    assert dot.startswith("digraph lineage {\n  rankdir=LR;") and dot.endswith("}\n")
    declared = re.findall(r'^  "([^"]+)" \[label=', dot, flags=re.MULTILINE)
    linked = re.findall(r'^  "([^"]+)" -> "([^"]+)" \[label="([^"]+)"\];$', dot, re.MULTILINE)
    assert declared == [node.key for node in found.nodes]
    assert {(a, b) for a, b, _ in linked} == {(e.source, e.target) for e in found.edges}
    assert ("model:adult-mlp@v1", "deployment:adult-api", "served (primary)") in linked
    assert dot.count("{") == dot.count("}") == 1
