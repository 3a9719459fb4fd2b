"""A fitted FeatureSpec as the edge runner's plain steps (features.json).

The runner fills the model's float32 [N, F] input one step per feature, as
`forgeml.data._records.RecordEncoder` does on the server: the same formulas, the same
matrix positions. Features it cannot reproduce exactly are refused at export.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from forgeml.core.errors import OptimizationError

if TYPE_CHECKING:
    from forgeml.data.features import FeatureSpec

_CATEGORICAL = ("onehot", "ordinal", "hash")
SUPPORTED = "standardize, minmax, onehot, ordinal, hash and numeric passthrough"


def _refuse(what: str) -> OptimizationError:
    return OptimizationError(
        f"The model's feature spec has {what}, which the edge runner does not reproduce; "
        f"it reproduces {SUPPORTED} features."
    )


def _step(feature: dict[str, Any], place: Any) -> dict[str, Any]:
    kind, column = feature["kind"], feature["column"]
    if kind == "standardize":
        mean = float(feature["mean"])
        return {"kind": "scaled", "column": column, "fill": mean, "shift": mean,
                "scale": float(feature["std"]), "position": place([column])[0]}  # fmt: skip
    if kind == "minmax":
        span = float(feature["maximum"]) - float(feature["minimum"])
        return {"kind": "scaled", "column": column, "fill": float(feature["mean"]),
                "shift": float(feature["minimum"]), "scale": span or 1.0,
                "position": place([column])[0]}  # fmt: skip
    categories = feature.get("categories") or []
    index = {value: i for i, value in enumerate(categories)}
    if kind == "onehot":
        outputs = [f"{column}={value}" for value in [*categories, "__other__"]]
        return {"kind": "onehot", "column": column, "index": index, "positions": place(outputs)}
    if kind == "ordinal":
        return {"kind": "ordinal", "column": column, "index": index, "position": place([column])[0]}
    if kind == "hash":
        index_output = feature["output"] == "index"
        outputs = [column] if index_output else [f"{column}#{i}" for i in range(feature["buckets"])]
        return {"kind": "hash", "column": column, "buckets": int(feature["buckets"]),
                "index_output": index_output, "positions": place(outputs)}  # fmt: skip
    raise _refuse(f"{kind} features")


def feature_steps(spec: FeatureSpec) -> dict[str, Any]:
    """features.json: the input fields, the matrix width and one step per feature.

    Raises:
        OptimizationError: a feature or column the runner does not reproduce exactly.
    """
    import polars as pl

    from forgeml.data.features import feature_columns

    columns = feature_columns(spec, spec.transform_records([]).schema)
    positions = {name: i for i, name in enumerate(columns)}
    placed: list[int] = []

    def place(names: list[str]) -> list[int]:
        if any(name not in positions for name in names):
            raise _refuse("an output column the model input does not keep")
        placed.extend(positions[name] for name in names)
        return [positions[name] for name in names]

    features = spec.to_dict()["features"]
    for feature in features:
        if feature["kind"] in _CATEGORICAL and spec.input_schema[feature["column"]] != pl.String:
            raise _refuse(f"a categorical feature on the non-string column '{feature['column']}'")
    steps = [_step(feature, place) for feature in features]
    for name in spec.passthrough:
        if name in positions:
            dtype = spec.input_schema[name]
            if not (dtype.is_numeric() or dtype == pl.Boolean):
                raise _refuse(f"the non-numeric passthrough column '{name}'")
            steps.append({"kind": "passthrough", "column": name, "position": place([name])[0]})
    if sorted(placed) != list(range(len(columns))):
        raise _refuse("model-input columns its steps do not fill exactly once")
    return {"inputs": spec.input_columns, "width": len(columns), "steps": steps}
