"""Filtered link-prediction ranking: MRR, MR and Hits@k, over every entity.

The protocol of Bordes et al. (NeurIPS 2013) that RotatE's paper reports (Sun et al.,
ICLR 2019): for each test triple (h, r, t), every entity is scored as the tail of
(h, r, ?) and the true tail ranked among them, after removing ("filtering") the other
entities t' for which (h, r, t') is a known true triple of train, valid or test; the same
for the head of (?, r, t). MRR is the mean of 1/rank over both directions, MR the mean
rank, Hits@k the share of ranks <= k.

Ties count half: a true entity tied with n others ranks 1 + (entities above) + n/2, its
expected rank when ties are broken at random, so a model that scores everything alike
ranks E/2 and not 1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from forgeml.core.errors import InvalidDataError
from forgeml.train.models.kg._embedding import KGEmbedding, Predict

HITS_AT = (1, 3, 10)


@dataclass(frozen=True)
class _Index:
    """Answers of queries `anchor * R + relation`, sorted by that key."""

    keys: torch.Tensor  # long [N], sorted
    answers: torch.Tensor  # long [N], the entity completing each key's triple


def _index(anchor: torch.Tensor, relation: torch.Tensor, answer: torch.Tensor, r: int) -> _Index:
    keys = anchor * r + relation
    order = torch.argsort(keys, stable=True)
    return _Index(keys[order], answer[order])


class KnownTriples:
    """Every true triple of a graph, indexed to find the known answers of a query fast."""

    def __init__(self, triples: Iterable[torch.Tensor], num_relations: int) -> None:
        """Index the (head, relation, tail) id tensors [N, 3] of `triples` (all splits)."""
        every = torch.unique(torch.cat(list(triples)), dim=0)
        head, relation, tail = every.unbind(dim=1)
        self.num_relations = num_relations
        self.count = int(every.shape[0])
        self._by_side = {
            "tail": _index(head, relation, tail, num_relations),
            "head": _index(tail, relation, head, num_relations),
        }

    def answers(
        self, anchor: torch.Tensor, relation: torch.Tensor, predict: Predict
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Every known answer of the queries (anchor [B], relation [B]) for side `predict`.

        Returns:
            (rows, entities), long [M] each: query `rows[m]` has answer `entities[m]`.
        """
        index = self._by_side[predict]
        keys = anchor * self.num_relations + relation
        start = torch.searchsorted(index.keys, keys)
        counts = torch.searchsorted(index.keys, keys, right=True) - start
        rows = torch.repeat_interleave(torch.arange(keys.shape[0]), counts)
        # position of each answer inside its query's run: 0, 1, ... counts[b] - 1
        first = torch.repeat_interleave(torch.cumsum(counts, 0) - counts, counts)
        within = torch.arange(rows.shape[0]) - first
        return rows, index.answers[torch.repeat_interleave(start, counts) + within]


TailScorer = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (head, relation) -> [B, E]


def filtered_ranks(
    model: KGEmbedding,
    triples: torch.Tensor,
    known: KnownTriples,
    predict: Predict,
    batch_size: int = 16,
) -> torch.Tensor:
    """The filtered rank (float [N]) of the true `predict` side of each triple [N, 3]."""

    def scores_of(anchor: torch.Tensor, relation: torch.Tensor) -> torch.Tensor:
        return model.score_all(anchor, relation, predict)

    return _ranks(scores_of, triples, known, predict, batch_size)


def filtered_tail_ranks(
    scorer: TailScorer, triples: torch.Tensor, known: KnownTriples, batch_size: int = 16
) -> torch.Tensor:
    """The filtered rank (float [N]) of each triple's tail among `scorer`'s scores.

    `scorer(head, relation)` returns every entity's score as the tail [B, E]: a model's
    served module or its ONNX graph, which rank tails only. At most `batch_size` triples
    go to one call, so the work is the triples' count times the entities'.
    """
    return _ranks(scorer, triples, known, "tail", batch_size)


def _ranks(
    scores_of: TailScorer,
    triples: torch.Tensor,
    known: KnownTriples,
    predict: Predict,
    batch_size: int,
) -> torch.Tensor:
    ranks = []
    with torch.inference_mode():
        for batch in triples.split(batch_size):
            head, relation, tail = batch.unbind(dim=1)
            anchor, truth = (head, tail) if predict == "tail" else (tail, head)
            scores = scores_of(anchor, relation).float()
            true_scores = scores.gather(1, truth.unsqueeze(1))
            rows, entities = known.answers(anchor, relation, predict)
            scores[rows, entities] = -torch.inf  # the other true answers, and this one
            scores.scatter_(1, truth.unsqueeze(1), -torch.inf)
            above = (scores > true_scores).sum(dim=1)
            tied = (scores == true_scores).sum(dim=1)
            ranks.append(1 + above + tied / 2)
    return torch.cat(ranks) if ranks else torch.empty(0)


@dataclass(frozen=True)
class RankingMetrics:
    """Filtered link-prediction metrics over `count` ranks (heads and tails)."""

    mrr: float
    mr: float
    hits_at_1: float
    hits_at_3: float
    hits_at_10: float
    count: int

    def as_dict(self) -> dict[str, float]:
        return {
            "mrr": self.mrr,
            "mr": self.mr,
            "hits_at_1": self.hits_at_1,
            "hits_at_3": self.hits_at_3,
            "hits_at_10": self.hits_at_10,
        }


def ranking_metrics(ranks: torch.Tensor) -> RankingMetrics:
    """MRR, MR and Hits@1/3/10 of ranks [N] (1 is best); InvalidDataError when N is 0."""
    if ranks.numel() == 0:
        raise InvalidDataError("There are no ranks to summarise: the triples to rank are empty.")
    ranks = ranks.double()
    hits = [float((ranks <= k).double().mean()) for k in HITS_AT]
    return RankingMetrics(
        mrr=float((1 / ranks).mean()),
        mr=float(ranks.mean()),
        hits_at_1=hits[0],
        hits_at_3=hits[1],
        hits_at_10=hits[2],
        count=int(ranks.numel()),
    )


def evaluate_ranking(
    model: KGEmbedding, triples: torch.Tensor, known: KnownTriples, batch_size: int = 16
) -> RankingMetrics:
    """Filtered metrics of `triples` [N, 3], predicting the tail and then the head of each."""
    was_training = model.training
    model.eval()
    try:
        ranks = [
            filtered_ranks(model, triples, known, side, batch_size) for side in ("tail", "head")
        ]
    finally:
        model.train(was_training)
    return ranking_metrics(torch.cat(ranks))
