"""Curve previews: each ended run's metric curves, LTTB-downsampled when the run ended, so a
chart's first view reads a few thousand points a run instead of every logged value.

A preview is a cache of MLflow's curve, never the record: it holds the metric's latest value
as MLflow kept it when the preview was made (step, timestamp, value, is_nan), and a reader
uses it only while MLflow's latest value is still that one.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Float, ForeignKey, Integer, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from forgeml.core.store._models import Base


class CurvePreviewRecord(Base):
    """One metric of one ended run, downsampled: its steps and values as little-endian
    int64 and float64 bytes (`points` of them at most; all `length` when no more)."""

    __tablename__ = "curve_previews"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id"), primary_key=True)
    # MLflow's metric keys are at most 250 characters
    key: Mapped[str] = mapped_column(String(250), primary_key=True)
    # MLflow's latest value of the metric when the preview was made (`latest_metrics`)
    step: Mapped[int] = mapped_column(BigInteger)
    timestamp: Mapped[int] = mapped_column(BigInteger)
    value: Mapped[float] = mapped_column(Float(precision=53))
    is_nan: Mapped[bool] = mapped_column(Boolean)
    # the LTTB threshold it was made with, and how many values the curve had then
    points: Mapped[int] = mapped_column(Integer)
    length: Mapped[int] = mapped_column(Integer)
    steps: Mapped[bytes] = mapped_column(LargeBinary)
    values: Mapped[bytes] = mapped_column(LargeBinary)
