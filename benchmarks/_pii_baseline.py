"""The hand-written PII patterns of `forgeml.data.pii` before libphonenumber and python-stdnum.

Frozen copy of the detectors at commit 0367a87 (src/forgeml/data/pii.py), kept only as the
baseline that benchmarks/pii.py scores beside the current detectors. Not used by forgeml.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import polars as pl

Kind = Literal["email", "credit_card", "national_id", "ip", "phone"]
KINDS: tuple[Kind, ...] = ("email", "credit_card", "national_id", "ip", "phone")

# Unicode noncharacters: never meant to appear in interchanged text, so safe as markers.
_OPEN, _CLOSE = "\ufdd0", "\ufdd1"
_MARKERS = f"[{_OPEN}{_CLOSE}]"


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


def redact(series: pl.Series, mask: str = "[{KIND}]") -> pl.Series:
    """`series` with every kind masked as the detectors of commit 0367a87 did."""
    return _redact_series(series, list(KINDS), mask)[0]
