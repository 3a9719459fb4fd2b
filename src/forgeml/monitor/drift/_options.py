"""What the drift option sets share: a strict, frozen model and the bounds their fields repeat.

Each field still declares its own default and description (the YAML key, the CLI's help);
the bounds here are those that two or more fields or option sets hold to.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class Options(BaseModel):
    """Options read from a user's YAML or flags: an unknown key is refused, and nothing
    changes them once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# a share of values, columns or rows, or a distance bounded by 1 (Jensen-Shannon, base 2)
Share = Annotated[float, Field(gt=0, le=1)]
# the expected run length between two false alarms, in rows or labelled predictions
RunLength = Annotated[int, Field(ge=10, le=10_000_000)]
