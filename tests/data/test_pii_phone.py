from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forgeml.data._pii_phone import PhoneMatcher, mask_numbers
from forgeml.data.pii import RedactParams, apply, redact_cells


def redact(text: str, region: str | None = None) -> str:
    frame = pl.DataFrame({"text": [text]})
    return apply(frame, RedactParams(region=region)).frame.item(0, "text")


@pytest.mark.parametrize(
    "number",
    ["07912345678", "07123456789", "09061701461", "08712300220", "02079460958", "020 7946 0958"],
)
def test_uk_national_numbers_are_masked_with_region_gb(number: str) -> None:
    assert redact(f"call {number} now!", "GB") == "call [PHONE] now!"
    assert redact(f"txt WIN to {number}.", "gb") == "txt WIN to [PHONE]."


@pytest.mark.parametrize("number", ["07912345678", "09061701461"])
def test_a_bare_national_number_needs_the_region(number: str) -> None:
    assert redact(f"call {number} now") == f"call {number} now"
    assert redact(f"call {number} now", "US") == f"call {number} now"


@pytest.mark.parametrize(
    "number",
    [
        "+44 7912 345678",
        "+447912345678",
        "+44 (0)20 7946 0958",
        "+86 138 9141 7776",
        "+8613891417776",
        "+49 151 12345678",
        "+49 30 901820",
        "+33 1 42 68 53 00",
        "+81 3-1234-5678",
        "+91 98765 43210",
    ],
)
def test_international_numbers_are_masked_without_a_region(number: str) -> None:
    assert redact(f"reach me on {number}, thanks") == "reach me on [PHONE], thanks"
    assert redact(f"reach me on {number}, thanks", "GB") == "reach me on [PHONE], thanks"


@pytest.mark.parametrize(
    ("text", "region", "expected"),
    [
        ("请拨打13891417776联系我", "CN", "请拨打[PHONE]联系我"),
        ("電話番号は090-1234-5678です。", "JP", "電話番号は[PHONE]です。"),
        ("Ruf 0151 12345678 an", "DE", "Ruf [PHONE] an"),
        ("appelez le 0142685300", "FR", "appelez le [PHONE]"),
        ("office 555-123-4567x123 or", None, "office [PHONE] or"),
        ("office (555) 123-4567 ext. 12 or", None, "office [PHONE] or"),
        ("call 555-123-4567 2 times", None, "call [PHONE] 2 times"),
        ("call 212-555-0199 2 times", "US", "call [PHONE] 2 times"),
    ],
)
def test_national_numbers_in_text(text: str, region: str | None, expected: str) -> None:
    assert redact(text, region) == expected


SENTENCES_WITH_NUMBERS = [
    "it 's a 2 stars movie at best , and 1999 's worst",
    "scores 10 20 30 40 50 and 1 234 567 viewers",
    "the 1990-2000 decade , 9/11 , 24/7 , 21/2 hours",
    "it cost $1,234.56 or 3,000,000 dollars in 2002",
    "born 15.01.2023 , released 09.06.2003 , shot 2023-01-15 at 12:30:45",
    "ISBN 978-1-06-960271-8 and 978-3-16-148410-0 , barcode 4006381333931",
    "text WIN to 87121 or call 999",
    "version 1.2.3.4.5 , pi 3.14159265 , 2,500 extras",
]


@pytest.mark.parametrize("region", [None, "GB", "US", "DE", "IT", "CN", "JP", "FR", "IN", "BR"])
def test_sentences_with_numbers_but_no_pii_are_left_alone(region: str | None) -> None:
    frame = pl.DataFrame({"text": SENTENCES_WITH_NUMBERS})
    output = apply(frame, RedactParams(region=region))
    assert output.frame["text"].to_list() == SENTENCES_WITH_NUMBERS
    assert output.report["total"] == 0


def test_the_local_3_4_shape_is_a_phone_only_in_north_america() -> None:
    assert redact("〒123-4567 東京都", "JP") == "〒123-4567 東京都"
    assert redact("call 555-1234 now", "US") == "call [PHONE] now"
    assert redact("call 555-1234 now") == "call [PHONE] now"


def test_short_codes_are_not_masked() -> None:
    assert mask_numbers("call 999 or 87121", "GB", "[P]") == ("call 999 or 87121", 0)


def test_mask_numbers_counts_each_number() -> None:
    text = "07912345678 or +44 20 7946 0958"
    assert mask_numbers(text, "GB", "[P]") == ("[P] or [P]", 2)
    assert mask_numbers(text, None, "[P]") == ("07912345678 or [P]", 1)


def matcher_on_every_cell(
    texts: list[str | None], region: str | None
) -> tuple[list[str | None], int]:
    out: list[str | None] = []
    total = 0
    for text in texts:
        if text is None:
            out.append(None)
            continue
        masked, found = mask_numbers(text, region, "[P]")
        out.append(masked)
        total += found
    return out, total


def assert_prefilter_changes_nothing(texts: list[str | None], region: str | None) -> None:
    series, found = PhoneMatcher(region).redact(pl.Series(texts, dtype=pl.String), "[P]")
    assert (series.to_list(), found) == matcher_on_every_cell(texts, region)


TEXT = st.text(
    alphabet=st.sampled_from(list("0123456789 0789-.()/+x\n٣０＋ext电话aZ:")),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(texts=st.lists(st.one_of(TEXT, st.none()), max_size=6))
def test_phone_prefilter_equals_the_matcher_on_every_cell(texts: list[str | None]) -> None:
    for region in (None, "GB", "CN", "DE"):
        assert_prefilter_changes_nothing(texts, region)


@pytest.fixture(scope="module")
def faker_sentences() -> list[str]:
    from faker import Faker

    sentences = []
    for locale in ("en_GB", "de_DE", "zh_CN", "en_US", "fr_FR"):
        fake = Faker(locale)
        fake.seed_instance(7)
        for _ in range(40):
            sentences.append(f"call {fake.phone_number()} on {fake.date()} for {fake.pricetag()}")
            sentences.append(f"{fake.sentence()} {fake.msisdn()} {fake.ean13()} {fake.year()}")
    return sentences


@pytest.mark.parametrize("region", [None, "GB", "CN"])
def test_phone_prefilter_equals_the_matcher_on_real_and_generated_text(
    shared_data: Path, faker_sentences: list[str], region: str | None
) -> None:
    dev = pl.read_csv(
        shared_data / "sst2" / "dev.tsv", separator="\t", quote_char=None, infer_schema=False
    )
    texts: list[str | None] = [*dev["content"].to_list(), *faker_sentences]
    assert_prefilter_changes_nothing(texts, region)


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(st.one_of(TEXT, st.none()), min_size=1, max_size=6))
def test_cell_prefilter_equals_scanning_every_cell(texts: list[str | None]) -> None:
    frame = pl.DataFrame({"text": pl.Series(texts, dtype=pl.String)})
    for region in (None, "GB"):
        params = RedactParams(region=region)
        output = apply(frame, params)
        plain, counts = redact_cells(frame["text"], params)
        assert output.frame["text"].to_list() == plain.to_list()
        assert output.report["counts"]["text"] == counts


def test_cell_prefilter_equals_scanning_every_cell_on_generated_pii(
    faker_sentences: list[str],
) -> None:
    texts = [*faker_sentences, "no digits here", "IP fe80::ab", "RSSMRALMNLPRLLSL"]
    frame = pl.DataFrame({"text": texts})
    params = RedactParams(region="GB")
    plain, counts = redact_cells(frame["text"], params)
    output = apply(frame, params)
    assert output.frame["text"].to_list() == plain.to_list()
    assert output.report["counts"]["text"] == counts
    assert counts["phone"] > 100
