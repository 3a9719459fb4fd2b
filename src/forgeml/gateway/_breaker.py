"""A per-replica circuit breaker, so a dead replica stops receiving traffic.

Closed: every request may go. After `failures_to_open` consecutive failures it opens and
refuses requests for `cooldown_s`; then it is half-open and lets one trial through (one per
cool-down): a success closes it, a failure opens it again. (Nygard, "Release It!", ch. 5.)
"""

from __future__ import annotations

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half-open"


class CircuitBreaker:
    """The health verdict on one replica, from the outcomes of the requests sent to it."""

    def __init__(self, failures_to_open: int, cooldown_s: float) -> None:
        self.failures_to_open = failures_to_open
        self.cooldown_s = cooldown_s
        self.state = CLOSED
        self.failures = 0
        self.open_until = 0.0

    def allow(self, now: float) -> bool:
        """Whether a request may be sent now (a half-open breaker admits one trial)."""
        if self.state == CLOSED:
            return True
        if now < self.open_until:
            return False
        # one trial per cool-down, so a trial that never reports back cannot wedge it
        self.state, self.open_until = HALF_OPEN, now + self.cooldown_s
        return True

    def success(self) -> None:
        """The replica answered: close."""
        self.state, self.failures = CLOSED, 0

    def failure(self, now: float) -> None:
        """The replica failed (refused, 502/503, timed out): count, and maybe open."""
        self.failures += 1
        if self.state == HALF_OPEN or self.failures >= self.failures_to_open:
            self.state, self.open_until = OPEN, now + self.cooldown_s
