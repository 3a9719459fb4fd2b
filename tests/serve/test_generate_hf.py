from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

from forgeml.core.errors import ConfigError
from forgeml.serve.generate_hf import HFGenerator
from tests.serve._text_models import one_torch_thread  # noqa: F401  (an autouse fixture)

VOCAB = 64
CONTEXT = 16


class CharTokenizer:
    """One token per character from `a`; no chat template unless given.

    Its EOS is past the model's vocabulary, so no generation stops before max_tokens.
    """

    def __init__(self, eos: int | None = VOCAB, chat_template: str | None = None) -> None:
        self.eos_token_id = eos
        self.chat_template = chat_template

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        return {"input_ids": [(ord(char) - ord("a")) % VOCAB for char in text]}

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(ord("a") + token) for token in ids)


@pytest.fixture(scope="module")
def tiny_llama() -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=CONTEXT,
    )
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = None
    return model


@pytest.fixture
def generator(tiny_llama: Any) -> Iterator[HFGenerator]:
    generator = HFGenerator(tiny_llama, CharTokenizer())
    yield generator
    generator.close()


def test_a_prompt_and_max_tokens_over_the_context_is_one_sentence(generator: HFGenerator) -> None:
    with pytest.raises(ConfigError) as caught:
        generator.stream("abcdefghij", 7)
    assert str(caught.value) == (
        "The prompt's 10 tokens and max_tokens 7 exceed the model's context of 16 tokens; "
        "shorten one of them."
    )
    stream = generator.stream("abcdefghij", 6, temperature=0)  # fits exactly
    assert len("".join(stream)) == 6
    assert stream.completion_tokens == 6 and stream.finish_reason == "length"


def test_chat_without_a_chat_template_points_to_completions(generator: HFGenerator) -> None:
    with pytest.raises(ConfigError, match="no chat template; use /v1/completions"):
        generator.chat_prompt([{"role": "user", "content": "hi"}])


def test_a_tokenizer_without_an_eos_is_refused(tiny_llama: Any) -> None:
    with pytest.raises(ConfigError, match="names no end-of-sequence token"):
        HFGenerator(tiny_llama, CharTokenizer(eos=None))
