"""Text generation from a Hugging Face causal LM: its tokenizer, its chat template, batching.

`HFGenerator` is the `LanguageGenerator` of the `hf_causal_lm` family (SmolLM2 and other
imported models). Prompts are tokenised with the bundle's own tokenizer; chat prompts are
rendered with its chat template; every request becomes a row of the model's
`BatchDecoder`, so concurrent requests share decode steps over one KV cache.

Text is detokenised incrementally the way TGI and vLLM do (decode a short window of ids
and emit only what is new once it no longer ends in a partial character), so the cost per
token does not grow with the length of the reply.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from forgeml.core.errors import ConfigError
from forgeml.serve.generate_batch import BatchDecoder, Row
from forgeml.serve.tokens import (
    Clock,
    FinishReason,
    Sampler,
    StopFilter,
    TokenConstraint,
    check_sampling,
)
from forgeml.serve.tool_prompt import render_chat

__all__ = ["HFGeneration", "HFGenerator"]

_DONE = object()


class HFGeneration(Iterator[str]):
    """One request's generation (a `GenerationStream`), fed by the decode thread."""

    def __init__(self, tokenizer: Any, prompt_tokens: int, stop: list[str], clock: Clock) -> None:
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = 0
        self.finish_reason: FinishReason | None = None
        self.clock = clock
        self.started = clock()
        self.first_token: float | None = None
        self.finished: float | None = None
        self._tokenizer = tokenizer
        self._stops = StopFilter(stop)
        self._pieces: queue.Queue[Any] = queue.Queue()
        self._ids: list[int] = []
        self._prefix = 0  # _ids[_prefix:_read] is the window already turned into text
        self._read = 0

    def __next__(self) -> str:
        item = self._pieces.get()
        if item is _DONE:
            self._pieces.put(_DONE)  # stays spent
            raise StopIteration
        if isinstance(item, BaseException):
            self._pieces.put(_DONE)
            raise item
        piece: str = item
        return piece

    def on_token(self, token: int, eos: bool) -> bool:
        """Count `token` and send the text it completes; False once a stop string showed."""
        self.completion_tokens += 1
        if self.first_token is None:
            self.first_token = self.clock()
        if eos:
            return False
        self._ids.append(token)
        ready = self._stops.feed(self._new_text())
        if ready:
            self._pieces.put(ready)
        return not self._stops.stopped

    def on_end(self, reason: FinishReason | None, error: BaseException | None) -> None:
        """The row left the batch: flush held-back text and end the iterator."""
        self.finished = self.clock()
        if error is not None:
            self._pieces.put(error)
            return
        tail = "" if self._stops.stopped else self._stops.flush()
        if tail:
            self._pieces.put(tail)
        self.finish_reason = "stop" if self._stops.stopped else reason
        self._pieces.put(_DONE)

    def _new_text(self) -> str:
        decode = self._tokenizer.decode
        before = decode(self._ids[self._prefix : self._read], skip_special_tokens=True)
        now = decode(self._ids[self._prefix :], skip_special_tokens=True)
        if len(now) <= len(before) or now.endswith("\ufffd"):
            return ""  # a character's bytes are still arriving
        self._prefix, self._read = self._read, len(self._ids)
        return now[len(before) :]


class HFGenerator:
    """Generates text from a transformers causal LM, batching concurrent requests."""

    def __init__(
        self, model: Any, tokenizer: Any, max_batch: int = 8, clock: Clock = time.perf_counter
    ) -> None:
        """Wrap `model` (eval mode) and its `tokenizer`.

        Args:
            model: A transformers causal LM (e.g. `LlamaForCausalLM`).
            tokenizer: Its tokenizer, with a chat template for chat prompts.
            max_batch: The most requests one decode step runs.
            clock: Timestamps for time to first token and per output token.
        """
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.clock = clock
        self.chat_stops: list[str] = []  # the template's end-of-turn token is an EOS
        self.context_size = int(getattr(model.config, "max_position_embeddings", 2048))
        self.eos_ids = frozenset(_eos_ids(model, tokenizer))
        self.decoder = BatchDecoder(model, max_batch)

    @classmethod
    def from_bundle(cls, bundle_dir: Path, module: Any, max_batch: int = 8) -> HFGenerator:
        """A generator over `module` with the tokenizer files of its bundle folder."""
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(bundle_dir), local_files_only=True)
        return cls(module, tokenizer, max_batch)

    def chat_prompt(self, messages: Sequence[Mapping[str, str]]) -> str:
        """The conversation rendered with the tokenizer's chat template, assistant turn open.

        Raises:
            ConfigError: the tokenizer has no chat template.
        """
        return render_chat(self.tokenizer, [dict(message) for message in messages], None)

    def encode(self, prompt: str) -> list[int]:
        """The prompt's token ids (special tokens written in it are recognised, none added)."""
        ids: list[int] = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        return ids

    def stream(
        self,
        prompt: str,
        max_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        stop: list[str] | None = None,
        seed: int | None = None,
        constraint: TokenConstraint | None = None,
    ) -> HFGeneration:
        """Start generating a continuation of `prompt` (see `TextGenerator.stream`).

        Raises:
            ConfigError: bad sampling settings, or prompt and `max_tokens` together longer
                than the model's context.
        """
        stops = list(stop or [])
        check_sampling(max_tokens, temperature, top_p, stops, seed)
        ids = self.encode(prompt) or [min(self.eos_ids)]  # an empty prompt starts a text
        if len(ids) + max_tokens > self.context_size:
            raise ConfigError(
                f"The prompt's {len(ids)} tokens and max_tokens {max_tokens} exceed the "
                f"model's context of {self.context_size} tokens; shorten one of them."
            )
        generation = HFGeneration(self.tokenizer, len(ids), stops, self.clock)
        sampler = Sampler(temperature, top_p, seed, self.clock)
        row = Row(
            ids,
            max_tokens,
            sampler,
            constraint,
            self.eos_ids,
            generation.on_token,
            generation.on_end,
        )
        self.decoder.submit(row)
        return generation

    def close(self) -> None:
        """Stop the decode thread."""
        self.decoder.close()


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    found: set[int] = set()
    for value in (
        getattr(tokenizer, "eos_token_id", None),
        getattr(getattr(model, "generation_config", None), "eos_token_id", None),
    ):
        if isinstance(value, int):
            found.add(value)
        elif isinstance(value, list):
            found.update(int(item) for item in value)
    if not found:
        raise ConfigError("The model's tokenizer names no end-of-sequence token.")
    return found
