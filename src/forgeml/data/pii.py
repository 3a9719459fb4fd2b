"""Find and mask personal data (PII) in text columns: `forgeml data redact REF`.

Kinds and the order they run in. Each detector sees the text left by the ones before it,
so a more specific pattern must run before a looser one that could eat part of it:

1. `email`        name@domain.tld.
2. `iban`         International Bank Account Numbers, bare or in groups of four, masked
                  only when the country's format and the ISO 13616 mod-97 check digits hold.
                  Before cards and phones, which would read the digits of a grouped IBAN.
3. `national_id`  identity numbers with their checks (`_pii_ids.py`, mostly python-stdnum):
                  US SSN, UK NINO, Spanish DNI/NIE, China's resident identity number,
                  Italian codice fiscale, French NIR, Brazilian CPF, Swiss AHV, Finnish
                  HETU, Swedish personnummer; with `region`, also that country's bare-digit
                  numbers (BR CPF, IN Aadhaar, PL PESEL, NL BSN, DE IdNr, NO
                  fødselsnummer, JP My Number). Before cards: two check digits, a date and
                  a region code are a stricter test than Luhn's one in ten.
4. `credit_card`  12-19 digits, bare or grouped by one kind of separator (space or dash),
                  masked only when the Luhn checksum holds (ISO/IEC 7812-1, annex B).
                  Before phones, which would otherwise read a grouped card number.
5. `ip`           IPv6 (checked by `ipaddress`, so `std::cout` or `12:30:45` are left alone),
                  then IPv4 dotted quads with every octet 0-255 (exactly four parts, so a
                  version string `1.2.3.4.5` is left alone). Before phones, which would
                  read `192.168.100.200` as grouped digits.
6. `phone`        libphonenumber's matcher (international numbers; with `region`, that
                  country's national numbers in any grouping), then the shapes national
                  numbers are written in (`_pii_phone.py`).

`region` is the data's country (ISO 3166-1 alpha-2, e.g. GB): national numbers cannot be
read without it (`07912345678` is a UK mobile, a Brazilian CPF or an order number).
How each detector replaces what it finds without a Python loop over rows: `_pii_match.py`.
"""

from __future__ import annotations

from typing import Any, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, field_validator

from forgeml.core.errors import InvalidDataError
from forgeml.data._frame import RESERVED_COLUMNS, TransformOutput, require_columns, user_columns
from forgeml.data._pii_checks import CREDIT_CARD, EMAIL, IBAN, IP
from forgeml.data._pii_ids import check, national_ids
from forgeml.data._pii_match import CLOSE, MARKERS, OPEN, Detector, RegexDetector
from forgeml.data._pii_phone import PhoneMatcher, phone_shapes

Kind = Literal["email", "iban", "national_id", "credit_card", "ip", "phone"]
KINDS: tuple[Kind, ...] = ("email", "iban", "national_id", "credit_card", "ip", "phone")


def check_region(value: str) -> str:
    """The ISO 3166-1 alpha-2 code `value` names, in capitals.

    Raises:
        ValueError: libphonenumber has no numbering plan for it (one sentence).
    """
    from phonenumbers import SUPPORTED_REGIONS

    code = value.strip().upper()
    if code in SUPPORTED_REGIONS:
        return code
    hint = " (the United Kingdom is GB)" if code == "UK" else ""
    raise ValueError(
        f"unknown region '{value}'{hint}: give an ISO 3166-1 alpha-2 country code "
        "such as GB, US, DE or CN."
    )


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
        description="Kinds of PII to mask: email, iban, national_id, credit_card, ip, phone.",
    )
    mask: str = Field(
        default="[{KIND}]",
        description="Replacement text; '{KIND}' becomes the kind in capitals, e.g. [EMAIL].",
    )
    region: str | None = Field(
        default=None,
        description="The data's country, ISO 3166-1 alpha-2 (GB, US, CN...): also find its "
        "national phone numbers and bare-digit national IDs; default: international numbers "
        "and distinctive IDs only.",
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
        if OPEN in value or CLOSE in value:
            raise ValueError("the mask must not contain the characters U+FDD0 or U+FDD1")
        return value

    @field_validator("region")
    @classmethod
    def _known_region(cls, value: str | None) -> str | None:
        return None if value is None else check_region(value)


def _detectors(region: str | None) -> list[Detector]:
    ids: list[Detector] = [
        RegexDetector("national_id", scheme.pattern, check(scheme))
        for scheme in national_ids(region)
    ]
    return [EMAIL, IBAN, *ids, CREDIT_CARD, *IP, PhoneMatcher(region), phone_shapes(region)]


# Every detector's match holds a digit, an `@` (e-mail) or a colon (IPv6 `fe80::ab`), or is
# a codice fiscale, whose digits may all be letters (omocodia): a cell with none of these is
# left as it is by every detector, so only the cells with one are scanned.
CANDIDATE_CELL = r"[0-9@:]|[A-Z]{6}[0-9A-Z]{2}[A-EHLMPR-T]"


def redact_cells(series: pl.Series, params: RedactParams) -> tuple[pl.Series, dict[str, int]]:
    """Run every detector of `params` over every cell of `series` (the plain path)."""
    counts: dict[str, int] = {}
    for detector in _detectors(params.region):
        if detector.kind not in params.kinds:
            continue
        kind_mask = params.mask.replace("{KIND}", detector.kind.upper())
        series, found = detector.redact(series, kind_mask)
        if found:
            counts[detector.kind] = counts.get(detector.kind, 0) + found
    return series, counts


def _redact_series(series: pl.Series, params: RedactParams) -> tuple[pl.Series, dict[str, int]]:
    # Text corpora are mostly cells without a digit (97% of SST-2's): 19 regex passes over
    # the few that have one, instead of over all.
    candidates = series.str.contains(CANDIDATE_CELL).fill_null(False)
    if candidates.all():
        return redact_cells(series, params)
    positions = candidates.arg_true()
    redacted, counts = redact_cells(series.gather(positions), params)
    return series.clone().scatter(positions, redacted), counts


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
    """Mask e-mails, IBANs, national IDs, card numbers, IP addresses and phone numbers.

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
        if series.str.contains(MARKERS).any():
            raise InvalidDataError(
                f"column '{name}' holds the Unicode noncharacters U+FDD0 or U+FDD1, which "
                "redact uses as internal markers; remove them before redacting."
            )
        series, column_counts = _redact_series(series, params)
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
