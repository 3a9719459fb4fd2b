"""The lineage graph holds only the records of projects its caller may read: a neighbour of
another project is one opaque node naming no record, the walk stops there, and its edges
stay. Read over HTTP as JSON and SVG, as the UI's page and as `forgeml --server ... lineage`
prints it (table, JSON, DOT).

The records, in a served workspace with accounts (tara: team-a; bob: team-b; pat: both):
team-a's dataset `iris-a@v1` (uploaded as `secret-a.csv`) trains team-a's run `train-a`
(model `mlp-a@v1`) and, used across projects through the store, team-b's run `train-b`
(model `mlp-b@v1`), which team-a's deployment `web-a` serves.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from forgeml.core.ids import new_id
from forgeml.core.store import ModelVersionRecord
from forgeml.core.workspace import Workspace
from forgeml.governance.lineage import lineage
from tests.cli._served import Forgeml, Served, forgeml_on, served_teams
from tests.cli.conftest import table_columns

CSV = b"x,y\n1,a\n2,b\n3,a\n"
# what team-b's member may not learn: team-a's names, file, owner and the dataset's digest
TEAM_A_WORDS = ("iris-a", "secret-a.csv", "train-a", "mlp-a", "web-a", "tara")
TEAM_B_WORDS = ("train-b", "mlp-b")


@dataclass(frozen=True)
class Teams:
    served: Served
    run_a: str
    run_b: str
    digest: str

    def get(self, who: str, path: str, **params: str) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.served.tokens[who]}"}
        return httpx.get(f"{self.served.url}{path}", params=params, headers=headers, timeout=120)


def _model(workspace: Workspace, name: str, run_id: str, project: str) -> None:
    with workspace.store.session() as session:
        session.add(
            ModelVersionRecord(id=new_id(), name=name, version=1, run_id=run_id,
                               project=project, artifact_digest="0" * 64, metrics={},
                               created_by="tester")
        )  # fmt: skip


def _records(workspace: Workspace, tmp: Path) -> tuple[str, str, str]:
    from forgeml.data import catalog
    from forgeml.data.ingest import IngestOptions
    from forgeml.data.pipeline import add
    from forgeml.serve.deployments import DeploymentSpec, _records
    from forgeml.tracking import RunStatus, finish_run, start_run

    in_a = workspace.in_project("team-a").acting_as("tara")
    in_b = workspace.in_project("team-b").acting_as("bob")
    data = tmp / "upload.csv"
    data.write_bytes(CSV)
    add(in_a, "iris-a", data, IngestOptions(), source_name="upload:secret-a.csv")
    with workspace.store.session() as session:
        version = catalog.resolve(session, "iris-a@v1")
    runs = []
    for home, name in ((in_a, "train-a"), (in_b, "train-b")):
        handle = start_run(home, {"lr": 0.1}, name, version)
        finish_run(handle, RunStatus.FINISHED, {"accuracy": 0.5})
        runs.append(handle.run_id)
    _model(workspace, "mlp-a", runs[0], "team-a")
    _model(workspace, "mlp-b", runs[1], "team-b")
    spec = DeploymentSpec(model="mlp-b@v1", model_ref="mlp-b@v1", replicas=1)
    with workspace.store.session() as session:
        _records._add_record(session, in_a, "web-a", spec, "failed", _records.now())
    return runs[0], runs[1], version.digest


@pytest.fixture(scope="module")
def teams(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Teams]:
    tmp = tmp_path_factory.mktemp("lineage-projects")
    people = {"tara": ("developer", "team-a"), "bob": ("developer", "team-b"),
              "pat": ("developer", "team-a"), "olivia": ("owner", "default")}  # fmt: skip
    with served_teams(tmp, people, members=(("team-b", "pat", "developer"),)) as served:
        run_a, run_b, digest = _records(served.workspace, tmp)
        yield Teams(served, run_a, run_b, digest)


@pytest.fixture
def forgeml(
    teams: Teams, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Forgeml]:
    with forgeml_on(teams.served, capsys, monkeypatch) as run:
        yield run


def _leaks(text: str, words: tuple[str, ...]) -> list[str]:
    return [word for word in words if word in text]


def _team_a(teams: Teams) -> tuple[str, ...]:
    return (*TEAM_A_WORDS, teams.run_a, teams.digest[:12])


def _graph(teams: Teams, who: str, record: str) -> dict:
    answer = teams.get(who, f"/api/v1/lineage/{record}")
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_team_bs_member_sees_team_as_records_as_opaque_nodes(teams: Teams) -> None:
    graph = _graph(teams, "bob", f"run:{teams.run_b}")

    nodes = {node["id"]: node for node in graph["nodes"]}
    assert set(nodes) == {"dataset:~1", f"run:{teams.run_b}", "model:mlp-b@v1", "deployment:~1"}
    for key in ("dataset:~1", "deployment:~1"):
        assert nodes[key]["hidden"] is True and nodes[key]["ref"] is None
        assert (nodes[key]["label"], nodes[key]["attrs"]) == ("in another project", {})
    assert not nodes["model:mlp-b@v1"]["hidden"]
    # the edges stay, so the graph says that something was used; the hidden deployment's
    # role in serving is its own record's, left out
    assert [(e["source"], e["relation"], e["target"], e["attrs"]) for e in graph["edges"]] == [
        ("dataset:~1", "trained", f"run:{teams.run_b}", {}),
        (f"run:{teams.run_b}", "registered", "model:mlp-b@v1", {}),
        ("model:mlp-b@v1", "served", "deployment:~1", {}),
    ]
    assert _leaks(json.dumps(graph), _team_a(teams)) == []


def test_the_walk_stops_at_another_projects_record(teams: Teams) -> None:
    # team-a's dataset: team-b's run is opaque, and what it made (team-b's model, served
    # by team-a's deployment) is not reached through it
    graph = _graph(teams, "tara", "iris-a@v1")
    served = _graph(teams, "tara", "deployment:web-a")

    assert [(n["kind"], n["ref"]) for n in graph["nodes"]] == [
        ("source", graph["nodes"][0]["ref"]), ("dataset", "iris-a@v1"),
        ("run", teams.run_a), ("run", None), ("model", "mlp-a@v1"),
    ]  # fmt: skip
    assert "secret-a.csv" in graph["nodes"][0]["label"]
    assert ("dataset:iris-a@v1", "run:~1") in {(e["source"], e["target"]) for e in graph["edges"]}
    assert [(n["id"], n["hidden"]) for n in served["nodes"]] == [
        ("model:~1", True), ("deployment:web-a", False),
    ]  # fmt: skip
    assert _leaks(json.dumps(graph), (*TEAM_B_WORDS, teams.run_b)) == []
    # the one mention left is team-a's own deployment's spec, which tara reads anyway
    assert served["nodes"][1]["attrs"]["model_ref"] == "mlp-b@v1"
    assert json.dumps(served).count("mlp-b") == 1


def test_a_member_of_both_projects_and_the_embedded_mode_see_everything(teams: Teams) -> None:
    for record in ("iris-a@v1", f"run:{teams.run_b}", "deployment:web-a"):
        graph = _graph(teams, "pat", record)
        embedded = lineage(teams.served.workspace, record).to_dict()

        assert graph == embedded, record
        assert not any(node["hidden"] for node in graph["nodes"]), record
    names = json.dumps(_graph(teams, "pat", "iris-a@v1"))
    assert all(word in names for word in ("secret-a.csv", "train-a", "train-b", "mlp-b", "web-a"))


def test_the_ui_page_and_the_svg_name_no_hidden_record(teams: Teams) -> None:
    page = teams.get("bob", "/lineage/model:mlp-b@v1")
    svg = teams.get("bob", "/api/v1/lineage/model:mlp-b@v1", format="svg")

    assert page.status_code == 200 and svg.status_code == 200, (page.text, svg.text)
    assert "<em>in another project</em>" in page.text and "mlp-b@v1" in page.text
    texts = " ".join("".join(e.itertext()) for e in ET.fromstring(svg.content).iter())
    assert "in another project" in texts and "mlp-b@v1" in texts
    for text in (page.text, texts):
        assert _leaks(text, _team_a(teams)) == []


def test_the_remote_cli_prints_no_hidden_record(teams: Teams, forgeml: Forgeml) -> None:
    record = f"run:{teams.run_b}"
    table = forgeml.remote("lineage", record, token="bob")
    as_json = forgeml.remote("lineage", record, "--json", token="bob")
    dot = forgeml.remote("lineage", record, "--format", "dot", token="bob")

    assert (table.code, as_json.code, dot.code) == (0, 0, 0), (table, as_json, dot)
    # the terminal's width folds a cell over lines: compared without spaces
    text = "".join(table_columns(table.stdout)).replace(" ", "")
    assert text.count("(inanotherproject)") == 3 and "mlp-b@v1" in text
    assert json.loads(as_json.stdout) == _graph(teams, "bob", record)
    assert '"dataset:~1" [label="dataset: in another project"' in dot.stdout
    assert f'"dataset:~1" -> "run:{teams.run_b}"' in dot.stdout
    for output in (text, as_json.stdout, dot.stdout):
        assert _leaks(output, _team_a(teams)) == []
