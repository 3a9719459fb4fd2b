"""Group-specific decision thresholds of a fairness-mitigated binary classifier, as JSON.

fairlearn's `ThresholdOptimizer` (Hardt et al. 2016) learns, per group of a sensitive
column, two threshold rules on the positive-class probability and the probability of
using each; equalized odds also mixes in a constant prediction (`p_ignore`). Its fitted
state is a pickle-only object, so `forgeml.governance.fairness` copies the rules
(`interpolated_thresholder_.interpolation_dict`) into `GroupThresholds`, saved as
`fairness_thresholds.json` beside the model's own files. Serving (`forgeml.serve.thresholds`)
and the mitigation's evaluation read that file and apply the rules here, as fairlearn's
`_pmf_predict` does: the positive label's probability for a row of group g with score s is

    q = p_ignore * constant + (1 - p_ignore) * (p0 * [s op0 t0] + p1 * [s op1 t1])

and the predicted label is positive when the row's draw u (uniform in [0, 1)) is below q.
A served row's draw is a hash of its raw fields, so the same row always gets the same answer.

`RowDecisions` is that decision for a batch of rows, shared by the server and by every
scorer of a bundle (`forgeml.train.evaluate`, through `split_decisions`): a split's row is
scored as the row a client sends, its model input fields as the dataset holds them, so a
mitigated version is measured on the very decisions it serves.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from forgeml.core.atomic import atomic_write_text
from forgeml.core.errors import ConfigError, InvalidDataError

if TYPE_CHECKING:
    from forgeml.train.task import SplitData

THRESHOLDS_FILE = "fairness_thresholds.json"
FORMAT_VERSION = 1
# scores are probabilities in [0, 1]: fairlearn's infinite thresholds (always / never) hold
# exactly with these finite stand-ins, which JSON can carry
_ALWAYS, _NEVER = -1.0, 2.0
# the group a missing sensitive cell belongs to, as `forgeml.train.data` reports slices
NULL_SLICE = "__null__"


def group_label(value: Any) -> str:
    """A sensitive field's value as the group it was learnt under: the text polars casts a
    split's slice cell to (missing: `NULL_SLICE`, booleans `true`/`false`, NaN `NaN`), so a
    served row's group is the training split's."""
    if value is None:
        return NULL_SLICE
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return str(value)


@dataclass(frozen=True)
class ThresholdRule:
    """`score > threshold` or `score < threshold`."""

    operator: str  # ">" or "<"
    threshold: float

    def apply(self, scores: np.ndarray) -> np.ndarray:
        return scores > self.threshold if self.operator == ">" else scores < self.threshold


@dataclass(frozen=True)
class GroupRule:
    """One group's mixture of two threshold rules (and of a constant, for equalized odds)."""

    p0: float
    rule0: ThresholdRule
    p1: float
    rule1: ThresholdRule
    p_ignore: float = 0.0
    constant: float = 0.0

    def positive_probability(self, scores: np.ndarray) -> np.ndarray:
        mixed = self.p0 * self.rule0.apply(scores) + self.p1 * self.rule1.apply(scores)
        return self.p_ignore * self.constant + (1 - self.p_ignore) * mixed


@dataclass(frozen=True)
class GroupThresholds:
    """The rules of every group of one sensitive column, and how they were learnt."""

    column: str
    constraint: str
    objective: str
    groups: dict[str, GroupRule]

    def positive_probability(self, scores: np.ndarray, groups: Sequence[str]) -> np.ndarray:
        """The positive label's probability of each row (its score and its group).

        Raises:
            InvalidDataError: a row's group is not one the rules were learnt for.
        """
        labels = np.asarray([group_label(group) for group in groups], dtype=object)
        self.check_groups(labels)
        found = np.zeros(len(labels), dtype=np.float64)
        scores = np.asarray(scores, dtype=np.float64)
        for group, rule in self.groups.items():
            rows = labels == group
            found[rows] = rule.positive_probability(scores[rows])
        return found

    def check_groups(self, groups: Iterable[Any]) -> None:
        """Raise InvalidDataError (one sentence) for a group without rules."""
        for position, group in enumerate(groups):
            if group_label(group) not in self.groups:
                known = ", ".join(sorted(self.groups))
                raise InvalidDataError(
                    f"Instance {position} has {self.column} {group_label(group)!r}, a group the "
                    f"fairness thresholds were not learnt for (groups: {known})."
                )

    def save(self, bundle_dir: Path) -> Path:
        """Write the rules as `fairness_thresholds.json` in `bundle_dir` (atomically)."""
        payload = {"format_version": FORMAT_VERSION, **asdict(self)}
        path = Path(bundle_dir) / THRESHOLDS_FILE
        atomic_write_text(path, json.dumps(payload, indent=2, sort_keys=True))
        return path


@dataclass(frozen=True)
class RowDecisions:
    """Each row's group and draw: what its thresholded decision needs beside its score."""

    thresholds: GroupThresholds
    groups: list[str]
    draws: np.ndarray  # float64 [N], uniform in [0, 1)

    @classmethod
    def of_rows(
        cls, thresholds: GroupThresholds, rows: Sequence[Mapping[str, Any]]
    ) -> RowDecisions:
        """The groups and draws of raw rows (dicts of a model's input fields).

        Raises:
            InvalidDataError: a row's group is not one the rules were learnt for.
        """
        groups = [group_label(row.get(thresholds.column)) for row in rows]
        thresholds.check_groups(groups)
        draws = np.array([row_draw(row) for row in rows], dtype=np.float64)
        return cls(thresholds, groups, draws)

    def decide(self, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The positive label's probability q of each row (of its positive-class score) and
        whether the row is labelled positive (its draw is below q)."""
        positive = self.thresholds.positive_probability(scores, self.groups)
        return positive, self.draws < positive


def split_decisions(bundle_dir: Path, split: SplitData) -> RowDecisions | None:
    """The decisions of the bundle's group thresholds on `split` (None: it has none).

    A split's row is decided as the model server decides the row a client sends: the
    model's input fields (its FeatureSpec's `input_columns`) as the dataset holds them.

    Raises:
        ConfigError: the bundle has thresholds but `split` holds no raw tabular rows, or
            the bundle no feature spec naming its input fields.
        InvalidDataError: a row's group is not one the rules were learnt for.
    """
    thresholds = load_thresholds(bundle_dir)
    if thresholds is None:
        return None
    spec_file = Path(bundle_dir) / "feature_spec.json"
    if split.rows is None or not spec_file.is_file():
        raise ConfigError(
            "The bundle has fairness thresholds but its data has no raw tabular rows with "
            "a feature spec, which is all the thresholds can decide on."
        )
    from forgeml.data.features import FeatureSpec

    fields = FeatureSpec.from_dict(json.loads(spec_file.read_text())).input_columns
    return RowDecisions.of_rows(thresholds, split.rows.select(fields).to_dicts())


def load_thresholds(bundle_dir: Path) -> GroupThresholds | None:
    """The bundle's group thresholds, or None for a bundle without them."""
    path = Path(bundle_dir) / THRESHOLDS_FILE
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    groups = {
        str(name): GroupRule(
            p0=float(rule["p0"]),
            rule0=ThresholdRule(**rule["rule0"]),
            p1=float(rule["p1"]),
            rule1=ThresholdRule(**rule["rule1"]),
            p_ignore=float(rule["p_ignore"]),
            constant=float(rule["constant"]),
        )
        for name, rule in data["groups"].items()
    }
    return GroupThresholds(data["column"], data["constraint"], data["objective"], groups)


def from_interpolation(
    column: str, constraint: str, objective: str, interpolation: Mapping[Any, Any]
) -> GroupThresholds:
    """`GroupThresholds` from a fitted ThresholdOptimizer's `interpolation_dict`."""
    groups = {}
    for group, found in interpolation.items():
        groups[str(group)] = GroupRule(
            p0=float(found["p0"]),
            rule0=_rule(found["operation0"]),
            p1=float(found["p1"]),
            rule1=_rule(found["operation1"]),
            p_ignore=float(found.get("p_ignore", 0.0)),
            constant=float(found.get("prediction_constant", 0.0)),
        )
    return GroupThresholds(column, constraint, objective, groups)


def _rule(operation: Any) -> ThresholdRule:
    threshold = float(operation.threshold)
    if math.isinf(threshold):
        threshold = _ALWAYS if threshold < 0 else _NEVER
    return ThresholdRule(str(operation.operator), threshold)


def row_draw(row: Mapping[str, Any]) -> float:
    """A uniform number in [0, 1) that is a function of the row's raw fields."""
    text = json.dumps(row, sort_keys=True, default=str, ensure_ascii=False)
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64
