"""Knowledge-graph embeddings: RotatE (Sun et al., ICLR 2019) and TransE, its baseline.

The pieces a model family needs, each a plain function or module:
- data -> tensors: `triples_task` (head, relation, tail frames -> a tail-prediction
  `TaskData`), `TripleVocab`, `read_triples`, `triple_ids`;
- builders `build_rotate(task, **params)`, `build_transe(task, **params)` (`KGParams`);
- the objective: `negative_sampling_loss` (self-adversarial, `NegativeSamplingParams`) over
  `negative_batches`, and `fit_kg`, a plain Adam loop;
- evaluation: `evaluate_ranking` (filtered MRR, MR, Hits@1/3/10) with `KnownTriples`;
- serving: `score_triple(s)`, `rank_tails`;
- ONNX: `TripleScores`, `TailScores`.

The model families `rotate` and `transe` (`_family.py`, found by name through
`forgeml.train.models`) put these together for `forgeml train`, `optimize` and `serve`.
"""

from forgeml.train.models.kg._embedding import (
    KGEmbedding,
    KGParams,
    Predict,
    RotatE,
    TransE,
    build_rotate,
    build_transe,
)
from forgeml.train.models.kg._export import TailScores, TripleScores
from forgeml.train.models.kg._objective import (
    FitSettings,
    NegativeSamplingParams,
    adversarial_weights,
    fit_kg,
    negative_sampling_loss,
    self_adversarial_loss,
)
from forgeml.train.models.kg._ranking import (
    KnownTriples,
    RankingMetrics,
    evaluate_ranking,
    filtered_ranks,
    ranking_metrics,
)
from forgeml.train.models.kg._sampling import NegativeBatch, corrupt, negative_batches
from forgeml.train.models.kg._serving import rank_tails, score_triple, score_triples
from forgeml.train.models.kg._triples import (
    TRIPLE_COLUMNS,
    TripleVocab,
    read_triples,
    require_triples,
    triple_ids,
    triples_task,
)

__all__ = [
    "TRIPLE_COLUMNS",
    "FitSettings",
    "KGEmbedding",
    "KGParams",
    "KnownTriples",
    "NegativeBatch",
    "NegativeSamplingParams",
    "Predict",
    "RankingMetrics",
    "RotatE",
    "TailScores",
    "TransE",
    "TripleScores",
    "TripleVocab",
    "adversarial_weights",
    "build_rotate",
    "build_transe",
    "corrupt",
    "evaluate_ranking",
    "filtered_ranks",
    "fit_kg",
    "negative_batches",
    "negative_sampling_loss",
    "rank_tails",
    "ranking_metrics",
    "read_triples",
    "require_triples",
    "score_triple",
    "score_triples",
    "self_adversarial_loss",
    "triple_ids",
    "triples_task",
]
