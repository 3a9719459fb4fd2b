"""How a detector replaces what it finds in a text column, without a Python loop over rows.

A `RegexDetector` with no check is counted and replaced with polars string expressions. One
with a check (Luhn, check digits, address parsing, phone shape) extracts candidates with
its regex, checks each UNIQUE candidate in Python, then wraps every regex match in two
Unicode noncharacters and swaps the wrapped valid ones for the mask in one Aho-Corasick
pass (`str.replace_many`); so only text at a candidate position is ever replaced.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import polars as pl

# Unicode noncharacters: never meant to appear in interchanged text, so safe as markers.
OPEN, CLOSE = "\ufdd0", "\ufdd1"
MARKERS = f"[{OPEN}{CLOSE}]"

# A check receives one regex match and the mask; it returns the match's replacement, or
# None when the match is not PII after all.
Check = Callable[[str, str], str | None]


class Detector(Protocol):
    """Finds one kind of PII in a text column and replaces each finding with the mask."""

    @property
    def kind(self) -> str:
        """The kind of PII, as named in `RedactParams.kinds`."""
        ...

    def redact(self, series: pl.Series, mask: str) -> tuple[pl.Series, int]:
        """The series with every finding masked, and the number of findings."""
        ...


@dataclass(frozen=True)
class RegexDetector:
    """Candidates found by a regex (a Rust `regex` crate pattern), confirmed by `check`."""

    kind: str
    pattern: str
    check: Check | None = None

    def redact(self, series: pl.Series, mask: str) -> tuple[pl.Series, int]:
        if self.check is None:
            found = int(series.str.count_matches(self.pattern).sum())
            if found:
                # `$` starts a group reference in a regex replacement; `$$` is a literal one.
                series = series.str.replace_all(self.pattern, mask.replace("$", "$$"))
            return series, found
        return self._replace_checked(series, self.check, mask)

    def _replace_checked(self, series: pl.Series, check: Check, mask: str) -> tuple[pl.Series, int]:
        matches = series.str.extract_all(self.pattern).explode().drop_nulls()
        if matches.is_empty():
            return series, 0
        # Checks run in Python, but once per distinct candidate, never once per row.
        replacements = {}
        for match in matches.unique().to_list():
            replacement = check(match, mask)
            if replacement is not None:
                replacements[OPEN + match + CLOSE] = replacement
        if not replacements:
            return series, 0
        found = int(matches.is_in([key[1:-1] for key in replacements]).sum())
        wrapped = series.str.replace_all(self.pattern, f"{OPEN}$0{CLOSE}")
        swapped = wrapped.str.replace_many(list(replacements), list(replacements.values()))
        return swapped.str.replace_all(MARKERS, ""), found
