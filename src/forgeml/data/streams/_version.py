"""A window's messages as a dataset version: rows, the raw messages, and the ack record.

The raw messages (position and payload bytes, as JSON Lines) are stored as an artifact
that the recipe names, so `data rebuild` can decode them again: the live source cannot be
re-read. A version's acknowledgements are confirmed by a `data.stream.ack` audit event;
positions of a version without one may still come back from the broker and are dropped.
"""

from __future__ import annotations

import base64
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import polars as pl
from sqlalchemy import select

from forgeml.core.errors import InvalidDataError
from forgeml.core.store import AuditEvent, Dataset, DatasetVersion
from forgeml.core.workspace import Workspace
from forgeml.data import catalog
from forgeml.data._parquet import write_frame
from forgeml.data.ingest import IngestOptions, ingest
from forgeml.data.streams._base import STREAM_OP as OP
from forgeml.data.streams._base import Message

ACK_ACTION = "data.stream.ack"
POSITION_COLUMN = "_stream_position"
PAYLOAD_COLUMN = "payload"
RawRecord = tuple[str, bytes]  # (position, payload)


def encode_raw(messages: Sequence[Message]) -> bytes:
    """The messages as JSON Lines of position and base64 payload, in arrival order."""
    return b"".join(
        orjson.dumps({"position": m.position, "payload": base64.b64encode(m.payload).decode()})
        + b"\n"
        for m in messages
    )


def decode_raw(raw: bytes) -> list[RawRecord]:
    """The (position, payload) pairs `encode_raw` wrote."""
    records = (orjson.loads(line) for line in raw.splitlines() if line)
    return [(item["position"], base64.b64decode(item["payload"])) for item in records]


def write_rows(records: Sequence[RawRecord], out: Path, payload: str) -> str:
    """Write the records' rows as canonical Parquet; returns the format used.

    JSON-object payloads (payload "auto" or "json") become one row each, their fields as
    columns; otherwise (payload "bytes", or "auto" with any other payload) each payload is
    kept whole in a binary `payload` column. Every row carries its `_stream_position`.

    Raises:
        InvalidDataError: payload "json" and a message is not a JSON object, or a payload
            has a `_stream_position` field.
    """
    objects = None if payload == "bytes" else _json_objects(records, payload == "json")
    if objects is None:
        frame = pl.DataFrame(
            {
                POSITION_COLUMN: [position for position, _ in records],
                PAYLOAD_COLUMN: [body for _, body in records],
            },
            schema={POSITION_COLUMN: pl.String, PAYLOAD_COLUMN: pl.Binary},
        )
        write_frame(frame, out)
        return "bytes"
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".stream-") as tmp:
        lines = Path(tmp) / "window.jsonl"
        lines.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in objects))
        ingest(lines, out, IngestOptions(format="jsonl"))
    return "json"


def _json_objects(records: Sequence[RawRecord], strict: bool) -> list[dict[str, Any]] | None:
    rows = []
    for position, body in records:
        try:
            value = orjson.loads(body)
        except orjson.JSONDecodeError:
            value = None
        if not isinstance(value, dict):
            if strict:
                raise InvalidDataError(
                    f"The message at position {position} is not a JSON object; pass "
                    "--payload bytes to keep payloads as bytes."
                )
            return None
        if POSITION_COLUMN in value:
            raise InvalidDataError(
                f"The message at position {position} has a field '{POSITION_COLUMN}', which "
                "forgeml reserves for the stream position; rename it in the publisher."
            )
        rows.append({POSITION_COLUMN: position, **value})
    return rows


def stream_versions(
    workspace: Workspace, name: str, source: str, recent: int = 0
) -> list[DatasetVersion]:
    """The versions of `name` from `source` whose acks were never confirmed, and the
    `recent` latest ones whatever their acks."""
    with workspace.store.session() as session:
        dataset = session.scalar(select(Dataset).where(Dataset.name == name))
        if dataset is None:
            return []
        versions = [
            v
            for v in session.scalars(
                select(DatasetVersion).where(DatasetVersion.dataset_id == dataset.id)
            )
            if v.recipe.get("op") == OP and v.recipe["params"]["source"] == source
        ]
        versions.sort(key=lambda version: version.version)
        confirmed = set(
            session.scalars(
                select(AuditEvent.object_ref).where(
                    AuditEvent.action == ACK_ACTION,
                    AuditEvent.object_ref.in_([f"{name}@v{v.version}" for v in versions]),
                )
            )
        )
    latest = {v.version for v in versions[-recent:]} if recent else set()
    return [v for v in versions if f"{name}@v{v.version}" not in confirmed or v.version in latest]


def unconfirmed_positions(
    workspace: Workspace, name: str, source: str, recent: int = 0
) -> set[str]:
    """Positions held by versions of `name` from `source` not yet confirmed as acked (and
    by its `recent` latest versions)."""
    positions: set[str] = set()
    for version in stream_versions(workspace, name, source, recent):
        raw = workspace.artifacts.get_bytes(version.recipe["params"]["raw_digest"])
        positions.update(position for position, _ in decode_raw(raw))
    return positions


def commit(
    workspace: Workspace, name: str, source: str, messages: Sequence[Message], payload: str
) -> catalog.Recorded:
    """Record `messages` as the next version of `name`, its parent the latest one."""
    raw = encode_raw(messages)
    records = decode_raw(raw)
    with workspace.artifacts.local_tempfile(suffix=".parquet") as temp:
        payload_format = write_rows(records, temp, payload)
        raw_digest = workspace.artifacts.put_bytes(raw)
        recipe = {
            "op": OP,
            "params": {
                "source": source,
                "raw_digest": raw_digest,
                "payload": payload_format,
                "records": len(records),
                "first_position": records[0][0],
                "last_position": records[-1][0],
                "replay": "a live stream cannot be re-read; rebuild decodes the raw messages "
                "kept as artifact raw_digest",
            },
        }
        report = {"records": len(records), "payload_format": payload_format}
        new = catalog.NewVersion(name, temp, recipe, report=report)
        with workspace.store.session() as session:
            new.parents = [catalog.resolve(session, name)] if _exists(session, name) else []
        prepared = catalog.prepare(workspace, new)
        with workspace.store.session() as session:
            return catalog.record(workspace, session, prepared)


def _exists(session: Any, name: str) -> bool:
    return session.scalar(select(Dataset.id).where(Dataset.name == name)) is not None


def confirm_acked(workspace: Workspace, version: DatasetVersion, count: int) -> None:
    """Record that the broker has acknowledged every message of `version`."""
    with workspace.store.session() as session:
        workspace.audit(session, ACK_ACTION, version.ref, {"acked": count})


def replay(workspace: Workspace, version: DatasetVersion, out: Path) -> None:
    """Rebuild `version`'s Parquet from its kept raw messages."""
    params = version.recipe["params"]
    records = decode_raw(workspace.artifacts.get_bytes(params["raw_digest"]))
    write_rows(records, out, params["payload"])
