from __future__ import annotations

import numpy as np
import pytest

from forgeml.monitor.drift import ReferenceProfile, build_reference, detect_drift, output_frame
from tests.monitor.drift.conftest import mixed_frame


def _classifier_outputs(rows: int, seed: int, positive: float) -> list[dict[str, object]]:
    """`:predict` answers of a binary classifier whose positive share is `positive`."""
    rng = np.random.default_rng(seed)
    p = np.clip(rng.normal(positive, 0.2, rows), 0, 1)
    return [
        {"label": ">50K" if v > 0.5 else "<=50K", "probabilities": {"<=50K": 1 - v, ">50K": v}}
        for v in p.tolist()
    ]


def test_predict_answers_become_label_and_confidence() -> None:
    answers = [
        {"label": "b", "probabilities": {"a": 0.25, "b": 0.75}},
        {"label": "a", "probabilities": {"a": 0.5, "b": 0.5}},
    ]

    frame = output_frame(answers, 2)

    assert frame is not None
    assert frame.to_dict(as_series=False) == {"label": ["b", "a"], "confidence": [0.75, 0.5]}


def test_v2_columns_and_regressor_numbers_are_read_too() -> None:
    v2 = {"label": ["a", "b"], "probabilities": [[0.9, 0.1], [0.2, 0.8]]}

    frame = output_frame(v2, 2)
    numbers = output_frame([1.5, 2.5, None], 3)

    assert frame is not None and frame.to_dict(as_series=False) == {
        "label": ["a", "b"],
        "confidence": [0.9, 0.8],
    }
    assert numbers is None  # a None among a regressor's numbers: not all answered
    regressor = output_frame([1.5, 2.5], 2)
    assert regressor is not None
    assert regressor.to_dict(as_series=False) == {"prediction": [1.5, 2.5]}


@pytest.mark.parametrize(
    "outputs",
    [None, "text", [[0.1, 0.2]], {"embeddings": [[0.1], [0.2]]}, [{"label": "a"}]],
    ids=["none", "a string", "vectors", "embeddings only", "wrong row count"],
)
def test_outputs_without_a_label_or_number_per_row_are_unknown(outputs: object) -> None:
    assert output_frame(outputs, 2) is None


@pytest.mark.parametrize(
    "outputs", [[{"role": "assistant", "content": "hi"}], []], ids=["a chat reply", "nothing"]
)
def test_outputs_of_a_request_with_no_rows_are_unknown(outputs: object) -> None:
    assert output_frame(outputs, 0) is None


def _reference_with_predictions() -> ReferenceProfile:
    answers = output_frame(_classifier_outputs(3_000, seed=1, positive=0.3), 3_000)
    assert answers is not None
    return build_reference(mixed_frame(3_000, seed=1), predictions=build_reference(answers))


def test_answers_like_the_validation_ones_do_not_drift_and_a_swing_does() -> None:
    reference = _reference_with_predictions()
    window = mixed_frame(2_000, seed=2)
    calm = output_frame(_classifier_outputs(2_000, seed=2, positive=0.3), 2_000)
    swung = output_frame(_classifier_outputs(2_000, seed=3, positive=0.6), 2_000)

    still = detect_drift(reference, window, outputs=calm)
    moved = detect_drift(reference, window, outputs=swung)

    assert [r.column for r in still.predictions] == ["label", "confidence"]
    assert not still.predictions_drifted
    assert moved.predictions_drifted
    assert {r.column for r in moved.predictions if r.drifted} >= {"label"}
    assert moved.drifted_columns == []  # the features did not move: only the answers


def test_no_outputs_or_no_reference_predictions_means_no_prediction_drift() -> None:
    plain = build_reference(mixed_frame(1_000, seed=4))
    answers = output_frame(_classifier_outputs(500, seed=4, positive=0.3), 500)

    assert detect_drift(plain, mixed_frame(500, seed=5), outputs=answers).predictions == []
    with_predictions = _reference_with_predictions()
    assert detect_drift(with_predictions, mixed_frame(500, seed=5)).predictions == []
