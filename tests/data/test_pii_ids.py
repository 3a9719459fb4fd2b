from __future__ import annotations

import polars as pl
import pytest
from stdnum.iso7064 import mod_11_2

from forgeml.data._pii_ids import NATIONAL_IDS, cn_ric_is_valid
from forgeml.data.pii import RedactParams, apply


def redact_ids(text: str, region: str | None = None) -> str:
    frame = pl.DataFrame({"text": [text]})
    params = RedactParams(kinds=["national_id"], region=region)
    return apply(frame, params).frame.item(0, "text")


def with_check_digit(body: str) -> str:
    return body + mod_11_2.calc_check_digit(body)


# (scheme, valid, the same with its check digit or letter changed, region it needs)
SCHEMES = [
    ("us.ssn", "536-90-4399", "078-05-1120", None),
    ("gb.nino", "AB 12 34 56 C", "GB 12 34 56 C", None),
    ("es.dni", "54362315K", "54362315Z", None),
    ("es.nie", "X2482300W", "X2482300A", None),
    ("cn.ric", "11010519491231002X", "110105194912310021", None),
    ("it.codicefiscale", "RCCMNL83S18D969H", "RCCMNL83S18D969J", None),
    ("fr.nir", "2 95 10 99 126 111 93", "2 95 10 99 126 111 94", None),
    ("br.cpf", "390.533.447-05", "390.533.447-06", None),
    ("ch.ssn", "756.9217.0769.85", "756.9217.0769.84", None),
    ("fi.hetu", "131052-308T", "131052-308U", None),
    ("se.personnummer", "880320-0016", "880320-0018", None),
    ("br.cpf", "39053344705", "39053344706", "BR"),
    ("in_.aadhaar", "2341 2341 2346", "2341 2341 2347", "IN"),
    ("pl.pesel", "44051401359", "44051401358", "PL"),
    ("nl.bsn", "1112.22.333", "1112.52.333", "NL"),
    ("de.idnr", "36 574 261 809", "36 574 261 890", "DE"),
    ("no.fodselsnummer", "151086 95088", "151086 95077", "NO"),
    ("jp.in_", "6214 9832 0257", "6214 9832 0258", "JP"),
]


def test_every_scheme_has_a_case() -> None:
    assert {scheme.scheme for scheme in NATIONAL_IDS} == {case[0] for case in SCHEMES}


@pytest.mark.parametrize(("scheme", "valid", "wrong", "region"), SCHEMES)
def test_a_valid_number_is_masked_and_a_wrong_check_is_not(
    scheme: str, valid: str, wrong: str, region: str | None
) -> None:
    assert redact_ids(f"id {valid}, thanks", region) == "id [NATIONAL_ID], thanks"
    assert redact_ids(f"id {wrong}, thanks", region) == f"id {wrong}, thanks"


@pytest.mark.parametrize(
    ("number", "region"),
    [
        ("39053344705", "BR"),
        ("2341 2341 2346", "IN"),
        ("44051401359", "PL"),
        ("111222333", "NL"),
        ("36574261809", "DE"),
        ("15108695088", "NO"),
        ("621498320257", "JP"),
    ],
)
def test_bare_digit_numbers_need_their_region(number: str, region: str) -> None:
    assert redact_ids(f"ref {number} ok") == f"ref {number} ok"
    assert redact_ids(f"ref {number} ok", "GB") == f"ref {number} ok"
    assert redact_ids(f"ref {number} ok", region) == "ref [NATIONAL_ID] ok"


def test_a_number_after_a_plus_sign_is_a_phone_not_an_id() -> None:
    assert redact_ids("call +918916143361", "IN") == "call +918916143361"


@pytest.mark.parametrize(
    ("number", "valid"),
    [
        ("11010519491231002X", True),
        ("11010519491231002x", True),
        (with_check_digit("36042619910101007"), True),
        (with_check_digit("99010519491231002"), False),  # no province 99
        (with_check_digit("11010519491331002"), False),  # month 13
        (with_check_digit("11010519490229002"), False),  # 29 February 1949
        (with_check_digit("11010518491231002"), False),  # born 1849
        ("110105194912310021", False),  # wrong check digit
        ("11010519491231002", False),  # 17 digits
    ],
)
def test_chinese_resident_id_checks_province_date_and_mod_11_2(number: str, valid: bool) -> None:
    assert cn_ric_is_valid(number) is valid


def test_chinese_resident_id_next_to_cjk_text_is_masked() -> None:
    text = "身份证号11010519491231002X，电话另附。"
    assert redact_ids(text) == "身份证号[NATIONAL_ID]，电话另附。"


def test_county_codes_renamed_since_birth_are_still_masked() -> None:
    # Faker's zh_CN numbers, valid but for counties stdnum's cn.ric dates after the birth year.
    from stdnum.cn import ric

    number = "610403197405156043"
    assert not ric.is_valid(number)
    assert redact_ids(f"ID {number}") == "ID [NATIONAL_ID]"
