from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

import pytest
import torch

from forgeml.core.errors import ServiceUnavailableError
from forgeml.serve.generate_batch import BatchDecoder, Row
from forgeml.serve.tokens import FinishReason, Sampler
from tests.serve._text_models import one_torch_thread  # noqa: F401  (an autouse fixture)

VOCAB = 64
PROMPTS = [[5, 9, 3], [7], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [11, 12]]


@pytest.fixture(scope="module")
def tiny_llama() -> torch.nn.Module:
    """A real (random) two-layer Llama: every cache and mask path, none of the weight."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    return LlamaForCausalLM(config).eval()


class Outcome:
    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.reason: FinishReason | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()

    def on_token(self, token: int, eos: bool) -> bool:
        self.tokens.append(token)
        return True

    def on_end(self, reason: FinishReason | None, error: BaseException | None) -> None:
        self.reason, self.error = reason, error
        self.done.set()


class OnlyEven:
    def allowed(self, generated: Sequence[int]) -> Sequence[int] | None:
        return range(0, VOCAB, 2)


def _run(
    decoder: BatchDecoder,
    prompts: list[list[int]],
    max_tokens: list[int],
    eos: frozenset[int] = frozenset(),
    constraint: OnlyEven | None = None,
) -> list[Outcome]:
    outcomes = [Outcome() for _ in prompts]
    for prompt, limit, outcome in zip(prompts, max_tokens, outcomes, strict=True):
        sampler = Sampler(0.0, 1.0, 0)
        row = Row(prompt, limit, sampler, constraint, eos, outcome.on_token, outcome.on_end)
        decoder.submit(row)
    for outcome in outcomes:
        assert outcome.done.wait(60)
    return outcomes


@pytest.fixture
def decoder(tiny_llama: torch.nn.Module) -> Iterator[BatchDecoder]:
    decoder = BatchDecoder(tiny_llama, max_batch=8)
    yield decoder
    decoder.close()


def _greedy(model: torch.nn.Module, prompt: list[int], count: int) -> list[int]:
    with torch.inference_mode():
        out = model.generate(
            torch.tensor([prompt]), max_new_tokens=count, do_sample=False, min_new_tokens=count
        )
    return [int(token) for token in out[0, len(prompt) :]]


def test_one_row_decodes_as_transformers_generate_does(
    decoder: BatchDecoder, tiny_llama: torch.nn.Module
) -> None:
    (outcome,) = _run(decoder, [PROMPTS[0]], [12])
    assert outcome.tokens == _greedy(tiny_llama, PROMPTS[0], 12)
    assert outcome.reason == "length"


def test_rows_batched_together_decode_as_each_alone(decoder: BatchDecoder) -> None:
    limits = [12, 3, 9, 15]  # rows leave the batch at different steps
    alone = [
        _run(decoder, [prompt], [limit])[0].tokens
        for prompt, limit in zip(PROMPTS, limits, strict=True)
    ]
    together = _run(decoder, PROMPTS, limits)
    assert [outcome.tokens for outcome in together] == alone
    assert [len(outcome.tokens) for outcome in together] == limits


def test_an_eos_ends_its_row_only(decoder: BatchDecoder) -> None:
    plain = _run(decoder, PROMPTS, [10] * 4)
    eos = frozenset({plain[0].tokens[2]})  # row 0 emits it third
    ended = _run(decoder, PROMPTS, [10] * 4, eos=eos)
    assert ended[0].tokens == plain[0].tokens[:3]
    assert ended[0].reason == "stop"
    for before, after in zip(plain[1:], ended[1:], strict=True):
        cut = next((i + 1 for i, t in enumerate(before.tokens) if t in eos), len(before.tokens))
        assert after.tokens == before.tokens[:cut]


def test_a_constraint_masks_its_rows_logits(decoder: BatchDecoder) -> None:
    outcomes = _run(decoder, PROMPTS[:2], [10, 10], constraint=OnlyEven())
    assert all(token % 2 == 0 for outcome in outcomes for token in outcome.tokens)


def test_zero_max_tokens_ends_at_once(decoder: BatchDecoder) -> None:
    (outcome,) = _run(decoder, [PROMPTS[1]], [0])
    assert outcome.tokens == [] and outcome.reason == "length"


class FailsOnThird:
    def allowed(self, generated: Sequence[int]) -> Sequence[int] | None:
        if len(generated) == 2:
            raise ValueError("the parser broke")
        return None


def test_a_failing_constraint_ends_its_own_row_only(decoder: BatchDecoder) -> None:
    (alone,) = _run(decoder, [PROMPTS[1]], [8])
    failing, other = Outcome(), Outcome()
    for prompt, constraint, outcome in (
        (PROMPTS[0], FailsOnThird(), failing),
        (PROMPTS[1], None, other),
    ):
        row = Row(
            prompt,
            8,
            Sampler(0.0, 1.0, 0),
            constraint,
            frozenset(),
            outcome.on_token,
            outcome.on_end,
        )
        decoder.submit(row)
    assert failing.done.wait(60) and other.done.wait(60)
    assert isinstance(failing.error, ValueError) and failing.reason is None
    assert len(failing.tokens) == 2
    assert other.error is None and other.tokens == alone.tokens and other.reason == "length"


def test_a_closed_decoder_refuses_new_rows(decoder: BatchDecoder) -> None:
    _run(decoder, [PROMPTS[1]], [2])
    decoder.close()
    with pytest.raises(ServiceUnavailableError, match="decoder is closed"):
        _run(decoder, [PROMPTS[1]], [2])
