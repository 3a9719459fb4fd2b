"""What a served knowledge-graph model answers: a triple's score, the best tails of a query.

Names in, names out: the vocabulary turns entity and relation names into ids (an unknown
name is a NotFoundError naming it) and ids back into names.
"""

from __future__ import annotations

import torch

from forgeml.core.errors import InvalidDataError
from forgeml.train.models.kg._embedding import KGEmbedding
from forgeml.train.models.kg._triples import TripleVocab


def score_triples(
    model: KGEmbedding, vocab: TripleVocab, triples: list[tuple[str, str, str]]
) -> list[float]:
    """γ − d of each (head, relation, tail) of names; higher is more plausible."""
    ids = vocab.encode(triples)
    with torch.inference_mode():
        scores = model.score(ids[:, 0], ids[:, 1], ids[:, 2])
    return [float(s) for s in scores]


def score_triple(
    model: KGEmbedding, vocab: TripleVocab, head: str, relation: str, tail: str
) -> float:
    """The score of one triple of names (see `score_triples`)."""
    return score_triples(model, vocab, [(head, relation, tail)])[0]


def rank_tails(
    model: KGEmbedding, vocab: TripleVocab, head: str, relation: str, k: int = 10
) -> list[tuple[str, float]]:
    """The `k` entities scoring best as the tail of (head, relation), best first.

    Raises:
        NotFoundError: the head or the relation is not in the vocabulary.
        InvalidDataError: `k` is below 1.
    """
    if k < 1:
        raise InvalidDataError(f"Ask for at least 1 tail, not {k}.")
    anchor = torch.tensor([vocab.entity_id(head)])
    relation_id = torch.tensor([vocab.relation_id(relation)])
    with torch.inference_mode():
        scores = model.score_all(anchor, relation_id, "tail")[0]
    best = torch.topk(scores, min(k, scores.shape[0]))
    return [
        (vocab.entities[int(i)], float(s)) for s, i in zip(best.values, best.indices, strict=True)
    ]
