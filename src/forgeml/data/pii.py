"""Find and mask personal data (PII) in text columns: `forgeml data redact REF`.

Kinds and the order they run in. Each detector sees the text left by the ones before it,
so a more specific pattern must run before a looser one that could eat part of it:

1. `email`        name@domain.tld.
2. `credit_card`  13-19 digits, bare or grouped by one kind of separator (space or dash),
                  masked only when the Luhn checksum holds (ISO/IEC 7812-1, annex B).
                  Before phones, which would otherwise read a grouped card number.
3. `national_id`  US SSN `ddd-dd-dddd` (area not 000, 666 or 9xx; group not 00; serial not
                  0000); UK National Insurance number `AB 12 34 56 C` (HMRC prefix rules);
                  Spanish DNI `12345678Z` / NIE `X1234567L`, masked only when the mod-23 check
                  letter holds. Before phones, which would read an SSN as 9 grouped digits.
4. `ip`           IPv6 (checked by `ipaddress`, so `std::cout` or `12:30:45` are left alone),
                  then IPv4 dotted quads with every octet 0-255 (exactly four parts, so a
                  version string `1.2.3.4.5` is left alone). Before phones, which would
                  read `192.168.100.200` as grouped digits.
5. `phone`        `+CC` international numbers, and national numbers written with separators
                  (`(555) 123-4567`, `020 7946 0958`, `01 23 45 67 89`), 7-15 digits. Plain
                  digit runs, years, year ranges (`1990-2000`), dates (`2023-01-15`),
                  numbers grouped by thousands (`1 234 567`) and two-part numbers that are
                  not a local `555-1234` or trunk-prefixed `030 1234567` shape are left alone.

Regex-only kinds are counted and replaced with polars string expressions. Kinds that need a
check (Luhn, check letters, address parsing, phone shape) extract candidates with the same
regex, check each UNIQUE candidate in Python, then wrap every regex match in two Unicode
noncharacters and swap the wrapped valid ones for the mask in one Aho-Corasick pass
(`str.replace_many`); so only text at a candidate position is ever replaced.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, field_validator

from forgeml.core.errors import InvalidDataError
from forgeml.data._frame import RESERVED_COLUMNS, TransformOutput, require_columns, user_columns

Kind = Literal["email", "credit_card", "national_id", "ip", "phone"]
KINDS: tuple[Kind, ...] = ("email", "credit_card", "national_id", "ip", "phone")

# Unicode noncharacters: never meant to appear in interchanged text, so safe as markers.
_OPEN, _CLOSE = "\ufdd0", "\ufdd1"
_MARKERS = f"[{_OPEN}{_CLOSE}]"


class RedactParams(BaseModel):
    """Parameters of `forgeml data redact`."""

    model_config = ConfigDict(extra="forbid")

    columns: list[str] | None = Field(
        default=None,
        min_length=1,
        description="Text columns to scan; default: every String column.",
    )
    kinds: list[Kind] = Field(
        default_factory=lambda: list(KINDS),
        min_length=1,
        description="Kinds of PII to mask: email, phone, credit_card, ip, national_id.",
    )
    mask: str = Field(
        default="[{KIND}]",
        description="Replacement text; '{KIND}' becomes the kind in capitals, e.g. [EMAIL].",
    )

    @field_validator("columns")
    @classmethod
    def _dedupe_columns(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else list(dict.fromkeys(value))

    @field_validator("kinds")
    @classmethod
    def _canonical_kinds(cls, value: list[Kind]) -> list[Kind]:
        # Detection order is fixed (see the module docstring), whatever order was given.
        return [kind for kind in KINDS if kind in value]

    @field_validator("mask")
    @classmethod
    def _mask_has_no_markers(cls, value: str) -> str:
        if _OPEN in value or _CLOSE in value:
            raise ValueError("the mask must not contain the characters U+FDD0 or U+FDD1")
        return value


# A check receives one regex match and the mask; it returns the match's replacement, or
# None when the match is not PII after all.
Check = Callable[[str, str], str | None]


@dataclass(frozen=True)
class _Detector:
    kind: Kind
    pattern: str
    check: Check | None = None


def _luhn_ok(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char) * (2 if position % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


def _is_card(text: str) -> bool:
    digits = re.sub(r"\D", "", text)
    separators = set(re.sub(r"\d", "", text))
    return (
        13 <= len(digits) <= 19
        and len(separators) <= 1
        and len(set(digits)) > 1
        and _luhn_ok(digits)
    )


def _check_card(match: str, mask: str) -> str | None:
    if match.startswith("+"):
        return None  # an international phone number such as +4915112345678
    if _is_card(match):
        return mask
    # "4111 1111 1111 1111 20": the regex may take a short trailing group that is not part
    # of the card; retry without it and keep it.
    cut = max(match.rfind(" "), match.rfind("-"))
    head, tail = match[:cut], match[cut:]
    if cut > 0 and len(tail) <= 4 and _is_card(head):
        return mask + tail
    return None


_NINO_BAD_PREFIXES = {"BG", "GB", "KN", "NK", "NT", "TN", "ZZ"}


def _check_nino(match: str, mask: str) -> str | None:
    # HMRC: first letter not D F I Q U V, second not D F I O Q U V, some pairs never issued.
    first, second = match[0], match[1]
    ok = first not in "DFIQUV" and second not in "DFIOQUV"
    return mask if ok and match[:2] not in _NINO_BAD_PREFIXES else None


_DNI_LETTERS = "TRWAGMYFPDXBNJZSQVHLCKE"


def _check_dni(match: str, mask: str) -> str | None:
    # Spanish DNI / NIE: the letter is the number mod 23 (NIE: X, Y, Z stand for 0, 1, 2).
    body = match.replace("-", "")
    number = "XYZ".index(body[0]) if body[0] in "XYZ" else ""
    value = int(f"{number}{body[1:-1]}" if number != "" else body[:-1])
    return mask if _DNI_LETTERS[value % 23] == body[-1] else None


def _check_ipv6(match: str, mask: str) -> str | None:
    # The match is a boundary character (absent at the start of the text) then a token.
    prefix = "" if re.match(r"[\w:.]", match[0]) else match[0]
    token = match[len(prefix) :]
    for address in (token, token.rstrip("."), token[:-1] if token.endswith(":") else ""):
        if not address or not re.search(r"[0-9A-Fa-f]", address):
            continue
        try:
            ipaddress.IPv6Address(address)
        except ValueError:
            continue
        return prefix + mask + token[len(address) :]
    return None


def _check_ipv4(match: str, mask: str) -> str | None:
    try:
        ipaddress.IPv4Address(match)
    except ValueError:
        return None
    return mask


def _check_phone(match: str, mask: str) -> str | None:
    groups = re.findall(r"\d+", match)
    if not 7 <= sum(len(group) for group in groups) <= 15:
        return None
    if match.startswith("+"):
        return mask
    lengths = [len(group) for group in groups]
    # Dates and the SSN shape (valid SSNs are already masked as national_id) are not phones.
    if lengths in ([4, 2, 2], [2, 2, 4], [3, 2, 4]):
        return None
    # Without a country code, accept only the shapes national numbers are written in: a
    # parenthesised area code, a trunk prefix 0 (most of Europe and Asia), or the North
    # American 3-3-4 / 3-4. Lists of numbers, year ranges and thousands groupings fail this.
    national = "(" in match or groups[0].startswith("0") or lengths in ([3, 3, 4], [3, 4])
    return mask if national else None


_DETECTORS: tuple[_Detector, ...] = (
    _Detector("email", r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"),
    _Detector(
        "credit_card",
        r"\+?\b(?:\d{13,19}|\d{4}(?:[ -]\d{4}){2,3}(?:[ -]\d{1,3})?|\d{4}[ -]\d{6}[ -]\d{4,5})\b",
        _check_card,
    ),
    _Detector(
        "national_id",
        r"\b(?:00[1-9]|0[1-9]\d|[1-578]\d\d|6[0-57-9]\d|66[0-57-9])-(?:0[1-9]|[1-9]\d)-"
        r"(?:000[1-9]|00[1-9]\d|0[1-9]\d\d|[1-9]\d{3})\b",
    ),
    _Detector("national_id", r"\b[A-Z]{2} ?\d{2} ?\d{2} ?\d{2} ?[A-D]\b", _check_nino),
    _Detector("national_id", r"\b(?:\d{8}|[XYZ]\d{7})-?[A-Z]\b", _check_dni),
    # A boundary character, then a whole token of word characters, colons and dots that
    # holds at least two colons; the check parses it (so `std::cout` is not an address).
    _Detector("ip", r"(?:^|[^\w:.])[\w:.]*:[\w:.]*:[\w:.]*", _check_ipv6),
    _Detector("ip", r"\b\d+(?:\.\d+)+\b", _check_ipv4),
    _Detector(
        "phone",
        r"(?:\+\d{1,3}(?:[ .-]?\(\d{1,5}\))?(?:[ .-]?\d{1,5}){1,6}"
        r"|\(\d{2,5}\)[ .-]?\d{2,8}(?:[ .-]\d{2,8}){0,4}"
        r"|\b\d{2,5}(?:[ .-]\d{2,8}){1,5})\b",
        _check_phone,
    ),
)


def _replace_checked(series: pl.Series, detector: _Detector, mask: str) -> tuple[pl.Series, int]:
    check = detector.check
    if check is None:
        raise TypeError("_replace_checked needs a detector with a check")
    matches = series.str.extract_all(detector.pattern).explode().drop_nulls()
    if matches.is_empty():
        return series, 0
    # Checks run in Python, but once per distinct candidate, never once per row.
    replacements = {}
    for match in matches.unique().to_list():
        replacement = check(match, mask)
        if replacement is not None:
            replacements[_OPEN + match + _CLOSE] = replacement
    if not replacements:
        return series, 0
    found = int(matches.is_in([key[1:-1] for key in replacements]).sum())
    wrapped = series.str.replace_all(detector.pattern, f"{_OPEN}$0{_CLOSE}")
    swapped = wrapped.str.replace_many(list(replacements), list(replacements.values()))
    return swapped.str.replace_all(_MARKERS, ""), found


def _redact_series(
    series: pl.Series, kinds: list[Kind], mask: str
) -> tuple[pl.Series, dict[str, int]]:
    counts: dict[str, int] = {}
    for detector in _DETECTORS:
        if detector.kind not in kinds:
            continue
        kind_mask = mask.replace("{KIND}", detector.kind.upper())
        if detector.check is None:
            found = int(series.str.count_matches(detector.pattern).sum())
            if found:
                # `$` starts a group reference in a regex replacement; `$$` is a literal one.
                series = series.str.replace_all(detector.pattern, kind_mask.replace("$", "$$"))
        else:
            series, found = _replace_checked(series, detector, kind_mask)
        if found:
            counts[detector.kind] = counts.get(detector.kind, 0) + found
    return series, counts


def _text_columns(frame: pl.DataFrame, params: RedactParams) -> list[str]:
    if params.columns is None:
        return [name for name in user_columns(frame) if frame.schema[name] == pl.String]
    require_columns(frame, params.columns, "redact --columns")
    for name in params.columns:
        if name in RESERVED_COLUMNS:
            raise InvalidDataError(
                f"redact --columns names '{name}', a reserved column forgeml manages; "
                "leave it out of --columns."
            )
        if frame.schema[name] != pl.String:
            raise InvalidDataError(
                f"redact scans text only, but column '{name}' is {frame.schema[name]}; "
                "leave it out of --columns or cast it to text first."
            )
    return params.columns


def apply(frame: pl.DataFrame, params: RedactParams) -> TransformOutput:
    """Mask e-mails, card numbers, national IDs, IP addresses and phone numbers.

    Args:
        frame: the rows of a dataset version.
        params: which columns and kinds to scan, and the mask text.

    Returns:
        The frame with each detected value replaced by its mask (other columns, row order
        and reserved columns untouched), and a report
        `{"counts": {column: {kind: n}}, "total": n, "columns": [...], "kinds": [...]}`
        where only kinds found at least once are listed under a column.

    Raises:
        MissingColumnError: a column named in `params.columns` does not exist.
        InvalidDataError: a named column is not text or is reserved, or a scanned column
            holds the marker characters U+FDD0 / U+FDD1 this transform uses internally.
    """
    columns = _text_columns(frame, params)
    counts: dict[str, dict[str, int]] = {}
    replaced: list[pl.Series] = []
    for name in columns:
        series = frame.get_column(name)
        if series.str.contains(_MARKERS).any():
            raise InvalidDataError(
                f"column '{name}' holds the Unicode noncharacters U+FDD0 or U+FDD1, which "
                "redact uses as internal markers; remove them before redacting."
            )
        series, column_counts = _redact_series(series, params.kinds, params.mask)
        counts[name] = column_counts
        if column_counts:
            replaced.append(series)
    report: dict[str, Any] = {
        "counts": counts,
        "total": sum(sum(kinds.values()) for kinds in counts.values()),
        "columns": columns,
        "kinds": list(params.kinds),
    }
    return TransformOutput(frame=frame.with_columns(replaced), report=report)
