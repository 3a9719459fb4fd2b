"""Labels that arrive after the prediction: one row per labelled request row.

A row joins the label to what the model server answered: the request id, the row's
position in its request, the served name (a deployment's or a model's), the model
version that answered, the row's features as sent (after the request log's redaction)
and the prediction (`{"label", "confidence"}` for a classifier, `{"value"}` for a
regressor). `(model, request_id, row)` is unique: a label sent again replaces the first.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from forgeml.core.store._models import Base, utcnow


class FeedbackRecord(Base):
    """One labelled prediction."""

    __tablename__ = "feedback"
    __table_args__ = (UniqueConstraint("model", "request_id", "row"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    # the served name: a deployment's name, or the model's when served on its own
    model: Mapped[str] = mapped_column(String(128), index=True)
    model_ref: Mapped[str] = mapped_column(String(256))
    request_id: Mapped[str] = mapped_column(String(128))
    row: Mapped[int] = mapped_column(Integer)
    predicted_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    features: Mapped[dict[str, Any]] = mapped_column(JSON)
    prediction: Mapped[dict[str, Any]] = mapped_column(JSON)
    label: Mapped[Any] = mapped_column(JSON)
    # http (the model server's feedback route) or file (`forgeml monitor feedback`)
    source: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
