"""`POST /api/v1/commands` reads its JSON body itself, served by uvicorn: a body over what
the upload limit takes in base64 is a 413 as it arrives, so the server never holds more of
it than the limit, however much is sent."""

from __future__ import annotations

import base64
import json
import tracemalloc
from collections.abc import Iterator

import httpx

from forgeml.api import api_in_thread
from forgeml.api._limits import ApiLimits
from forgeml.core.workspace import Workspace
from tests.api._commands import job_folders_left
from tests.api.conftest import Alice

MIB = 1 << 20
LIMITS = ApiLimits(max_upload_bytes=MIB, max_upload_members=16)
CHUNK = 64 << 10


def _chunked(body: bytes) -> Iterator[bytes]:
    # no declared length: the server finds the limit as the body arrives
    for start in range(0, len(body), CHUNK):
        yield body[start : start + CHUNK]


def _command_of_size(size: int) -> bytes:
    """A command's JSON body of exactly `size` bytes: one file, its base64 padded out."""
    head = json.dumps({"argv": ["train", "x.yaml"], "files": {"x.yaml": ""}}).encode()
    data = base64.b64encode(bytes((size - len(head)) // 4 * 3))
    body = head.replace(b'""', b'"' + data + b'"')
    return body + b" " * (size - len(body))  # JSON may end in blanks


def _post(client: httpx.Client, content: bytes | Iterator[bytes]) -> httpx.Response:
    return client.post(
        "/api/v1/commands", content=content, headers={"Content-Type": "application/json"}
    )


def test_a_chunked_body_one_byte_over_the_limit_is_a_413_and_leaves_nothing(
    api_workspace: Workspace,
) -> None:
    limit = LIMITS.max_command_body_bytes
    with (
        api_in_thread(api_workspace, authorizer=Alice(), limits=LIMITS) as url,
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        over = _post(client, _chunked(_command_of_size(limit + 1)))
        at = _post(client, _chunked(_command_of_size(limit)))

    assert over.status_code == 413, over.text
    assert over.json()["error"] == (
        f"The request body is larger than this server's limit of {limit:,} bytes."
    )
    # a body at the limit is read, and its file is then over the upload limit itself
    assert at.status_code == 413, at.text
    assert at.json()["error"] == "files: over this server's upload limit of 1,048,576 bytes."
    assert job_folders_left(api_workspace) == []


def test_a_body_of_64_mib_is_refused_holding_no_more_than_the_limit(
    api_workspace: Workspace,
) -> None:
    limit = LIMITS.max_command_body_bytes
    sent = 0
    block = b"A" * CHUNK  # one block sent over and over: the client allocates nothing

    def body() -> Iterator[bytes]:
        nonlocal sent
        yield b'{"argv": ["train", "x.yaml"], "files": {"x.yaml": "'
        while sent < 64 * MIB:
            sent += CHUNK
            yield block
        yield b'"}}'

    with (
        api_in_thread(api_workspace, authorizer=Alice(), limits=LIMITS) as url,
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        # the route's first call imports and builds what it needs once: not measured
        assert _post(client, _chunked(_command_of_size(limit + 1))).status_code == 413
        tracemalloc.start()
        try:
            answer = _post(client, body())
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()

    assert limit < 2 * MIB and sent >= 64 * MIB
    assert answer.status_code == 413, answer.text
    # the server (a thread of this process) held about the limit (a growing buffer's
    # spare room), never the 64 MiB sent
    assert peak < 2 * limit, f"the server held {peak:,} bytes"
    assert job_folders_left(api_workspace) == []
