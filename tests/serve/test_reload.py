from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest

from forgeml.serve import ServeOptions
from forgeml.tracking import promote
from tests._wait import wait_until
from tests.serve.conftest import LiveServer, adult_records, open_home

pytestmark = pytest.mark.slow


def test_a_moved_alias_is_swapped_in_under_load_without_failing_a_request(
    served_home: Path,
) -> None:
    workspace = open_home(served_home)
    promote(workspace, "adult-mlp", 1, "production", "accuracy", force=True)
    options = ServeOptions(reload_interval_s=0.3, max_wait_ms=1)
    live = LiveServer(workspace, ["adult-mlp@production"], options).start()
    url = f"{live.url}/v1/models/adult-mlp:predict"
    body = {"instances": adult_records(4)}
    answers: list[tuple[int, str, float]] = []
    stop = threading.Event()

    def send() -> None:
        with httpx.Client(timeout=30) as client:
            while not stop.is_set():
                response = client.post(url, json=body)
                version = (
                    response.json().get("model_version", "") if response.status_code == 200 else ""
                )
                first = (
                    response.json()["predictions"][0]["probabilities"][">50K"] if version else 0.0
                )
                answers.append((response.status_code, version, first))

    def served_by(version: str) -> int:
        return sum(answer[1] == version for answer in answers)

    senders = [threading.Thread(target=send) for _ in range(2)]
    try:
        for sender in senders:
            sender.start()
        wait_until(lambda: len(answers) >= 20, 60, "answers from v1 under load")
        promote(workspace, "adult-mlp", 2, "production", "accuracy", force=True)
        # under load through the swap, and on after it
        wait_until(lambda: served_by("2") >= 20, 60, "answers from v2 after the swap")
    finally:
        stop.set()
        for sender in senders:
            sender.join(30)
        live.stop()
        workspace.close()
    assert answers and all(status == 200 for status, _, _ in answers)
    versions = [version for _, version, _ in answers]
    assert versions[0] == "1" and versions[-1] == "2"
    # one set of weights answered all of v1's: equal but for the last bits, which depend on
    # how many rows shared each forward (the CPU's kernels block a batch by its size)
    firsts = [first for _, version, first in answers if version == "1"]
    assert max(firsts) - min(firsts) < 1e-6
    v1, v2 = (next(a[2] for a in answers if a[1] == v) for v in ("1", "2"))
    assert abs(v1 - v2) > 1e-4  # the answers really come from the other weights
