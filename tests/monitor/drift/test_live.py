"""Reading a live window from a model server's request log."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from forgeml.core.errors import EmptyWindowError, NotFoundError
from forgeml.monitor.drift import read_requests, read_window


def _log(path: Path, entries: list[object], tail: bytes = b"") -> Path:
    path.write_bytes(b"".join(orjson.dumps(entry) + b"\n" for entry in entries) + tail)
    return path


def test_the_window_is_the_latest_rows_of_one_model_oldest_first(tmp_path: Path) -> None:
    log = _log(
        tmp_path / "requests.jsonl",
        [
            {"model": "adult", "instances": [{"age": 30, "sex": "[REDACTED]"}, {"age": 31}]},
            {"model": "other", "instances": [{"age": 99}]},
            {"model": "adult", "instances": [{"age": 32, "sex": "[REDACTED]"}]},
            "not a record",
        ],
        tail=b'{"model": "adult", "instances": [{"age": 3',  # the line being written
    )
    window = read_window(log, "adult", 2)
    assert window["age"].to_list() == [31, 32]
    assert window.columns == ["age"]  # a redacted field's values are gone: left out
    assert read_window(log, "adult", 100)["age"].to_list() == [30, 31, 32]


def test_a_text_model_s_strings_are_its_text_column(tmp_path: Path) -> None:
    log = _log(tmp_path / "r.jsonl", [{"model": "sst2", "instances": ["good", "bad"]}])
    assert read_window(log, "sst2", 10)["text"].to_list() == ["good", "bad"]


def test_a_language_model_s_prompts_are_rows_and_its_chats_are_none(tmp_path: Path) -> None:
    chat = [{"role": "user", "content": "hi"}]
    log = _log(
        tmp_path / "r.jsonl",
        [
            {"model": "lm", "instances": [chat], "outputs": [{"role": "assistant"}]},
            {"model": "lm", "instances": ["Once upon"], "outputs": [" a time"], "prompt": "s@v1"},
        ],
    )
    assert read_window(log, "lm", 10)["text"].to_list() == ["Once upon"]
    only_chat = _log(tmp_path / "c.jsonl", [{"model": "lm", "instances": [chat], "outputs": []}])
    with pytest.raises(EmptyWindowError, match="holds no rows for model 'lm' yet"):
        read_window(only_chat, "lm", 10)


def test_no_log_or_no_rows_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="--log-sample-rate above 0"):
        read_window(tmp_path / "none.jsonl", "adult", 10)
    log = _log(tmp_path / "r.jsonl", [{"model": "other", "instances": [{"age": 1}]}])
    with pytest.raises(EmptyWindowError, match="holds no rows for model 'adult' yet"):
        read_window(log, "adult", 10)


def test_logs_of_several_replicas_merge_by_time_and_keep_one_version(tmp_path: Path) -> None:
    answer = {"label": "a", "probabilities": {"a": 0.9, "b": 0.1}}
    first = _log(
        tmp_path / "one.jsonl",
        [
            {"ts": 1.0, "model": "prod", "version": "m@v1", "instances": [{"age": 1}],
             "outputs": [answer]},
            {"ts": 3.0, "model": "prod", "version": "m@v2", "instances": [{"age": 99}],
             "outputs": [answer]},
            {"ts": 4.0, "model": "prod", "version": "m@v1", "instances": [{"age": 4}],
             "outputs": [answer]},
        ],
    )  # fmt: skip
    second = _log(
        tmp_path / "two.jsonl",
        [{"ts": 2.0, "model": "prod", "version": "m@v1", "instances": [{"age": 2}, {"age": 3}],
          "outputs": [answer, answer]}],
    )  # fmt: skip

    found = read_requests([first, second, tmp_path / "absent.jsonl"], "prod", version="m@v1")

    assert found.frame["age"].to_list() == [1, 2, 3, 4]
    assert found.times == [1.0, 2.0, 2.0, 4.0]
    assert found.outputs is not None
    assert found.outputs.to_dict(as_series=False) == {"label": ["a"] * 4, "confidence": [0.9] * 4}
    assert read_requests([first, second], "prod", rows=2).frame["age"].to_list() == [99, 4]


def test_rows_whose_answers_were_not_kept_leave_the_outputs_unknown(tmp_path: Path) -> None:
    log = _log(tmp_path / "r.jsonl", [{"model": "m", "instances": [{"age": 1}]}])

    assert read_requests([log], "m").outputs is None
