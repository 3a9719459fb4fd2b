"""A model card names only records of projects its reader may read, as lineage does: a
dataset version, parent model or deployment of another project is written "in another
project", with no name, ref, digest or file of its own, and the chain stops there. Read over
HTTP, as the UI's model page and as `forgeml --server ... models card` prints it; the local
CLI's card shows every record.

The records, in a served workspace with accounts (tara: team-a; bob: team-b; pat: both):
team-b's dataset `iris-b@v1` (uploaded as `secret-b.csv`) is the parent of team-a's
`iris-a@v1` (a `clean`, written into the store: transforms refuse another project's data),
which team-a's run `train-a` trains `mlp-a@v1` on; `mlp-a@v1` derives from team-b's
`mlp-b@v1` and team-b's deployment `web-b` serves it. Team-a's `mlp-c@v1` is registered (in
the store) as trained on `iris-b@v1` itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from forgeml.core.ids import new_id
from forgeml.core.store import DatasetVersion, LineageEdge, ModelVersionRecord
from forgeml.core.workspace import Workspace
from forgeml.governance.cards import model_card
from tests.cli._served import Forgeml, Served, forgeml_on, served_teams

CARD = "/api/v1/models/mlp-a/versions/1/card"
# what team-a's member may not learn of team-b: its dataset, file, model and deployment
TEAM_B_WORDS = ("iris-b", "secret-b.csv", "mlp-b", "web-b", "bob")


@dataclass(frozen=True)
class Teams:
    served: Served
    digest_b: str

    def get(self, who: str, path: str, **params: str) -> httpx.Response:
        # the UI's model page lists in the request's project: team-a's, as tara's switch would
        headers = {
            "Authorization": f"Bearer {self.served.tokens[who]}",
            "X-Forgeml-Project": "team-a",
        }
        return httpx.get(f"{self.served.url}{path}", params=params, headers=headers, timeout=120)


def _model(workspace: Workspace, name: str, run_id: str, project: str, **fields: object) -> None:
    from forgeml.tracking._mlflow import open_client

    client = open_client(workspace)
    client.create_registered_model(name)
    client.create_model_version(name, source=f"runs:/{run_id}/model", run_id=run_id)
    with workspace.store.session() as session:
        session.add(
            ModelVersionRecord(id=new_id(), name=name, version=1, run_id=run_id,
                               project=project, artifact_digest="0" * 64, metrics={},
                               created_by="tester", **fields)
        )  # fmt: skip


def _records(workspace: Workspace, tmp: Path) -> str:
    from forgeml.data import catalog
    from forgeml.data.ingest import IngestOptions
    from forgeml.data.pipeline import add
    from forgeml.serve.deployments import DeploymentSpec, _records
    from forgeml.tracking import RunStatus, finish_run, start_run

    in_a = workspace.in_project("team-a").acting_as("tara")
    in_b = workspace.in_project("team-b").acting_as("bob")
    for home, name, body in ((in_b, "iris-b", b"x,y\n1,a\n2,b\n"), (in_a, "iris-a", b"x,y\n1,a\n")):
        data = tmp / f"{name}.csv"
        data.write_bytes(body)
        source = "upload:secret-b.csv" if name == "iris-b" else "upload:plain-a.csv"
        add(home, name, data, IngestOptions(), source_name=source)
    with workspace.store.session() as session:
        version_a = catalog.resolve(session, "iris-a@v1")
        version_b = catalog.resolve(session, "iris-b@v1")
        session.add(LineageEdge(child_id=version_a.id, position=0, parent_id=version_b.id))
        session.get(DatasetVersion, version_a.id).recipe = {"op": "clean", "params": {}}  # type: ignore[union-attr]
    runs = []
    for home, name, version in ((in_a, "train-a", version_a), (in_b, "train-b", version_b)):
        handle = start_run(home, {"lr": 0.1}, name, version)
        finish_run(handle, RunStatus.FINISHED, {"accuracy": 0.5})
        runs.append(handle.run_id)
    _model(workspace, "mlp-b", runs[1], "team-b", dataset_version_id=version_b.id)
    _model(workspace, "mlp-a", runs[0], "team-a", dataset_version_id=version_a.id,
           parent="mlp-b@v1")  # fmt: skip
    _model(workspace, "mlp-c", runs[0], "team-a", dataset_version_id=version_b.id)
    spec = DeploymentSpec(model="mlp-a@v1", model_ref="mlp-a@v1", replicas=1)
    with workspace.store.session() as session:
        _records._add_record(session, in_b, "web-b", spec, "failed", _records.now())
    return version_b.digest


@pytest.fixture(scope="module")
def teams(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Teams]:
    tmp = tmp_path_factory.mktemp("card-projects")
    people = {"tara": ("developer", "team-a"), "bob": ("developer", "team-b"),
              "pat": ("developer", "team-a")}  # fmt: skip
    with served_teams(tmp, people, members=(("team-b", "pat", "developer"),)) as served:
        yield Teams(served, _records(served.workspace, tmp))


@pytest.fixture
def forgeml(
    teams: Teams, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Forgeml]:
    with forgeml_on(teams.served, capsys, monkeypatch, user="tara") as run:
        yield run


def _leaks(teams: Teams, text: str) -> list[str]:
    return [word for word in (*TEAM_B_WORDS, teams.digest_b[:12]) if word in text]


def _card(teams: Teams, who: str, card_format: str = "md") -> str:
    answer = teams.get(who, CARD, format=card_format)
    assert answer.status_code == 200, answer.text
    card: str = answer.json()["card"]
    return card


@pytest.mark.parametrize("card_format", ["md", "html"])
def test_a_teams_member_reads_another_projects_records_as_hidden(
    teams: Teams, card_format: str
) -> None:
    card = _card(teams, "tara", card_format)

    assert _leaks(teams, card) == []
    assert "iris-a@v1" in card and "in another project" in card


def test_the_card_says_what_is_hidden_and_where_the_chain_stops(teams: Teams) -> None:
    card = _card(teams, "tara")

    assert "| `iris-a@v1` | clean |" in card
    assert "| *in another project* |  |  |  |" in card
    assert "Source: a dataset version in another project." in card
    assert "Derived from: a model in another project." in card
    assert "Served by a deployment in another project." in card
    # the front matter names the readable training version, no hidden parent as base model
    assert "- iris-a@v1" in card and "base_model" not in card


def test_a_member_of_both_projects_and_the_local_card_see_everything(teams: Teams) -> None:
    card = _card(teams, "pat")
    local = model_card(teams.served.workspace, "mlp-a@v1")

    assert card == local
    assert "in another project" not in card
    for word in ("iris-b@v1", "secret-b.csv", "mlp-b@v1", "web-b", teams.digest_b):
        assert word in card, word


def test_another_projects_member_may_not_read_the_card(teams: Teams) -> None:
    answer = teams.get("bob", CARD)

    assert answer.status_code == 403 and "'team-a'" in answer.json()["error"]


def test_a_card_trained_on_another_projects_version_names_no_data(teams: Teams) -> None:
    answer = teams.get("tara", "/api/v1/models/mlp-c/versions/1/card")
    card = answer.json()["card"]

    assert answer.status_code == 200, answer.text
    assert "on a dataset version in another project" in card
    assert "Trained on a dataset version in another project, target" not in card
    assert "datasets:" not in card.partition("\n---\n")[0]  # the front matter names none
    assert _leaks(teams, card) == []


def test_a_versions_dataset_and_parent_of_another_project_are_hidden(teams: Teams) -> None:
    listed = teams.get("tara", "/api/v1/models").json()
    both = teams.get("pat", "/api/v1/models").json()

    hidden = {(v["ref"], v["dataset"], v["parent"]) for v in listed}
    assert hidden == {("mlp-a@v1", "iris-a@v1", "in another project"),
                      ("mlp-c@v1", "in another project", None)}  # fmt: skip
    assert teams.get("tara", "/api/v1/models/mlp-c").json()["dataset"] == "in another project"
    assert {(v["ref"], v["dataset"], v["parent"]) for v in both} == {
        ("mlp-a@v1", "iris-a@v1", "mlp-b@v1"), ("mlp-c@v1", "iris-b@v1", None),
    }  # fmt: skip


def test_the_ui_model_page_embeds_the_card_naming_no_hidden_record(teams: Teams) -> None:
    from forgeml.ui._pages_models import card_body

    page = teams.get("tara", "/models/mlp-a")
    card = str(card_body(_card(teams, "tara", "html")))

    assert page.status_code == 200, page.text
    assert card in page.text
    assert "<em>in another project</em>" in card and "iris-a@v1" in card
    assert _leaks(teams, page.text) == []


def test_the_remote_cli_prints_no_hidden_record_and_the_local_one_all(
    teams: Teams, forgeml: Forgeml
) -> None:
    printed = forgeml.remote("models", "card", "mlp-a@v1", token="tara")
    as_json = forgeml.remote("models", "card", "mlp-a@v1", "--json", token="tara")
    local = forgeml("models", "card", "mlp-a@v1")

    assert (printed.code, as_json.code, local.code) == (0, 0, 0), (printed, as_json, local)
    assert printed.stdout.rstrip("\n") == _card(teams, "tara").rstrip("\n")
    assert json.loads(as_json.stdout)["card"] == _card(teams, "tara")
    for output in (printed.stdout, as_json.stdout):
        assert _leaks(teams, output) == []
    assert "secret-b.csv" in local.stdout and "web-b" in local.stdout
