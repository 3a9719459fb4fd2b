"""Traffic splits: callers who name no alias or version are sent to aliases by weight.

`forgeml prompts split qa stable=90 canary=10` stores a split of prompt `qa`: a request
through the gateway that names the prompt alone draws `stable` nine times in ten and
`canary` once, and renders the version that alias points at when it is drawn (moving an
alias moves its share of the traffic with it). Weights are whole percentages summing to
100, over two or more aliases of the prompt. Setting and clearing a split append an audit
event in the transaction that writes it, as alias moves do.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from forgeml.core.errors import NotFoundError, UsageError
from forgeml.core.ids import validate_alias, validate_name
from forgeml.core.store import PromptSplitRecord
from forgeml.core.workspace import Workspace
from forgeml.prompts.registry import aliases_of, records_of

TOTAL = 100  # weights are percentages


@dataclass(frozen=True)
class PromptSplit:
    """Prompt `name`'s aliases and their weights in percent (summing to `TOTAL`)."""

    name: str
    weights: tuple[tuple[str, int], ...]

    def draw(self, rng: random.Random) -> str:
        """An alias, each with probability weight / 100 (one `randrange` of `rng`)."""
        point = rng.randrange(TOTAL)
        for alias, weight in self.weights:
            if point < weight:
                return alias
            point -= weight
        return self.weights[-1][0]  # unreachable while the weights sum to TOTAL

    def as_dict(self) -> dict[str, int]:
        return dict(self.weights)

    def __str__(self) -> str:
        return " ".join(f"{alias}={weight}" for alias, weight in self.weights)


def parse_weights(items: list[str]) -> dict[str, int]:
    """`ALIAS=WEIGHT` items as a mapping (checked by `set_split`).

    Raises:
        UsageError: an item is not ALIAS=WEIGHT with a whole number, or repeats an alias.
    """
    weights: dict[str, int] = {}
    for item in items:
        alias, sep, weight = item.partition("=")
        if not sep or not alias or not weight.strip().isdigit():
            raise UsageError(
                f"Invalid split '{item}': give ALIAS=WEIGHT, a weight in whole percent "
                "(e.g. stable=90 canary=10)."
            )
        if alias in weights:
            raise UsageError(f"The split names alias '{alias}' twice.")
        weights[alias] = int(weight)
    return weights


def set_split(workspace: Workspace, name: str, weights: Mapping[str, int]) -> PromptSplit:
    """Replace prompt `name`'s split with `weights` (alias -> percent).

    Raises:
        InvalidNameError: `name` is not a plain identifier.
        UsageError: fewer than two aliases, a weight outside 1..99, or a sum other than 100.
        NotFoundError: no such prompt, or an alias it does not have.
        OtherProjectError: the prompt belongs to another project.
    """
    validate_name(name, "prompt name")
    _check(weights)
    with workspace.store.session() as session:
        # the prompt exists, in the project acted in
        workspace.check_own("Prompt", name, records_of(session, name)[0].project)
        known = aliases_of(session, name)
        for alias in weights:
            if alias not in known:
                listed = ", ".join(sorted(known)) or "none"
                raise NotFoundError(
                    f"Prompt '{name}' has no alias '{alias}' (its aliases: {listed}); "
                    "point one with `forgeml prompts alias` first."
                )
        previous = _split(session, name)
        session.execute(delete(PromptSplitRecord).where(PromptSplitRecord.name == name))
        now = datetime.now(UTC)
        for alias, weight in sorted(weights.items()):
            session.add(PromptSplitRecord(name=name, alias=alias, weight=weight, updated_at=now))
        session.flush()
        split = PromptSplit(name, tuple(sorted(weights.items())))
        payload = {"split": split.as_dict(), "previous": previous and previous.as_dict()}
        workspace.audit(session, "prompt.split", name, payload)
        return split


def clear_split(workspace: Workspace, name: str) -> PromptSplit | None:
    """Remove prompt `name`'s split; the split removed (None: it had none, nothing written).

    Raises:
        NotFoundError: no such prompt.
        OtherProjectError: the prompt belongs to another project.
    """
    validate_name(name, "prompt name")
    with workspace.store.session() as session:
        workspace.check_own("Prompt", name, records_of(session, name)[0].project)
        previous = _split(session, name)
        if previous is None:
            return None
        session.execute(delete(PromptSplitRecord).where(PromptSplitRecord.name == name))
        payload = {"split": None, "previous": previous.as_dict()}
        workspace.audit(session, "prompt.split", name, payload)
        return previous


def get_split(workspace: Workspace, name: str) -> PromptSplit | None:
    """Prompt `name`'s split, or None when it has none.

    Raises:
        InvalidNameError: `name` is not a plain identifier.
    """
    validate_name(name, "prompt name")
    with workspace.store.session() as session:
        return _split(session, name)


def _check(weights: Mapping[str, int]) -> None:
    if len(weights) < 2:
        raise UsageError("A split needs two or more aliases, e.g. stable=90 canary=10.")
    for alias, weight in weights.items():
        validate_alias(alias, max_length=128)
        if not 0 < weight < TOTAL:
            raise UsageError(
                f"The weight of alias '{alias}' is {weight}; give each alias 1 to 99 percent."
            )
    total = sum(weights.values())
    if total != TOTAL:
        raise UsageError(f"The split's weights sum to {total}; they must sum to {TOTAL}.")


def _split(session: Session, name: str) -> PromptSplit | None:
    rows = session.scalars(
        select(PromptSplitRecord)
        .where(PromptSplitRecord.name == name)
        .order_by(PromptSplitRecord.alias)
    ).all()
    return PromptSplit(name, tuple((row.alias, row.weight) for row in rows)) if rows else None
