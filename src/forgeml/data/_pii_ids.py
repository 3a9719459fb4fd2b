"""National identity numbers that `data redact` finds: each scheme's shape and its check.

Every scheme is validated by its published check (check digits, dates, issuing rules), most
of them by python-stdnum, the maintained library of standard number formats, so a number
of the right shape with a wrong check digit is left alone.

A scheme is either found in any text (`region=None`): its written form is distinctive (a
fixed layout of separators or letters, or 15+ digits that embed a date and check digits),
or only under its country's `--region` hint: a bare run of 9-12 digits with one check digit
passes by chance once in about ten, and is as likely an order number or a phone number of
another country.

`(?-u:\\b)` is an ASCII word boundary: digits written right after CJK text (`身份证号1101...`)
still start a candidate, as a Unicode `\\b` would not see a boundary between two word
characters there.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module

B = "(?-u:\\b)"

# GB/T 2260 province-level codes, the first two digits of a resident identity number
# (83: residence permits of Hong Kong, Macao and Taiwan residents).
_CN_PROVINCES = frozenset(
    {"11", "12", "13", "14", "15", "21", "22", "23", "31", "32", "33", "34", "35", "36"}
    | {"37", "41", "42", "43", "44", "45", "46", "50", "51", "52", "53", "54", "61", "62"}
    | {"63", "64", "65", "71", "81", "82", "83"}
)
_NINO_BAD_PREFIXES = frozenset({"BG", "GB", "KN", "NK", "NT", "TN", "ZZ"})


@dataclass(frozen=True)
class NationalId:
    """One identity number scheme: a candidate pattern and the check that confirms it."""

    scheme: str  # python-stdnum's module name where it has one, e.g. "cn.ric"
    pattern: str
    is_valid: Callable[[str], bool]
    region: str | None = None  # None: found in any text; else only with this --region


def _stdnum(module: str) -> Callable[[str], bool]:
    def is_valid(number: str) -> bool:
        # stdnum's modules are imported on first use: 20 of them cost ~0.1 s to import.
        checked: bool = import_module(f"stdnum.{module}").is_valid(number)
        return checked

    return is_valid


def cn_ric_is_valid(number: str) -> bool:
    """China's 18-digit resident identity number (GB 11643-1999).

    The ISO 7064 MOD 11-2 check digit, a real birth date (years 1900-2099: no clock, so a
    redaction rebuilds to the same result on any day) and a province-level region code.
    stdnum's `cn.ric` also requires the 6-digit county to have existed in the birth year,
    which rejects real numbers registered under codes renamed since; a redactor must not.
    """
    from stdnum.iso7064 import mod_11_2

    number = number.upper()
    if len(number) != 18 or not number[:17].isdigit() or number[:2] not in _CN_PROVINCES:
        return False
    try:
        born = datetime.date(int(number[6:10]), int(number[10:12]), int(number[12:14]))
    except ValueError:
        return False
    return 1900 <= born.year <= 2099 and bool(mod_11_2.is_valid(number))


def gb_nino_is_valid(number: str) -> bool:
    """UK National Insurance number; python-stdnum has no module for it.

    HMRC: the first letter is not D F I Q U V, the second not D F I O Q U V, and the pairs
    BG GB KN NK NT TN ZZ are never issued; the suffix is A-D.
    """
    compact = number.replace(" ", "")
    first, second = compact[0], compact[1]
    return (
        first not in "DFIQUV"
        and second not in "DFIOQUV"
        and compact[:2] not in _NINO_BAD_PREFIXES
        and compact[-1] in "ABCD"
    )


_CF_DIGIT = "[0-9LMNPQRSTUV]"  # codice fiscale digits; letters stand in where homonyms collide
_CODICE_FISCALE = (
    f"[A-Z]{{6}}{_CF_DIGIT}{{2}}[A-EHLMPR-T]{_CF_DIGIT}{{2}}[A-Z]{_CF_DIGIT}{{3}}[A-Z]"
)


def _word(pattern: str) -> str:
    # A leading `+` is taken so that the check can refuse it: `+918916143361` is a phone.
    return f"\\+?{B}(?:{pattern}){B}"


NATIONAL_IDS: tuple[NationalId, ...] = (
    NationalId("us.ssn", _word(r"[0-9]{3}-[0-9]{2}-[0-9]{4}"), _stdnum("us.ssn")),
    NationalId(
        "gb.nino", _word(r"[A-Z]{2} ?[0-9]{2} ?[0-9]{2} ?[0-9]{2} ?[A-D]"), gb_nino_is_valid
    ),
    NationalId("es.dni", _word(r"[0-9]{8}-?[A-Z]"), _stdnum("es.dni")),
    NationalId("es.nie", _word(r"[XYZ][0-9]{7}-?[A-Z]"), _stdnum("es.nie")),
    NationalId("cn.ric", _word(r"[0-9]{17}[0-9Xx]"), cn_ric_is_valid),
    NationalId("it.codicefiscale", _word(_CODICE_FISCALE), _stdnum("it.codicefiscale")),
    NationalId(
        "fr.nir",
        _word(r"[1-478] ?[0-9]{2} ?[0-9]{2} ?(?:[0-9]{2}|2[AB]) ?[0-9]{3} ?[0-9]{3} ?[0-9]{2}"),
        _stdnum("fr.nir"),
    ),
    NationalId("br.cpf", _word(r"[0-9]{3}\.[0-9]{3}\.[0-9]{3}-[0-9]{2}"), _stdnum("br.cpf")),
    NationalId("ch.ssn", _word(r"756\.[0-9]{4}\.[0-9]{4}\.[0-9]{2}"), _stdnum("ch.ssn")),
    NationalId("fi.hetu", _word(r"[0-9]{6}[-+A-FU-Y][0-9]{3}[0-9A-Y]"), _stdnum("fi.hetu")),
    NationalId("se.personnummer", _word(r"[0-9]{6}[-+][0-9]{4}"), _stdnum("se.personnummer")),
    # Bare digit runs: only where the data's country is known.
    NationalId("br.cpf", _word(r"[0-9]{11}"), _stdnum("br.cpf"), "BR"),
    NationalId(
        "in_.aadhaar", _word(r"[2-9][0-9]{3} ?[0-9]{4} ?[0-9]{4}"), _stdnum("in_.aadhaar"), "IN"
    ),
    NationalId("pl.pesel", _word(r"[0-9]{11}"), _stdnum("pl.pesel"), "PL"),
    NationalId("nl.bsn", _word(r"[0-9]{9}|[0-9]{4}\.[0-9]{2}\.[0-9]{3}"), _stdnum("nl.bsn"), "NL"),
    NationalId(
        "de.idnr", _word(r"[0-9]{2} ?[0-9]{3} ?[0-9]{3} ?[0-9]{3}"), _stdnum("de.idnr"), "DE"
    ),
    NationalId("no.fodselsnummer", _word(r"[0-9]{6} ?[0-9]{5}"), _stdnum("no.fodselsnummer"), "NO"),
    NationalId("jp.in_", _word(r"[0-9]{4}[ -]?[0-9]{4}[ -]?[0-9]{4}"), _stdnum("jp.in_"), "JP"),
)


def check(scheme: NationalId) -> Callable[[str, str], str | None]:
    """The detector check of `scheme`: the mask where the number is valid, else None."""

    def check_match(match: str, mask: str) -> str | None:
        return mask if not match.startswith("+") and scheme.is_valid(match) else None

    return check_match


def national_ids(region: str | None) -> list[NationalId]:
    """The schemes searched for: the distinctive ones, and the bare ones of `region`."""
    return [scheme for scheme in NATIONAL_IDS if scheme.region in (None, region)]
