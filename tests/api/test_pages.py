"""Keyset pages: walking every page in SQL (`keyset`) and in memory (`in_memory`) gives the
plain sorted list, each row once, whatever the ties, page size, sort and order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Column, DateTime, Integer, MetaData, String, Table, create_engine, select

from forgeml.api._pages import Page, _decode, finish, in_memory, keyset
from forgeml.core.errors import InvalidRequestError

_META = MetaData()
_ITEMS = Table(
    "items", _META,
    Column("id", String(8), primary_key=True),
    Column("score", Integer, nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
)  # fmt: skip
_START = datetime(2026, 12, 1, tzinfo=UTC)

rows = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=0, max_size=25
).map(lambda pairs: [
    {"id": f"r{index:03d}", "score": score, "at": _START + timedelta(seconds=second)}
    for index, (score, second) in enumerate(pairs)
])  # fmt: skip


def _walk_sql(engine: Any, sort: str, descending: bool, limit: int) -> list[str]:
    page, seen = Page(limit, sort, descending), []
    with engine.connect() as connection:
        while True:
            found = connection.execute(keyset(select(_ITEMS), page, _ITEMS.c, _ITEMS.c.id)).all()
            kept, cursor = finish(found, page, lambda row: (getattr(row, sort), row.id))
            seen += [row.id for row in kept]
            if cursor is None:
                return seen
            page = Page(limit, sort, descending, _decode(cursor, page))


def _walk_memory(items: list[dict], sort: str, descending: bool, limit: int) -> list[str]:
    page, seen = Page(limit, sort, descending), []
    while True:
        kept, cursor = in_memory(items, page, lambda item, key: (item[key], item["id"]))
        seen += [item["id"] for item in kept]
        if cursor is None:
            return seen
        page = Page(limit, sort, descending, _decode(cursor, page))


@settings(max_examples=40, deadline=None)
@given(
    items=rows,
    sort=st.sampled_from(["score", "at", "id"]),
    descending=st.booleans(),
    limit=st.integers(1, 7),
)
def test_every_page_walk_is_the_sorted_list(
    items: list[dict], sort: str, descending: bool, limit: int
) -> None:
    engine = create_engine("sqlite://")
    _META.create_all(engine)
    if items:
        with engine.begin() as connection:
            connection.execute(_ITEMS.insert(), items)
    expected = [
        item["id"]
        for item in sorted(items, key=lambda item: (item[sort], item["id"]), reverse=descending)
    ]
    assert _walk_sql(engine, sort, descending, limit) == expected
    assert _walk_memory(items, sort, descending, limit) == expected
    engine.dispose()


@pytest.mark.parametrize("cursor", ["", "!!", "W10", "WzEsMiwzXQ", "bm90IGpzb24"])
def test_a_cursor_that_is_not_ours_is_a_422(cursor: str) -> None:
    with pytest.raises(InvalidRequestError, match=r"query\.after"):
        _decode(cursor, Page(10, "score", False))


def test_a_cursor_keeps_its_sort_and_order() -> None:
    page = Page(10, "score", True)
    cursor = page.cursor(3, "r001")
    assert _decode(cursor, page) == (3, "r001")
    with pytest.raises(InvalidRequestError, match="sort=score order=desc"):
        _decode(cursor, Page(10, "score", False))
