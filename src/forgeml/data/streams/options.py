"""The options of one stream window (pydantic only: the CLI reads its help from here)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class StreamOptions(BaseModel):
    """How long a window stays open and how its payloads become rows."""

    model_config = ConfigDict(extra="forbid")

    max_records: int = Field(
        1000, ge=1, description="Close the window after this many new records."
    )
    max_seconds: float = Field(60.0, gt=0, description="Close the window after this many seconds.")
    payload: Literal["auto", "json", "bytes"] = Field(
        "auto",
        description="json: each message is a JSON object whose fields become columns; bytes: "
        "each message is kept whole in a binary 'payload' column; auto: json when every "
        "message of the window is a JSON object, else bytes.",
    )
