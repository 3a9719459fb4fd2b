"""Kernel SHAP over a tabular model's raw fields (Lundberg & Lee 2017, `shap.KernelExplainer`).

A request's fields are the players, not the encoded columns: `education` is one player
though its one-hot encoding is sixteen columns. Masking a field takes all of its encoded
columns from one background row, which is exactly encoding the mixed raw record, because
every FeatureSpec feature reads one input column (`forgeml.data.features`).

So the background and the explained row are encoded once (a "pool" of K + 1 encoded
rows), and a coalition is a row of pool indices, one per field: Kernel SHAP's thousands
of synthetic rows become one numpy gather each, not thousands of records to encode.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from forgeml.core.errors import ConfigError

SAMPLING_SEED = 0  # the coalitions Kernel SHAP samples, the same for every call

if TYPE_CHECKING:
    from forgeml.serve.explain import Explanation
    from forgeml.serve.model import LoadedModel


def column_fields(model: LoadedModel) -> tuple[list[str], np.ndarray]:
    """The raw fields of `model` and, per encoded input column, the index of its field."""
    from forgeml.data.features import feature_columns
    from forgeml.serve.inputs import TabularEncoder

    encoder = model.row_encoder()
    if not isinstance(encoder, TabularEncoder):
        raise ConfigError(f"Model '{model.name}' takes no tabular records to explain.")
    spec = encoder.spec
    fields = [f.name for f in encoder.fields]
    source = {name: e.column for e in spec.encoders for name in e.output_columns()}
    source.update({name: name for name in spec.passthrough})
    columns = feature_columns(spec, spec.transform_records([]).schema)
    return fields, np.array([fields.index(source[name]) for name in columns], dtype=np.int64)


class FieldMasker:
    """Encoded rows of a background (K raw records) and a way to mix them field by field."""

    def __init__(self, model: LoadedModel, background: list[dict[str, Any]]) -> None:
        self.model = model
        self.fields, self.groups = column_fields(model)
        self.background = background
        self.encoded_background = self.encode(background)

    def encode(self, records: list[dict[str, Any]]) -> np.ndarray:
        """Raw records -> the model's `features` matrix [N, F] (its own FeatureSpec)."""
        arrays = self.model.row_encoder().encode(records)
        return np.asarray(arrays["features"], dtype=np.float32)

    def logits(self, features: np.ndarray) -> np.ndarray:
        """The model's raw logits for encoded rows, through the runtime that serves it."""
        return self.model.runtime.run({"features": features}, ["logits"])["logits"]

    def mixed(self, pool: np.ndarray, picks: np.ndarray) -> np.ndarray:
        """Encoded rows [N, F]: field j of row n taken from pool row `picks[n, j]`."""
        rows = picks.astype(np.int64)[:, self.groups]  # [N, F]: the pool row of each column
        return pool[rows, np.arange(pool.shape[1])]

    def codes(self, pool: np.ndarray) -> np.ndarray:
        """Per pool row and field, the first pool row with the same encoded values of that
        field: so a field whose value the row shares with every background row does not
        vary, and Kernel SHAP gives it exactly zero (its dummy-player property)."""
        found = np.empty((len(pool), len(self.fields)), dtype=np.float64)
        for field in range(len(self.fields)):
            values = pool[:, self.groups == field]
            _, first, inverse = np.unique(values, axis=0, return_index=True, return_inverse=True)
            found[:, field] = first[inverse.reshape(-1)]
        return found

    def kernel_shap(self, record: dict[str, Any], samples: int | str = "auto") -> Explanation:
        """Kernel SHAP values of `record`'s fields for its predicted output."""
        import shap

        from forgeml.serve.explain import Attribution, Explanation, sorted_attributions, target_of

        encoded = self.encode([record])
        pool = np.concatenate([self.encoded_background, encoded])  # the row is pool[K]
        k = len(self.encoded_background)
        target = target_of(self.model, self.logits(encoded)[0])

        def output(picks: np.ndarray) -> np.ndarray:
            return target.pick(self.logits(self.mixed(pool, picks)))

        codes = self.codes(pool)
        # l1_reg off: every field keeps its value, so they add up to f(x) - E[f(background)]
        explainer = shap.KernelExplainer(output, codes[:k], link="identity")
        # shap samples coalitions from numpy's global generator: seeded here (and put back),
        # so the same row answers the same attributions from the CLI, the API and the UI
        saved = np.random.get_state()
        np.random.seed(SAMPLING_SEED)
        try:
            values = explainer.shap_values(codes[k:], nsamples=samples, l1_reg=False, silent=True)
        finally:
            np.random.set_state(saved)
        flat = np.asarray(values, dtype=np.float64).reshape(-1)
        attributions = [
            Attribution(name, float(value)) for name, value in zip(self.fields, flat, strict=True)
        ]
        prediction = float(output(codes[k:])[0])
        return Explanation(
            method="kernel_shap",
            output=target.output,
            label=target.label,
            prediction=prediction,
            base_value=float(np.asarray(explainer.expected_value).reshape(-1)[0]),
            attributions=sorted_attributions(attributions),
            details={"background_rows": k},
        )
