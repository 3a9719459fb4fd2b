"""Collect one bounded window of messages: at most `max_records`, for at most `max_seconds`.

A redelivered message whose position is in a committed version is a copy: it is
acknowledged at once and dropped. A redelivery of a message already in this window (a
broker whose ack deadline passed while the window was open) is kept aside and acknowledged
with the window; where positions are the broker's message ids, so is any second delivery
of one, marked or not (it may arrive before the delivery it repeats). Time comes from the
injected `clock`.
"""

from __future__ import annotations

from collections.abc import Callable, Set
from dataclasses import dataclass, field

from forgeml.data.streams._base import Message, StreamSource

POLL_S = 0.5  # the longest a receive waits, so the deadline is checked this often


@dataclass
class Window:
    """What one window received.

    Attributes:
        messages: the new messages, in arrival order, one per position.
        copies: redeliveries of messages already in `messages` (acknowledged with them).
        dropped: how many redeliveries of committed messages were acknowledged and dropped.
    """

    messages: list[Message] = field(default_factory=list)
    copies: list[Message] = field(default_factory=list)
    dropped: int = 0


def collect(
    source: StreamSource,
    max_records: int,
    max_seconds: float,
    committed: Set[str],
    clock: Callable[[], float],
    on_progress: Callable[[int], None] = lambda _count: None,
) -> Window:
    """Receive until the window holds `max_records` new messages or `max_seconds` pass."""
    window = Window()
    taken: set[str] = set()
    deadline = clock() + max_seconds
    while len(window.messages) < max_records:
        remaining = deadline - clock()
        if remaining <= 0:
            break
        batch = source.receive(max_records - len(window.messages), min(remaining, POLL_S))
        stale = [m for m in batch if m.redelivered and m.position in committed]
        if stale:
            source.ack(stale)
            window.dropped += len(stale)
        for message in batch:
            if message.redelivered and message.position in committed:
                continue
            # a broker may hand over a redelivery before the first delivery it repeats
            # (NATS: an expired fetch's message reaches the next one): with ids as
            # positions, any second delivery is the copy
            copy = message.redelivered or source.ids_as_positions
            if copy and message.position in taken:
                window.copies.append(message)
            else:
                taken.add(message.position)
                window.messages.append(message)
        if batch:
            on_progress(len(window.messages))
    return window
