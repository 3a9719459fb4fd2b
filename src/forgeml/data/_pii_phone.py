"""Phone numbers: libphonenumber's matcher first, then the shapes national numbers are written in.

1. `PhoneMatcher`: Google's libphonenumber (`phonenumbers.PhoneNumberMatcher`) finds
   numbers in international form (`+44 7912 345678`) in any text, and, given the data's
   country as a `--region` hint, national ones in any grouping, including the bare 11-digit
   `07912345678` / `09061701461` a shape rule cannot tell from other digit runs.
   Leniency VALID: a number must lie in a range its country's numbering plan allocates.
   POSSIBLE (length only) also takes dates (`15.01.2023`), ISBNs, years, barcodes and
   lists of scores; STRICT_GROUPING and EXACT_GROUPING also require the digits to be
   grouped as the country formats them, which drops real numbers written with other
   spacing, and a redactor must not leave a number visible for how it is spaced.
2. The shape rule: `+CC` numbers and national numbers written with separators
   (`(555) 123-4567`, `020 7946 0958`, `01 23 45 67 89`), 7-15 digits, that the numbering
   plan does not confirm (no hint, fictional 555 numbers, ranges newer than the metadata).
   Plain digit runs, years, year ranges (`1990-2000`), dates (`2023-01-15`), numbers grouped
   by thousands (`1 234 567`) and two-part numbers that are not a local `555-1234` or
   trunk-prefixed `030 1234567` shape are left alone.

Numbers of fewer than 7 digits (short codes such as `87121`, emergency numbers) are not
personal data and are not masked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import polars as pl

from forgeml.data._pii_match import RegexDetector

if TYPE_CHECKING:
    from phonenumbers import PhoneNumberMatch

MIN_DIGITS = 7
# A row can hold a number of MIN_DIGITS digits only if it holds MIN_DIGITS digits each at
# most 4 characters from the next: the matcher's pattern allows at most 4 punctuation
# characters between two blocks of digits (libphonenumber's PUNCTUATION_LIMIT). Rows without
# such a run never reach the matcher, which costs ~0.3 ms per row even on text without digits.
CANDIDATE_ROW = rf"\d(?:\D{{0,4}}\d){{{MIN_DIGITS - 1}}}"
# Without a region libphonenumber parses only numbers that start with a plus sign.
PLUS_SIGN = "[+\uff0b]"


def _number_digits(match: PhoneNumberMatch) -> int:
    # The extension's digits (`x7783`) are not the number's.
    return len(re.findall(r"\d", match.raw_string)) - len(match.number.extension or "")


def mask_numbers(text: str, region: str | None, mask: str) -> tuple[str, int]:
    """`text` with each phone number libphonenumber finds replaced by `mask`, and their count.

    Args:
        text: one cell.
        region: ISO 3166-1 alpha-2 country of national numbers; None finds only numbers
            written with their country code.
        mask: the replacement text, inserted as is.
    """
    from phonenumbers import Leniency, PhoneNumberMatcher

    pieces: list[str] = []
    end = found = 0
    for match in PhoneNumberMatcher(text, region, leniency=Leniency.VALID):
        if _number_digits(match) < MIN_DIGITS or _written_as_other(match.raw_string):
            continue
        pieces += [text[end : match.start], mask]
        end, found = match.end, found + 1
    return "".join([*pieces, text[end:]]), found


@dataclass(frozen=True)
class PhoneMatcher:
    """`mask_numbers` over a column: once per distinct cell that can hold a number."""

    region: str | None
    kind: str = "phone"

    def redact(self, series: pl.Series, mask: str) -> tuple[pl.Series, int]:
        possible = series.str.contains(CANDIDATE_ROW)
        if self.region is None:
            possible &= series.str.contains(PLUS_SIGN)
        candidates = series.filter(possible.fill_null(False))
        replaced: dict[str, str] = {}
        counts: dict[str, int] = {}
        for text in candidates.unique().to_list():
            masked, found = mask_numbers(text, self.region, mask)
            if found:
                replaced[text], counts[text] = masked, found
        if not replaced:
            return series, 0
        per_cell = series.replace_strict(
            list(counts), list(counts.values()), default=0, return_dtype=pl.Int64
        )
        return series.replace(list(replaced), list(replaced.values())), int(per_cell.sum())


def _is_date(lengths: list[int]) -> bool:
    # 2023-01-15, 15.01.2023: a date, whatever the numbering plan says of its digits.
    return lengths in ([4, 2, 2], [2, 2, 4], [4, 1, 1], [1, 1, 4], [2, 1, 4], [1, 2, 4])


def _written_as_other(raw: str) -> bool:
    """A date (`09.06.2003`), or a list of small numbers (`10 20 30 40 50`, valid in China)."""
    groups = re.findall(r"\d+", raw)
    lengths = [len(group) for group in groups]
    listed = len(groups) > 4 and max(lengths) <= 2 and raw[0] not in "+\uff0b0"
    return _is_date(lengths) or listed


def _national_shape(groups: list[str], north_american: bool) -> bool:
    lengths = [len(group) for group in groups]
    if not MIN_DIGITS <= sum(lengths) <= 15 or _is_date(lengths) or lengths == [3, 2, 4]:
        return False  # [3, 2, 4]: the SSN shape (valid SSNs are already masked as national_id)
    if not 2 <= lengths[0] <= 5 or not all(2 <= length <= 8 for length in lengths[1:]):
        return False  # 1-digit groups: ISBNs, versions, lists of counts
    # A trunk prefix 0 (most of Europe and Asia) or, in North America, 3-3-4 / 3-4. Lists
    # of numbers, year ranges and thousands groupings fail this.
    return groups[0].startswith("0") or (north_american and lengths in ([3, 3, 4], [3, 4]))


def _check_shape(match: str, mask: str, north_american: bool) -> str | None:
    number, extension = _EXTENSION_AT_END.fullmatch(match).groups(default="")  # type: ignore[union-attr]
    groups = re.findall(r"\d+", number)
    if number.startswith("+"):
        return mask if MIN_DIGITS <= sum(map(len, groups)) <= 15 else None
    if number.startswith("("):
        lengths = [len(group) for group in groups]
        ok = MIN_DIGITS <= sum(lengths) <= 15 and not _is_date(lengths) and lengths != [3, 2, 4]
        return mask if ok else None
    # A run of digit groups: mask its longest head of two or more whole groups in a national
    # shape, and keep the rest (`555-123-4567 2 times`); so a group of a longer run (the
    # `06-960271` of ISBN `978-1-06-960271-8`) is never read as a number by itself.
    ends = [found.end() for found in re.finditer(r"\d+", number)]
    for count in range(len(groups), 1, -1):
        if _national_shape(groups[:count], north_american):
            rest = number[ends[count - 1] :]
            return mask + (rest + extension if rest else "")
    return None


_EXTENSION = r"(?:\s?(?:x|ext\.?)\s?\d{1,6})"
_EXTENSION_AT_END = re.compile(f"(.*?)({_EXTENSION})?", re.DOTALL)
_SHAPES = (
    r"(?:\+\d{1,3}(?:[ .-]?\(\d{1,5}\))?(?:[ .-]?\d{1,5}){1,6}"
    r"|\(\d{2,5}\)[ .-]?\d{2,8}(?:[ .-]\d{2,8}){0,4}"
    r"|(?-u:\b)\d+(?:[ .-]\d+)+)"
    f"{_EXTENSION}?(?-u:\\b)"
)


def phone_shapes(region: str | None) -> RegexDetector:
    """Numbers in the shapes national numbers are written in; see the module docstring.

    The North American 3-3-4 and local 3-4 shapes count only without a region or in a
    country of the North American Numbering Plan: elsewhere `123-4567` is a postcode (JP)
    or an account number as often as a phone number.
    """
    from phonenumbers import country_code_for_region

    north_american = region is None or country_code_for_region(region) == 1
    return RegexDetector("phone", _SHAPES, partial(_check_shape, north_american=north_american))
