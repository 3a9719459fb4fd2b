"""Keyset pages for every list route: `?limit=&after=&sort=&order=`, one shape.

A page holds at most `limit` items (1..`MAX_LIMIT`; more is a 422) in `sort` order, ties
broken by each item's unique key, and the next page starts strictly after the last item's
(sort value, key): rows added or removed meanwhile never make a page skip or repeat one, as
OFFSET does, and the database reads one index range per page however deep it is.

The cursor (`after`) is opaque to clients: base64url of the sort it was made under and the
last item's sort value and key. A cursor that does not decode, or that was made under
another sort or order, is a 422.

The body is the list exactly as the CLI's `--json` prints it, so the CLI's remote mode can
print it unchanged; the next page comes in `Link: <URL>; rel="next"` (RFC 8288) and in
`X-Next-Cursor`, both absent on the last page.
"""

import base64
import binascii
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

import orjson
from fastapi import Query, Request, Response
from sqlalchemy import DateTime, Select, and_, or_

from forgeml.core.errors import InvalidRequestError

MAX_LIMIT = 500
DEFAULT_LIMIT = 100
NEXT_HEADER = "X-Next-Cursor"

T = TypeVar("T")
S = TypeVar("S", bound="Select[*tuple[Any, ...]]")


@dataclass(frozen=True)
class Page:
    """One page asked for: its size, its order, and where the previous page ended."""

    limit: int
    sort: str
    descending: bool
    after: tuple[Any, Any] | None = None  # (sort value, key) of the previous page's last item

    def cursor(self, value: Any, key: Any) -> str:
        """The opaque cursor of the page that follows an item with `value` and `key`."""
        if isinstance(value, datetime):
            value = value.isoformat()
        raw = orjson.dumps([self.sort, self.descending, value, key])
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def pages(sortable: Sequence[str], default: str, *, descending: bool = False) -> Any:
    """A route dependency that reads a `Page` from the query, sortable on `sortable` fields."""
    pattern = "^(" + "|".join(sortable) + ")$"
    default_order = "desc" if descending else "asc"

    def page(
        limit: Annotated[
            int, Query(ge=1, le=MAX_LIMIT, description=f"Items per page (at most {MAX_LIMIT}).")
        ] = DEFAULT_LIMIT,
        after: Annotated[
            str | None,
            Query(max_length=1024, description="The cursor of the previous page's end."),
        ] = None,
        sort: Annotated[str, Query(pattern=pattern, description="The field to sort on.")] = default,
        order: Annotated[
            str, Query(pattern="^(asc|desc)$", description="asc or desc.")
        ] = default_order,
    ) -> Page:
        wanted = Page(limit=limit, sort=sort, descending=order == "desc")
        if after is None:
            return wanted
        return Page(limit, sort, wanted.descending, _decode(after, wanted))

    return page


def _decode(cursor: str, page: Page) -> tuple[Any, Any]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        sort, descending, value, key = orjson.loads(raw)
    except (binascii.Error, ValueError, TypeError):
        raise InvalidRequestError(
            "query.after: not a cursor this API gave (pass the X-Next-Cursor of the last page)."
        ) from None
    if isinstance(key, list):  # a composite key travels as a JSON array
        key = tuple(key)
    if sort != page.sort or descending != page.descending:
        raise InvalidRequestError(
            f"query.after: the cursor belongs to sort={sort} order="
            f"{'desc' if descending else 'asc'}; ask with the same sort and order."
        )
    return value, key


def keyset(query: S, page: Page, columns: Mapping[str, Any], key: Any) -> S:
    """`query` ordered by the page's sort column (then `key`, a unique column), limited to
    one item more than the page (so `finish` knows whether a next page exists), and started
    after the cursor.

    The sort columns must not hold NULLs: a NULL compares as neither before nor after.
    """
    column = columns[page.sort]
    if page.after is not None:
        value, last = page.after
        if isinstance(column.type, DateTime) and isinstance(value, str):
            value = _datetime(value)
        if page.descending:
            query = query.where(or_(column < value, and_(column == value, key < last)))
        else:
            query = query.where(or_(column > value, and_(column == value, key > last)))
    if page.descending:
        query = query.order_by(column.desc(), key.desc())
    else:
        query = query.order_by(column.asc(), key.asc())
    return query.limit(page.limit + 1)


def _datetime(value: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidRequestError("query.after: not a cursor this API gave.") from None
    # the store keeps UTC; SQLite hands it back without its zone
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def finish(
    rows: Sequence[T], page: Page, position: Callable[[T], tuple[Any, Any]]
) -> tuple[list[T], str | None]:
    """The page's rows (`keyset` fetched one more) and the next page's cursor, if any."""
    if len(rows) <= page.limit:
        return list(rows), None
    kept = list(rows[: page.limit])
    return kept, page.cursor(*position(kept[-1]))


def in_memory(
    items: Sequence[T], page: Page, position: Callable[[T, str], tuple[Any, Any]]
) -> tuple[list[T], str | None]:
    """One page of `items` that come from outside the metadata store (MLflow, small lists),
    with the same cursors as `keyset`. `position(item, sort)` is its (sort value, key);
    NULL sort values come first in ascending order."""

    def order(item: T) -> tuple[bool, Any, Any]:
        value, key = position(item, page.sort)
        return (value is not None, _comparable(value), key)

    ordered = sorted(items, key=order, reverse=page.descending)
    if page.after is not None:
        value, last = page.after
        mark = (value is not None, _comparable(value), last)
        try:
            ordered = [
                item
                for item in ordered
                if (order(item) < mark if page.descending else order(item) > mark)
            ]
        except TypeError:
            raise InvalidRequestError("query.after: not a cursor this API gave.") from None
    return finish(ordered, page, lambda item: position(item, page.sort))


def _comparable(value: Any) -> Any:
    # datetimes travel in cursors as ISO strings, which sort as the datetimes do (all UTC)
    if isinstance(value, datetime):
        return value.isoformat()
    return 0 if value is None else value


def link(request: Request, response: Response, cursor: str | None) -> None:
    """Name the next page in `response`'s headers (nothing on the last page)."""
    if cursor is None:
        return
    url = request.url.include_query_params(after=cursor)
    response.headers[NEXT_HEADER] = cursor
    response.headers["Link"] = f'<{url}>; rel="next"'
