from __future__ import annotations

import asyncio
import json
import math
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import torch
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient
from torch import nn

from forgeml.core.config import Settings
from forgeml.core.errors import ConfigError, NotFoundError, UsageError
from forgeml.core.workspace import Workspace
from forgeml.serve.generate import TextGenerator
from forgeml.serve.protocols.openai import CHAT_TURN_END, router
from forgeml.train.models.text_classifier import TextClassifier, tokenize
from forgeml.train.recipe import load_bundle_model
from tests._wait import wait_until
from tests.serve._text_models import (
    complete,
    download_bundles,
    one_torch_thread,  # noqa: F401  (an autouse fixture)
)
from tests.train.conftest import copy_home, trained_text_template

ENCODER, GPT = "sst2-minilm", "pydoc-gpt"
PROMPT = "the movie was "


class BundleModels:
    """`OpenAIModels` over the real bundles: MiniLM embeddings and the byte-level GPT.

    Embeddings are the classifier's mean-pooled sentence vectors, L2-normalised (as
    sentence-transformers' `normalize_embeddings=True`), so dot products are cosines.
    """

    def __init__(self, bundles: dict[str, Path]) -> None:
        encoder_dir = bundles[ENCODER]
        encoder = load_bundle_model(encoder_dir)
        assert isinstance(encoder, TextClassifier)
        self.encoder = encoder
        description = json.loads((encoder_dir / "model.json").read_text())
        self.encoder_params: dict[str, Any] = description["model"]["params"]
        self.gpt = TextGenerator.from_bundle(bundles[GPT])

    def names(self) -> list[str]:
        return [ENCODER, GPT]

    async def embed(self, name: str, texts: list[str]) -> list[list[float]]:
        if name == GPT:
            raise UsageError(f"Model '{name}' is a language model, not a text encoder.")
        if name != ENCODER:
            raise NotFoundError(f"The model '{name}' does not exist on this server.")
        return await asyncio.to_thread(self._embed, texts)

    def _embed(self, texts: list[str]) -> list[list[float]]:
        return [
            [value / math.hypot(*vector) for value in vector]
            for vector in self.encoder_vectors(texts)
        ]

    def encoder_vectors(self, texts: list[str]) -> list[list[float]]:
        """The encoder's raw (not normalised) sentence vectors."""
        with torch.inference_mode():
            rows: list[list[float]] = self.encoder.embed(
                **tokenize(texts, self.encoder_params)
            ).tolist()
        return rows

    def generator(self, name: str) -> TextGenerator:
        if name == ENCODER:
            raise UsageError(f"Model '{name}' is a text encoder; it cannot generate text.")
        if name != GPT:
            raise NotFoundError(f"The model '{name}' does not exist on this server.")
        return self.gpt


def serve_in_thread(app: FastAPI) -> Iterator[str]:
    """Run `app` under uvicorn on a free loopback port; yields its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning", ws="none", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_until(lambda: server.started or not thread.is_alive(), 60, "the server's start")
    assert server.started, "the server thread ended before it started"
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_home(trained_text_template(tmp_path_factory), tmp_path_factory.mktemp("oa") / "h")


@pytest.fixture(scope="module")
def models(home: Path, tmp_path_factory: pytest.TempPathFactory) -> BundleModels:
    bundles = download_bundles(
        home, [f"{name}@v1" for name in (ENCODER, GPT)], tmp_path_factory.mktemp("bundles")
    )
    return BundleModels({name: bundles[f"{name}@v1"] for name in (ENCODER, GPT)})


@pytest.fixture(scope="module")
def base_url(models: BundleModels) -> Iterator[str]:
    app = FastAPI()
    app.include_router(router(models))
    yield from serve_in_thread(app)


@pytest.fixture(scope="module")
def client(base_url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0) as client:
        yield client


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(
        sum(x * x for x in a) * sum(y * y for y in b)
    )


def test_models_are_listed_and_retrieved(client: openai.OpenAI) -> None:
    assert sorted(model.id for model in client.models.list()) == [GPT, ENCODER]
    assert client.models.retrieve(GPT).id == GPT
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("nosuch")


def test_embeddings_have_the_encoders_width_in_input_order(client: openai.OpenAI) -> None:
    texts = ["a gripping, moving film", "dull and far too long", "a gripping, moving film"]
    response = client.embeddings.create(model=ENCODER, input=texts, encoding_format="float")

    assert [item.index for item in response.data] == [0, 1, 2]
    vectors = [item.embedding for item in response.data]
    assert {len(vector) for vector in vectors} == {384}
    assert all(math.isclose(math.hypot(*vector), 1.0, rel_tol=1e-4) for vector in vectors)
    assert vectors[0] == vectors[2]
    assert vectors[0] != vectors[1]
    assert response.model == ENCODER
    assert response.usage.prompt_tokens == sum(len(text.split()) for text in texts)


def test_base64_embeddings_decode_to_the_float_ones(client: openai.OpenAI) -> None:
    texts = ["a warm and funny story", "the plot makes no sense"]
    floats = client.embeddings.create(model=ENCODER, input=texts, encoding_format="float")
    packed = client.embeddings.create(model=ENCODER, input=texts)  # the client asks for base64

    for plain, decoded in zip(floats.data, packed.data, strict=True):
        assert decoded.embedding == pytest.approx(plain.embedding, abs=1e-6)


def test_a_batch_embeds_like_single_texts(client: openai.OpenAI) -> None:
    texts = ["short", "a much longer sentence about a film that goes on and on"]
    batch = client.embeddings.create(model=ENCODER, input=texts, encoding_format="float")

    for text, item in zip(texts, batch.data, strict=True):
        single = client.embeddings.create(model=ENCODER, input=text, encoding_format="float")
        assert item.embedding == pytest.approx(single.data[0].embedding, abs=1e-4)


def test_similar_sentences_are_closer_than_unrelated_ones(client: openai.OpenAI) -> None:
    texts = [
        "a wonderful, heartfelt movie",
        "a lovely and touching film",
        "the train to the airport leaves at nine",
    ]
    response = client.embeddings.create(model=ENCODER, input=texts, encoding_format="float")
    movie, film, train = (item.embedding for item in response.data)

    assert _cosine(movie, film) > _cosine(movie, train) + 0.1


def test_greedy_completions_are_deterministic_and_match_the_generator(
    client: openai.OpenAI, models: BundleModels
) -> None:
    first = client.completions.create(model=GPT, prompt=PROMPT, max_tokens=24, temperature=0)
    second = client.completions.create(model=GPT, prompt=PROMPT, max_tokens=24, temperature=0)

    assert first.choices[0].text == second.choices[0].text
    assert first.choices[0].text == complete(models.gpt, PROMPT, 24, temperature=0)
    assert first.choices[0].finish_reason == "length"
    assert first.usage is not None
    assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (len(PROMPT), 24)
    assert first.object == "text_completion"


def test_a_seed_makes_sampling_repeatable(client: openai.OpenAI) -> None:
    texts = [
        client.completions.create(model=GPT, prompt=PROMPT, max_tokens=24, seed=seed).choices[0]
        for seed in (3, 3, 4)
    ]

    assert texts[0].text == texts[1].text
    assert texts[0].text != texts[2].text


def test_completions_stop_at_a_stop_string(client: openai.OpenAI, models: BundleModels) -> None:
    greedy = complete(models.gpt, PROMPT, 40, temperature=0)
    stop = greedy[8:11]
    response = client.completions.create(
        model=GPT, prompt=PROMPT, max_tokens=40, temperature=0, stop=stop
    )

    assert response.choices[0].text == greedy[: greedy.index(stop)]
    assert response.choices[0].finish_reason == "stop"


def test_several_prompts_get_one_choice_each_and_echo_repeats_them(
    client: openai.OpenAI, models: BundleModels
) -> None:
    prompts = ["it is ", "a story "]
    response = client.completions.create(
        model=GPT, prompt=prompts, max_tokens=10, temperature=0, echo=True
    )

    assert [choice.index for choice in response.choices] == [0, 1]
    for prompt, choice in zip(prompts, response.choices, strict=True):
        assert choice.text == prompt + complete(models.gpt, prompt, 10, temperature=0)


def test_streamed_completions_join_to_the_whole_text(client: openai.OpenAI) -> None:
    whole = client.completions.create(model=GPT, prompt=PROMPT, max_tokens=30, temperature=0)
    chunks = list(
        client.completions.create(
            model=GPT,
            prompt=PROMPT,
            max_tokens=30,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    texts = [chunk.choices[0].text for chunk in chunks if chunk.choices]

    assert len(texts) > 2
    assert "".join(texts) == whole.choices[0].text
    assert [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices][-1] == "length"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 30


def test_chat_replies_continue_the_rendered_conversation(
    client: openai.OpenAI, models: BundleModels
) -> None:
    messages: Any = [
        {"role": "system", "content": "You review films."},
        {
            "role": "user",
            "content": [{"type": "text", "text": "How was "}, {"type": "text", "text": "it?"}],
        },
    ]
    response = client.chat.completions.create(
        model=GPT, messages=messages, max_tokens=20, temperature=0
    )
    prompt = "system: You review films.\nuser: How was it?\nassistant:"
    expected = models.gpt.stream(prompt, 20, temperature=0, stop=[CHAT_TURN_END])

    assert response.choices[0].message.role == "assistant"
    assert response.choices[0].message.content == "".join(expected)
    assert response.choices[0].finish_reason == expected.finish_reason
    assert response.usage is not None
    assert response.usage.prompt_tokens == len(prompt)


def test_streamed_chat_deltas_join_to_the_whole_reply(client: openai.OpenAI) -> None:
    messages: Any = [{"role": "user", "content": "Tell me about the film."}]
    whole = client.chat.completions.create(
        model=GPT, messages=messages, max_completion_tokens=30, temperature=0
    )
    chunks = list(
        client.chat.completions.create(
            model=GPT, messages=messages, max_completion_tokens=30, temperature=0, stream=True
        )
    )

    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(chunk.choices[0].delta.content or "" for chunk in chunks) == (
        whole.choices[0].message.content
    )
    assert chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason
    assert all(chunk.id == chunks[0].id for chunk in chunks)


@pytest.mark.parametrize(
    ("endpoint", "model"),
    [("embeddings", "nosuch"), ("completions", "nosuch"), ("chat", "nosuch")],
)
def test_an_unknown_model_is_a_404_model_not_found(
    client: openai.OpenAI, endpoint: str, model: str
) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        if endpoint == "embeddings":
            client.embeddings.create(model=model, input="hello")
        elif endpoint == "completions":
            client.completions.create(model=model, prompt="hello")
        else:
            client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "hi"}]
            )

    assert caught.value.code == "model_not_found"
    assert caught.value.param == "model"


@pytest.mark.parametrize(
    ("arguments", "param"),
    [
        ({"temperature": 2.5}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"n": 2}, "n"),
        ({"max_tokens": -1}, "max_tokens"),
        ({"max_tokens": 100_000}, "max_tokens"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"stop": [""]}, "stop"),
        ({"prompt": []}, "prompt"),
        ({"prompt": [1, 2, 3]}, "prompt"),
        ({"model": ENCODER}, "model"),
    ],
)
def test_bad_completion_parameters_are_a_400(
    client: openai.OpenAI, arguments: dict[str, Any], param: str
) -> None:
    request: dict[str, Any] = {"model": GPT, "prompt": "hi", "max_tokens": 4, **arguments}
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(**request)

    assert caught.value.param == param
    assert caught.value.type == "invalid_request_error"


@pytest.mark.parametrize(
    ("arguments", "param"),
    [
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages.0.role"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
            "messages.0.content",
        ),
        ({"max_completion_tokens": -5}, "max_completion_tokens"),
    ],
)
def test_bad_chat_parameters_are_a_400(
    client: openai.OpenAI, arguments: dict[str, Any], param: str
) -> None:
    request: dict[str, Any] = {"model": GPT, "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(**{**request, **arguments})

    assert caught.value.param == param


_TOOL = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}
_SCHEMA = {"name": "s", "schema": {"type": "object"}}


@pytest.mark.parametrize(
    ("arguments", "wanted"),
    [
        ({"tools": [_TOOL]}, "'tools'"),
        ({"tools": [_TOOL], "tool_choice": "required"}, "'tools'"),
        (
            {"response_format": {"type": "json_schema", "json_schema": _SCHEMA}},
            "'response_format' json_schema",
        ),
        ({"response_format": {"type": "json_object"}}, "'response_format' json_object"),
    ],
)
def test_the_byte_level_model_refuses_tools_and_json_replies_with_one_sentence(
    client: openai.OpenAI, arguments: dict[str, Any], wanted: str
) -> None:
    request: dict[str, Any] = {"model": GPT, "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(**{**request, **arguments})

    assert caught.value.body["message"] == (  # type: ignore[index]
        f"The model '{GPT}' is a byte-level model without a tokenizer, so it cannot honour "
        f"{wanted}; send the request without it."
    )
    assert caught.value.param == "model"


def test_the_byte_level_model_ignores_tools_it_is_told_not_to_use(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model=GPT,
        messages=[{"role": "user", "content": "hi"}],
        tools=[_TOOL],  # type: ignore[list-item]
        tool_choice="none",
        max_tokens=4,
        temperature=0,
    )
    assert (
        reply.choices[0].finish_reason == "length" and reply.choices[0].message.tool_calls is None
    )


@pytest.mark.parametrize(
    ("arguments", "param"),
    [
        ({"input": []}, "input"),
        ({"input": ""}, "input"),
        ({"dimensions": 12}, "dimensions"),
        ({"model": GPT}, "model"),
    ],
)
def test_bad_embedding_requests_are_a_400(
    client: openai.OpenAI, arguments: dict[str, Any], param: str
) -> None:
    request: dict[str, Any] = {"model": ENCODER, "input": "hello", **arguments}
    with pytest.raises(openai.BadRequestError) as caught:
        client.embeddings.create(**request)

    assert caught.value.param == param


@pytest.mark.parametrize(
    ("path", "content"),
    [
        ("/v1/completions", b'{"model": "pydoc-gpt", "prompt": '),
        ("/v1/chat/completions", b"not json at all"),
        ("/v1/embeddings", b""),
        ("/v1/completions", b'{"model": "pydoc-gpt", "prompt": "a\\ud800b"}'),
        ("/v1/completions", b'{"model": "\\udfff", "prompt": "hi"}'),
        ("/v1/embeddings", b'{"model": "sst2-minilm", "input": ["ok", "\\udfff"]}'),
        ("/v1/chat/completions", b'{"model": "pydoc-gpt", "messages": [], "seed": 1e40}'),
        (
            "/v1/completions",
            b'{"model": "pydoc-gpt", "prompt": "hi", "seed": 18446744073709551616}',
        ),
    ],
)
def test_malformed_bodies_get_openai_errors_and_the_server_keeps_serving(
    base_url: str, client: openai.OpenAI, path: str, content: bytes
) -> None:
    response = httpx.post(
        base_url + path, content=content, headers={"content-type": "application/json"}
    )

    assert response.status_code == 400
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert client.completions.create(model=GPT, prompt="ok", max_tokens=2).choices


@pytest.fixture
def model_server(home: Path) -> Iterator[str]:
    """The real model server app (`forgeml.serve.create_app`) over both models."""
    from forgeml.serve import ServeOptions, create_app

    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        workspace = Workspace(Settings(home=home, user="tester"))
        try:
            app = create_app(workspace, [f"{ENCODER}@v1", f"{GPT}@v1"], ServeOptions())
            with contextmanager(serve_in_thread)(app) as base_url:
                ready = f"{base_url}/v2/health/ready"
                wait_until(lambda: httpx.get(ready).status_code == 200, 120, "the models' load")
                yield base_url
        finally:
            workspace.close()


def test_the_model_server_speaks_openai(model_server: str, models: BundleModels) -> None:
    with openai.OpenAI(base_url=f"{model_server}/v1", api_key="x", max_retries=0) as client:
        assert sorted(model.id for model in client.models.list()) == [GPT, ENCODER]
        texts = ["a lovely and touching film", "the train leaves at nine"]
        served = client.embeddings.create(model=ENCODER, input=texts, encoding_format="float")
        raw = models.encoder_vectors(texts)
        for item, vector in zip(served.data, raw, strict=True):
            assert _cosine(item.embedding, vector) == pytest.approx(1.0, abs=1e-4)
        completion = client.completions.create(
            model=GPT, prompt=PROMPT, max_tokens=16, temperature=0
        )
        assert completion.choices[0].text == complete(models.gpt, PROMPT, 16, temperature=0)
        stream = client.chat.completions.create(
            model=GPT, messages=[{"role": "user", "content": "hi"}], max_tokens=12, stream=True
        )
        assert [chunk.choices[0].finish_reason for chunk in stream][-1] in ("stop", "length")
        with pytest.raises(openai.NotFoundError):
            client.completions.create(model="nosuch", prompt="hi")
        with pytest.raises(openai.BadRequestError):
            client.embeddings.create(model=GPT, input="hi")


def test_streams_are_server_sent_events_ending_in_done(base_url: str) -> None:
    body = {"model": GPT, "prompt": PROMPT, "max_tokens": 8, "temperature": 0, "stream": True}
    with httpx.stream("POST", f"{base_url}/v1/completions", json=body) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [line for line in response.iter_lines() if line]

    assert all(event.startswith("data: ") for event in events)
    assert events[-1] == "data: [DONE]"
    assert json.loads(events[-2].removeprefix("data: "))["choices"][0]["finish_reason"] == "length"


class HeldLM(nn.Module):
    """A byte-level LM whose first step waits until the test releases it."""

    vocab_size = 256

    def __init__(self) -> None:
        super().__init__()
        self.generating, self.release = threading.Event(), threading.Event()

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        self.generating.set()
        self.release.wait(60)
        return torch.zeros(*input_ids.shape, self.vocab_size)


class HeldModels:
    """`OpenAIModels` with one language model, `HeldLM`."""

    def __init__(self) -> None:
        self.lm = HeldLM()

    def names(self) -> list[str]:
        return [GPT]

    async def embed(self, name: str, texts: list[str]) -> list[list[float]]:
        raise UsageError(f"Model '{name}' is a language model, not a text encoder.")

    def generator(self, name: str) -> TextGenerator:
        return TextGenerator(self.lm, block_size=8)


def test_generation_does_not_block_other_requests() -> None:
    models = HeldModels()
    app = FastAPI()
    app.include_router(router(models))
    completion: dict[str, httpx.Response] = {}

    with contextmanager(serve_in_thread)(app) as base_url:

        def complete_held() -> None:
            body = {"model": GPT, "prompt": PROMPT, "max_tokens": 2}
            completion["done"] = httpx.post(f"{base_url}/v1/completions", json=body, timeout=60)

        worker = threading.Thread(target=complete_held)
        worker.start()
        try:
            assert models.lm.generating.wait(30), "the completion did not start"
            # answered while the generation is held: it does not run on the event loop
            listed = httpx.get(f"{base_url}/v1/models", timeout=30)
            still_generating = worker.is_alive()
        finally:
            models.lm.release.set()
            worker.join(timeout=60)
    assert listed.status_code == 200 and still_generating
    assert completion["done"].status_code == 200


class BrokenLM(nn.Module):
    """A byte-level LM whose every step fails, as a model that breaks mid-stream does."""

    vocab_size = 256

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        raise self.error


class BrokenModels:
    """`OpenAIModels` with one language model, a `BrokenLM` raising `error`."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def names(self) -> list[str]:
        return [GPT]

    async def embed(self, name: str, texts: list[str]) -> list[list[float]]:
        raise UsageError(f"Model '{name}' is a language model, not a text encoder.")

    def generator(self, name: str) -> TextGenerator:
        return TextGenerator(BrokenLM(self.error), block_size=8)


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (ConfigError("the model broke"), "the model broke"),
        # a bug keeps its traceback in the log; the client gets no internals
        (RuntimeError("index out of range"), "Internal server error; see the server log."),
    ],
    ids=["forgeml-error", "bug"],
)
def test_an_error_after_the_stream_started_is_an_error_event_then_done(
    error: Exception, message: str
) -> None:
    app = FastAPI()
    app.include_router(router(BrokenModels(error)))
    body = {"model": GPT, "prompt": PROMPT, "max_tokens": 4, "stream": True}
    with TestClient(app) as test_client:
        response = test_client.post("/v1/completions", json=body)
    assert response.status_code == 200
    events = [line.removeprefix("data: ") for line in response.text.splitlines() if line]
    assert json.loads(events[-2]) == {
        "error": {"message": message, "type": "server_error", "param": None, "code": None}
    }
    assert events[-1] == "[DONE]"
