from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest
import yaml
from sqlalchemy import text

from forgeml.core import audit
from forgeml.core.configfile import load_yaml_model
from forgeml.core.errors import (
    AuditChainBrokenError,
    BadRowsError,
    ConfigError,
    ForgemlError,
    IntegrityError,
    InvalidDataError,
    InvalidNameError,
    MissingColumnError,
    NotFoundError,
    UsageError,
)
from forgeml.core.store import DatasetVersion
from forgeml.core.workspace import Workspace
from forgeml.data import catalog, pipeline
from forgeml.data._frame import AUGMENTED_COLUMN, SPLIT_COLUMN, SPLIT_NAMES
from forgeml.data.clean import CleanParams
from forgeml.data.ingest import IngestOptions
from tests.data.conftest import (
    add,
    assert_one_sentence,
    audit_events,
    edit_recipe,
    leftover_temp_files,
    snapshot_store,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "adult"


def example(name: str) -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / name).read_text(encoding="utf-8"))


def parent_refs(version: DatasetVersion) -> list[str]:
    return [edge.parent.ref for edge in version.parent_edges]


def every_version(workspace: Workspace) -> list[DatasetVersion]:
    with workspace.store.session() as session:
        names = [dataset.name for dataset, _ in catalog.list_datasets(session)]
        return [v for name in names for v in catalog.versions_of(session, name)]


def high_income_share(frame: pl.DataFrame) -> float:
    return frame.filter(pl.col("Y") == ">50K").height / frame.height


def check_adult_lineage(workspace: Workspace, raw: DatasetVersion) -> dict[str, Any]:
    cleaned = pipeline.derive(workspace, "clean", raw.ref, example("clean.yaml")).main.version
    assert cleaned.ref == "adult@v2"
    assert parent_refs(cleaned) == ["adult@v1"]
    clean_frame = catalog.read_frame(workspace, cleaned)
    assert cleaned.rows == clean_frame.height < raw.rows  # 24 exact duplicates dropped
    for column in ("workclass", "occupation", "native-country"):
        assert clean_frame[column].null_count() == 0
        assert "?" not in clean_frame[column].to_list()
    assert set(clean_frame["Y"].unique()) == {"<=50K", ">50K"}

    validated = pipeline.derive(workspace, "validate", cleaned.ref, example("expectations.yaml"))
    passed, quarantine = validated.main.version, validated.sides["quarantine"].version
    assert (passed.ref, quarantine.ref) == ("adult@v3", "adult-quarantine@v1")
    assert parent_refs(passed) == parent_refs(quarantine) == ["adult@v2"]
    assert validated.report["passed"] == passed.rows > 0
    assert validated.report["failed"] == quarantine.rows > 0
    assert passed.rows + quarantine.rows == cleaned.rows
    reasons = catalog.read_frame(workspace, quarantine)["__reason__"]
    assert reasons.null_count() == 0
    assert all(reason for reason in reasons.to_list())
    assert quarantine.recipe["output"] == "quarantine"

    split = pipeline.derive(
        workspace, "split", passed.ref, {"ratios": [0.8, 0.1, 0.1], "stratify": "Y", "seed": 7}
    ).main.version
    assert split.ref == "adult@v4"
    assert parent_refs(split) == ["adult@v3"]
    split_frame = catalog.read_frame(workspace, split)
    overall = high_income_share(split_frame)
    for name in SPLIT_NAMES:
        part = catalog.read_frame(workspace, split, name)
        assert part[SPLIT_COLUMN].unique().to_list() == [name]
        assert abs(high_income_share(part) - overall) < 0.01
    assert catalog.read_frame(workspace, split, "train").height == pytest.approx(
        0.8 * split.rows, abs=5
    )

    featured = pipeline.derive(workspace, "features", split.ref, example("features.yaml"))
    features = featured.main.version
    assert features.ref == "adult-features@v1"
    assert parent_refs(features) == ["adult@v4"]
    spec = featured.feature_spec
    assert spec is not None
    assert (spec.name, spec.version, spec.dataset_version_id) == ("adult-features", 1, features.id)
    document = orjson.loads(workspace.artifacts.get_bytes(spec.digest))
    assert "age" in orjson.dumps(document).decode()
    assert catalog.read_frame(workspace, features).height == split.rows
    return {"split": split, "spec": spec}


def test_adult_flow_end_to_end(any_workspace: Workspace, adult_csv: Path, tmp_path: Path) -> None:
    source = shutil.copy(adult_csv, tmp_path / "adult.csv")
    raw = add(any_workspace, "adult", Path(source)).version
    made = check_adult_lineage(any_workspace, raw)

    versions = every_version(any_workspace)
    assert sorted(v.ref for v in versions) == [
        "adult-features@v1",
        "adult-quarantine@v1",
        "adult@v1",
        "adult@v2",
        "adult@v3",
        "adult@v4",
    ]
    for version in versions:
        rebuilt = pipeline.rebuild(any_workspace, version.ref)
        assert rebuilt.actual == rebuilt.expected == version.digest

    events = audit_events(any_workspace)
    created = {
        e.object_ref: e.payload["digest"] for e in events if e.action == "data.version.create"
    }
    assert created == {v.ref: v.digest for v in versions}
    assert [e.object_ref for e in events if e.action == "data.feature_spec.create"] == [
        "adult-features@v1"
    ]
    assert len(events) == len(versions) + 1
    with any_workspace.store.session() as session:
        assert audit.verify(session).events == len(events)

    edit_recipe(any_workspace, made["split"].ref, seed=8)
    with pytest.raises(IntegrityError) as caught:
        pipeline.rebuild(any_workspace, made["split"].ref)
    assert "Rebuilding adult@v4 gave digest" in str(caught.value)
    assert_one_sentence(str(caught.value))

    with any_workspace.store.engine.begin() as connection:
        connection.execute(text("UPDATE audit_events SET actor = 'mallory' WHERE seq = 3"))
    with pytest.raises(AuditChainBrokenError) as broken, any_workspace.store.session() as session:
        audit.verify(session)
    assert broken.value.seq == 3
    assert "Audit log broken at event 3" in str(broken.value)


def chain_steps() -> list[tuple[str, dict[str, Any]]]:
    return [
        ("clean", {"text": {"lowercase": True}}),
        ("redact", {"columns": ["email"]}),
        ("validate", {"columns": {"age": {"ge": 25}}}),
        ("split", {"stratify": "label", "seed": 2}),
        ("augment", {"tabular": {"label": "label"}}),
        (
            "features",
            {
                "target": "label",
                "features": [
                    {"column": "age", "kind": "standardize"},
                    {"column": "city", "kind": "onehot"},
                ],
            },
        ),
    ]


def test_every_transform_records_lineage_and_rebuilds(
    any_workspace: Workspace, small_csv: Path
) -> None:
    ref = add(any_workspace, "small", small_csv).version.ref
    made = []
    for op, params in chain_steps():
        derived = pipeline.derive(any_workspace, op, ref, params)
        version = derived.main.version
        assert derived.main.created, op
        assert parent_refs(version) == [ref], op
        assert version.recipe["op"] == op
        assert version.report == orjson.loads(orjson.dumps(derived.report))
        for side in derived.sides.values():
            assert parent_refs(side.version) == [ref], op
            made.append(side.version.ref)
        made.append(version.ref)
        ref = version.ref

    assert made == [
        "small@v2",
        "small@v3",
        "small-quarantine@v1",
        "small@v4",
        "small@v5",
        "small@v6",
        "small-features@v1",
    ]
    final = catalog.read_frame(any_workspace, resolved(any_workspace, "small@v6"))
    assert final[AUGMENTED_COLUMN].sum() > 0
    assert final.filter(pl.col(AUGMENTED_COLUMN))[SPLIT_COLUMN].unique().to_list() == ["train"]
    for ref in made:
        assert pipeline.rebuild(any_workspace, ref).actual == resolved(any_workspace, ref).digest
    with any_workspace.store.session() as session:
        assert audit.verify(session).events == len(made) + 2  # ingest + feature spec


def resolved(workspace: Workspace, ref: str) -> DatasetVersion:
    with workspace.store.session() as session:
        return catalog.resolve(session, ref)


def test_rebuild_detects_a_changed_or_missing_source(
    any_workspace: Workspace, small_csv: Path
) -> None:
    add(any_workspace, "small", small_csv)
    assert pipeline.rebuild(any_workspace, "small@v1").ref == "small@v1"

    small_csv.write_text(small_csv.read_text().replace("Oslo", "Bergen"))
    with pytest.raises(IntegrityError) as changed:
        pipeline.rebuild(any_workspace, "small@v1")
    small_csv.unlink()
    with pytest.raises(NotFoundError) as missing:
        pipeline.rebuild(any_workspace, "small@v1")

    assert "changed since it was ingested" in str(changed.value)
    assert "no longer exists" in str(missing.value)
    assert_one_sentence(str(changed.value))


@pytest.mark.parametrize(
    ("step", "original", "edited"),
    [
        ("clean", {"text": {"lowercase": True}}, {"text": {"lowercase": False}}),
        ("redact", {"columns": ["email"]}, {"columns": ["city"]}),
        ("split", {"seed": 1}, {"seed": 99}),
    ],
)
def test_rebuild_detects_an_edited_recipe(
    workspace: Workspace,
    small_csv: Path,
    step: str,
    original: dict[str, Any],
    edited: dict[str, Any],
) -> None:
    add(workspace, "small", small_csv)
    derived = pipeline.derive(workspace, step, "small@v1", original).main
    assert derived.created
    assert pipeline.rebuild(workspace, derived.version.ref).actual == derived.version.digest
    edit_recipe(workspace, derived.version.ref, **edited)

    with pytest.raises(IntegrityError) as caught:
        pipeline.rebuild(workspace, derived.version.ref)

    assert "small@v2" in str(caught.value)
    assert "does not reproduce it" in str(caught.value)


def write_bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


BadCase = Callable[[Workspace, Path], object]


def _malformed(ws: Workspace, tmp: Path) -> object:
    return add(ws, "bad", write_bytes(tmp / "bad.csv", b"a,b\n1,2\n3\n4,5\n6,7,8\n"))


def _undecodable(ws: Workspace, tmp: Path) -> object:
    return add(ws, "bad", write_bytes(tmp / "latin1.csv", b"a,b\n1,caf\xe9\n2,x\n"))


def _empty(ws: Workspace, tmp: Path) -> object:
    return add(ws, "bad", write_bytes(tmp / "empty.csv", b""))


def _binary(ws: Workspace, tmp: Path) -> object:
    return add(ws, "bad", write_bytes(tmp / "blob.bin", bytes(range(256)) * 8))


def _missing_file(ws: Workspace, tmp: Path) -> object:
    return add(ws, "bad", tmp / "nowhere.csv")


def _slash_name(ws: Workspace, tmp: Path) -> object:
    return add(ws, "a/b", tmp / "small.csv")


def _dotdot_name(ws: Workspace, tmp: Path) -> object:
    return add(ws, "..", tmp / "small.csv")


def _derive_into_bad_name(ws: Workspace, tmp: Path) -> object:
    return pipeline.derive(ws, "split", "small", {}, name="../escape")


def _clean_missing_column(ws: Workspace, tmp: Path) -> object:
    return pipeline.derive(ws, "clean", "small", {"missing": {"columns": {"nope": {}}}})


def _clean_unknown_key(ws: Workspace, tmp: Path) -> object:
    return pipeline.derive(ws, "clean", "small", {"text": {"bogus": True}})


def _validate_missing_column(ws: Workspace, tmp: Path) -> object:
    return pipeline.derive(ws, "validate", "small", {"columns": {"nope": {"ge": 1}}})


def _split_missing_column(ws: Workspace, tmp: Path) -> object:
    return pipeline.derive(ws, "split", "small", {"stratify": "nope"})


def _unknown_transform(ws: Workspace, tmp: Path) -> object:
    return pipeline.derive(ws, "shuffle", "small", {})


def _unknown_parent(ws: Workspace, tmp: Path) -> object:
    return pipeline.derive(ws, "clean", "small@v9", {})


BAD_INPUTS: list[tuple[BadCase, type[ForgemlError], str]] = [
    (_malformed, BadRowsError, "(line 3, line 5)"),
    (_undecodable, InvalidDataError, "not valid UTF-8 text at line 2"),
    (_empty, InvalidDataError, "the file is empty"),
    (_binary, InvalidDataError, "binary file of unknown format"),
    (_missing_file, InvalidDataError, "does not exist"),
    (_slash_name, InvalidNameError, "Invalid dataset name 'a/b'"),
    (_dotdot_name, InvalidNameError, "Invalid dataset name '..'"),
    (_derive_into_bad_name, InvalidNameError, "Invalid dataset name '../escape'"),
    (_clean_missing_column, MissingColumnError, "names column 'nope'"),
    (_clean_unknown_key, ConfigError, "clean recipe: unknown key 'text.bogus'"),
    (_validate_missing_column, MissingColumnError, "names column 'nope'"),
    (_split_missing_column, MissingColumnError, "'nope'"),
    (_unknown_transform, UsageError, "Unknown transform 'shuffle'"),
    (_unknown_parent, NotFoundError, "has no version v9"),
]


@pytest.mark.parametrize(
    ("attempt", "error", "expected"), BAD_INPUTS, ids=[case[0].__name__ for case in BAD_INPUTS]
)
def test_bad_input_leaves_the_store_unchanged(
    workspace: Workspace,
    small_csv: Path,
    attempt: BadCase,
    error: type[ForgemlError],
    expected: str,
) -> None:
    add(workspace, "small", small_csv)
    before = snapshot_store(workspace)

    with pytest.raises(error) as caught:
        attempt(workspace, small_csv.parent)

    assert expected in str(caught.value)
    assert_one_sentence(str(caught.value))
    assert snapshot_store(workspace) == before
    assert leftover_temp_files(workspace) == []


def test_malformed_rows_name_their_lines(workspace: Workspace, tmp_path: Path) -> None:
    source = write_bytes(tmp_path / "bad.csv", b"a,b\n1,2\n3\n4,5\n6,7,8\n9,10\n")

    with pytest.raises(BadRowsError) as caught:
        add(workspace, "bad", source)
    skipped = add(workspace, "bad", source, on_bad_rows="skip").version

    assert caught.value.line_numbers == [3, 5]
    assert "--on-bad-rows skip" in str(caught.value)
    assert skipped.rows == 3
    assert skipped.report["bad_row_count"] == 2
    assert skipped.report["bad_rows"] == [3, 5]
    assert skipped.recipe["params"]["options"]["on_bad_rows"] == "skip"
    assert pipeline.rebuild(workspace, skipped.ref).actual == skipped.digest


def test_an_invalid_recipe_file_names_file_and_key(tmp_path: Path) -> None:
    recipe = tmp_path / "clean.yaml"
    recipe.write_text("missing:\n  columns:\n    age: {strategy: sometimes}\n")

    with pytest.raises(ConfigError) as caught:
        load_yaml_model(recipe, CleanParams)

    assert str(caught.value).startswith(f"{recipe}: key 'missing.columns.age.strategy'")
    assert_one_sentence(str(caught.value))


def test_an_invalid_feature_spec_name_leaves_no_blobs(
    workspace: Workspace, small_csv: Path
) -> None:
    add(workspace, "small", small_csv)
    before = snapshot_store(workspace)
    spec = {"target": "label", "features": [{"column": "age", "kind": "standardize"}]}

    with pytest.raises(InvalidNameError, match="Invalid feature spec name"):
        pipeline.derive(workspace, "features", "small", spec, spec_name="bad/name")

    assert snapshot_store(workspace) == before


def test_an_unknown_label_leaves_no_blobs(workspace: Workspace, small_csv: Path) -> None:
    before = snapshot_store(workspace)

    with pytest.raises(MissingColumnError, match="'nope'"):
        pipeline.add(workspace, "small", small_csv, IngestOptions(), label="nope")

    assert snapshot_store(workspace) == before


def test_sdk_names_and_column_steps_rebuild(workspace: Workspace, tmp_path: Path) -> None:
    source = tmp_path / "pairs.csv"
    source.write_text("spam,win cash now\nham,see you at 6\n", encoding="utf-8")

    named = pipeline.add(workspace, "sms", source, IngestOptions(names=["label", "text"]))
    renamed = pipeline.derive(
        workspace, "clean", named.version.ref, {"rename": {"text": "message"}, "drop": ["label"]}
    )

    assert catalog.read_frame(workspace, named.version).columns == ["label", "text"]
    assert catalog.read_frame(workspace, renamed.main.version).columns == ["message"]
    for ref in (named.version.ref, renamed.main.version.ref):
        assert pipeline.rebuild(workspace, ref).actual == resolved(workspace, ref).digest
