"""Queues are install-wide and shared by every project (Volcano's queues, Kueue's
ClusterQueues): `queues:read` is decided in the request's project, so a team's member lists
and shows them and submits to one; `queues:manage` stays decided in `default`; a show
counts the queue's jobs of every project by state and names none.

The records, in a served workspace with accounts (olivia: default's owner; tara: team-a's
developer; bob: team-b's developer; vera: team-b's viewer): olivia's queues `gpu` and `cpu`,
and tara's job `secret-job-a` waiting in `gpu`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from forgeml.core.config import get_settings
from tests.cli._served import Forgeml, Served, forgeml_on, served_teams

PEOPLE = {
    "olivia": ("owner", "default"),
    "tara": ("developer", "team-a"),
    "bob": ("developer", "team-b"),
    "vera": ("viewer", "team-b"),
}


@dataclass(frozen=True)
class Teams:
    served: Served
    job_a: str

    def call(
        self, who: str, method: str, path: str, project: str | None, body: object = None
    ) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.served.tokens[who]}"}
        if project is not None:
            headers["X-Forgeml-Project"] = project
        url = f"{self.served.url}{path}"
        return httpx.request(method, url, json=body, headers=headers, timeout=120)


@pytest.fixture(scope="module")
def teams(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Teams]:
    tmp = tmp_path_factory.mktemp("queues-projects")
    with served_teams(tmp, PEOPLE) as served:
        teams = Teams(served, "")
        for queue in ("gpu", "cpu"):
            created = teams.call("olivia", "POST", "/api/v1/queues", None, {"name": queue})
            assert created.status_code == 201, created.text
        body = {"command": ["true"], "name": "secret-job-a", "queue": "gpu"}
        job = teams.call("tara", "POST", "/api/v1/jobs", "team-a", body)
        assert job.status_code == 201, job.text
        yield Teams(served, job.json()["job_id"])


@pytest.fixture
def forgeml(
    teams: Teams, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Forgeml]:
    with forgeml_on(teams.served, capsys, monkeypatch) as run:
        monkeypatch.setenv("FORGEML_PROJECT", "team-b")
        get_settings.cache_clear()
        yield run


def _team_a_words(teams: Teams) -> tuple[str, ...]:
    return ("secret-job-a", "tara", teams.job_a, "team-a")


@pytest.mark.parametrize("who", ["bob", "vera"])
def test_a_teams_member_lists_and_shows_the_shared_queues_in_its_project(
    teams: Teams, who: str
) -> None:
    listed = teams.call(who, "GET", "/api/v1/queues", "team-b")
    shown = teams.call(who, "GET", "/api/v1/queues/gpu", "team-b")

    assert listed.status_code == 200, listed.text
    assert [queue["name"] for queue in listed.json()] == ["cpu", "default", "gpu"]
    assert shown.status_code == 200, shown.text
    assert shown.json()["name"] == "gpu"


def test_a_show_counts_every_projects_jobs_and_names_none(teams: Teams) -> None:
    shown = teams.call("bob", "GET", "/api/v1/queues/gpu", "team-b")

    # tara's job is counted (the shared queue's load), but nothing names it or her
    assert shown.json()["jobs"] == {"PENDING": 1}
    assert [word for word in _team_a_words(teams) if word in shown.text] == []


def test_a_teams_developer_submits_to_a_shared_queue(teams: Teams) -> None:
    body = {"command": ["true"], "name": "probe-b", "queue": "cpu"}
    submitted = teams.call("bob", "POST", "/api/v1/jobs", "team-b", body)

    assert submitted.status_code == 201, submitted.text
    job = submitted.json()
    assert job["queue"] == "cpu"
    listed = teams.call("bob", "GET", "/api/v1/jobs", "team-b").json()
    assert [found["job_id"] for found in listed] == [job["job_id"]]
    cancelled = teams.call("bob", "POST", f"/api/v1/jobs/{job['job_id']}/cancel", "team-b")
    assert cancelled.status_code == 200, cancelled.text


def test_creating_a_queue_stays_with_defaults_maintainers(teams: Teams) -> None:
    for who, project in (("bob", "team-b"), ("tara", "team-a"), ("bob", None)):
        answer = teams.call(who, "POST", "/api/v1/queues", project, {"name": "mine"})
        assert answer.status_code == 403, (who, answer.text)
        assert "queues:manage in the project 'default'" in answer.json()["error"]
    assert teams.call("vera", "GET", "/api/v1/queues/mine", "team-b").status_code == 404


def test_a_member_of_no_project_named_is_still_refused(teams: Teams) -> None:
    # bob reads queues in team-b, not in a project he is no member of
    for project in ("team-a", None):
        answer = teams.call("bob", "GET", "/api/v1/queues", project)
        assert answer.status_code == 403, (project, answer.text)


def test_the_home_page_shows_the_queues_load_to_a_teams_member(teams: Teams) -> None:
    page = teams.call("bob", "GET", "/", "team-b")

    assert page.status_code == 200, page.text
    start = page.text.index('id="queue-load-data">') + len('id="queue-load-data">')
    load = json.loads(page.text[start : page.text.index("</script>", start)])
    assert {queue["name"]: queue["jobs"] for queue in load}["gpu"] == {"PENDING": 1}
    assert "secret-job-a" not in page.text


def test_the_cli_lists_and_shows_the_queues_in_a_teams_project(
    teams: Teams, forgeml: Forgeml
) -> None:
    listed = forgeml.remote("queues", "list", "--json", token="bob")
    shown = forgeml.remote("queues", "show", "gpu", "--json", token="bob")
    created = forgeml.remote("queues", "create", "mine", token="bob")
    local = forgeml("queues", "list", "--json")  # no server: no decision, every queue

    assert (listed.code, shown.code) == (0, 0), (listed, shown)
    assert [queue["name"] for queue in json.loads(listed.stdout)] == ["cpu", "default", "gpu"]
    assert json.loads(local.stdout) == json.loads(listed.stdout)
    assert json.loads(shown.stdout)["jobs"] == {"PENDING": 1}
    assert created.code == 1 and created.stderr.count("\n") == 1, created
    assert "queues:manage in the project 'default'" in created.stderr
