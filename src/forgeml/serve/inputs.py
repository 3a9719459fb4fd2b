"""Raw request rows -> model input arrays: the encoders a model family names.

The encoders live with the families (`forgeml.train.models._codec`), since a family
states how its requests are encoded; serving reads them through this module. Tabular
rows are dicts of raw fields through the model's own fitted FeatureSpec, the path training
took, so serving cannot skew; text rows are strings through the family's tokenizer.
"""

from __future__ import annotations

from forgeml.train.models._codec import (
    InputField,
    RowEncoder,
    TabularEncoder,
    TextEncoder,
    v2_datatype,
)

__all__ = ["InputField", "RowEncoder", "TabularEncoder", "TextEncoder", "v2_datatype"]
