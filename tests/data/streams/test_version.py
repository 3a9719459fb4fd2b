from __future__ import annotations

from pathlib import Path

import orjson
import polars as pl
import pytest

from forgeml.core.errors import IntegrityError, InvalidDataError
from forgeml.core.workspace import Workspace
from forgeml.data import catalog, pipeline
from forgeml.data.streams import Message
from forgeml.data.streams._version import (
    commit,
    decode_raw,
    encode_raw,
    unconfirmed_positions,
    write_rows,
)

SOURCE = "redis://127.0.0.1:6379/sensors"


def _json(position: str, **fields: object) -> Message:
    return Message(position, orjson.dumps(fields))


def test_raw_messages_round_trip_whatever_their_bytes() -> None:
    messages = [Message("1-0", b"\x00\xff binary"), Message("2-0", b'{"a": 1}')]
    assert decode_raw(encode_raw(messages)) == [("1-0", b"\x00\xff binary"), ("2-0", b'{"a": 1}')]


def test_json_objects_become_rows_with_their_position(tmp_path: Path) -> None:
    records = [("7", b'{"n": 1, "t": 2.5}'), ("8", b'{"n": 2, "t": 3, "extra": "x"}')]
    assert write_rows(records, tmp_path / "out.parquet", "auto") == "json"
    frame = pl.read_parquet(tmp_path / "out.parquet")
    assert frame.to_dicts() == [
        {"_stream_position": "7", "n": 1, "t": 2.5, "extra": None},
        {"_stream_position": "8", "n": 2, "t": 3.0, "extra": "x"},
    ]


@pytest.mark.parametrize("payload", ["auto", "bytes"])
def test_other_payloads_are_kept_whole_in_a_bytes_column(tmp_path: Path, payload: str) -> None:
    records = [("1", b'{"n": 1}'), ("2", b"21.5C"), ("3", b"[1, 2]")]
    assert write_rows(records, tmp_path / "out.parquet", payload) == "bytes"
    frame = pl.read_parquet(tmp_path / "out.parquet")
    assert frame.schema == {"_stream_position": pl.String, "payload": pl.Binary}
    assert frame["payload"].to_list() == [b'{"n": 1}', b"21.5C", b"[1, 2]"]


def test_payload_json_refuses_a_message_that_is_not_an_object(tmp_path: Path) -> None:
    records = [("1", b'{"n": 1}'), ("2", b"not json")]
    with pytest.raises(InvalidDataError, match="position 2 is not a JSON object"):
        write_rows(records, tmp_path / "out.parquet", "json")
    assert not (tmp_path / "out.parquet").exists()


def test_a_payload_field_named_like_the_position_column_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidDataError, match="has a field '_stream_position'"):
        write_rows([("1", b'{"_stream_position": 3}')], tmp_path / "out.parquet", "auto")


def test_windows_chain_as_versions_and_rebuild_from_their_raw_messages(
    workspace: Workspace,
) -> None:
    first = commit(workspace, "sensors", SOURCE, [_json("1", n=1), _json("2", n=2)], "auto")
    second = commit(workspace, "sensors", SOURCE, [Message("3", b"\x01\x02")], "auto")
    assert second.version.recipe["params"]["payload"] == "bytes"
    assert [edge.parent.ref for edge in second.version.parent_edges] == [first.version.ref]
    assert "cannot be re-read" in second.version.recipe["params"]["replay"]
    for ref in ("sensors@v1", "sensors@v2"):
        assert pipeline.rebuild(workspace, ref).actual == catalog_digest(workspace, ref)


def test_rebuild_fails_when_the_kept_raw_messages_were_altered(workspace: Workspace) -> None:
    recorded = commit(workspace, "sensors", SOURCE, [_json("1", n=1)], "auto")
    blob = workspace.artifacts.local_path(recorded.version.recipe["params"]["raw_digest"])
    blob.chmod(0o644)
    blob.write_bytes(encode_raw([_json("1", n=2)]))
    with pytest.raises(IntegrityError):
        pipeline.rebuild(workspace, "sensors@v1")


def test_positions_of_unconfirmed_versions_are_the_ones_checked(workspace: Workspace) -> None:
    from forgeml.data.streams._version import confirm_acked

    acked = commit(workspace, "sensors", SOURCE, [_json("1", n=1)], "auto")
    confirm_acked(workspace, acked.version, 1)
    commit(workspace, "sensors", SOURCE, [_json("2", n=2), _json("3", n=3)], "auto")
    commit(workspace, "sensors", "redis://127.0.0.1:6379/other", [_json("4", n=4)], "auto")
    assert unconfirmed_positions(workspace, "sensors", SOURCE) == {"2", "3"}
    assert unconfirmed_positions(workspace, "nothing-yet", SOURCE) == set()


def catalog_digest(workspace: Workspace, ref: str) -> str:
    with workspace.store.session() as session:
        return catalog.resolve(session, ref).digest


def test_the_latest_versions_are_checked_too_when_acks_go_unanswered(
    workspace: Workspace,
) -> None:
    from forgeml.data.streams._version import confirm_acked

    for position in ("1", "2", "3"):
        recorded = commit(workspace, "sensors", SOURCE, [_json(position, n=1)], "auto")
        confirm_acked(workspace, recorded.version, 1)
    assert unconfirmed_positions(workspace, "sensors", SOURCE) == set()
    assert unconfirmed_positions(workspace, "sensors", SOURCE, recent=2) == {"2", "3"}
