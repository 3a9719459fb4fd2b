"""The `onnx` family: a model built in another framework, brought in as an ONNX graph.

A scikit-learn pipeline exported by skl2onnx, a Keras model by tf2onnx, a JAX function by
jax2onnx: forgeml cannot train these, but it serves and quantises them like its own ONNX
exports. Everything serving needs is read from the graph itself (`read_graph`): the
inputs' names, element types and shapes become the request fields, the outputs become the
answers, and a classifier's class labels (ai.onnx.ml `classlabels_*`) name its classes.

A graph is checked before anything is registered: tensors only (no ZipMap sequences of
maps), and no external data. ONNX keeps large weights in side files named by a relative
path in the graph; onnx < 1.16 followed `../` and absolute paths out of the model's folder
(CVE-2024-27318, CVE-2024-27319), so a graph naming such a path is refused by name, and
one that names any side file is refused because an import carries one file.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Any

import numpy as np

from forgeml.core.errors import ConfigError, InvalidDataError
from forgeml.train.models._codec import InputField
from forgeml.train.models._family import ModelFamily

if TYPE_CHECKING:
    import onnx

    from forgeml.train.models._family import ServedBundle
    from forgeml.train.task import TaskData

FAMILY_NAME = "onnx"
# ONNX TensorProto element types -> (numpy dtype name, KServe v2 datatype)
_ELEMENTS: dict[int, tuple[str, str]] = {
    1: ("float32", "FP32"),
    11: ("float64", "FP64"),
    7: ("int64", "INT64"),
    6: ("int32", "INT32"),
    9: ("bool", "BOOL"),
    8: ("str", "BYTES"),
}
_KINDS = {"float32": "iuf", "float64": "iuf", "int64": "iu", "int32": "iu", "bool": "b"}


@dataclass(frozen=True)
class GraphTensor:
    """One graph input or output: its name, numpy dtype name, v2 datatype and shape."""

    name: str
    dtype: str
    datatype: str
    shape: tuple[int, ...]  # -1 for a dimension the graph leaves open (the batch)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GraphTensor:
        datatype = {dtype: v2 for dtype, v2 in _ELEMENTS.values()}[data["dtype"]]
        return cls(data["name"], data["dtype"], datatype, tuple(data["shape"]))


@dataclass(frozen=True)
class GraphSignature:
    """What `read_graph` learned: inputs, outputs, opset and class labels (or None)."""

    inputs: list[GraphTensor]
    outputs: list[GraphTensor]
    opset: int
    class_names: list[str] | None


def _escapes(location: str) -> bool:
    """True when an external-data path leaves the model's folder (absolute or `..`)."""
    paths = (PurePosixPath(location), PureWindowsPath(location))
    return any(p.is_absolute() or p.anchor or ".." in p.parts for p in paths)


def _tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Every tensor a graph holds: initializers and node attributes, subgraphs included."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield from (sparse.values, sparse.indices)
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            if attribute.HasField("g"):
                yield from _tensors(attribute.g)
            for subgraph in attribute.graphs:
                yield from _tensors(subgraph)


def check_external_data(model: onnx.ModelProto, name: str) -> None:
    """Refuse a graph whose tensors live in side files (CVE-2024-27318 / CVE-2024-27319).

    Raises:
        InvalidDataError: a tensor names an external file, one outside the folder first.
    """
    locations = [
        entry.value
        for tensor in _tensors(model.graph)
        for entry in tensor.external_data
        if entry.key == "location"
    ]
    escaping = [location for location in locations if _escapes(location)]
    if escaping:
        raise InvalidDataError(
            f"{name} refers to external data at '{escaping[0]}', outside the model's folder "
            "(the path traversal of CVE-2024-27318); it was not imported."
        )
    if locations:
        raise InvalidDataError(
            f"{name} keeps tensors in the external file '{locations[0]}'; import a single "
            "self-contained file (onnx.save(model, path, save_as_external_data=False))."
        )


def _tensor(value: Any, name: str) -> GraphTensor:
    kind = value.type.WhichOneof("value")
    if kind != "tensor_type":
        hint = " (skl2onnx: options={'zipmap': False})" if kind == "sequence_type" else ""
        raise InvalidDataError(
            f"{name}: graph value '{value.name}' is a {kind}, not a tensor; export the model "
            f"with tensor inputs and outputs only{hint}."
        )
    element = value.type.tensor_type.elem_type
    if element not in _ELEMENTS:
        raise InvalidDataError(
            f"{name}: graph value '{value.name}' has ONNX element type {element}, which forgeml "
            "does not serve (float, double, int32, int64, bool, string)."
        )
    dims = value.type.tensor_type.shape.dim
    shape = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in dims)
    dtype, datatype = _ELEMENTS[element]
    return GraphTensor(value.name, dtype, datatype, shape)


def _class_names(model: onnx.ModelProto) -> list[str] | None:
    """The class labels an ai.onnx.ml classifier node declares, as strings."""
    for node in model.graph.node:
        for attribute in node.attribute:
            if attribute.name == "classlabels_strings":
                return [value.decode() for value in attribute.strings]
            if attribute.name == "classlabels_ints":
                return [str(value) for value in attribute.ints]
    return None


def read_graph(path: Path) -> GraphSignature:
    """The signature of the ONNX file at `path`, after the checks above and onnx's own.

    Raises:
        NotFoundError: no file at `path`.
        InvalidDataError: not an ONNX model, external data, or a value forgeml cannot serve.
    """
    import onnx

    from forgeml.core.errors import NotFoundError

    if not path.is_file():
        raise NotFoundError(f"The ONNX file {path} does not exist or is not a file.")
    try:
        model = onnx.load(str(path), load_external_data=False)
        check_external_data(model, path.name)
        onnx.checker.check_model(model)
    except InvalidDataError:
        raise
    except Exception as error:  # onnx raises DecodeError, ValidationError and plain ones
        reason = str(error).splitlines()[0].rstrip(".") if str(error) else type(error).__name__
        raise InvalidDataError(f"{path.name} is not a valid ONNX model: {reason}.") from None
    if not model.graph.input or not model.graph.output:
        raise InvalidDataError(f"{path.name} is an ONNX graph without inputs or outputs.")
    initializers = {tensor.name for tensor in model.graph.initializer}
    inputs = [_tensor(v, path.name) for v in model.graph.input if v.name not in initializers]
    outputs = [_tensor(v, path.name) for v in model.graph.output]
    opset = next((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    return GraphSignature(inputs, outputs, opset, _class_names(model))


def _graph(bundle: ServedBundle, key: str) -> list[GraphTensor]:
    return [GraphTensor.from_dict(item) for item in bundle.description["graph"][key]]


class GraphEncoder:
    """Rows -> one array per graph input: `{name: value}` per row, or the value alone when
    the graph has one input (a feature vector, as a scikit-learn model takes it)."""

    def __init__(self, inputs: list[GraphTensor]) -> None:
        self.inputs = inputs
        self.fields = [InputField(i.name, i.datatype, i.shape) for i in inputs]
        self.scalar_rows = len(inputs) == 1

    def _values(self, row: Any, position: int) -> dict[str, Any]:
        names = [i.name for i in self.inputs]
        if isinstance(row, dict):
            if sorted(row) != sorted(names):
                raise InvalidDataError(
                    f"Instance {position} has fields {', '.join(row) or 'none'} but the model "
                    f"takes {', '.join(names)}."
                )
            return row
        if self.scalar_rows:
            return {names[0]: row}
        raise InvalidDataError(
            f"Instance {position} is {type(row).__name__}; send an object with {', '.join(names)}."
        )

    def _array(self, tensor: GraphTensor, value: Any, position: int) -> np.ndarray:
        where = f"Input '{tensor.name}' of instance {position}"
        try:
            array = np.asarray(value)
        except ValueError:
            raise InvalidDataError(f"{where} is ragged; send a rectangular array.") from None
        expected = tensor.shape[1:]
        fits = len(array.shape) == len(expected) and all(
            want in (-1, got) for want, got in zip(expected, array.shape, strict=True)
        )
        if not fits:
            raise InvalidDataError(
                f"{where} has shape {list(array.shape)} but the model takes {list(expected)} "
                "per row (-1: any)."
            )
        allowed = _KINDS.get(tensor.dtype)
        ok = array.dtype.kind in allowed if allowed else array.dtype.kind == "U" or not array.size
        if not ok:
            raise InvalidDataError(f"{where} holds {array.dtype} values; it takes {tensor.dtype}.")
        return array.astype(tensor.dtype if tensor.dtype != "str" else object)

    def check(self, rows: list[Any]) -> None:
        """Every row has each input, of the graph's type and per-row shape."""
        for position, row in enumerate(rows):
            values = self._values(row, position)
            for tensor in self.inputs:
                self._array(tensor, values[tensor.name], position)

    def encode(self, rows: list[Any]) -> dict[str, np.ndarray]:
        """The rows stacked into one array per input."""
        values = [self._values(row, position) for position, row in enumerate(rows)]
        return {
            tensor.name: np.stack(
                [self._array(tensor, v[tensor.name], p) for p, v in enumerate(values)]
            )
            for tensor in self.inputs
        }


class GraphAnswers:
    """The graph's outputs as they are (integer ones back to integers)."""

    def __init__(self, outputs: list[GraphTensor]) -> None:
        self.graph_outputs = outputs
        self.outputs = [InputField(o.name, o.datatype, o.shape or (-1,)) for o in outputs]

    def needs(self, outputs: set[str]) -> list[str]:
        return [o.name for o in self.graph_outputs if o.name in outputs]

    def decode(self, raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        found = {}
        for tensor in self.graph_outputs:
            if tensor.name in raw:
                value = raw[tensor.name]
                found[tensor.name] = value if tensor.dtype == "str" else value.astype(tensor.dtype)
        return found


def graph_requests(bundle: ServedBundle) -> GraphEncoder:
    """Rows by the graph's inputs (model.json `graph.inputs`)."""
    return GraphEncoder(_graph(bundle, "inputs"))


def graph_answers(bundle: ServedBundle) -> GraphAnswers:
    """Answers by the graph's outputs (model.json `graph.outputs`)."""
    return GraphAnswers(_graph(bundle, "outputs"))


def _not_trainable(task: TaskData, **params: Any) -> Any:
    raise ConfigError(
        "Model 'onnx' is a graph imported from another framework; forgeml serves and "
        "quantises it but cannot train it (train in its own framework and import again)."
    )


FAMILY = ModelFamily(
    name=FAMILY_NAME,
    builder=_not_trainable,
    modality="tabular",
    inputs=(),
    outputs=(),
    requests=graph_requests,
    answers=graph_answers,
    onnx=None,  # it is a graph already: there is nothing to export
)
