"""A labelling task's schema and the check every label passes before it is stored.

Three kinds of label: `classes` (one class per item), `spans` (character ranges of a text
column, each with a class: named-entity style) and `boxes` (rectangles on an image column,
in pixels, each with a class). A label is stored in its normal form, so two annotators who
gave the same answer compare equal (agreement, majority vote).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from forgeml.core.errors import InvalidLabelError

LabelKind = Literal["classes", "spans", "boxes"]


class LabelSchema(BaseModel):
    """What annotators give for each item."""

    model_config = ConfigDict(extra="forbid")

    kind: LabelKind = Field("classes", description="classes, spans (of text) or boxes (on images).")
    classes: list[str] = Field(
        min_length=1, description="The classes a label (or each span or box) may take."
    )
    column: str | None = Field(
        None,
        description="The column annotators read: the text that spans index, the image that "
        "boxes cover; needed for spans and boxes.",
    )

    @model_validator(mode="after")
    def _column_for_regions(self) -> LabelSchema:
        if self.kind != "classes" and self.column is None:
            raise ValueError(f"a {self.kind} schema names the column its labels refer to")
        if len(set(self.classes)) != len(self.classes):
            raise ValueError("classes must be distinct")
        return self


class _Span(BaseModel):
    model_config = ConfigDict(extra="forbid")

    start: int = Field(ge=0)
    end: int = Field(gt=0)
    label: str


class _Box(BaseModel):
    model_config = ConfigDict(extra="forbid")

    x: float = Field(ge=0)
    y: float = Field(ge=0)
    width: float = Field(gt=0)
    height: float = Field(gt=0)
    label: str


def check_label(schema: LabelSchema, value: Any, item: dict[str, Any] | None = None) -> Any:
    """`value` in its normal form, if the schema allows it for `item` (the row labelled).

    Classes: a class name. Spans: a list of `{start, end, label}` within the item's text,
    sorted. Boxes: a list of `{x, y, width, height, label}`, sorted.

    Raises:
        InvalidLabelError: one sentence saying what is outside the schema.
    """
    if schema.kind == "classes":
        return _check_class(schema, value)
    if not isinstance(value, list):
        raise InvalidLabelError(f"A {schema.kind} label is a list of {schema.kind}, not {value!r}.")
    model = _Span if schema.kind == "spans" else _Box
    try:
        regions = [model.model_validate(part) for part in value]
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidLabelError(
            f"A {schema.kind[:-1]} of the label is invalid at '{where}': {first['msg']}."
        ) from None
    for region in regions:
        _check_class(schema, region.label)
    if schema.kind == "spans":
        _check_spans(schema, [r for r in regions if isinstance(r, _Span)], item)
    normal = [region.model_dump() for region in regions]
    return sorted(normal, key=lambda r: [str(r[k]) for k in sorted(r)])


def _check_class(schema: LabelSchema, value: Any) -> str:
    if (
        not isinstance(value, str | int)
        or isinstance(value, bool)
        or str(value) not in schema.classes
    ):
        raise InvalidLabelError(
            f"Label {value!r} is not one of the task's classes ({', '.join(schema.classes)})."
        )
    return str(value)


def _check_spans(schema: LabelSchema, spans: list[_Span], item: dict[str, Any] | None) -> None:
    text = None if item is None or schema.column is None else item.get(schema.column)
    for span in spans:
        if span.end <= span.start:
            raise InvalidLabelError(f"A span ends ({span.end}) before it starts ({span.start}).")
        if isinstance(text, str) and span.end > len(text):
            raise InvalidLabelError(
                f"A span ends at {span.end}, past the {len(text)} characters of its text."
            )
