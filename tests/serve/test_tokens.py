from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from forgeml.core.errors import ConfigError
from forgeml.serve.metrics import ServerMetrics
from forgeml.serve.tokens import MeteredGenerator, Sampler, StopFilter


@given(
    text=st.text(alphabet="ab<>x", max_size=30),
    cuts=st.lists(st.integers(0, 30), max_size=6),
    stop=st.lists(st.text(alphabet="ab<>", min_size=1, max_size=4), max_size=3),
)
def test_the_stop_filter_cuts_at_the_first_stop_however_the_text_arrives(
    text: str, cuts: list[int], stop: list[str]
) -> None:
    found = [i for i in (text.find(s) for s in stop) if i >= 0]
    expected = text[: min(found)] if found else text
    stops = StopFilter(stop)
    sent, start = "", 0
    for cut in [*sorted(cuts), len(text)]:
        if stops.stopped:
            break
        sent += stops.feed(text[start:cut])
        start = max(start, cut)
    if not stops.stopped:
        sent += stops.flush()
    assert sent == expected
    assert stops.stopped == bool(found)


def test_greedy_picks_the_best_allowed_token() -> None:
    logits = torch.tensor([0.0, 5.0, 1.0, 3.0])
    sampler = Sampler(0.0, 1.0, 0)
    assert sampler.pick(logits) == 1
    assert sampler.pick(logits, [0, 2, 3]) == 3


def test_sampling_never_leaves_the_allowed_tokens() -> None:
    sampler = Sampler(1.5, 0.95, 3)
    logits = torch.zeros(50)
    assert {sampler.pick(logits, [4, 9, 31]) for _ in range(200)} <= {4, 9, 31}


def test_a_constraint_allowing_nothing_is_one_sentence() -> None:
    with pytest.raises(ConfigError, match="allows no token"):
        Sampler(0.0, 1.0, 0).pick(torch.zeros(4), [7, 99])


class Echo:
    """A LanguageGenerator over a fixed text, one character per token."""

    def __init__(self) -> None:
        self.chat_stops: list[str] = []
        self.settings: tuple[object, ...] = ()

    def chat_prompt(self, messages: object) -> str:
        return "prompt"

    def stream(self, prompt: str, max_tokens: int, *args: object, **kwargs: object) -> object:
        from forgeml.serve.generate_hf import HFGeneration

        self.settings = (prompt, max_tokens, args, kwargs)

        class Chars:
            def decode(self, ids: list[int], skip_special_tokens: bool) -> str:
                return "".join(chr(i) for i in ids)

        ticks = iter(float(t) for t in range(100))
        generation = HFGeneration(Chars(), len(prompt), [], lambda: next(ticks))
        for char in "hello"[:max_tokens]:
            generation.on_token(ord(char), False)
        generation.on_end("length", None)
        return generation


def test_a_metered_generation_reports_its_times_and_tokens_once() -> None:
    metrics = ServerMetrics()
    metered = MeteredGenerator(Echo(), lambda s: metrics.observe_generation("m", s))  # type: ignore[arg-type]
    stream = metered.stream("abc", 5)
    assert "".join(stream) == "hello"
    assert stream.completion_tokens == 5 and stream.finish_reason == "length"
    with pytest.raises(StopIteration):
        next(stream)
    text = metrics.exposition().decode()
    assert 'gen_ai_server_time_to_first_token_seconds_sum{model="m"} 1.0' in text
    # clock: started 0, first token 1, finished 2: 1 s over the 4 tokens after the first
    assert 'gen_ai_server_time_per_output_token_seconds_sum{model="m"} 0.25' in text
    assert 'gen_ai_client_token_usage_sum{gen_ai_token_type="input",model="m"} 3.0' in text
    assert 'gen_ai_server_time_to_first_token_seconds_count{model="m"} 1.0' in text


def test_a_metered_generator_passes_every_setting_through() -> None:
    echo = Echo()
    metered = MeteredGenerator(echo, lambda stream: None)  # type: ignore[arg-type]
    "".join(metered.stream("abc", 3, 0.5, top_p=0.9, stop=["x"], seed=7))
    assert echo.settings == ("abc", 3, (0.5,), {"top_p": 0.9, "stop": ["x"], "seed": 7})
