"""Edge bundles: a registered model as a folder that runs with onnxruntime and numpy alone.

`export_edge(workspace, ref, folder)` writes the ONNX graph (int8 where it agrees with
fp32), the tokenizer or FeatureSpec as plain JSON, a manifest of SHA-256 digests and
`runner.py` (this package's `runner` module, which imports no forgeml).
"""

from forgeml.optimize.edge._build import EdgeBundle, check_destination, export_edge
from forgeml.optimize.edge._precision import MIN_AGREEMENT, Precision

__all__ = ["MIN_AGREEMENT", "EdgeBundle", "Precision", "check_destination", "export_edge"]
