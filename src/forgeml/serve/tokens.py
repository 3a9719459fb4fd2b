"""What every text generator shares: the generator protocol, token constraints, sampling.

`LanguageGenerator` is what the OpenAI routes call: the byte-level `TextGenerator`
(`forgeml.serve.generate`, for `tiny_gpt`) and the batched Hugging Face generator
(`forgeml.serve.generate_hf`) both implement it. A request may carry a
`TokenConstraint` (constrained decoding, e.g. a JSON schema): before each token is
sampled, the row's logits are masked to the ids it allows.

Sampling follows OpenAI's knobs: temperature (0 is greedy), nucleus sampling (`top_p`,
Holtzman et al. 2020, "The Curious Case of Neural Text Degeneration") and a seed.
torch is imported inside the functions that need it, so importing this module is cheap.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from forgeml.core.errors import ConfigError

if TYPE_CHECKING:
    import torch

__all__ = [
    "Clock",
    "FinishReason",
    "GenerationStream",
    "LanguageGenerator",
    "MeteredGenerator",
    "Sampler",
    "StopFilter",
    "TokenConstraint",
    "check_sampling",
]

FinishReason = Literal["stop", "length"]
Clock = Callable[[], float]


class TokenConstraint(Protocol):
    """Which tokens a request may emit next (constrained decoding)."""

    def allowed(self, generated: Sequence[int]) -> Sequence[int] | None:
        """Token ids allowed after `generated` (this request's ids so far); None: any."""
        ...


class GenerationStream(Protocol):
    """One running generation: iterate for text pieces; counts and timings follow it.

    `prompt_tokens` is known from the start; `completion_tokens` grows as tokens are
    sampled; `finish_reason` is set once the iterator is spent. `started`, `first_token`
    and `finished` are clock readings (None until they happen), for the GenAI metrics.
    """

    prompt_tokens: int
    completion_tokens: int
    finish_reason: FinishReason | None
    started: float
    first_token: float | None
    finished: float | None

    def __iter__(self) -> Iterator[str]: ...

    def __next__(self) -> str: ...


class LanguageGenerator(Protocol):
    """A language model the OpenAI routes generate with."""

    chat_stops: list[str]  # stop strings its chat format implies (a next user turn)

    def chat_prompt(self, messages: Sequence[Mapping[str, str]]) -> str:
        """The conversation (`role`, `content` per message) as the model's prompt text."""
        ...

    def stream(
        self,
        prompt: str,
        max_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        stop: list[str] | None = None,
        seed: int | None = None,
        constraint: TokenConstraint | None = None,
    ) -> GenerationStream:
        """Start generating a continuation of `prompt` (see `TextGenerator.stream`)."""
        ...


def check_sampling(
    max_tokens: int, temperature: float, top_p: float, stop: list[str], seed: int | None
) -> None:
    """Refuse settings no sampler can honour.

    Raises:
        ConfigError: a negative count or temperature, top_p outside (0, 1], an empty stop
            string, or a seed that does not fit in 64 bits.
    """
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


class StopFilter:
    """Holds back text that may be the start of a stop string; cuts at the first one found."""

    def __init__(self, stop: list[str]) -> None:
        self.stop = stop
        self.hold = max((len(item) for item in stop), default=1) - 1
        self.pending = ""
        self.stopped = False

    def feed(self, text: str) -> str:
        """Take newly decoded `text`; the text now safe to send (sets `stopped` at a stop)."""
        self.pending += text
        cut = _find_stop(self.pending, self.stop)
        if cut is not None:
            self.stopped = True
            ready, self.pending = self.pending[:cut], ""
            return ready
        if len(self.pending) <= self.hold:
            return ""
        split = len(self.pending) - self.hold
        ready, self.pending = self.pending[:split], self.pending[split:]
        return ready

    def flush(self) -> str:
        """The held-back text once generation ends (cut at a stop string within it)."""
        cut = _find_stop(self.pending, self.stop)
        if cut is not None:
            self.stopped = True
        ready, self.pending = self.pending[:cut], ""
        return ready


class Sampler:
    """Picks the next token from logits: greedy, or temperature + nucleus sampling."""

    def __init__(
        self, temperature: float, top_p: float, seed: int | None, clock: Clock = time.perf_counter
    ) -> None:
        import torch

        self.temperature = temperature
        self.top_p = top_p
        self.clock = clock
        self.random = torch.Generator()
        # an unseeded torch.Generator starts from a fixed seed; draw a fresh one instead
        if seed is None:
            self.random.seed()
        else:
            self.random.manual_seed(seed)

    def pick(self, logits: torch.Tensor, allowed: Sequence[int] | None = None) -> int:
        """A token id sampled from `logits` [vocab], among `allowed` ids only when given.

        Raises:
            ConfigError: `allowed` is empty or names no id of the vocabulary.
        """
        import torch

        if allowed is not None:
            ids = torch.as_tensor(list(allowed), dtype=torch.long)
            ids = ids[(ids >= 0) & (ids < logits.shape[-1])]
            if ids.numel() == 0:
                raise ConfigError("The constraint allows no token of the vocabulary.")
            masked = torch.full_like(logits, float("-inf"))
            masked[ids] = logits[ids]
            logits = masked
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


class _Metered(Iterator[str]):
    """A stream that reports itself once, when it is spent or fails."""

    def __init__(self, stream: GenerationStream, report: Callable[[GenerationStream], None]):
        self.stream = stream
        self.report: Callable[[GenerationStream], None] | None = report

    def __getattr__(self, name: str) -> object:
        return getattr(self.stream, name)  # prompt_tokens, finish_reason, ... read through

    def __next__(self) -> str:
        try:
            return next(self.stream)
        except BaseException:
            report, self.report = self.report, None
            if report is not None:
                report(self.stream)
            raise


class MeteredGenerator:
    """A `LanguageGenerator` whose every generation is reported when it ends (metrics)."""

    def __init__(
        self, generator: LanguageGenerator, report: Callable[[GenerationStream], None]
    ) -> None:
        self.generator = generator
        self.report = report
        self.chat_stops = generator.chat_stops

    def __getattr__(self, name: str) -> object:
        return getattr(self.generator, name)  # e.g. an HFGenerator's `tokenizer`

    def chat_prompt(self, messages: Sequence[Mapping[str, str]]) -> str:
        """The wrapped generator's chat prompt."""
        return self.generator.chat_prompt(messages)

    def stream(self, prompt: str, *args: Any, **kwargs: Any) -> GenerationStream:
        """The wrapped generator's stream (same arguments), reported to `report` once it ends."""
        stream = self.generator.stream(prompt, *args, **kwargs)
        metered: GenerationStream = _Metered(stream, self.report)  # type: ignore[assignment]
        return metered
