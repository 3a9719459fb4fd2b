from __future__ import annotations

import asyncio
import json
import math
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from forgeml.core.errors import NotFoundError
from forgeml.core.workspace import Workspace
from forgeml.gateway._prompts import PromptField, PromptResolver
from forgeml.prompts import PromptSpec, create_prompt, set_alias, set_split
from tests._wait import FakeClock
from tests.gateway.conftest import TEST_OPTIONS, GatewayUnderTest, Upstream, start_gateway
from tests.serve.conftest import LiveServer, request_log_entry

CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
QA_TEXT = {
    "template": "Q: {{ question }}\nA:",
    "variables": [{"name": "question"}],
    "model": {"temperature": 0, "max_tokens": 16},
}
QA_CHAT = {
    "messages": [
        {"role": "system", "template": "Answer in {{ words }} words."},
        {"role": "user", "template": "{{ question }}"},
    ],
    "variables": [{"name": "question"}, {"name": "words", "type": "integer", "default": 3}],
}


def _prompts(workspace: Workspace) -> None:
    """qa@v1 (text) @stable, qa@v2 (chat) @canary; ab, split stable=70 canary=30."""
    for name in ("qa", "ab"):
        create_prompt(workspace, name, PromptSpec.model_validate(QA_TEXT))
        create_prompt(workspace, name, PromptSpec.model_validate(QA_CHAT))
        set_alias(workspace, f"{name}@v1", "stable")
        set_alias(workspace, f"{name}@v2", "canary")
    set_split(workspace, "ab", {"stable": 70, "canary": 30})


@pytest.fixture(scope="module")
def lm(gw: GatewayUnderTest) -> tuple[Upstream, str]:
    """A stand-in replica deployed as `lm`, the prompts, and a key."""
    _prompts(gw.workspace)
    replica = gw.upstream("lm-1")
    gw.deploy("lm", [replica.url])
    return replica, gw.key(["lm"])


def _ask(gw: GatewayUnderTest, key: str, path: str, **body: Any) -> Any:
    return gw.post(path, key, json={"model": "lm", **body})


def _sent(replica: Upstream) -> tuple[dict[str, Any], dict[str, str]]:
    hit = replica.hits[-1]
    return json.loads(hit["body"]), hit["headers"]


def test_a_chat_prompt_is_rendered_into_the_messages_the_replica_gets(
    gw: GatewayUnderTest, lm: tuple[Upstream, str]
) -> None:
    replica, key = lm
    field = {"name": "qa", "version": 2, "variables": {"question": "Why?"}}

    answer = _ask(gw, key, CHAT, forgeml_prompt=field, seed=3)

    assert answer.status_code == 200, answer.text
    assert answer.headers["x-forgeml-prompt"] == "qa@v2"
    body, headers = _sent(replica)
    assert body == {
        "model": "lm",
        "seed": 3,
        "messages": [
            {"role": "system", "content": "Answer in 3 words."},
            {"role": "user", "content": "Why?"},
        ],
    }
    assert headers["x-forgeml-prompt"] == "qa@v2"


@pytest.mark.parametrize(
    ("path", "extra", "expected"),
    [
        (COMPLETIONS, {}, {"prompt": "Q: Why?\nA:", "temperature": 0, "max_tokens": 16}),
        (
            COMPLETIONS,
            {"temperature": 0.5, "max_tokens": 4},
            {"prompt": "Q: Why?\nA:", "temperature": 0.5, "max_tokens": 4},
        ),
        (
            CHAT,
            {"max_completion_tokens": 4},
            {
                "messages": [{"role": "user", "content": "Q: Why?\nA:"}],
                "temperature": 0,
                "max_completion_tokens": 4,
            },
        ),
    ],
)
def test_a_text_prompt_fills_prompt_or_one_user_message_and_its_defaults_yield_to_the_callers(
    gw: GatewayUnderTest,
    lm: tuple[Upstream, str],
    path: str,
    extra: dict[str, Any],
    expected: dict[str, Any],
) -> None:
    replica, key = lm
    field = {"name": "qa", "alias": "stable", "variables": {"question": "Why?"}}

    answer = _ask(gw, key, path, forgeml_prompt=field, **extra)

    assert answer.status_code == 200, answer.text
    assert answer.headers["x-forgeml-prompt"] == "qa@v1"
    assert _sent(replica)[0] == {"model": "lm", **expected}


def test_the_latest_version_is_used_when_no_alias_version_or_split_is_given(
    gw: GatewayUnderTest, lm: tuple[Upstream, str]
) -> None:
    _, key = lm

    answer = _ask(gw, key, CHAT, forgeml_prompt={"name": "qa", "variables": {"question": "?"}})

    assert answer.headers["x-forgeml-prompt"] == "qa@v2"


def test_the_split_draws_aliases_by_weight(gw: GatewayUnderTest, lm: tuple[Upstream, str]) -> None:
    _, key = lm
    field = {"name": "ab", "variables": {"question": "?"}}
    draws = 300

    counts = Counter(
        _ask(gw, key, CHAT, forgeml_prompt=field).headers["x-forgeml-prompt"] for _ in range(draws)
    )

    assert set(counts) == {"ab@v1", "ab@v2"}
    sigma = math.sqrt(draws * 0.3 * 0.7)
    assert abs(counts["ab@v2"] - draws * 0.3) <= 4 * sigma, counts


def test_a_callers_own_prompt_header_passes_unless_the_gateway_renders_one(
    gw: GatewayUnderTest, lm: tuple[Upstream, str]
) -> None:
    replica, key = lm
    claimed = {"Authorization": f"Bearer {key}", "x-forgeml-prompt": "other@v9"}
    plain = {"model": "lm", "messages": [{"role": "user", "content": "hi"}]}
    field = {"name": "qa", "version": "v1", "variables": {"question": "?"}}

    passed = gw.client.post(CHAT, headers=claimed, json=plain)
    sent_plain = replica.hits[-1]
    rendered = gw.client.post(CHAT, headers=claimed, json={"model": "lm", "forgeml_prompt": field})

    assert passed.status_code == 200 and "x-forgeml-prompt" not in passed.headers
    assert sent_plain["headers"]["x-forgeml-prompt"] == "other@v9"
    assert json.loads(sent_plain["body"]) == plain
    assert rendered.headers["x-forgeml-prompt"] == "qa@v1"
    assert _sent(replica)[1]["x-forgeml-prompt"] == "qa@v1"


@pytest.mark.parametrize(
    "content",
    [b'"say \\"forgeml_prompt\\""', b'"forgeml_prompt"'],  # its name as text is no field
)
def test_a_body_without_the_field_is_forwarded_byte_for_byte(
    gw: GatewayUnderTest, lm: tuple[Upstream, str], content: bytes
) -> None:
    replica, key = lm
    raw = b'{"model":"lm",  "messages":[{"role":"user","content":' + content + b"}]}"
    headers = {"Authorization": f"Bearer {key}", "content-type": "application/json"}

    answer = gw.client.post(CHAT, headers=headers, content=raw)

    assert answer.status_code == 200
    assert replica.hits[-1]["body"] == raw


@pytest.mark.parametrize(
    ("path", "field", "extra", "status", "message"),
    [
        (CHAT, {"name": "qa", "alias": "stable", "variables": {"question": "?", "nope": 1}},
         {}, 400, "Prompt qa@v1 has no variable 'nope' (it declares: question)."),
        (CHAT, {"name": "qa", "version": 1}, {}, 400,
         "Prompt qa@v1 needs the variable 'question'."),
        (CHAT, {"name": "qa", "variables": {"question": "?", "words": "many"}}, {}, 400,
         "Prompt qa@v2's variable 'words' must be an integer, not str 'many'."),
        (CHAT, {"name": "qa", "alias": "stable", "version": 1}, {}, 400,
         "The request's 'forgeml_prompt' is invalid: give 'alias' or 'version', not both."),
        (CHAT, {"name": "qa", "version": "latest"}, {}, 400,
         "The request's 'forgeml_prompt' is invalid: 'version' must be a version number like 3 "
         "or 'v3', not 'latest'."),
        (CHAT, {"name": "qa", "template": "{{ x }}"}, {}, 400,
         "The request's 'forgeml_prompt.template' is invalid: Extra inputs are not permitted."),
        (CHAT, "qa", {}, 400, "The request's 'forgeml_prompt' is invalid: Input should be a "
         "valid dictionary or instance of PromptField."),
        (CHAT, {"name": "qa", "variables": {"question": "?"}},
         {"messages": [{"role": "user", "content": "hi"}]}, 400,
         "The request gives both 'messages' and 'forgeml_prompt'; give one of them."),
        (COMPLETIONS, {"name": "qa", "variables": {"question": "?"}}, {}, 400,
         "Prompt qa@v2 is a chat prompt; send it to /v1/chat/completions, not /v1/completions."),
        (CHAT, {"name": "nosuch"}, {}, 404,
         "Prompt 'nosuch' does not exist (see `forgeml prompts list`)."),
        (CHAT, {"name": "qa", "alias": "gone"}, {}, 404,
         "Prompt 'qa' has no alias 'gone' (its aliases: canary, stable)."),
        (CHAT, {"name": "qa", "version": 9}, {}, 404,
         "Prompt 'qa' has no version v9 (its versions are v1..v2)."),
    ],
)  # fmt: skip
def test_a_bad_prompt_request_is_one_sentence_and_reaches_no_replica(
    gw: GatewayUnderTest,
    lm: tuple[Upstream, str],
    path: str,
    field: Any,
    extra: dict[str, Any],
    status: int,
    message: str,
) -> None:
    replica, key = lm
    before = len(replica.hits)

    answer = _ask(gw, key, path, forgeml_prompt=field, **extra)

    assert answer.status_code == status
    assert answer.json()["error"]["message"] == message
    assert len(replica.hits) == before


def test_a_key_not_allowed_the_deployment_learns_nothing_about_prompts(
    gw: GatewayUnderTest, lm: tuple[Upstream, str]
) -> None:
    other = gw.key(["elsewhere"])

    answer = _ask(gw, other, CHAT, forgeml_prompt={"name": "nosuch"})

    assert answer.status_code == 403


def test_resolutions_are_cached_for_the_ttl_on_the_injected_clock(workspace: Workspace) -> None:
    _prompts(workspace)
    clock = FakeClock()
    resolver = PromptResolver(workspace, 5.0, clock, random.Random(0))
    stable = PromptField(name="qa", alias="stable")
    only_name = PromptField(name="qa")

    async def refs() -> tuple[str, str]:
        return (await resolver.version(stable)).ref, (await resolver.version(only_name)).ref

    first = asyncio.run(refs())
    set_alias(workspace, "qa@v2", "stable")
    set_split(workspace, "qa", {"stable": 50, "canary": 50})
    cached = asyncio.run(refs())
    clock.advance(5.1)
    fresh = asyncio.run(refs())

    assert first == ("qa@v1", "qa@v2")
    assert cached == first
    assert fresh == ("qa@v2", "qa@v2")  # both aliases point at v2 now


def test_an_unknown_prompt_is_not_cached(workspace: Workspace) -> None:
    resolver = PromptResolver(workspace, 60.0, FakeClock(), random.Random(0))

    with pytest.raises(NotFoundError):
        asyncio.run(resolver.version(PromptField(name="qa")))
    _prompts(workspace)

    assert asyncio.run(resolver.version(PromptField(name="qa"))).ref == "qa@v2"


@pytest.fixture(scope="module")
def patient_gw(gateway_home: Workspace) -> Iterator[GatewayUnderTest]:
    """A gateway that waits for a real LM on two busy cores."""
    yield from start_gateway(
        gateway_home, TEST_OPTIONS.model_copy(update={"request_timeout_s": 300})
    )


@pytest.mark.slow
def test_the_rendered_prompt_reaches_the_real_lm_whose_request_log_records_its_version(
    patient_gw: GatewayUnderTest, lm: tuple[Upstream, str], smollm2_server: LiveServer
) -> None:
    import openai

    gw = patient_gw
    gw.deploy("smollm2", [smollm2_server.url])
    client = openai.OpenAI(
        base_url=f"{gw.server.url}/v1", api_key=gw.key(["smollm2"]), max_retries=0
    )
    field = {"name": "qa", "alias": "canary", "variables": {"question": "Name a colour."}}

    raw = client.chat.completions.with_raw_response.create(
        model="smollm2",
        messages=[],
        max_tokens=6,
        extra_body={"forgeml_prompt": field},
        extra_headers={"x-request-id": "gw-prompt-1"},
    )

    reply = raw.parse()
    assert raw.headers["x-forgeml-prompt"] == "qa@v2"
    assert reply.choices[0].message.content
    entry = request_log_entry(smollm2_server, "gw-prompt-1")
    assert entry["prompt"] == "qa@v2"
    assert entry["instances"] == [
        [
            {"role": "system", "content": "Answer in 3 words."},
            {"role": "user", "content": "Name a colour."},
        ]
    ]
    assert entry["outputs"][0]["content"] == reply.choices[0].message.content


def test_a_prompt_of_another_project_than_the_called_deployments_is_refused(
    gw: GatewayUnderTest, lm: tuple[Upstream, str]
) -> None:
    replica, key = lm  # `lm` is a deployment of default
    in_b = gw.workspace.in_project("team-b")
    create_prompt(in_b, "qa-b", PromptSpec.model_validate(QA_TEXT))
    sent = len(replica.hits)
    field = {"name": "qa-b", "variables": {"question": "Why?"}}

    answer = _ask(gw, key, COMPLETIONS, forgeml_prompt=field)

    assert answer.status_code == 403, answer.text
    assert "'qa-b' belongs to the project 'team-b', not 'default'" in answer.text
    assert len(replica.hits) == sent
