"""Serving a fairness-mitigated version: its group thresholds over the model's answers.

A bundle with `fairness_thresholds.json` (`forgeml.train.thresholds`, written by
`forgeml models mitigate`) is the original model plus per-group decision rules. Its rows
are the model's own (the sensitive column is one of its input fields); the encoder also
hands the decoder each row's group and draw, and the decoder turns the model's
positive-class probability into the mitigated one: `probabilities` [1 - q, q] and the
`label` the draw picks.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from forgeml.core.errors import ConfigError
from forgeml.train.thresholds import GroupThresholds, RowDecisions, load_thresholds

if TYPE_CHECKING:
    from forgeml.serve.inputs import RowEncoder
    from forgeml.train.models import AnswerDecoder

# beside the model's input arrays: the runtime takes only its own inputs by name
GROUP_ARRAY = "fairness_group"
DRAW_ARRAY = "fairness_draw"


class ThresholdedEncoder:
    """The model's own encoder, plus each row's group and draw."""

    def __init__(self, inner: RowEncoder, thresholds: GroupThresholds) -> None:
        self.inner = inner
        self.thresholds = thresholds
        self.fields = inner.fields
        self.scalar_rows = inner.scalar_rows

    def check(self, rows: list[Any]) -> None:
        """The model's checks, then: every row's group has thresholds."""
        self.inner.check(rows)
        self.thresholds.check_groups([row[self.thresholds.column] for row in rows])

    def encode(self, rows: list[Any]) -> dict[str, np.ndarray]:
        arrays = self.inner.encode(rows)
        decisions = RowDecisions.of_rows(self.thresholds, rows)
        arrays[GROUP_ARRAY] = np.array(decisions.groups, dtype=object)
        arrays[DRAW_ARRAY] = decisions.draws
        return arrays


class ThresholdedAnswers:
    """The model's class answers with the groups' thresholds applied."""

    def __init__(
        self, inner: AnswerDecoder, thresholds: GroupThresholds, class_names: list[str]
    ) -> None:
        self.inner = inner
        self.thresholds = thresholds
        self.class_names = class_names
        self.outputs = inner.outputs

    def needs(self, outputs: set[str]) -> list[str]:
        return self.inner.needs(outputs | {"probabilities"})

    def decode(self, raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        found = self.inner.decode(raw)
        if "probabilities" not in found:
            return found
        decisions = RowDecisions(self.thresholds, list(raw[GROUP_ARRAY]), raw[DRAW_ARRAY])
        positive, chosen = decisions.decide(found["probabilities"][:, 1])
        found["probabilities"] = np.stack([1 - positive, positive], axis=1).astype(np.float32)
        found["label"] = np.array([self.class_names[int(c)] for c in chosen], dtype=object)
        return found


def with_group_thresholds(
    bundle: Path,
    description: dict[str, Any],
    encoder: RowEncoder | None,
    decoder: AnswerDecoder,
) -> tuple[RowEncoder | None, AnswerDecoder]:
    """The encoder and decoder to serve `bundle` with: thresholded when it has thresholds.

    Raises:
        ConfigError: the bundle has thresholds but is not a binary classifier of rows.
    """
    thresholds = load_thresholds(bundle)
    if thresholds is None:
        return encoder, decoder
    names = [str(name) for name in description.get("class_names") or []]
    if encoder is None or encoder.scalar_rows or len(names) != 2:
        raise ConfigError(
            "The bundle has fairness thresholds but is not a binary classifier of tabular "
            "rows, which is all they apply to."
        )
    return ThresholdedEncoder(encoder, thresholds), ThresholdedAnswers(decoder, thresholds, names)
