"""Agreement between annotators: Cohen's kappa for each pair, Fleiss' kappa for all.

Cohen's kappa (Cohen 1960) is scikit-learn's `cohen_kappa_score`. Fleiss' kappa (Fleiss,
"Measuring nominal scale agreement among many raters", 1971) is computed here from its
definition (statsmodels, which has one, is not a dependency): with n ratings per item,
n_ij the ratings of item i in category j, N items,

    P_i = (sum_j n_ij^2 - n) / (n (n - 1)),   P = mean_i P_i
    p_j = sum_i n_ij / (N n),                 P_e = sum_j p_j^2
    kappa = (P - P_e) / (1 - P_e)

Spans and boxes are compared as whole labels (two annotators agree when they gave the same
regions), the strict reading of nominal agreement.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from itertools import combinations
from typing import Any

import numpy as np

from forgeml.core.errors import InvalidDataError
from forgeml.core.workspace import Workspace
from forgeml.label.tasks import annotations_of, get_task


def fleiss_kappa(counts: np.ndarray) -> float:
    """Fleiss' kappa of a (items, categories) table of rating counts, the same number of
    ratings on every item.

    Raises:
        ValueError: fewer than two ratings per item, or unequal numbers of ratings.
    """
    table = np.asarray(counts, dtype=np.float64)
    ratings = table.sum(axis=1)
    if table.ndim != 2 or len(table) == 0 or not np.all(ratings == ratings[0]) or ratings[0] < 2:
        raise ValueError("every item needs the same number (at least 2) of ratings")
    n = ratings[0]
    per_item = ((table**2).sum(axis=1) - n) / (n * (n - 1))
    observed = per_item.mean()
    shares = table.sum(axis=0) / table.sum()
    expected = float((shares**2).sum())
    if expected == 1.0:
        return 1.0  # every rating in one category: complete agreement, kappa's 0/0
    return float((observed - expected) / (1.0 - expected))


def cohen_kappa(first: list[str], second: list[str]) -> float:
    """Cohen's kappa of two annotators' labels of the same items (scikit-learn's)."""
    from sklearn.metrics import cohen_kappa_score

    if len(set(first) | set(second)) == 1:
        return 1.0  # one category only: complete agreement (scikit-learn answers nan)
    return float(cohen_kappa_score(first, second))


def _category(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def task_agreement(workspace: Workspace, name: str) -> dict[str, Any]:
    """What `label agreement` answers: Cohen's kappa per pair of annotators over the items
    both labelled, and Fleiss' kappa over the items with the task's overlap of labels.

    Raises:
        InvalidDataError: no item has labels from two annotators.
    """
    with workspace.store.session() as session:
        task = get_task(session, name)
        given = [a for a in annotations_of(session, task) if not a.adjudicated]
        overlap = task.overlap
    by_item: dict[int, dict[str, str]] = defaultdict(dict)
    for annotation in given:
        by_item[annotation.item][annotation.annotator] = _category(annotation.value)
    shared = {item: labels for item, labels in by_item.items() if len(labels) >= 2}
    if not shared:
        raise InvalidDataError(
            f"No item of label task '{name}' has labels from two annotators yet, so there is "
            "no agreement to measure."
        )
    return {
        "task": name,
        "items_compared": len(shared),
        "pairs": _pairs(shared),
        "fleiss": _fleiss(shared, overlap),
    }


def _pairs(shared: dict[int, dict[str, str]]) -> list[dict[str, Any]]:
    annotators = sorted({who for labels in shared.values() for who in labels})
    pairs = []
    for first, second in combinations(annotators, 2):
        both = [labels for labels in shared.values() if first in labels and second in labels]
        if not both:
            continue
        a = [labels[first] for labels in both]
        b = [labels[second] for labels in both]
        pairs.append(
            {
                "annotators": [first, second],
                "items": len(both),
                "observed": sum(x == y for x, y in zip(a, b, strict=True)) / len(both),
                "cohen_kappa": cohen_kappa(a, b),
            }
        )
    return pairs


def _fleiss(shared: dict[int, dict[str, str]], overlap: int) -> dict[str, Any] | None:
    # Fleiss' kappa needs the same number of ratings per item: the task's overlap, or the
    # most common count when the labels were imported without one
    counts = Counter(len(labels) for labels in shared.values())
    raters = overlap if overlap >= 2 and overlap in counts else counts.most_common(1)[0][0]
    items = [labels for labels in shared.values() if len(labels) == raters]
    categories = sorted({label for labels in items for label in labels.values()})
    index = {category: j for j, category in enumerate(categories)}
    table = np.zeros((len(items), len(categories)))
    for i, labels in enumerate(items):
        for label in labels.values():
            table[i, index[label]] += 1
    return {"raters": raters, "items": len(items), "kappa": fleiss_kappa(table)}
