"""Text generation from a byte-level language model (`tiny_gpt`), one token at a time.

Tokens are UTF-8 bytes, as `forgeml.train.data.byte_windows` encodes text for training:
the prompt's bytes are the context and every sampled token is one more byte. Sampling
follows nanoGPT's loop with OpenAI's knobs: temperature (0 is greedy), nucleus sampling
(`top_p`, Holtzman et al. 2020, "The Curious Case of Neural Text Degeneration"), stop
strings and a seed. There is no KV cache: each step re-reads at most `block_size` bytes of
context, which costs little at this model's size.

torch is imported inside the functions that need it, so importing this module is cheap.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from forgeml.core.errors import ConfigError, UsageError

if TYPE_CHECKING:
    import torch
    from torch import nn

__all__ = ["BYTE_VOCAB", "Generation", "TextGenerator"]

BYTE_VOCAB = 256
# The training text joins documents with "\n", so a newline is the natural start of a text
# when the prompt is empty (a model needs at least one token of context)
_START = b"\n"[0]

FinishReason = Literal["stop", "length"]


def _check_sampling(
    max_tokens: int, temperature: float, top_p: float, stop: list[str], seed: int | None
) -> None:
    if max_tokens < 0:
        raise ConfigError(f"max_tokens must be 0 or more, got {max_tokens}.")
    if temperature < 0:
        raise ConfigError(f"temperature must be 0 (greedy) or more, got {temperature}.")
    if not 0 < top_p <= 1:
        raise ConfigError(f"top_p must be above 0 and at most 1, got {top_p}.")
    if any(not item for item in stop):
        raise ConfigError("Stop strings must not be empty.")
    if seed is not None and not -(2**63) <= seed < 2**63:
        raise ConfigError(f"seed must fit in 64 bits (a signed integer), got {seed}.")


def _find_stop(text: str, stop: list[str]) -> int | None:
    """Index where the earliest stop string starts in `text`, or None."""
    found = [index for index in (text.find(item) for item in stop) if index >= 0]
    return min(found) if found else None


class Generation(Iterator[str]):
    """One running generation: iterate for text pieces; counts and finish reason follow it.

    `prompt_tokens` is known from the start; `completion_tokens` grows as tokens are
    sampled, and `finish_reason` is set ("stop" or "length") once the iterator is spent.
    Each step enters `torch.inference_mode` on its own, so consecutive pieces may be pulled
    from different threads (as a server's thread pool does).
    """

    def __init__(
        self,
        owner: TextGenerator,
        prompt: str,
        max_tokens: int,
        sampler: _Sampler,
        stop: list[str],
    ) -> None:
        # a lone surrogate (from JSON's "\ud800") becomes "?" rather than failing mid-request
        encoded = prompt.encode("utf-8", errors="replace")
        self.prompt_tokens = len(encoded)
        self.completion_tokens = 0
        self.finish_reason: FinishReason | None = None
        self._owner = owner
        self._context = list(encoded) or [_START]
        self._max_tokens = max_tokens
        self._sampler = sampler
        self._stop = stop
        self._pieces = self._run()

    def __next__(self) -> str:
        return next(self._pieces)

    def _run(self) -> Iterator[str]:
        # decode incrementally: a character's bytes may arrive over several steps
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        # text held back because it may be the start of a stop string
        hold = max((len(item) for item in self._stop), default=1) - 1
        pending = ""
        for _ in range(self._max_tokens):
            token = self._owner.next_token(self._context, self._sampler)
            self._context.append(token)
            self.completion_tokens += 1
            pending += decoder.decode(bytes((token,)))
            cut = _find_stop(pending, self._stop)
            if cut is not None:
                self.finish_reason = "stop"
                if cut:
                    yield pending[:cut]
                return
            if len(pending) > hold:
                ready, pending = pending[: len(pending) - hold], pending[len(pending) - hold :]
                yield ready
        pending += decoder.decode(b"", final=True)
        cut = _find_stop(pending, self._stop)
        self.finish_reason = "length" if cut is None else "stop"
        if pending[:cut]:
            yield pending[:cut]


class _Sampler:
    """Picks the next token from logits: greedy, or temperature + nucleus sampling."""

    def __init__(self, temperature: float, top_p: float, seed: int | None) -> None:
        import torch

        self.temperature = temperature
        self.top_p = top_p
        self.random = torch.Generator()
        # an unseeded torch.Generator starts from a fixed seed; draw a fresh one instead
        if seed is None:
            self.random.seed()
        else:
            self.random.manual_seed(seed)

    def pick(self, logits: torch.Tensor) -> int:
        """A token id sampled from `logits` [vocab]."""
        import torch

        if self.temperature == 0:
            return int(logits.argmax())
        probabilities = torch.softmax(logits.float() / self.temperature, dim=-1)
        if self.top_p >= 1:
            return int(torch.multinomial(probabilities, 1, generator=self.random))
        ordered, order = probabilities.sort(descending=True)
        # keep the smallest set of most likely tokens whose mass reaches top_p (never empty)
        keep = (ordered.cumsum(dim=0) - ordered) < self.top_p
        choice = torch.multinomial(ordered * keep, 1, generator=self.random)
        return int(order[choice])


class TextGenerator:
    """Generates text from a byte-level decoder language model.

    Thread-safe: the module is only read (eval mode), and each generation keeps its own
    context and random state.
    """

    def __init__(self, module: nn.Module, block_size: int) -> None:
        """Wrap `module`: token ids [1, T] (keyword `input_ids`) -> logits [1, T, vocab].

        Args:
            module: The language model, e.g. a `TinyGPT`; put into eval mode here.
            block_size: The longest context the model accepts; older bytes are cut.

        Raises:
            ConfigError: `block_size` is under 1 or the vocabulary is smaller than bytes.
        """
        if block_size < 1:
            raise ConfigError(f"block_size must be 1 or more, got {block_size}.")
        vocab_size = getattr(module, "vocab_size", BYTE_VOCAB)
        if not isinstance(vocab_size, int) or vocab_size < BYTE_VOCAB:
            raise ConfigError(
                f"A byte-level generator needs a vocabulary of at least {BYTE_VOCAB} tokens, "
                f"but the model has {vocab_size}."
            )
        self.module = module.eval()
        self.block_size = block_size

    @classmethod
    def from_module(cls, module: nn.Module, block_size: int) -> TextGenerator:
        """A generator over an already loaded language model (see `__init__`)."""
        return cls(module, block_size)

    @classmethod
    def from_bundle(cls, bundle_dir: Path) -> TextGenerator:
        """A generator over a model bundle folder holding a byte-level language model.

        Raises:
            UsageError: The bundle's model is not a byte-level language model.
        """
        from forgeml.train.recipe import load_bundle_model

        description: dict[str, Any] = json.loads((bundle_dir / "model.json").read_text())
        data = description.get("data") or {}
        if description.get("task") != "language_modeling" or (
            data.get("tokenizer") != "utf-8 bytes"
        ):
            raise UsageError(
                f"The model in {bundle_dir} is a {description.get('task')} model, not a "
                "byte-level language model, so it cannot generate text."
            )
        block_size = int(description["model"]["params"].get("block_size", 128))
        return cls(load_bundle_model(bundle_dir), block_size)

    def next_token(self, context: list[int], sampler: _Sampler) -> int:
        """The token following `context` (cut to the last `block_size` bytes)."""
        import torch

        with torch.inference_mode():
            ids = torch.tensor([context[-self.block_size :]], dtype=torch.long)
            logits = self.module(input_ids=ids)[0, -1, :BYTE_VOCAB]
            return sampler.pick(logits)

    def stream(
        self,
        prompt: str,
        max_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        stop: list[str] | None = None,
        seed: int | None = None,
    ) -> Generation:
        """Start generating a continuation of `prompt`; iterate the result for text pieces.

        Args:
            prompt: The text to continue (an empty prompt starts a new line of text).
            max_tokens: Most tokens (bytes) to generate.
            temperature: Softmax temperature; 0 always picks the most likely byte.
            top_p: Sample among the most likely bytes holding this much probability mass.
            stop: Strings that end the text; the text stops before the first one found.
            seed: Same seed, same prompt and settings -> same text; None draws a fresh one.

        Returns:
            The running generation: an iterator of decoded text pieces (never splitting a
            UTF-8 character) with `prompt_tokens`, `completion_tokens` and `finish_reason`.

        Raises:
            ConfigError: A negative count or temperature, top_p outside (0, 1], or an
                empty stop string.
        """
        stops = list(stop or [])
        _check_sampling(max_tokens, temperature, top_p, stops, seed)
        return Generation(self, prompt, max_tokens, _Sampler(temperature, top_p, seed), stops)
