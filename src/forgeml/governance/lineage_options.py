"""How far a lineage walk goes: the fields the CLI's options and the API's query share.

Kept apart from `lineage` (networkx, SQLAlchemy) so that the CLI reads its help from
these fields without loading either at start-up.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

Direction = Literal["up", "down", "both"]
DIRECTIONS: tuple[Direction, ...] = get_args(Direction)
# what `lineage_draw` writes: an image (matplotlib) or Graphviz DOT text
PictureFormat = Literal["svg", "png", "dot"]


class LineageOptions(BaseModel):
    """How far `lineage` walks from its reference."""

    model_config = ConfigDict(extra="forbid")

    depth: int | None = Field(
        None, ge=0, description="Follow at most this many links from REF (default: all)."
    )
    direction: Direction = Field(
        "both",
        description="up: what REF was made from; down: what used it; both (the default).",
    )
