from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import httpx
import openai
import pytest

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from forgeml.tracking import get_model_version
from forgeml.tracking._bundle import PICKLE_SUFFIXES
from tests.conftest import SmolLM2Home
from tests.serve._text_models import one_torch_thread  # noqa: F401  (an autouse fixture)
from tests.serve.conftest import LiveServer

CAPITAL = [{"role": "user", "content": "What is the capital of France?"}]
QUESTIONS = [
    "What is the capital of France?",
    "Name a colour.",
    "What is 2+2?",
    "Say hello in Spanish.",
]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(smollm2_server: LiveServer) -> LiveServer:
    return smollm2_server


@pytest.fixture(scope="module")
def client(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)


def _ask(client: openai.OpenAI, question: str, **options: object) -> str:
    settings: dict[str, object] = {"temperature": 0, "max_tokens": 24, **options}
    reply = client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": question}],
        **settings,  # type: ignore[arg-type]
    )
    return reply.choices[0].message.content or ""


def test_import_writes_a_safetensors_bundle_with_the_chat_template_and_no_pickle(
    smollm2_home: SmolLM2Home, smollm2_bundle: Path
) -> None:
    names = sorted(path.name for path in smollm2_bundle.iterdir())
    assert names == [
        "config.json",
        "model.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    assert not [name for name in names if Path(name).suffix in PICKLE_SUFFIXES]
    assert (
        "im_start"
        in json.loads((smollm2_bundle / "tokenizer_config.json").read_text())["chat_template"]
    )
    description = json.loads((smollm2_bundle / "model.json").read_text())
    assert description["model"]["name"] == "hf_causal_lm"
    assert description["source"]["file"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert re.fullmatch(
        r"gguf:SmolLM2-135M-Instruct\.Q4_1\.gguf@sha256:[0-9a-f]{64}", smollm2_home.parent
    )
    workspace = Workspace(Settings(home=smollm2_home.home, user="tester"))
    try:
        record = get_model_version(workspace, "smollm2")
    finally:
        workspace.close()
    assert record.parent == smollm2_home.parent
    assert record.metrics["convert_seconds"] > 0


def test_the_served_model_answers_the_capital_question(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model="smollm2",
        messages=CAPITAL,
        temperature=0,
        max_tokens=24,  # type: ignore[arg-type]
    )
    choice = reply.choices[0]
    assert "Paris" in (choice.message.content or "")
    assert choice.finish_reason == "stop"
    assert reply.usage is not None
    # the chat template's system turn and the question: tens of real tokens, not bytes
    assert 20 < reply.usage.prompt_tokens < 60
    assert 3 < reply.usage.completion_tokens < 24


def test_streaming_sends_the_same_text_in_pieces_with_usage(client: openai.OpenAI) -> None:
    whole = _ask(client, CAPITAL[0]["content"])
    stream = client.chat.completions.create(
        model="smollm2",
        messages=CAPITAL,  # type: ignore[arg-type]
        temperature=0,
        max_tokens=24,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    pieces = [c.choices[0].delta.content or "" for c in chunks if c.choices]
    assert "".join(pieces) == whole
    assert len([piece for piece in pieces if piece]) > 1
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 1


def test_a_stop_string_ends_the_reply_before_it(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model="smollm2",
        messages=CAPITAL,  # type: ignore[arg-type]
        temperature=0,
        max_tokens=24,
        stop=["Paris"],
    )
    assert reply.choices[0].message.content == "The capital of France is "
    assert reply.choices[0].finish_reason == "stop"


def test_max_tokens_bounds_the_reply(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model="smollm2",
        messages=CAPITAL,
        temperature=0,
        max_tokens=3,  # type: ignore[arg-type]
    )
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage is not None and reply.usage.completion_tokens == 3


def test_a_seed_makes_sampling_reproducible(client: openai.OpenAI) -> None:
    def sample(seed: int) -> str:
        return _ask(client, "Tell me about cats.", temperature=1.0, top_p=0.9, seed=seed)

    first = sample(7)
    assert sample(7) == first
    assert any(sample(seed) != first for seed in (8, 9, 10))


def test_completions_continue_a_prompt_with_real_token_counts(client: openai.OpenAI) -> None:
    reply = client.completions.create(
        model="smollm2", prompt="The capital of France is", max_tokens=5, temperature=0
    )
    assert reply.choices[0].text.strip()
    assert reply.usage is not None
    assert reply.usage.prompt_tokens == 5  # "The| capital| of| France| is"
    assert reply.usage.completion_tokens <= 5


def test_concurrent_requests_are_batched_and_answer_as_one_at_a_time(
    client: openai.OpenAI,
) -> None:
    alone = [_ask(client, question) for question in QUESTIONS]
    together: list[str] = [""] * len(QUESTIONS)
    barrier = threading.Barrier(len(QUESTIONS))

    def ask(index: int) -> None:
        barrier.wait()
        together[index] = _ask(client, QUESTIONS[index])

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(QUESTIONS))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert together == alone


def test_metrics_hold_the_gen_ai_histograms_by_model(
    server: LiveServer, client: openai.OpenAI
) -> None:
    _ask(client, "Hi!", max_tokens=4)
    text = httpx.get(f"{server.url}/metrics").text
    for name in (
        "gen_ai_server_time_to_first_token_seconds_count",
        "gen_ai_server_time_per_output_token_seconds_count",
    ):
        count = re.search(rf'^{name}{{model="smollm2"}} (\S+)$', text, re.MULTILINE)
        assert count is not None and float(count.group(1)) >= 1
    assert 'gen_ai_client_token_usage_count{gen_ai_token_type="input",model="smollm2"}' in text
    assert 'gen_ai_client_token_usage_count{gen_ai_token_type="output",model="smollm2"}' in text


def test_an_unknown_model_is_a_404(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as raised:
        client.chat.completions.create(model="nope", messages=CAPITAL)  # type: ignore[arg-type]
    assert "no model 'nope'" in str(raised.value)


def test_max_tokens_over_the_limit_is_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(
            model="smollm2",
            messages=CAPITAL,
            max_tokens=100_000,  # type: ignore[arg-type]
        )
    assert "max_tokens" in str(raised.value)
