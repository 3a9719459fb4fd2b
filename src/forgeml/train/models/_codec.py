"""Serving's two ends of a model family: raw request rows in, decoded answers out.

A `RowEncoder` checks and encodes the raw rows a model takes (tabular records through the
bundle's own fitted FeatureSpec, the path training took, so serving cannot skew; texts
through the family's tokenizer). An `AnswerDecoder` turns the runtime's raw outputs into
the answers the model's metadata lists. `check` runs per request on the event loop (cheap
type checks, so one bad request fails alone); `encode` and `decode` run per batch in the
batcher's worker thread.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from forgeml.core.errors import InvalidDataError

if TYPE_CHECKING:
    import numpy as np

    from forgeml.data.features import FeatureSpec
    from forgeml.train.models._family import Modality, RequestsFactory, ServedBundle, Tokenizer

# A fast tokenizer must not run in two threads at once (see `load_tokenizer`); two text
# models in one server share the cached one, so their batcher threads take turns.
_TOKENIZER_LOCK = threading.Lock()


@dataclass(frozen=True)
class InputField:
    """One named input or output and its KServe v2 datatype (BYTES, INT64, FP32, FP64, BOOL).

    `shape` is the v2 metadata shape: -1 for the batch and for widths not known before a run.
    An input that is not `required` may be left out of a request (a graph's `tail`).
    """

    name: str
    datatype: str
    shape: tuple[int, ...] = (-1,)
    required: bool = True


class RowEncoder(Protocol):
    """Validates and encodes the raw rows one model takes."""

    fields: list[InputField]
    # True: a row is the value of the one field (a text); False: a dict of the fields
    scalar_rows: bool

    def check(self, rows: list[Any]) -> None:
        """Raise InvalidDataError (one sentence) if a row is not one the model takes."""
        ...

    def encode(self, rows: list[Any]) -> dict[str, np.ndarray]:
        """Arrays named as the runtime's inputs, one row each."""
        ...


class AnswerDecoder(Protocol):
    """Raw runtime outputs -> the answers a request can ask for."""

    outputs: list[InputField]  # every answer, as the model's metadata lists them

    def needs(self, outputs: set[str]) -> list[str]:
        """The raw outputs to run for the requested answers."""
        ...

    def decode(self, raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The answers the raw outputs give.

        `raw` holds the runtime's outputs and, beside them, the encoded request arrays
        (a decoder whose answer depends on the request, a top k, reads them there).
        """
        ...


# --- requests ---------------------------------------------------------------------------


def v2_datatype(dtype: Any) -> str:
    """The KServe v2 datatype a raw column of polars `dtype` is sent as."""
    if dtype.is_integer():
        return "INT64"
    if dtype.is_float():
        return "FP32" if str(dtype) == "Float32" else "FP64"
    if str(dtype) == "Boolean":
        return "BOOL"
    return "BYTES"


def _fits(value: Any, datatype: str) -> bool:
    if value is None:
        return True  # nulls are encoded as training encoded them
    if datatype == "BYTES":
        return isinstance(value, str)
    if datatype == "BOOL":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if datatype == "INT64":
        return isinstance(value, int)
    return isinstance(value, int | float)


_TYPE_WORDS = {
    "BYTES": "a string",
    "BOOL": "true or false",
    "INT64": "an integer",
    "FP32": "a number",
    "FP64": "a number",
}


class TabularEncoder:
    """Records (dicts of raw fields) -> `features` float32 [N, F] through the FeatureSpec."""

    scalar_rows = False

    def __init__(self, spec: FeatureSpec) -> None:
        from forgeml.data.features import record_encoder

        self.spec = spec
        self.fields = [
            InputField(name, v2_datatype(spec.input_schema[name])) for name in spec.input_columns
        ]
        self._types = {field.name: field.datatype for field in self.fields}
        self._records = record_encoder(spec)

    def check(self, rows: list[Any]) -> None:
        """Every row is a dict with exactly the spec's input fields, each of its type."""
        expected = ", ".join(self._types)
        for position, row in enumerate(rows):
            if not isinstance(row, dict):
                raise InvalidDataError(
                    f"Instance {position} is {type(row).__name__}, not an object of raw fields "
                    f"({expected})."
                )
            extra = [name for name in row if name not in self._types]
            if extra:
                raise InvalidDataError(
                    f"Instance {position} has field '{extra[0]}', which the model does not "
                    f"take (fields: {expected})."
                )
            missing = [name for name in self._types if name not in row]
            if missing:
                raise InvalidDataError(
                    f"Instance {position} has no field '{missing[0]}', which the model needs "
                    f"(fields: {expected})."
                )
            for name, datatype in self._types.items():
                if not _fits(row[name], datatype):
                    raise InvalidDataError(
                        f"Field '{name}' of instance {position} is {row[name]!r} but must be "
                        f"{_TYPE_WORDS[datatype]} or null."
                    )

    def encode(self, rows: list[Any]) -> dict[str, np.ndarray]:
        """The spec's transform of the rows, its numeric columns as float32 [N, F]."""
        return {"features": self._records.encode(rows)}


class TextEncoder:
    """Texts -> the tokenizer's int64 arrays [N, T] (padded to the batch's longest text)."""

    scalar_rows = True

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.fields = [InputField("text", "BYTES")]

    def check(self, rows: list[Any]) -> None:
        """Every row is a string."""
        for position, row in enumerate(rows):
            if not isinstance(row, str):
                raise InvalidDataError(
                    f"Instance {position} is {type(row).__name__}, but this text model takes "
                    "strings."
                )

    def encode(self, rows: list[Any]) -> dict[str, np.ndarray]:
        """The tokenizer's tensors as arrays."""
        with _TOKENIZER_LOCK:
            tensors = self.tokenizer(list(rows))
        return {name: tensor.numpy() for name, tensor in tensors.items()}


def tabular_requests(bundle: ServedBundle) -> RowEncoder | None:
    """Records through the FeatureSpec training applied (the bundle's feature_spec.json).

    None (no rows) for a bundle without one.
    """
    import orjson

    from forgeml.data.features import FeatureSpec

    path = bundle.directory / "feature_spec.json"
    if not path.exists():
        return None
    return TabularEncoder(FeatureSpec.from_dict(orjson.loads(path.read_bytes())))


def text_requests(bundle: ServedBundle) -> RowEncoder | None:
    """Texts through the family's tokenizer, restored from the bundle."""
    return TextEncoder(bundle.tokenizer())


def default_requests(modality: Modality) -> RequestsFactory | None:
    """The request encoder a modality has unless its family brings one (None: no rows)."""
    found: dict[str, RequestsFactory] = {"tabular": tabular_requests, "text": text_requests}
    return found.get(modality)


# --- answers ----------------------------------------------------------------------------


class ClassAnswers:
    """Logits [N, C] -> `probabilities` (softmax) and `label` (the most probable class)."""

    def __init__(self, class_names: list[str], extra: list[str]) -> None:
        self.class_names = class_names
        self.extra = extra  # raw outputs answered as they are (e.g. `embeddings`)
        width = len(class_names) or -1
        self.outputs = [
            InputField("probabilities", "FP32", (-1, width)),
            InputField("label", "BYTES"),
            *(InputField(name, "FP32", (-1, -1)) for name in extra),
        ]

    def needs(self, outputs: set[str]) -> list[str]:
        """`logits` for probabilities or label, plus the extra outputs asked for."""
        needed = ["logits"] if outputs & {"probabilities", "label"} else []
        return needed + [name for name in self.extra if name in outputs]

    def decode(self, raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Probabilities and labels from `logits`; extra outputs passed through."""
        import numpy as np

        found = {name: raw[name] for name in self.extra if name in raw}
        if "logits" in raw:
            logits = raw["logits"]
            shifted = logits - logits.max(axis=1, keepdims=True)  # stable softmax
            exp = np.exp(shifted)
            probabilities = (exp / exp.sum(axis=1, keepdims=True)).astype(np.float32)
            names = self.class_names or [str(i) for i in range(logits.shape[1])]
            labels = np.array([names[int(i)] for i in probabilities.argmax(axis=1)], dtype=object)
            found.update(probabilities=probabilities, label=labels)
        return found


class NumberAnswers:
    """Logits [N] or [N, 1] -> `prediction` float32 [N]."""

    def __init__(self, extra: list[str]) -> None:
        self.extra = extra
        self.outputs = [
            InputField("prediction", "FP32"),
            *(InputField(name, "FP32", (-1, -1)) for name in extra),
        ]

    def needs(self, outputs: set[str]) -> list[str]:
        """`logits` for the prediction, plus the extra outputs asked for."""
        needed = ["logits"] if "prediction" in outputs else []
        return needed + [name for name in self.extra if name in outputs]

    def decode(self, raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The first logit of each row as the prediction; extra outputs passed through."""
        import numpy as np

        found = {name: raw[name] for name in self.extra if name in raw}
        if "logits" in raw:
            logits = raw["logits"]
            found["prediction"] = logits.reshape(len(logits), -1)[:, 0].astype(np.float32)
        return found


class NoAnswers:
    """A model that answers no rows (a language model generates instead)."""

    def __init__(self) -> None:
        self.outputs: list[InputField] = []

    def needs(self, outputs: set[str]) -> list[str]:
        return []

    def decode(self, raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {}


def task_answers(bundle: ServedBundle) -> AnswerDecoder:
    """Answers from the bundle's task: a class and its probabilities, or a number."""
    extra = [name for name in bundle.family.outputs if name != "logits"]
    task = bundle.description["task"]
    if task == "classification":
        names = bundle.description.get("class_names") or []
        return ClassAnswers([str(name) for name in names], extra)
    if task == "regression":
        return NumberAnswers(extra)
    return NoAnswers()
