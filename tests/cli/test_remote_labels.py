"""`forgeml label` in remote mode prints what it prints locally, with the same errors and
exit codes, on SQLite and PostgreSQL; the annotator is the token's user there."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from forgeml.auth import issue_token
from forgeml.data import pipeline
from forgeml.data.ingest import IngestOptions
from tests.auth._accounts import fast_settings, person
from tests.cli._served import Forgeml, Served, served_on
from tests.label.conftest import add_reviews

# the flow, run once per side on a task of its own ({task}); {item} is the item `next` served
FLOW = [
    ("create", "{task}", "--dataset", "reviews@v1", "--classes", "pos,neg", "--seed", "3"),
    ("create", "{task}", "--dataset", "reviews@v1", "--classes", "pos,neg"),  # taken: exit 1
    ("show", "{task}"),
    ("next", "{task}"),
    ("submit", "{task}", "{item}", "pos"),
    ("submit", "{task}", "{item}", "neg", "--adjudicate", "--json"),
    ("next", "{task}", "--json"),
    ("import", "{task}", "{labels}", "--key", "id", "--annotator", "bob"),
    ("import", "{task}", "{labels}", "--key", "id", "--annotator", "bob", "--json"),
    ("agreement", "{task}", "--json"),
    ("reorder", "{task}", "--strategy", "random", "--seed", "5"),
    ("reorder", "{task}", "--strategy", "random", "--seed", "6", "--json"),
    ("show", "{task}", "--json"),
    ("export", "{task}", "--resolve", "majority"),
    ("export", "{task}", "--dataset", "{task}_out", "--column", "sentiment"),
]
# the same command on both sides, against the local side's task
ERRORS = [
    ("show", "nosuch"),
    ("next", "nosuch"),
    ("submit", "{task}", "0", "great"),
    ("submit", "{task}", "0", "[oops"),
    ("submit", "{task}", "99", "pos"),
    ("import", "{task}", "missing.csv"),
    ("import", "{task}", "x.txt"),
    ("import", "{task}", "{labels}", "--format", "xml"),  # usage: exit 2
    ("import", "{task}", "{unknown}", "--key", "id", "--annotator", "bob"),
    ("import", "{task}", "{labels}", "--key", "id"),  # names no annotator
    ("export", "{task}", "--resolve", "vote"),  # usage: exit 2
    ("create", "t2", "--dataset", "nope", "--classes", "a"),
    ("create", "t2", "--dataset", "reviews", "--classes", "a", "--strategy", "margin"),
    ("create", "t2", "--dataset", "reviews", "--classes", "a", "--kind", "spans", "--column", "x"),
    ("create", "t2", "--dataset", "reviews", "--classes", "a", "--strategy", "entropy",
     "--model", "nosuch@v1"),
    ("reorder", "{task}", "--strategy", "entropy", "--model", "nosuch@v1"),
    ("reorder", "nosuch", "--strategy", "random"),
]  # fmt: skip
_MOMENT = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?(\+00:00|Z)?")


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    with served_on(request.param, tmp_path_factory) as home:
        add_reviews(home.workspace, tmp_path_factory.mktemp("reviews"))
        yield home


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("label-files")
    (folder / "labels.jsonl").write_text(
        '{"id": "r1", "label": "neg"}\n{"id": "r2", "label": "pos"}\n'
    )
    (folder / "unknown.jsonl").write_text('{"id": "r9", "label": "neg"}\n')
    return {"labels": str(folder / "labels.jsonl"), "unknown": str(folder / "unknown.jsonl")}


def _plain(text: str, task: str) -> str:
    """`text` with the side's task name and the moments (leases, creation) made alike."""
    return _MOMENT.sub("<moment>", text.replace(task, "{task}"))


def _side(forgeml: Forgeml, remote: bool, task: str, files: dict[str, str]) -> list[tuple]:
    run = forgeml.remote if remote else forgeml
    item = json.loads(run("label", "next", task, "--json").stdout or "null")
    printed = []
    for command in FLOW:
        args = [arg.format(task=task, item=item and item["item"], **files) for arg in command]
        done = run("label", *args)
        printed.append((command, done.code, _plain(done.stdout, task), _plain(done.stderr, task)))
        if command[0] == "create" and done.code == 0:
            item = json.loads(run("label", "next", task, "--json").stdout)
    return printed


@pytest.mark.slow
def test_the_labelling_flow_prints_alike(forgeml: Forgeml, files: dict[str, str]) -> None:
    local = _side(forgeml, False, "flow_local", files)
    remote = _side(forgeml, True, "flow_remote", files)

    for here, there in zip(local, remote, strict=True):
        assert there == here
    codes = [code for _, code, _, _ in local]
    assert codes == [0, 1, *[0] * 7, 1, *[0] * 5], local  # 1: overlap 1, no agreement
    listed = forgeml.remote("label", "list", "--json")
    assert {t["name"] for t in json.loads(listed.stdout)} >= {"flow_local", "flow_remote"}
    assert forgeml.remote("label", "list").stdout == forgeml("label", "list").stdout


@pytest.mark.slow
def test_bad_input_prints_the_same_sentence_and_exit_code(
    forgeml: Forgeml, files: dict[str, str]
) -> None:
    task = "errors"
    assert forgeml.remote(
        "label", "create", task, "--dataset", "reviews@v1", "--classes", "pos,neg"
    ).code == 0  # fmt: skip
    for command in ERRORS:
        args = [arg.format(task=task, **files) for arg in command]
        local, remote = forgeml("label", *args), forgeml.remote("label", *args)

        assert (remote.code, remote.stdout, remote.stderr) == (
            local.code, local.stdout, local.stderr,
        ), command  # fmt: skip
        assert local.code in (1, 2) and local.stderr.startswith("error: "), command
        assert local.stderr.count("\n") == 1, command


def test_the_annotator_is_the_tokens_user_in_remote_mode(forgeml: Forgeml) -> None:
    forgeml("label", "create", "who", "--dataset", "reviews@v1", "--classes", "pos,neg")

    refused = forgeml.remote("label", "next", "who", "--annotator", "bob")
    served = json.loads(forgeml.remote("label", "next", "who", "--json").stdout)
    done = forgeml.remote("label", "submit", "who", str(served["item"]), "pos", "--json")

    assert refused.code == 2
    assert refused.stderr.startswith("error: --annotator cannot be given in remote mode")
    assert json.loads(done.stdout)["annotator"] == "olivia"
    shown = json.loads(forgeml("label", "show", "who", "--json").stdout)
    assert shown["progress"]["by_annotator"] == {"olivia": 1}


def test_a_viewer_may_read_but_neither_label_nor_create(forgeml: Forgeml) -> None:
    forgeml("label", "create", "viewed", "--dataset", "reviews@v1", "--classes", "pos,neg")

    assert forgeml.remote("label", "show", "viewed", token="victor").code == 0
    assert forgeml.remote("label", "list", token="victor").code == 0
    refused = forgeml.remote("label", "next", "viewed", token="victor")
    assert refused.code == 1 and "labels:submit" in refused.stderr
    refused = forgeml.remote(
        "label", "create", "v2", "--dataset", "reviews@v1", "--classes", "a", token="victor"
    )
    assert refused.code == 1 and "labels:manage" in refused.stderr
    assert refused.stderr.count("\n") == 1


def test_the_client_labels_resource_answers_the_cli_json(served: Served, tmp_path: Path) -> None:
    from forgeml.client import Client

    with Client(served.url, served.tokens["olivia"]) as client:
        spec = {"name": "sdk", "dataset": "reviews@v1", "schema": {"classes": ["pos", "neg"]}}
        created = client.labels.create(spec)
        served_item = client.labels.next("sdk")
        assert served_item is not None
        stored = client.labels.submit("sdk", served_item["item"], "neg")
        exported = client.labels.export("sdk", resolve="majority")

    assert created["items"] == 6 and created["created_by"] == "olivia"
    assert stored["label"] == "neg"
    assert exported["labelled"] == 1


def test_a_remote_label_task_acts_in_the_callers_project(
    forgeml: Forgeml, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    served = forgeml.served
    person(served.workspace, fast_settings(tmp_path), "mia", "maintainer", "team-a")
    served.tokens["mia"] = issue_token(served.workspace, "mia", "cli", actor="tester")[1]
    source = tmp_path / "reviews-a.csv"
    source.write_text("id,text\nr0,fine\nr1,dull\n")
    pipeline.add(served.workspace.in_project("team-a"), "reviews-a", source, IngestOptions())
    monkeypatch.setenv("FORGEML_PROJECT", "team-a")

    created = forgeml.remote(
        "label", "create", "remote-a", "--dataset", "reviews-a@v1", "--classes", "pos,neg",
        "--json", token="mia",
    )  # fmt: skip
    assert created.code == 0, created.stderr
    assert json.loads(created.stdout)["project"] == "team-a"
    listed = json.loads(forgeml.remote("label", "list", "--json", token="mia").stdout)
    assert [task["name"] for task in listed] == ["remote-a"]
    item = json.loads(forgeml.remote("label", "next", "remote-a", "--json", token="mia").stdout)
    done = forgeml.remote("label", "submit", "remote-a", str(item["item"]), "pos", token="mia")
    assert done.code == 0, done.stderr
    exported = forgeml.remote("label", "export", "remote-a", "--resolve", "majority", "--json",
                              token="mia")  # fmt: skip
    assert json.loads(exported.stdout)["ref"] == "reviews-a-labelled@v1"
    # default's owner neither lists it nor uses it, from default
    monkeypatch.delenv("FORGEML_PROJECT")
    listed = json.loads(forgeml.remote("label", "list", "--json").stdout)
    assert "remote-a" not in {task["name"] for task in listed}
    refused = forgeml.remote("label", "next", "remote-a")
    assert refused.code == 1 and "'team-a'" in refused.stderr, refused
    assert refused.stderr.count("\n") == 1
