from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from forgeml.monitor.drift import (
    ConceptDriftConfig,
    DriftConfig,
    OnlineDriftConfig,
    ReferenceOptions,
)

REQUIRED: dict[type[BaseModel], dict[str, Any]] = {
    ReferenceOptions: {},
    DriftConfig: {},
    OnlineDriftConfig: {"run_length": 1_000},
    ConceptDriftConfig: {"run_length": 1_000},
}


@pytest.mark.parametrize("options", list(REQUIRED))
def test_every_option_set_refuses_an_unknown_key_and_is_frozen(options: type[BaseModel]) -> None:
    made = options(**REQUIRED[options])

    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        options(**REQUIRED[options], window=3)
    with pytest.raises(ValidationError, match="frozen"):
        made.seed = 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("field", ["js_threshold", "null_share_threshold", "dataset_drift_share"])
def test_a_share_lies_in_zero_to_one_one_included(field: str) -> None:
    assert getattr(DriftConfig(**{field: 1.0}), field) == 1.0
    for outside in (0.0, 1.01):
        with pytest.raises(ValidationError, match=field):
            DriftConfig(**{field: outside})


@pytest.mark.parametrize("options", [OnlineDriftConfig, ConceptDriftConfig])
def test_a_run_length_lies_in_ten_to_ten_million(
    options: type[OnlineDriftConfig | ConceptDriftConfig],
) -> None:
    assert options(run_length=10).run_length == 10
    assert options(run_length=10_000_000).run_length == 10_000_000
    for outside in (9, 10_000_001):
        with pytest.raises(ValidationError, match="run_length"):
            options(run_length=outside)
