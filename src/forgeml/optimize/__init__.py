"""Model optimisation: ONNX export (verified against PyTorch), int8 quantisation, pruning.

Each optimisation of a registered version is a tracked run that registers a new version
whose parent is the source (`optimize_model`). `OnnxModel` runs an ONNX bundle (the model
server's onnx runtime uses it); `profile_models` scores and times versions side by side;
`score_on_split` scores one on any dataset version's split (what a release gate compares);
`load_model` is the bundle they score, in its runtime (a fairness-mitigated one thresholded).
"""

from forgeml.optimize._runtime import LoadedModel, load_model
from forgeml.optimize.compare import ModelProfile, profile_models, score_on_split
from forgeml.optimize.latency import LatencyStats, measure
from forgeml.optimize.pipeline import OptimizeRequest, OptimizeResult, optimize_model
from forgeml.optimize.session import OnnxModel, is_onnx_bundle, read_description

__all__ = [
    "LatencyStats",
    "LoadedModel",
    "ModelProfile",
    "OnnxModel",
    "OptimizeRequest",
    "OptimizeResult",
    "is_onnx_bundle",
    "load_model",
    "measure",
    "optimize_model",
    "profile_models",
    "read_description",
    "score_on_split",
]
