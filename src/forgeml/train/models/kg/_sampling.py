"""Negative sampling: corrupt the head or the tail of true triples with uniform entities.

As in the authors' code for RotatE (Sun et al., ICLR 2019), batches alternate between
corrupting tails and corrupting heads, and every positive gets its own negatives. Unlike
that code, a negative is not checked against the true triples: drawn uniformly from E
entities it is one with probability (known answers of the query) / E, a fraction of a
percent on WordNet, and the check costs a set lookup per negative.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch

from forgeml.train.models.kg._embedding import Predict


@dataclass(frozen=True)
class NegativeBatch:
    """True triples and, per triple, entities that replace its `corrupt` side."""

    positives: torch.Tensor  # long [B, 3]: head, relation, tail ids
    negatives: torch.Tensor  # long [B, K]: entity ids
    corrupt: Predict


def corrupt(
    positives: torch.Tensor,
    num_entities: int,
    negatives: int,
    side: Predict,
    generator: torch.Generator,
) -> NegativeBatch:
    """`negatives` uniform entity ids per triple of `positives` [B, 3] for its `side`."""
    ids = torch.randint(num_entities, (positives.shape[0], negatives), generator=generator)
    return NegativeBatch(positives, ids, side)


def negative_batches(
    triples: torch.Tensor,
    num_entities: int,
    batch_size: int,
    negatives: int,
    generator: torch.Generator,
) -> Iterator[NegativeBatch]:
    """Endless batches of `triples` [N, 3]: a new shuffle each epoch, tail then head corruption.

    The last batch of an epoch may be smaller than `batch_size`.
    """
    sides: tuple[Predict, Predict] = ("tail", "head")
    step = 0
    while True:
        order = torch.randperm(triples.shape[0], generator=generator)
        for start in range(0, triples.shape[0], batch_size):
            batch = triples[order[start : start + batch_size]]
            yield corrupt(batch, num_entities, negatives, sides[step % 2], generator)
            step += 1
