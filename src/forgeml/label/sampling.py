"""The order items are labelled in: uncertainty sampling, or random as the baseline.

Uncertainty sampling (Settles, "Active Learning Literature Survey", 2009, section 3.1)
labels first the items a model is least sure of, read from its class probabilities P
(one row per item):

- least confidence: 1 - max_c P(c)
- margin: the gap between the two most probable classes (smallest first)
- entropy: -sum_c P(c) log P(c)

Pure functions, no I/O: the task's store code and the benchmark drive them the same way.
Ties keep a random order drawn from `rng`, so equal scores do not favour the file's head.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Strategy = Literal["random", "least-confidence", "margin", "entropy"]
STRATEGIES: tuple[Strategy, ...] = ("random", "least-confidence", "margin", "entropy")


def uncertainty(probabilities: np.ndarray, strategy: Strategy) -> np.ndarray:
    """How uncertain the model is of each item: higher is labelled sooner.

    Args:
        probabilities: shape (items, classes), each row a distribution.
        strategy: one of the uncertainty strategies (not `random`).
    """
    p = np.asarray(probabilities, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] < 2:
        raise ValueError("probabilities must be (items, classes) with at least two classes")
    if strategy == "least-confidence":
        return 1.0 - p.max(axis=1)
    if strategy == "margin":
        top_two = np.sort(p, axis=1)[:, -2:]
        return -(top_two[:, 1] - top_two[:, 0])  # the smallest margin first
    if strategy == "entropy":
        safe = np.clip(p, 1e-12, 1.0)
        return -(p * np.log(safe)).sum(axis=1)
    raise ValueError(f"{strategy!r} is not an uncertainty strategy")


def label_order(
    items: int,
    strategy: Strategy,
    rng: np.random.Generator,
    probabilities: np.ndarray | None = None,
) -> list[int]:
    """Item positions 0..items-1 in the order they are labelled.

    `random` is a permutation drawn from `rng`; an uncertainty strategy sorts by its score,
    most uncertain first, ties in a random order.
    """
    shuffled = rng.permutation(items)
    if strategy == "random":
        return [int(i) for i in shuffled]
    if probabilities is None or len(probabilities) != items:
        raise ValueError(f"{strategy} needs one row of probabilities per item")
    scores = uncertainty(probabilities, strategy)[shuffled]
    ranked = shuffled[np.argsort(-scores, kind="stable")]
    return [int(i) for i in ranked]
