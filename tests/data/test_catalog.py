from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from forgeml.core.errors import (
    IntegrityError,
    InvalidNameError,
    NotFoundError,
    UsageError,
)
from forgeml.core.store import DatasetVersion
from forgeml.core.workspace import Workspace
from forgeml.data import catalog, pipeline, quality
from forgeml.data._frame import SPLIT_COLUMN, SPLIT_NAMES
from tests.data.conftest import (
    add,
    assert_one_sentence,
    audit_events,
    snapshot_store,
    write_table_csv,
)


def resolve(workspace: Workspace, ref: str) -> DatasetVersion:
    with workspace.store.session() as session:
        return catalog.resolve(session, ref)


def two_versions(workspace: Workspace, tmp_path: Path) -> tuple[catalog.Recorded, catalog.Recorded]:
    first = add(workspace, "small", write_table_csv(tmp_path / "a.csv", rows=120))
    second = add(workspace, "small", write_table_csv(tmp_path / "b.csv", rows=60, offset=7))
    return first, second


def test_adding_adult_twice_keeps_one_version(any_workspace: Workspace, adult_csv: Path) -> None:
    first = add(any_workspace, "adult", adult_csv)
    assert first.created
    assert first.version.ref == "adult@v1"
    assert first.version.rows == 32561
    assert first.version.recipe["op"] == "ingest"
    assert first.version.recipe["params"]["source"] == str(adult_csv.resolve())
    assert len(audit_events(any_workspace)) == 1
    before = snapshot_store(any_workspace)

    again = add(any_workspace, "adult", adult_csv)

    assert not again.created
    assert (again.version.ref, again.version.id) == ("adult@v1", first.version.id)
    assert snapshot_store(any_workspace) == before
    with any_workspace.store.session() as session:
        assert [v.ref for v in catalog.versions_of(session, "adult")] == ["adult@v1"]


def test_new_content_becomes_the_next_version(any_workspace: Workspace, tmp_path: Path) -> None:
    first, second = two_versions(any_workspace, tmp_path)

    assert (first.created, second.created) == (True, True)
    assert (first.version.ref, second.version.ref) == ("small@v1", "small@v2")
    assert first.version.digest != second.version.digest
    assert (first.version.rows, second.version.rows) == (120, 60)
    assert first.version.schema == {
        "id": "Int64",
        "age": "Int64",
        "score": "Float64",
        "city": "String",
        "email": "String",
        "label": "String",
    }
    assert first.version.created_by == "tester"
    assert first.version.parent_edges == []
    events = audit_events(any_workspace)
    assert [(e.action, e.object_ref) for e in events] == [
        ("data.version.create", "small@v1"),
        ("data.version.create", "small@v2"),
    ]
    assert events[1].payload["digest"] == second.version.digest
    assert any_workspace.artifacts.exists(first.version.digest)


def test_identical_content_returns_the_existing_version(
    any_workspace: Workspace, tmp_path: Path
) -> None:
    two_versions(any_workspace, tmp_path)
    before = snapshot_store(any_workspace)

    again = add(any_workspace, "small", write_table_csv(tmp_path / "copy.csv", rows=120))

    assert not again.created
    assert again.version.ref == "small@v1"
    assert snapshot_store(any_workspace) == before


def test_refs_resolve_by_name_version_and_digest(any_workspace: Workspace, tmp_path: Path) -> None:
    first, second = two_versions(any_workspace, tmp_path)
    v1, v2 = first.version, second.version

    assert resolve(any_workspace, "small").id == v2.id
    assert resolve(any_workspace, "small@v1").id == v1.id
    assert resolve(any_workspace, "small@v2").id == v2.id
    assert resolve(any_workspace, f"small@{v1.digest[:8]}").id == v1.id
    assert resolve(any_workspace, f"small@{v2.digest}").id == v2.id
    resolved = resolve(any_workspace, "small@v1")
    assert resolved.dataset.name == "small"


def test_unknown_refs_are_not_found(any_workspace: Workspace, tmp_path: Path) -> None:
    first, second = two_versions(any_workspace, tmp_path)
    unused = next(
        prefix
        for prefix in ("0000", "1111", "aaaa", "ffff")
        if not first.version.digest.startswith(prefix)
        and not second.version.digest.startswith(prefix)
    )
    cases = {
        "nope": "Dataset 'nope' does not exist",
        "nope@v1": "Dataset 'nope' does not exist",
        "small@v3": "has no version v3 (its versions are v1..v2)",
        f"small@{unused}": f"has no version {unused}",
    }
    for ref, expected in cases.items():
        with pytest.raises(NotFoundError) as caught:
            resolve(any_workspace, ref)
        assert expected in str(caught.value)
        assert_one_sentence(str(caught.value))


def test_an_ambiguous_digest_prefix_is_a_usage_error(
    any_workspace: Workspace, tmp_path: Path
) -> None:
    first, second = two_versions(any_workspace, tmp_path)
    shared = first.version.digest[:6]
    # two real digests sharing 6 hex characters would take ~16M versions to find
    with any_workspace.store.session() as session:
        version = catalog.resolve(session, "small@v2")
        version.digest = shared + second.version.digest[6:]

    with pytest.raises(UsageError) as caught:
        resolve(any_workspace, f"small@{shared}")

    assert "matches 2 versions" in str(caught.value)
    assert "give more characters" in str(caught.value)
    assert resolve(any_workspace, f"small@{first.version.digest[:12]}").version == 1


@pytest.mark.parametrize(
    ("ref", "error", "expected"),
    [
        ("small@latest", UsageError, "after '@' give vN"),
        ("small@abc", UsageError, "at least 4 hex characters"),
        ("small@", UsageError, "after '@' give vN"),
        ("../small", InvalidNameError, "no '/' or '..'"),
        ("a/b@v1", InvalidNameError, "no '/' or '..'"),
        ("", InvalidNameError, "Invalid dataset reference"),
    ],
)
def test_malformed_refs_are_refused(
    workspace: Workspace, ref: str, error: type[Exception], expected: str
) -> None:
    with pytest.raises(error) as caught:
        resolve(workspace, ref)
    assert expected in str(caught.value)
    assert_one_sentence(str(caught.value))


def test_listing_versions_and_children(any_workspace: Workspace, tmp_path: Path) -> None:
    beta1 = add(any_workspace, "beta", write_table_csv(tmp_path / "b1.csv", rows=80)).version
    beta2 = add(any_workspace, "beta", write_table_csv(tmp_path / "b2.csv", rows=40)).version
    alpha = add(any_workspace, "alpha", write_table_csv(tmp_path / "a.csv", rows=30)).version
    split = pipeline.derive(any_workspace, "split", "beta@v1", {"seed": 3}).main.version

    with any_workspace.store.session() as session:
        listed = [(d.name, v.ref) for d, v in catalog.list_datasets(session)]
        versions = [v.ref for v in catalog.versions_of(session, "beta")]
        children = [
            c.ref for c in catalog.children_of(session, catalog.resolve(session, "beta@v1"))
        ]
        childless = catalog.children_of(session, catalog.resolve(session, "beta@v2"))

    assert listed == [("alpha", alpha.ref), ("beta", "beta@v3")]
    assert versions == [beta1.ref, beta2.ref, "beta@v3"]
    assert split.ref == "beta@v3"
    assert [edge.parent.ref for edge in split.parent_edges] == ["beta@v1"]
    assert children == ["beta@v3"]
    assert childless == []


def test_listing_an_unknown_or_invalid_dataset_fails(workspace: Workspace) -> None:
    with workspace.store.session() as session:
        assert catalog.list_datasets(session) == []
        with pytest.raises(NotFoundError, match="Dataset 'nope' does not exist"):
            catalog.versions_of(session, "nope")
        with pytest.raises(InvalidNameError, match="Invalid dataset name"):
            catalog.versions_of(session, "../etc")


def test_read_frame_returns_one_split(workspace: Workspace, small_csv: Path) -> None:
    add(workspace, "small", small_csv)
    version = pipeline.derive(workspace, "split", "small", {"stratify": "label"}).main.version
    whole = catalog.read_frame(workspace, version)

    parts = {name: catalog.read_frame(workspace, version, name) for name in SPLIT_NAMES}

    for name, part in parts.items():
        assert part.height > 0
        assert part[SPLIT_COLUMN].unique().to_list() == [name]
        assert part.equals(whole.filter(pl.col(SPLIT_COLUMN) == name))
    assert sum(part.height for part in parts.values()) == whole.height == 120


def test_read_frame_refuses_unknown_splits_and_unsplit_versions(
    workspace: Workspace, small_csv: Path
) -> None:
    unsplit = add(workspace, "small", small_csv).version
    split = pipeline.derive(workspace, "split", "small", {}).main.version

    with pytest.raises(UsageError) as unknown:
        catalog.read_frame(workspace, split, "holdout")
    with pytest.raises(UsageError) as missing:
        catalog.read_frame(workspace, unsplit, "train")

    assert "Unknown split 'holdout'" in str(unknown.value)
    assert "train, validation, test" in str(unknown.value)
    assert "small@v1 has no splits" in str(missing.value)
    assert "forgeml data split small@v1" in str(missing.value)
    assert_one_sentence(str(unknown.value))
    assert_one_sentence(str(missing.value))


def test_read_frame_detects_a_corrupted_blob(workspace: Workspace, small_csv: Path) -> None:
    version = add(workspace, "small", small_csv).version
    blob = Path(workspace.artifacts.url_for(version.digest))
    blob.chmod(0o644)
    blob.write_bytes(blob.read_bytes()[:-10] + b"0123456789")

    with pytest.raises(IntegrityError, match=f"Artifact {version.digest[:12]} is corrupt"):
        catalog.read_frame(workspace, version)


def test_deriving_twice_records_once(any_workspace: Workspace, small_csv: Path) -> None:
    add(any_workspace, "small", small_csv)
    first = pipeline.derive(any_workspace, "split", "small@v1", {"seed": 1})
    before = snapshot_store(any_workspace)

    again = pipeline.derive(any_workspace, "split", "small@v1", {"seed": 1})

    assert first.main.created
    assert not again.main.created
    assert again.main.version.id == first.main.version.id
    assert snapshot_store(any_workspace) == before


def test_a_profile_is_computed_on_first_use_and_stored(
    workspace: Workspace, small_csv: Path
) -> None:
    added = add(workspace, "small", small_csv).version
    split = pipeline.derive(workspace, "split", "small", {"stratify": "label"}).main.version
    assert not catalog.is_profiled(added)
    assert not catalog.is_profiled(split)
    before = snapshot_store(workspace)

    profile = catalog.profile_of(workspace, added)

    expected = quality.profile(catalog.read_frame(workspace, added), "label")
    assert profile == expected
    assert profile["label_balance"] and profile["rows"] == added.rows == 120
    assert snapshot_store(workspace).blobs == before.blobs
    stored = resolve(workspace, "small@v1")
    assert catalog.is_profiled(stored)
    assert stored.profile == expected
    assert catalog.profile_of(workspace, stored) is stored.profile


def test_a_derived_profile_reuses_its_profiled_parent(
    workspace: Workspace, small_csv: Path
) -> None:
    add(workspace, "small", small_csv)
    catalog.profile_of(workspace, resolve(workspace, "small@v1"))
    split = pipeline.derive(workspace, "split", "small", {"seed": 3}).main.version

    profile = catalog.profile_of(workspace, resolve(workspace, split.ref))

    parent = resolve(workspace, "small@v1").profile
    assert profile["column_stats"] == parent["column_stats"]
    assert profile["splits"] == {"train": 96, "validation": 12, "test": 12}
    assert resolve(workspace, split.ref).profile == profile


def test_a_profile_stored_by_another_reader_first_is_kept(
    workspace: Workspace, small_csv: Path
) -> None:
    stale = add(workspace, "small", small_csv).version
    first = catalog.profile_of(workspace, resolve(workspace, "small@v1"))

    again = catalog.profile_of(workspace, stale)  # still holds the pending profile

    assert again == first
    assert resolve(workspace, "small@v1").profile == first
