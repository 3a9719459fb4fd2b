from __future__ import annotations

from collections.abc import Sequence

from forgeml.data.streams import Message
from forgeml.data.streams._window import POLL_S, collect
from tests._wait import FakeClock


class ScriptedSource:
    """Hands out prepared batches; each receive moves the clock by the time it waited."""

    def __init__(
        self, clock: FakeClock, batches: list[list[Message]], ids_as_positions: bool = False
    ) -> None:
        self.clock, self.batches = clock, batches
        self.acked: list[str] = []
        self.acks_confirmed = True
        self.ids_as_positions = ids_as_positions
        self.waits: list[float] = []

    def receive(self, limit: int, timeout: float) -> list[Message]:
        self.waits.append(timeout)
        if not self.batches:
            self.clock.advance(timeout)
            return []
        batch, rest = self.batches[0][:limit], self.batches[0][limit:]
        self.batches[0:1] = [rest] if rest else []
        return batch

    def ack(self, messages: Sequence[Message]) -> None:
        self.acked += [m.position for m in messages]

    def close(self) -> None:
        pass


def _messages(*positions: str, redelivered: bool = False) -> list[Message]:
    return [Message(p, p.encode(), redelivered) for p in positions]


def test_window_closes_at_max_records_and_leaves_the_rest_with_the_broker() -> None:
    clock = FakeClock()
    source = ScriptedSource(clock, [_messages("1", "2", "3"), _messages("4", "5")])
    window = collect(source, 4, 60, set(), clock)
    assert [m.position for m in window.messages] == ["1", "2", "3", "4"]
    assert source.batches == [_messages("5")]
    assert source.acked == []  # nothing is acked before the commit


def test_window_closes_at_max_seconds_on_the_injected_clock() -> None:
    clock = FakeClock()
    source = ScriptedSource(clock, [_messages("1")])
    window = collect(source, 10, 2.0, set(), clock)
    assert [m.position for m in window.messages] == ["1"]
    assert source.waits == [POLL_S, POLL_S, POLL_S, POLL_S, POLL_S]  # 0.5 s each, 2 s in all
    assert sum(source.waits[1:]) == 2.0


def test_redelivered_committed_messages_are_acked_at_once_and_dropped() -> None:
    clock = FakeClock()
    batches = [_messages("1", "2", redelivered=True) + _messages("3")]
    source = ScriptedSource(clock, batches)
    window = collect(source, 1, 60, {"1", "2"}, clock)
    assert [m.position for m in window.messages] == ["3"]
    assert window.dropped == 2
    assert source.acked == ["1", "2"]


def test_a_fresh_message_is_kept_even_when_its_position_was_committed() -> None:
    # a content position (MQTT, AMQP without message_id): the same payload sent again
    clock = FakeClock()
    source = ScriptedSource(clock, [_messages("same")])
    window = collect(source, 1, 60, {"same"}, clock)
    assert [m.position for m in window.messages] == ["same"]
    assert window.dropped == 0


def test_a_redelivery_of_a_message_in_the_window_is_kept_aside_for_the_ack() -> None:
    clock = FakeClock()
    batches = [_messages("1"), _messages("1", redelivered=True), _messages("2")]
    source = ScriptedSource(clock, batches)
    window = collect(source, 2, 60, set(), clock)
    assert [m.position for m in window.messages] == ["1", "2"]
    assert [m.position for m in window.copies] == ["1"]


def test_a_redelivery_before_its_first_delivery_is_the_copy_where_ids_are_positions() -> None:
    # NATS: message 21's first delivery reached a fetch that had expired and came with the
    # next one, after the broker's redelivery (ack_wait passed): CI, 2026-12-05, recorded
    # 21 twice
    clock = FakeClock()
    batches = [_messages("20"), _messages("21", redelivered=True), _messages("21")]
    source = ScriptedSource(clock, batches, ids_as_positions=True)
    window = collect(source, 3, 60, set(), clock)
    assert [m.position for m in window.messages] == ["20", "21"]
    assert [m.position for m in window.copies] == ["21"]


def test_two_messages_with_one_content_position_are_both_kept() -> None:
    # MQTT, AMQP without message_id: the same payload sent twice is two records
    clock = FakeClock()
    batches = [_messages("same", redelivered=True), _messages("same")]
    source = ScriptedSource(clock, batches)
    window = collect(source, 2, 60, set(), clock)
    assert [m.position for m in window.messages] == ["same", "same"]
    assert window.copies == []


def test_progress_reports_the_window_count_after_each_batch() -> None:
    clock = FakeClock()
    source = ScriptedSource(clock, [_messages("1", "2"), _messages("3")])
    counts: list[int] = []
    collect(source, 3, 60, set(), clock, counts.append)
    assert counts == [2, 3]
