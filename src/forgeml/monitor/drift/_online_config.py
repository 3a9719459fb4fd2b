"""The typed options of the online detectors: how rarely they may cry wolf, and what they
are tuned to catch.

Both take the false-alarm rate as the expected run length (ARL): the mean number of rows
(or labelled predictions) between two false alarms on data like the reference. 10,000
means one false alarm per 10,000 rows on average; a larger ARL buys fewer false alarms
with a longer delay.
"""

from __future__ import annotations

from pydantic import Field

from forgeml.monitor.drift._options import Options, RunLength


class OnlineDriftConfig(Options):
    """The online feature-drift detector: a two-sided CUSUM per numeric feature."""

    run_length: RunLength = Field(
        description="Expected rows between false alarms (ARL) on data like the reference.",
    )
    shift: float = Field(
        default=0.5,
        gt=0,
        le=5,
        description="The mean shift, in reference standard deviations, detected fastest "
        "(the CUSUM's reference value k is half of it).",
    )
    clip: float = Field(
        default=4.0,
        ge=1,
        le=100,
        description="Standardised values are clipped to +-clip, so one outlier alone "
        "cannot raise an alarm.",
    )
    calibration_runs: int = Field(
        default=500,
        ge=50,
        le=100_000,
        description="Simulated in-control runs that calibrate the threshold (the ARL it "
        "gives is within about 1/sqrt(runs) of the one set).",
    )
    seed: int = Field(default=0, description="Seed of the calibration.")


class ConceptDriftConfig(Options):
    """The concept-drift detector: a Bernoulli CUSUM on a stream of 0/1 prediction errors."""

    run_length: RunLength = Field(
        description="Expected labelled predictions between false alarms (ARL) while the "
        "error rate stays at its in-control level.",
    )
    odds_ratio: float = Field(
        default=2.0,
        gt=1,
        le=100,
        description="The rise in the odds of an error detected fastest (2: the odds double).",
    )
    warmup: int = Field(
        default=1000,
        ge=30,
        le=1_000_000,
        description="Predictions that estimate the in-control error rate before the detector "
        "watches (again after every alarm); the estimate is refined at 2x, 4x, ... warmup.",
    )
