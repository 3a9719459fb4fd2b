"""The `rotate` and `transe` model families: graphs trained, exported and served by name.

`forgeml train` with `model: {name: rotate, params: {...}}` on a dataset with head,
relation and tail columns reads the triples modality (`triples_task`), trains with the
family's objective (`NegativeSamplingObjective`: self-adversarial negative sampling,
evaluated by filtered MRR and Hits@k) and keeps the vocabulary in the bundle's model.json
`tokenizer`. `forgeml optimize --onnx` exports the graph serving runs: every entity's
score as the tail of (head, relation), the model's `forward` (`TailScores`). Serving maps
names to ids and back (`TripleEncoder`, `TripleAnswers`): score a triple, rank tails.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from forgeml.core.configfile import parse_model
from forgeml.train.models._family import ModelFamily, OnnxExport
from forgeml.train.models.kg._codec import triple_answers, triple_requests
from forgeml.train.models.kg._embedding import KGParams, RotatE, TransE, graph_size
from forgeml.train.models.kg._export import ServedTailScores, export_rows
from forgeml.train.models.kg._objective import NegativeSamplingObjective, NegativeSamplingParams
from forgeml.train.models.mlp import PARAMS_SOURCE
from forgeml.train.task import TaskData


class KGFamilyParams(KGParams, NegativeSamplingParams):
    """`model.params` of the rotate and transe families: the model's and its objective's."""


def build_rotate_family(task: TaskData, **params: Any) -> RotatE:
    """RotatE for a graph task; the objective's params (negatives, alpha) are accepted too."""
    config = parse_model(KGFamilyParams, params, PARAMS_SOURCE)
    return RotatE(*graph_size(task, "rotate"), config.dim, config.gamma)


def build_transe_family(task: TaskData, **params: Any) -> TransE:
    """TransE for a graph task (see `build_rotate_family`)."""
    config = parse_model(KGFamilyParams, params, PARAMS_SOURCE)
    return TransE(*graph_size(task, "transe"), config.dim, config.gamma)


def negative_sampling(params: Mapping[str, Any]) -> NegativeSamplingObjective:
    """The objective of a rotate or transe run with these model params."""
    config = parse_model(KGFamilyParams, dict(params), PARAMS_SOURCE)
    return NegativeSamplingObjective(
        NegativeSamplingParams(negatives=config.negatives, alpha=config.alpha)
    )


def _family(name: str, builder: Any) -> ModelFamily:
    return ModelFamily(
        name=name,
        builder=builder,
        modality="triples",
        inputs=("head", "relation"),
        output_module=ServedTailScores,
        requests=triple_requests,
        answers=triple_answers,
        onnx=OnnxExport(max_rows=export_rows),
        objective=negative_sampling,
    )


ROTATE = _family("rotate", build_rotate_family)
TRANSE = _family("transe", build_transe_family)
