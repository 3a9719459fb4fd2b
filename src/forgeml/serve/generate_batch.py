"""Continuous batching of token generation over a Hugging Face causal LM with a KV cache.

One decode thread owns the model. Each loop it admits the requests waiting at that moment
(each prompt is pre-filled alone, then its key/value cache joins the batch's, both left
padded to one length) and runs one decode step for every row: a forward pass of one new
token per row over the shared cache, with an attention mask that hides each row's
padding and position ids that count each row's own tokens. Every row keeps its own
sampler, constraint, token limit and stop check; a finished row leaves the batch (its
cache rows are dropped, and columns every remaining row pads are trimmed) while the
others go on. This is the iteration-level scheduling of Orca (Yu et al., OSDI 2022).

Pre-filling a prompt alone costs a little throughput against padding prompts together,
but never puts an all-padding query row through attention, so a row's logits do not
depend on who it shares the batch with beyond floating-point summation order.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from forgeml.core.errors import ServiceUnavailableError
from forgeml.serve.tokens import FinishReason, Sampler, TokenConstraint

if TYPE_CHECKING:
    import torch

_log = logging.getLogger(__name__)
_IDLE_POLL_S = 0.5  # how often an idle decode thread checks whether it was closed


@dataclass(eq=False)
class Row:
    """One request in the batch: its prompt, its settings and where its tokens go.

    `on_token(token, is_eos)` runs in the decode thread for every sampled token and
    returns False when the request wants no more (a stop string); `on_end(reason, error)`
    runs once, when the row leaves the batch.
    """

    prompt_ids: list[int]
    max_tokens: int
    sampler: Sampler
    constraint: TokenConstraint | None
    eos_ids: frozenset[int]
    on_token: Callable[[int, bool], bool]
    on_end: Callable[[FinishReason | None, BaseException | None], None]
    generated: list[int] = field(default_factory=list)
    length: int = 0  # this row's real tokens in the cache (its next position id)
    next_token: int = -1  # sampled, not yet fed to the model


class BatchDecoder:
    """The decode thread of one model (started on the first request)."""

    def __init__(self, model: Any, max_batch: int = 8) -> None:
        """Decode with `model`, a transformers causal LM, at most `max_batch` rows at once."""
        self.model = model
        self.max_batch = max(1, max_batch)
        self._waiting: queue.Queue[Row] = queue.Queue()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._rows: list[Row] = []
        self._cache: Any = None  # a transformers DynamicCache over self._rows
        self._mask: torch.Tensor | None = None  # [B, T]: 1 real token, 0 padding

    @property
    def depth(self) -> int:
        """Requests waiting to join the batch."""
        return self._waiting.qsize()

    def submit(self, row: Row) -> None:
        """Queue `row`; it joins the batch at the next decode step.

        Raises:
            ServiceUnavailableError: the decoder was closed.
        """
        if self._closed.is_set():
            raise ServiceUnavailableError("The model's decoder is closed; it takes no requests.")
        if row.max_tokens == 0:
            row.on_end("length", None)
            return
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="decode", daemon=True)
                self._thread.start()
        self._waiting.put(row)

    def close(self) -> None:
        """Take no more requests; the thread ends once the rows it has are done."""
        self._closed.set()
        if self._thread is not None:
            self._thread.join(60)

    def _loop(self) -> None:
        import torch

        with torch.inference_mode():
            while not (self._closed.is_set() and not self._rows and self._waiting.empty()):
                joining = self._take()
                try:
                    for row in joining:
                        self._admit(row)
                    if self._rows:
                        self._step()
                except Exception as error:  # one failed pass fails its rows, not the thread
                    _log.exception("decode step failed")
                    self._fail([*self._rows, *joining], error)
        self._fail(self._rows, ServiceUnavailableError("The model's decoder was closed."))

    def _take(self) -> list[Row]:
        joining: list[Row] = []
        if not self._rows:
            try:
                joining.append(self._waiting.get(timeout=_IDLE_POLL_S))
            except queue.Empty:
                return []
        while len(self._rows) + len(joining) < self.max_batch:
            try:
                joining.append(self._waiting.get_nowait())
            except queue.Empty:
                break
        return joining

    def _fail(self, rows: list[Row], error: BaseException) -> None:
        for row in rows:
            if row.length >= 0:
                row.length = -1  # ended: on_end once
                row.on_end(None, error)
        self._rows, self._cache, self._mask = [], None, None

    def _admit(self, row: Row) -> None:
        import torch

        ids = torch.tensor([row.prompt_ids], dtype=torch.long)
        # logits of the last position only: the vocabulary projection of every prompt
        # position was a fifth of a long prompt's pre-fill, for logits no one read
        out = self.model(input_ids=ids, use_cache=True, logits_to_keep=1)
        row.length = len(row.prompt_ids)
        if self._accept(row, out.logits[0, -1]):
            self._join(row, out.cache)

    def _accept(self, row: Row, logits: torch.Tensor) -> bool:
        """Sample `row`'s next token; False (and the row ended) when it is done."""
        try:
            allowed = None if row.constraint is None else row.constraint.allowed(row.generated)
            token = row.sampler.pick(logits, allowed)
        except Exception as error:  # a failing constraint ends its own row only
            row.length = -1
            row.on_end(None, error)
            return False
        row.generated.append(token)
        eos = token in row.eos_ids
        wanted = row.on_token(token, eos)
        reason: FinishReason | None = None
        if eos or not wanted:
            reason = "stop"
        elif len(row.generated) >= row.max_tokens:
            reason = "length"
        if reason is not None:
            row.length = -1
            row.on_end(reason, None)
            return False
        row.next_token = token
        return True

    def _join(self, row: Row, cache: Any) -> None:
        import torch

        mask = torch.ones((1, row.length), dtype=torch.long)
        if self._cache is None or self._mask is None:
            self._rows, self._cache, self._mask = [row], cache, mask
            return
        width = max(self._mask.shape[1], row.length)
        for ours, theirs in zip(self._cache.layers, cache.layers, strict=True):
            ours.keys = torch.cat((_pad_left(ours.keys, width), _pad_left(theirs.keys, width)))
            ours.values = torch.cat(
                (_pad_left(ours.values, width), _pad_left(theirs.values, width))
            )
        self._mask = torch.cat((_pad_mask(self._mask, width), _pad_mask(mask, width)))
        self._rows.append(row)

    def _step(self) -> None:
        import torch

        if self._mask is None:  # no rows
            return
        rows = self._rows
        ids = torch.tensor([[row.next_token] for row in rows], dtype=torch.long)
        positions = torch.tensor([[row.length] for row in rows], dtype=torch.long)
        self._mask = torch.cat((self._mask, torch.ones((len(rows), 1), dtype=torch.long)), 1)
        out = self.model(
            input_ids=ids,
            attention_mask=self._mask,
            position_ids=positions,
            cache=self._cache,
            use_cache=True,
        )
        self._cache = out.cache
        for row in rows:
            row.length += 1
        keep = [i for i, row in enumerate(rows) if self._accept(row, out.logits[i, -1])]
        if len(keep) < len(rows):
            self._select(keep)

    def _select(self, keep: list[int]) -> None:
        """Keep rows `keep` only, and drop the cache columns all of them pad."""
        import torch

        if not keep or self._mask is None:
            self._rows, self._cache, self._mask = [], None, None
            return
        index = torch.tensor(keep, dtype=torch.long)
        mask = self._mask[index]
        first = int((mask.sum(dim=0) > 0).nonzero()[0])
        for layer in self._cache.layers:
            layer.keys = layer.keys[index, :, first:]
            layer.values = layer.values[index, :, first:]
        self._mask = mask[:, first:]
        self._rows = [self._rows[i] for i in keep]


def _pad_left(states: torch.Tensor, width: int) -> torch.Tensor:
    """Key or value states [B, H, T, D] padded with zeros on the left to T = width."""
    from torch.nn import functional as F  # noqa: N812  (the PyTorch convention)

    return F.pad(states, (0, 0, width - states.shape[2], 0))


def _pad_mask(mask: torch.Tensor, width: int) -> torch.Tensor:
    from torch.nn import functional as F  # noqa: N812

    return F.pad(mask, (width - mask.shape[1], 0))
