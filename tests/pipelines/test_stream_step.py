from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from forgeml.core.errors import ConfigError, StreamError
from forgeml.core.store import PipelineCacheRecord
from forgeml.core.workspace import Workspace
from forgeml.data import catalog
from forgeml.pipelines import load_pipeline
from forgeml.pipelines.job import _with_password
from forgeml.pipelines.steps import StreamStep
from tests.data.streams.conftest import RedisBroker, broker_address
from tests.pipelines.conftest import run, steps_by_name, write_pipeline

# a window closes at 4 records (what each test publishes before a run) or after 20 s
STREAM_PIPELINE = """
name: meters-window
steps:
  - name: window
    kind: stream
    dataset: meters
    url: URL
    max_records: 4
    max_seconds: 20
    payload: json
"""


@pytest.fixture
def redis_broker() -> Iterator[RedisBroker]:
    broker = RedisBroker(broker_address("redis"))
    try:
        yield broker
    finally:
        broker.close()


def _pipeline(folder: Path, url: str) -> Path:
    return write_pipeline(folder, STREAM_PIPELINE.replace("URL", url))


def _numbers(workspace: Workspace) -> list[list[int]]:
    with workspace.store.session() as session:
        versions = catalog.versions_of(session, "meters")
    return [sorted(catalog.read_frame(workspace, v)["n"].to_list()) for v in versions]


def _cache_entries(workspace: Workspace) -> int:
    with workspace.store.session() as session:
        return session.scalar(select(func.count()).select_from(PipelineCacheRecord)) or 0


@pytest.mark.slow
def test_each_run_of_a_stream_step_ingests_the_next_window_never_from_the_cache(
    pipe_workspace: Workspace, redis_broker: RedisBroker, tmp_path: Path
) -> None:
    path = _pipeline(tmp_path, redis_broker.url)
    redis_broker.publish(range(4))
    first = steps_by_name(run(pipe_workspace, path))["window"]
    redis_broker.publish(range(4, 8))

    second = steps_by_name(run(pipe_workspace, path))["window"]

    assert first["state"] == second["state"] == "SUCCEEDED", (first, second)
    assert not first["cached"] and not second["cached"]
    assert second["cache_key"] == first["cache_key"]  # same step, run again all the same
    assert [first["outputs"]["dataset"], second["outputs"]["dataset"]] == ["meters@v1", "meters@v2"]
    assert first["outputs"]["rows"] == second["outputs"]["rows"] == 4
    with pipe_workspace.store.session() as session:
        v2 = catalog.resolve(session, "meters@v2")
        assert second["outputs"]["digest"] == v2.digest
        assert [edge.parent.ref for edge in v2.parent_edges] == ["meters@v1"]
    assert _numbers(pipe_workspace) == [[0, 1, 2, 3], [4, 5, 6, 7]]  # every record once
    assert _cache_entries(pipe_workspace) == 0

    # nothing new: the step hands on the latest version and records none
    third = steps_by_name(run(pipe_workspace, path, "steps.window.max_seconds=0.5"))["window"]

    assert third["state"] == "SUCCEEDED" and not third["cached"], third
    assert third["outputs"] == second["outputs"]
    assert len(_numbers(pipe_workspace)) == 2


def test_an_empty_first_window_fails_the_step_in_one_sentence(
    pipe_workspace: Workspace, redis_broker: RedisBroker, tmp_path: Path
) -> None:
    path = _pipeline(tmp_path, redis_broker.url)

    step = steps_by_name(run(pipe_workspace, path, "steps.window.max_seconds=0.5"))["window"]

    assert step["state"] == "FAILED"
    assert step["error"] == (
        "Step 'window': the window held no new records and dataset 'meters' has no version yet."
    )


@pytest.mark.parametrize(
    ("override", "sentence"),
    [
        ("steps.window.topic=meters", "step 'window': unknown key 'topic'."),
        ("steps.window.max_records=0", "step 'window': key 'max_records': Input should be"),
        (
            "steps.window.url=ftp://127.0.0.1/meters",
            "step 'window': Unknown stream scheme 'ftp://'; use one of amqp://, mqtt://, "
            "nats://, redis://.",
        ),
        (
            "steps.window.url=redis://127.0.0.1",
            "step 'window': The stream URL 'redis://127.0.0.1' needs a host and a name",
        ),
    ],
)
def test_a_bad_stream_step_is_one_sentence_at_load_time(
    tmp_path: Path, override: str, sentence: str
) -> None:
    path = _pipeline(tmp_path, "redis://127.0.0.1:6379/meters")

    with pytest.raises(ConfigError) as raised:
        load_pipeline(path, [override])

    message = str(raised.value)
    assert message.startswith(f"{path}: ") and sentence in message, message
    assert "\n" not in message


def test_a_password_in_a_bad_stream_url_is_never_in_the_sentence(tmp_path: Path) -> None:
    path = _pipeline(tmp_path, "amqp://guest:s3cret@127.0.0.1:5672")

    with pytest.raises(ConfigError) as raised:
        load_pipeline(path)

    assert "s3cret" not in str(raised.value) and "needs a host and a name" in str(raised.value)


def test_a_stream_url_from_the_params_is_checked_with_them_in_place(tmp_path: Path) -> None:
    path = write_pipeline(
        tmp_path,
        STREAM_PIPELINE.replace("URL", "${params.broker}").replace(
            "steps:", "params:\n  broker: kafka://127.0.0.1/meters\nsteps:"
        ),
    )

    with pytest.raises(ConfigError, match="Unknown stream scheme 'kafka://'"):
        load_pipeline(path)
    assert load_pipeline(path, ["params.broker=nats://127.0.0.1/meters"]).kinds == {
        "window": "stream"
    }


def test_a_password_in_a_stream_url_is_refused_at_load_time_and_never_shown(
    tmp_path: Path,
) -> None:
    path = _pipeline(tmp_path, "amqp://guest:s3cret@127.0.0.1:5672/meters")

    with pytest.raises(ConfigError) as raised:
        load_pipeline(path)

    message = str(raised.value)
    assert "its URL holds a password" in message and "password_env" in message
    assert "s3cret" not in message


def test_a_password_env_must_be_passed_to_the_job(tmp_path: Path) -> None:
    path = _pipeline(tmp_path, "amqp://guest@127.0.0.1:5672/meters")

    with pytest.raises(ConfigError, match="password_env BROKER_PW is not in its env list"):
        load_pipeline(path, ["steps.window.password_env=BROKER_PW"])


def test_the_job_puts_the_password_from_its_environment_into_the_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    step = StreamStep(
        name="window", kind="stream", dataset="meters", env=["BROKER_PW"],
        url="amqp://guest@127.0.0.1:5672/meters", password_env="BROKER_PW",
    )  # fmt: skip
    monkeypatch.setenv("BROKER_PW", "p@ss:word/1")

    assert _with_password(step) == "amqp://guest:p%40ss%3Aword%2F1@127.0.0.1:5672/meters"
    monkeypatch.delenv("BROKER_PW")
    with pytest.raises(StreamError, match="BROKER_PW \\(password_env\\) is not set"):
        _with_password(step)
