from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from torch import nn

from forgeml.core.errors import ConfigError, UsageError
from forgeml.serve.generate import TextGenerator
from forgeml.train.models.tiny_gpt import TinyGPT, generate
from tests.serve._text_models import (
    complete,
    download_bundles,
    one_torch_thread,  # noqa: F401  (an autouse fixture)
)
from tests.train.conftest import copy_home, trained_text_template

PROMPT = "the film is "


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The unpacked bundles of `pydoc-gpt@v1` and `sst2-minilm@v1`."""
    root = tmp_path_factory.mktemp("generate")
    home = copy_home(trained_text_template(tmp_path_factory), root / "home")
    return download_bundles(home, ("pydoc-gpt@v1", "sst2-minilm@v1"), root)


@pytest.fixture(scope="module")
def generator(bundles: dict[str, Path]) -> TextGenerator:
    return TextGenerator.from_bundle(bundles["pydoc-gpt@v1"])


class ScriptedLM(nn.Module):
    """A byte-level LM whose most likely next byte spells `text` (position = context length)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.script = list(text.encode("utf-8"))
        self.vocab_size = 256

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(*input_ids.shape, self.vocab_size)
        position = input_ids.shape[1] - 1  # the prompt is one byte long in these tests
        logits[0, -1, self.script[position % len(self.script)]] = 10.0
        return logits


def test_greedy_text_matches_the_models_own_sampler(generator: TextGenerator) -> None:
    model = generator.module
    assert isinstance(model, TinyGPT)
    prompt_ids = torch.tensor([list(PROMPT.encode())])
    reference = generate(model, prompt_ids, 40, temperature=0)[0, len(PROMPT) :]
    expected = bytes(reference.tolist()).decode("utf-8", errors="replace")

    assert complete(generator, PROMPT, 40, temperature=0) == expected
    assert complete(generator, PROMPT, 40, temperature=0, seed=5) == expected


def test_same_seed_gives_the_same_sample_and_another_seed_differs(
    generator: TextGenerator,
) -> None:
    first = complete(generator, PROMPT, 48, temperature=1.0, seed=7)

    assert complete(generator, PROMPT, 48, temperature=1.0, seed=7) == first
    assert complete(generator, PROMPT, 48, temperature=1.0, seed=8) != first


def test_a_tiny_nucleus_keeps_only_the_most_likely_byte(generator: TextGenerator) -> None:
    greedy = complete(generator, PROMPT, 30, temperature=0)

    assert complete(generator, PROMPT, 30, temperature=1.5, top_p=1e-6, seed=1) == greedy


def test_max_tokens_bounds_the_generated_bytes(generator: TextGenerator) -> None:
    generation = generator.stream(PROMPT, 25, temperature=1.0, seed=3)
    text = "".join(generation)

    assert generation.completion_tokens == 25
    assert generation.prompt_tokens == len(PROMPT)
    assert generation.finish_reason == "length"
    assert len(text.encode("utf-8")) <= 25 + 2 * text.count("\ufffd")  # U+FFFD is 3 bytes
    assert complete(generator, PROMPT, 0) == ""


def test_text_ends_before_the_first_stop_string(generator: TextGenerator) -> None:
    greedy = complete(generator, PROMPT, 60, temperature=0)
    stop = greedy[10:13]
    generation = generator.stream(PROMPT, 60, temperature=0, stop=["\x00never", stop])
    text = "".join(generation)

    assert text == greedy[: greedy.index(stop)]
    assert generation.finish_reason == "stop"
    assert generation.completion_tokens < 60


def test_stream_pieces_join_to_the_completion_even_across_threads(
    generator: TextGenerator,
) -> None:
    expected = complete(generator, PROMPT, 50, temperature=0.8, seed=11)
    generation = generator.stream(PROMPT, 50, temperature=0.8, seed=11)
    pieces: list[str] = []
    with ThreadPoolExecutor(max_workers=3) as pool:
        while (piece := pool.submit(next, generation, None).result()) is not None:
            pieces.append(piece)

    assert len(pieces) > 1
    assert "".join(pieces) == expected


def test_prompts_longer_than_the_block_keep_only_the_latest_context(
    generator: TextGenerator,
) -> None:
    long_prompt = "x" * 200 + PROMPT
    generation = generator.stream(long_prompt, 10, temperature=0)

    assert "".join(generation) == complete(generator, long_prompt[-64:], 10, temperature=0)
    assert generation.prompt_tokens == len(long_prompt)


def test_a_lone_surrogate_in_the_prompt_counts_as_one_unknown_byte(
    generator: TextGenerator,
) -> None:
    generation = generator.stream("a\ud800", 3, temperature=0)

    assert "".join(generation) == complete(generator, "a?", 3, temperature=0)
    assert generation.prompt_tokens == 2


def test_an_empty_prompt_starts_a_new_line(generator: TextGenerator) -> None:
    assert complete(generator, "", 12, temperature=0) == complete(
        generator, "\n", 12, temperature=0
    )


def test_multibyte_characters_are_never_split_across_pieces() -> None:
    text = "héllo ✓ 日本 "
    generator = TextGenerator.from_module(ScriptedLM(text), block_size=512)
    pieces = list(generator.stream("a", len(text.encode()), temperature=0))

    assert "".join(pieces) == text
    assert "\ufffd" not in "".join(pieces)
    assert len(pieces) == len(text)  # one piece per character, however many bytes


def test_a_stop_string_split_over_several_steps_is_held_back() -> None:
    generator = TextGenerator.from_module(ScriptedLM("abc<|end|>def"), block_size=512)
    generation = generator.stream("a", 13, temperature=0, stop=["<|end|>"])
    pieces = list(generation)

    assert pieces == ["a", "b", "c"]
    assert generation.finish_reason == "stop"


def test_a_character_cut_by_max_tokens_is_replaced() -> None:
    generator = TextGenerator.from_module(ScriptedLM("✓✓"), block_size=512)

    assert complete(generator, "a", 4, temperature=0) == "✓\ufffd"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"max_tokens": -1}, "max_tokens must be 0 or more"),
        ({"temperature": -0.5}, "temperature must be 0"),
        ({"top_p": 0.0}, "top_p must be above 0"),
        ({"top_p": 1.5}, "top_p must be above 0"),
        ({"stop": [""]}, "Stop strings must not be empty"),
        ({"seed": 2**64}, "seed must fit in 64 bits"),
    ],
)
def test_bad_sampling_settings_are_refused(
    generator: TextGenerator, arguments: dict[str, object], message: str
) -> None:
    settings: dict[str, object] = {"max_tokens": 5, **arguments}
    with pytest.raises(ConfigError, match=message):
        generator.stream(PROMPT, **settings)  # type: ignore[arg-type]


def test_an_encoder_bundle_cannot_generate(bundles: dict[str, Path]) -> None:
    with pytest.raises(UsageError, match="not a byte-level language model"):
        TextGenerator.from_bundle(bundles["sst2-minilm@v1"])


def test_a_model_without_a_byte_vocabulary_is_refused() -> None:
    with pytest.raises(ConfigError, match="vocabulary of at least 256"):
        TextGenerator.from_module(TinyGPT(vocab_size=100, block_size=8), block_size=8)
