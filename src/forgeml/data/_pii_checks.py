"""Detectors of e-mail addresses, IBANs, payment card numbers and IP addresses."""

from __future__ import annotations

import ipaddress
import re

from forgeml.data._pii_match import RegexDetector

B = "(?-u:\\b)"  # an ASCII word boundary, so that digits right after CJK text start a token
_IPV6_CHARS = "0-9A-Za-z_:."
_IPV6_TOKEN = f"[{_IPV6_CHARS}]"


def _luhn_ok(digits: str) -> bool:
    from stdnum import luhn

    return bool(luhn.is_valid(digits))


def _is_barcode(text: str) -> bool:
    # A bare 12- or 13-digit run with a valid GS1 check digit is a UPC-A / EAN-13 barcode
    # (ISBN-13s among them); one in ten also passes Luhn. Cards of those lengths (old Visa
    # 13, Maestro 12) are rare, and are printed in groups.
    from stdnum import ean

    return text.isdigit() and len(text) in (12, 13) and bool(ean.is_valid(text))


def _is_card(text: str) -> bool:
    digits = re.sub(r"\D", "", text)
    separators = set(re.sub(r"\d", "", text))
    # ISO/IEC 7812-1: the major industry identifier of bank cards is 1-6 (airlines, travel
    # and entertainment, banking, merchandising); 12-digit numbers are Maestro's (5, 6).
    length_ok = 13 <= len(digits) <= 19 or (len(digits) == 12 and digits[0] in "56")
    return (
        length_ok
        and digits[0] in "123456"
        and len(separators) <= 1
        and len(set(digits)) > 1
        and _luhn_ok(digits)
        and not _is_barcode(text)
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


def _check_iban(match: str, mask: str) -> str | None:
    from stdnum import iban

    # ISO 13616: the country's BBAN format and the mod-97 check digits. The regex may have
    # taken a following word in capitals (`... 7654 32 PLEASE`): retry without it.
    for cut in [len(match), *(i for i in range(len(match) - 1, 0, -1) if match[i] == " ")]:
        if iban.is_valid(match[:cut]):
            return mask + match[cut:]
    return None


def _check_ipv6(match: str, mask: str) -> str | None:
    # The match is a boundary character (absent at the start of the text) then a token.
    prefix = "" if re.match(_IPV6_TOKEN, match[0]) else match[0]
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


EMAIL = RegexDetector("email", r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
IBAN = RegexDetector(
    "iban",
    f"{B}[A-Z]{{2}}[0-9]{{2}}(?: ?[A-Z0-9]{{4}}){{2,7}}(?: ?[A-Z0-9]{{1,3}})?{B}",
    _check_iban,
)
CREDIT_CARD = RegexDetector(
    "credit_card",
    f"\\+?{B}(?:[0-9]{{12,19}}|[0-9]{{4}}(?:[ -][0-9]{{4}}){{2,3}}(?:[ -][0-9]{{1,3}})?"
    f"|[0-9]{{4}}[ -][0-9]{{6}}[ -][0-9]{{4,5}}){B}",
    _check_card,
)
IP = (
    # A boundary character, then a whole token of word characters, colons and dots that
    # holds at least two colons; the check parses it (so `std::cout` is not an address).
    RegexDetector(
        "ip", f"(?:^|[^{_IPV6_CHARS}]){_IPV6_TOKEN}*:{_IPV6_TOKEN}*:{_IPV6_TOKEN}*", _check_ipv6
    ),
    RegexDetector("ip", f"{B}[0-9]+(?:\\.[0-9]+)+{B}", _check_ipv4),
)
