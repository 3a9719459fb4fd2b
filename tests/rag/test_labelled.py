from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from forgeml.core.errors import InvalidDataError
from forgeml.rag.labelled import (
    LabelledSet,
    bfcl_set,
    first_sentence,
    load_jsonl,
    merge_queries,
    stdlib_modules,
    stdlib_set,
)

BFCL_PIN = "bfcl-eval==2026.3.23"


@pytest.fixture(scope="session")
def bfcl_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bfcl-eval's wheel, fetched from PyPI once per session (never a forgeml dependency)."""
    folder = tmp_path_factory.mktemp("bfcl-wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", BFCL_PIN, "-d", str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    wheels = sorted(folder.glob("bfcl_eval-*.whl"))
    if done.returncode != 0 or not wheels:
        pytest.skip(
            f"PyPI is unreachable, so {BFCL_PIN} could not be fetched: {done.stderr[-300:]}"
        )
    return wheels[0]


@pytest.fixture(scope="session")
def stdlib() -> LabelledSet:
    return stdlib_set()


@pytest.fixture(scope="session")
def bfcl(bfcl_wheel: Path) -> LabelledSet:
    return bfcl_set(bfcl_wheel)


@pytest.mark.parametrize(
    ("docstring", "sentence", "rest"),
    [
        ("Return the sum.", "Return the sum.", ""),
        (
            "Return the sum. Of all items.\n\nMore here.",
            "Return the sum.",
            "Of all items.\n\nMore here.",
        ),
        ("Return the\n  sum of items.\nIt is exact.", "Return the sum of items.", "It is exact."),
        ("No full stop here\n\nSecond paragraph.", "No full stop here", "Second paragraph."),
        ("Use e.g.x or 3.14 freely. Then stop.", "Use e.g.x or 3.14 freely.", "Then stop."),
        ("Is it? Yes.", "Is it?", "Yes."),
        ("", "", ""),
    ],
)
def test_first_sentence(docstring: str, sentence: str, rest: str) -> None:
    assert first_sentence(docstring) == (sentence, rest)


def test_merge_queries_joins_identical_texts_in_first_appearance_order() -> None:
    queries = merge_queries([("b", "x"), ("a", "y"), ("b", "z")], "set")
    assert [(q.id, q.text, q.relevant) for q in queries] == [
        ("set:0", "b", frozenset({"x", "z"})),
        ("set:1", "a", frozenset({"y"})),
    ]


def test_load_jsonl_reads_queries_and_skips_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "gold.jsonl"
    rows = [
        {"query": "how to sort", "relevant": ["sorted", "list.sort"]},
        {"query": "q2", "relevant": ["a"]},
    ]
    path.write_text(json.dumps(rows[0]) + "\n\n" + json.dumps(rows[1]) + "\n")
    labelled = load_jsonl(path)
    assert labelled.name == "gold"
    assert labelled.documents == []
    assert [(q.id, q.text, q.relevant) for q in labelled.queries] == [
        ("gold:1", "how to sort", frozenset({"sorted", "list.sort"})),
        ("gold:3", "q2", frozenset({"a"})),
    ]


@pytest.mark.parametrize(
    "line",
    [
        "not json",
        "[1, 2]",
        '{"query": "q"}',
        '{"query": "", "relevant": ["a"]}',
        '{"query": "q", "relevant": []}',
        '{"query": "q", "relevant": "a"}',
        '{"query": "q", "relevant": [1]}',
    ],
)
def test_load_jsonl_names_the_bad_line(tmp_path: Path, line: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"query": "fine", "relevant": ["a"]}\n' + line + "\n")
    with pytest.raises(
        InvalidDataError, match=r"^Line 2 of .*bad\.jsonl is not a JSON object"
    ) as caught:
        load_jsonl(path)
    assert "\n" not in str(caught.value)


def test_load_jsonl_refuses_an_empty_or_missing_file(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(InvalidDataError, match="holds no queries"):
        load_jsonl(tmp_path / "empty.jsonl")
    with pytest.raises(InvalidDataError, match="Cannot read the labelled set"):
        load_jsonl(tmp_path / "missing.jsonl")


def test_stdlib_modules_leave_out_private_test_gui_and_deprecated_ones() -> None:
    names = stdlib_modules()
    assert names == sorted(names)
    assert {"json", "collections.abc", "email.mime.text", "urllib.parse"} <= set(names)
    for skipped in ("tkinter", "idlelib", "test", "this", "antigravity", "lib2to3", "cgi"):
        assert not any(name == skipped or name.startswith(f"{skipped}.") for name in names)
    assert not any(part.startswith("_") for name in names for part in name.split("."))


def test_stdlib_set_is_about_two_thousand_objects_with_unique_ids(stdlib: LabelledSet) -> None:
    ids = [document.id for document in stdlib.documents]
    assert 1_800 <= len(ids) <= 4_000
    assert len(set(ids)) == len(ids)
    assert len({q.text for q in stdlib.queries}) == len(stdlib.queries)
    assert set().union(*(q.relevant for q in stdlib.queries)) == set(ids)


def test_stdlib_set_is_deterministic(stdlib: LabelledSet) -> None:
    again = stdlib_set()
    assert again.documents == stdlib.documents
    assert again.queries == stdlib.queries


def test_stdlib_document_is_the_signature_and_docstring_less_its_first_sentence(
    stdlib: LabelledSet,
) -> None:
    documents = {document.id: document for document in stdlib.documents}
    dumps = documents["json.dumps"]
    assert dumps.text.startswith("json.dumps(obj, *, skipkeys=False")
    query = next(q for q in stdlib.queries if "json.dumps" in q.relevant)
    assert query.text == "Serialize ``obj`` to a JSON formatted ``str``."
    assert query.text not in " ".join(dumps.text.split())
    assert documents["argparse.ArgumentParser"].metadata == {"kind": "class"}
    leaked = [
        q
        for q in stdlib.queries
        for gold in q.relevant
        if q.text in " ".join(documents[gold].text.split())
    ]
    assert len(leaked) <= len(stdlib.queries) // 100  # only where a docstring repeats itself


def test_stdlib_objects_need_their_own_docstring(stdlib: LabelledSet) -> None:
    texts = {q.text: q.relevant for q in stdlib.queries}
    # encodings' codecs inherit codecs.Codec's docstring; comments above code are not docs
    decode = "Decodes the object input and returns a tuple (output object, length consumed)."
    assert texts[decode] == {"codecs.Codec.decode"}
    assert not any(text.startswith("#") for text in texts)
    assert not any("->" in text for text in texts)


def test_bfcl_set_holds_every_single_turn_function_and_question(bfcl: LabelledSet) -> None:
    ids = [document.id for document in bfcl.documents]
    assert len(ids) == 2_724
    assert len(set(ids)) == len(ids)
    assert len(bfcl.queries) == 2_380
    assert sum(len(q.relevant) for q in bfcl.queries) == 2_717
    assert set().union(*(q.relevant for q in bfcl.queries)) <= set(ids)


def test_bfcl_query_is_the_question_and_its_gold_the_called_function(bfcl: LabelledSet) -> None:
    first = bfcl.queries[0]
    assert (
        first.text == "Find the area of a triangle with a base of 10 units and height of 5 units."
    )
    assert first.relevant == {"calculate_triangle_area"}
    document = next(d for d in bfcl.documents if d.id == "calculate_triangle_area")
    assert document.text.startswith(
        "calculate_triangle_area\nCalculate the area of a triangle given its base and height."
    )
    assert '"base": {"description": "The base of the triangle."' in document.text


def test_bfcl_functions_sharing_a_name_get_distinct_ids(bfcl: LabelledSet) -> None:
    renamed = [d for d in bfcl.documents if "#" in d.id]
    assert renamed
    for document in renamed:
        name, digest = document.id.split("#")
        assert document.metadata["name"] == name and len(digest) == 8


def test_bfcl_set_refuses_a_file_that_is_not_its_wheel(tmp_path: Path) -> None:
    (tmp_path / "not.whl").write_text("text")
    with pytest.raises(InvalidDataError, match="Cannot read the bfcl-eval wheel"):
        bfcl_set(tmp_path / "not.whl")
    with zipfile.ZipFile(tmp_path / "empty.whl", "w") as archive:
        archive.writestr("bfcl_eval/__init__.py", "")
    with pytest.raises(InvalidDataError, match=r"has no data file BFCL_v4_simple_python.json"):
        bfcl_set(tmp_path / "empty.whl")
