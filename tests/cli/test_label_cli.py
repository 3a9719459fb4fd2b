from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.label.conftest import REVIEWS

Cli = Any


@pytest.fixture
def reviews_cli(cli: Cli, tmp_path: Path) -> Cli:
    source = tmp_path / "reviews.csv"
    source.write_text("id,text\n" + "".join(f'{key},"{text}"\n' for key, text in REVIEWS))
    assert cli("data", "add", "reviews", source).code == 0
    return cli


def test_the_labelling_flow_from_create_to_export(reviews_cli: Cli, tmp_path: Path) -> None:
    cli = reviews_cli
    created = cli(
        "label", "create", "sentiment", "--dataset", "reviews@v1", "--classes", "pos,neg",
        "--assignee", "ann", "--assignee", "bob", "--overlap", "2",
        "--instructions", "Is the review positive?", "--json",
    )  # fmt: skip
    assert created.code == 0, created.stderr
    assert json.loads(created.stdout)["items"] == 6
    listed = json.loads(cli("label", "list", "--json").stdout)
    assert [task["name"] for task in listed] == ["sentiment"]
    for who in ("ann", "bob"):
        for _ in range(2):
            served = json.loads(
                cli("label", "next", "sentiment", "--annotator", who, "--json").stdout
            )
            label = "neg" if who == "bob" and served["item"] % 2 else "pos"
            done = cli("label", "submit", "sentiment", served["item"], label, "--annotator", who)
            assert done.code == 0, done.stderr
    shown = json.loads(cli("label", "show", "sentiment", "--json").stdout)
    assert shown["progress"]["items_done"] == 2
    assert shown["instructions"] == "Is the review positive?"
    agreement = json.loads(cli("label", "agreement", "sentiment", "--json").stdout)
    assert agreement["pairs"][0]["annotators"] == ["ann", "bob"]
    exported = cli("label", "export", "sentiment", "--resolve", "majority", "--json")
    assert exported.code == 0, exported.stderr
    assert json.loads(exported.stdout)["parents"] == ["reviews@v1"]
    assert cli("label", "show", "sentiment").code == 0
    assert cli("label", "list").code == 0


def test_import_from_a_file(reviews_cli: Cli, tmp_path: Path) -> None:
    cli = reviews_cli
    cli("label", "create", "sentiment", "--dataset", "reviews", "--classes", "pos,neg")
    path = tmp_path / "labels.jsonl"
    path.write_text('{"id": "r1", "label": "neg"}\n')
    done = cli("label", "import", "sentiment", path, "--key", "id", "--annotator", "x", "--json")
    assert done.code == 0, done.stderr
    assert json.loads(done.stdout)["added"] == 1


@pytest.mark.parametrize(
    ("args", "sentence"),
    [
        (("label", "show", "nope"), "Label task 'nope' does not exist"),
        (("label", "submit", "sentiment", "0", "great"), "is not one of the task's classes"),
        (("label", "submit", "sentiment", "0", "[oops"), "The label is not valid JSON"),
        (("label", "submit", "sentiment", "99", "pos"), "Item 99 is not in label task"),
        (("label", "agreement", "sentiment"), "no agreement to measure"),
        (("label", "export", "sentiment"), "no settled label to export"),
        (("label", "import", "sentiment", "missing.csv"), "no such file"),
        (("label", "import", "sentiment", "x.txt"), "Cannot tell the format of x.txt"),
        (
            ("label", "create", "sentiment", "--dataset", "reviews", "--classes", "a"),
            "Label task 'sentiment' already exists",
        ),
        (
            ("label", "create", "t2", "--dataset", "nope", "--classes", "a"),
            "Dataset 'nope' does not exist",
        ),
        (
            (
                "label",
                "create",
                "t2",
                "--dataset",
                "reviews",
                "--classes",
                "a",
                "--strategy",
                "margin",
            ),
            "needs a model version",
        ),
        (
            (
                "label",
                "create",
                "t2",
                "--dataset",
                "reviews",
                "--classes",
                "a",
                "--kind",
                "spans",
                "--column",
                "body",
            ),
            "names column 'body', which the data does not have",
        ),
    ],
)
def test_bad_input_is_one_sentence_and_exit_1(
    reviews_cli: Cli, args: tuple[str, ...], sentence: str
) -> None:
    reviews_cli("label", "create", "sentiment", "--dataset", "reviews", "--classes", "pos,neg")
    result = reviews_cli(*args)
    assert result.code == 1, result.stdout
    assert sentence in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_an_unknown_resolve_is_a_usage_error(reviews_cli: Cli) -> None:
    result = reviews_cli("label", "export", "x", "--resolve", "vote")
    assert result.code == 2
    assert "Unknown --resolve 'vote'" in result.stderr
