from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from tests.serve._text_models import one_torch_thread  # noqa: F401  (an autouse fixture)
from tests.serve.conftest import LiveServer, request_log_entry

pytestmark = pytest.mark.slow
QUESTION = [{"role": "user", "content": "Name a colour."}]


def _post(server: LiveServer, path: str, body: dict[str, Any], prompt: str) -> tuple[str, Any]:
    request_id = f"log-{uuid.uuid4().hex[:12]}"
    headers = {"x-request-id": request_id, "x-forgeml-prompt": prompt}
    answer = httpx.post(f"{server.url}{path}", json=body, headers=headers, timeout=120)
    assert answer.status_code == 200, answer.text
    return request_id, answer


def test_a_chat_generation_records_its_messages_reply_and_prompt_version(
    smollm2_server: LiveServer,
) -> None:
    body = {"model": "smollm2", "messages": QUESTION, "max_tokens": 6, "temperature": 0}

    request_id, answer = _post(smollm2_server, "/v1/chat/completions", body, "colours@v3")

    entry = request_log_entry(smollm2_server, request_id)
    assert (entry["model"], entry["version"], entry["protocol"]) == (
        "smollm2",
        "smollm2@v1",
        "openai",
    )
    assert entry["prompt"] == "colours@v3"
    assert entry["instances"] == [QUESTION]
    assert entry["outputs"] == [answer.json()["choices"][0]["message"]]


def test_a_streamed_chat_records_the_whole_reply(smollm2_server: LiveServer) -> None:
    body = {"model": "smollm2", "messages": QUESTION, "max_tokens": 6, "stream": True}

    request_id, answer = _post(smollm2_server, "/v1/chat/completions", body, "colours@v4")

    events = [line.removeprefix("data: ") for line in answer.text.splitlines() if line]
    chunks = [json.loads(e) for e in events if e != "[DONE]"]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    entry = request_log_entry(smollm2_server, request_id)
    assert entry["prompt"] == "colours@v4"
    assert entry["outputs"] == [{"role": "assistant", "content": text}]


def test_a_completion_records_its_prompts_and_texts(smollm2_server: LiveServer) -> None:
    body = {"model": "smollm2", "prompt": ["Red, green and", "One, two,"], "max_tokens": 3}

    request_id, answer = _post(smollm2_server, "/v1/completions", body, "lists@v1")

    entry = request_log_entry(smollm2_server, request_id)
    assert entry["prompt"] == "lists@v1"
    assert entry["instances"] == ["Red, green and", "One, two,"]
    assert entry["outputs"] == [choice["text"] for choice in answer.json()["choices"]]


@pytest.mark.parametrize("claimed", ["colours", "colours@production", "a b@v1", "x@v0", "x:y@v1"])
def test_a_header_that_is_not_name_at_version_is_not_recorded(
    smollm2_server: LiveServer, claimed: str
) -> None:
    body = {"model": "smollm2", "messages": QUESTION, "max_tokens": 1}

    request_id, _ = _post(smollm2_server, "/v1/chat/completions", body, claimed)

    assert "prompt" not in request_log_entry(smollm2_server, request_id)


@pytest.mark.parametrize("ref", ["client-qa@v7", "builtin:client-answer@1"])
def test_the_chat_client_sends_the_prompt_version_it_was_given(
    smollm2_server: LiveServer, ref: str
) -> None:
    from forgeml.prompts import ChatClient

    client = ChatClient(f"{smollm2_server.url}/v1", "smollm2")

    reply = client.chat(QUESTION, max_tokens=2, prompt=ref)

    entry = request_log_entry(smollm2_server, ref, key="prompt")
    assert entry["outputs"][0]["content"] == reply.content
