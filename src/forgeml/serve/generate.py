"""Text generation from a byte-level language model (`tiny_gpt`), one token at a time.

Tokens are UTF-8 bytes, as `forgeml.train.data.byte_windows` encodes text for training:
the prompt's bytes are the context and every sampled token is one more byte. Sampling
(`forgeml.serve.tokens.Sampler`) follows nanoGPT's loop with OpenAI's knobs: temperature,
nucleus sampling, stop strings and a seed. There is no KV cache: each step re-reads at most
`block_size` bytes of context, which costs little at this model's size.

`TextGenerator` is one `LanguageGenerator`; Hugging Face causal LMs have theirs in
`forgeml.serve.generate_hf`. torch is imported inside the functions that need it, so
importing this module is cheap.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forgeml.core.errors import ConfigError, UsageError
from forgeml.serve.tokens import (
    FinishReason,
    GenerationStream,
    LanguageGenerator,
    Sampler,
    StopFilter,
    TokenConstraint,
    check_sampling,
)

if TYPE_CHECKING:
    from torch import nn

__all__ = [
    "BYTE_VOCAB",
    "CHAT_TURN_END",
    "Generation",
    "GenerationStream",
    "LanguageGenerator",
    "TextGenerator",
    "TokenConstraint",
]

BYTE_VOCAB = 256
# The training text joins documents with "\n", so a newline is the natural start of a text
# when the prompt is empty (a model needs at least one token of context)
_START = b"\n"[0]
# the byte-level chat format: one `ROLE: CONTENT` line per message, then `assistant:`; the
# reply ends where the model starts the next user turn
CHAT_TURN_END = "\nuser:"


class Generation(Iterator[str]):
    """One running byte-level generation (a `GenerationStream`): iterate for text pieces.

    Each step enters `torch.inference_mode` on its own, so consecutive pieces may be pulled
    from different threads (as a server's thread pool does).
    """

    def __init__(
        self,
        owner: TextGenerator,
        prompt: str,
        max_tokens: int,
        sampler: Sampler,
        stop: list[str],
        constraint: TokenConstraint | None = None,
    ) -> None:
        # a lone surrogate (from JSON's "\ud800") becomes "?" rather than failing mid-request
        encoded = prompt.encode("utf-8", errors="replace")
        self.prompt_tokens = len(encoded)
        self.completion_tokens = 0
        self.finish_reason: FinishReason | None = None
        self.started = sampler.clock()
        self.first_token: float | None = None
        self.finished: float | None = None
        self._owner = owner
        self._context = list(encoded) or [_START]
        self._max_tokens = max_tokens
        self._sampler = sampler
        self._stop = stop
        self._constraint = constraint
        self._pieces = self._run()

    def __next__(self) -> str:
        return next(self._pieces)

    def _run(self) -> Iterator[str]:
        # decode incrementally: a character's bytes may arrive over several steps
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        stops = StopFilter(self._stop)
        generated: list[int] = []
        for _ in range(self._max_tokens):
            allowed = None if self._constraint is None else self._constraint.allowed(generated)
            token = self._owner.next_token(self._context, self._sampler, allowed)
            self._tick()
            self._context.append(token)
            generated.append(token)
            ready = stops.feed(decoder.decode(bytes((token,))))
            if ready:
                yield ready
            if stops.stopped:
                self._finish("stop")
                return
        ready = stops.feed(decoder.decode(b"", final=True)) + stops.flush()
        self._finish("stop" if stops.stopped else "length")
        if ready:
            yield ready

    def _tick(self) -> None:
        self.completion_tokens += 1
        if self.first_token is None:
            self.first_token = self._sampler.clock()

    def _finish(self, reason: FinishReason) -> None:
        self.finish_reason = reason
        self.finished = self._sampler.clock()


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
        self.chat_stops = [CHAT_TURN_END]

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

    def next_token(
        self, context: list[int], sampler: Sampler, allowed: Sequence[int] | None = None
    ) -> int:
        """The token following `context` (cut to the last `block_size` bytes)."""
        import torch

        with torch.inference_mode():
            ids = torch.tensor([context[-self.block_size :]], dtype=torch.long)
            logits = self.module(input_ids=ids)[0, -1, :BYTE_VOCAB]
            return sampler.pick(logits, allowed)

    def chat_prompt(self, messages: Sequence[Mapping[str, str]]) -> str:
        """One line `ROLE: CONTENT` per message, then `assistant:`."""
        lines = [f"{message['role']}: {message['content']}\n" for message in messages]
        return "".join(lines) + "assistant:"

    def stream(
        self,
        prompt: str,
        max_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        stop: list[str] | None = None,
        seed: int | None = None,
        constraint: TokenConstraint | None = None,
    ) -> Generation:
        """Start generating a continuation of `prompt`; iterate the result for text pieces.

        Args:
            prompt: The text to continue (an empty prompt starts a new line of text).
            max_tokens: Most tokens (bytes) to generate.
            temperature: Softmax temperature; 0 always picks the most likely byte.
            top_p: Sample among the most likely bytes holding this much probability mass.
            stop: Strings that end the text; the text stops before the first one found.
            seed: Same seed, same prompt and settings -> same text; None draws a fresh one.
            constraint: Limits each next byte to the ids it allows; None: any byte.

        Returns:
            The running generation: an iterator of decoded text pieces (never splitting a
            UTF-8 character) with `prompt_tokens`, `completion_tokens` and `finish_reason`.

        Raises:
            ConfigError: A negative count or temperature, top_p outside (0, 1], or an
                empty stop string.
        """
        stops = list(stop or [])
        check_sampling(max_tokens, temperature, top_p, stops, seed)
        sampler = Sampler(temperature, top_p, seed)
        return Generation(self, prompt, max_tokens, sampler, stops, constraint)
