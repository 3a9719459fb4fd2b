"""The training objective: negative sampling loss with self-adversarial weights.

Sun et al. (ICLR 2019), eq. 4 and 5: with score s = γ − d,

    L = −log σ(s(h, r, t)) − Σ_i p(h'_i, r, t'_i) log σ(−s(h'_i, r, t'_i)),
    p(h'_j, r, t'_j) = softmax_j(α · s(h'_j, r, t'_j)),

so the negatives the model finds most plausible weigh most. The weights are constants
(detached): they choose where the gradient goes and take none themselves. As in the
authors' code, the loss is the mean of the positive and the negative term over the batch
(the paper's sum, halved). α = 0 weighs every negative 1/K.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from pydantic import BaseModel, ConfigDict, Field, PositiveInt
from torch.nn import functional as F  # noqa: N812  (the PyTorch convention)

from forgeml.core.errors import ConfigError
from forgeml.train.models.kg._embedding import KGEmbedding, Predict
from forgeml.train.models.kg._ranking import (
    KnownTriples,
    evaluate_ranking,
    filtered_tail_ranks,
    ranking_metrics,
)
from forgeml.train.models.kg._sampling import NegativeBatch, negative_batches
from forgeml.train.models.kg._triples import TripleVocab, triple_ids
from forgeml.train.task import SplitData, TaskData

# scores one call of a served module computes when `evaluate_served` ranks with it
_SERVED_SCORES = 1 << 18


class NegativeSamplingParams(BaseModel):
    """How a knowledge-graph model is trained: negatives per triple and α."""

    model_config = ConfigDict(extra="forbid")

    negatives: PositiveInt = Field(default=256, description="Corrupted triples per true one.")
    alpha: float = Field(
        default=0.5, ge=0, description="Self-adversarial temperature α; 0 weighs negatives evenly."
    )


def adversarial_weights(negative_scores: torch.Tensor, alpha: float) -> torch.Tensor:
    """p_i = softmax(α · s_i) over the negatives [B, K] of each triple, detached."""
    return torch.softmax(alpha * negative_scores, dim=-1).detach()


def self_adversarial_loss(
    positive_scores: torch.Tensor, negative_scores: torch.Tensor, alpha: float
) -> torch.Tensor:
    """The loss of true triples' scores [B] against their negatives' scores [B, K]."""
    weights = adversarial_weights(negative_scores, alpha)
    positive = F.logsigmoid(positive_scores)
    negative = (weights * F.logsigmoid(-negative_scores)).sum(dim=-1)
    return -(positive.mean() + negative.mean()) / 2


def negative_sampling_loss(model: KGEmbedding, batch: NegativeBatch, alpha: float) -> torch.Tensor:
    """The loss of one batch: its true triples against their corrupted copies."""
    head, relation, tail = batch.positives.unbind(dim=1)
    if batch.corrupt == "tail":
        query, truth = model.query(head, relation, "tail"), tail
    else:
        query, truth = model.query(tail, relation, "head"), head
    # one gather for the true entity and its negatives, sharing the query
    scores = model.score_candidates(query, torch.cat([truth.unsqueeze(1), batch.negatives], 1))
    return self_adversarial_loss(scores[:, 0], scores[:, 1:], alpha)


@dataclass(frozen=True)
class FitSettings:
    """The budget and optimiser of `fit_kg`."""

    steps: int
    batch_size: int = 512
    lr: float = 1e-3
    sampling: NegativeSamplingParams = field(default_factory=NegativeSamplingParams)
    # the authors' schedule: the learning rate drops tenfold after this share of the steps
    lr_drop_at: float = 0.5


def fit_kg(
    model: KGEmbedding,
    triples: torch.Tensor,
    settings: FitSettings,
    generator: torch.Generator,
    on_step: Callable[[int, float], None] | None = None,
) -> list[float]:
    """Train `model` on true triples [N, 3] with Adam; returns the loss of every step.

    Args:
        model: the embedding to train, in place.
        triples: the train split's (head, relation, tail) ids.
        settings: steps, batch size, learning rate and negative sampling.
        generator: the source of every shuffle and negative, so a seed fixes the run.
        on_step: called with (step, loss) after each step (progress, logging).
    """
    # fused: one pass over the tables per step instead of several
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr, fused=True)
    drop_at = int(settings.steps * settings.lr_drop_at)
    batches = negative_batches(
        triples, model.num_entities, settings.batch_size, settings.sampling.negatives, generator
    )
    model.train()
    losses: list[float] = []
    for step, batch in zip(range(settings.steps), batches, strict=False):
        if step == drop_at and step > 0:
            for group in optimizer.param_groups:
                group["lr"] = settings.lr / 10
        loss = negative_sampling_loss(model, batch, settings.sampling.alpha)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
        if on_step is not None:
            on_step(step, losses[-1])
    return losses


class NegativeSamplingObjective:
    """The `rotate` and `transe` families' objective for `forgeml train`'s loop.

    Each micro-batch's true triples (inputs `head`, `relation`, target tail) are split in
    two halves: the first has its tails corrupted, the second its heads, each triple with
    its own `negatives` uniform entities, and the loss is `negative_sampling_loss` averaged
    over the rows. (The authors' code alternates the side batch by batch; halves give every
    step both, in expectation the same objective.) Negatives come from torch's global
    generator, which the loop seeds and its checkpoints save, so a seed fixes a run.

    Evaluation is the filtered ranking of `evaluate_ranking`: metrics `mrr`, `mr`,
    `hits_at_1`, `hits_at_3`, `hits_at_10`, filtering the known triples of every split the
    run has.

    A served module (the family's serving module, or its ONNX export) ranks tails only:
    `evaluate_served` reports the filtered tail ranking, `tail_mrr`, `tail_mr`,
    `tail_hits_at_1`, `_3`, `_10`, the figures `forgeml optimize` and `models compare`
    hold side by side for the PyTorch model and its export.
    """

    served_metric = "tail_mrr"

    def __init__(self, sampling: NegativeSamplingParams, eval_batch: int = 16) -> None:
        self.sampling = sampling
        self.eval_batch = eval_batch
        self._known: tuple[int, KnownTriples] | None = None  # (id of the task, its triples)

    def loss(
        self, model: torch.nn.Module, inputs: dict[str, torch.Tensor], targets: torch.Tensor
    ) -> torch.Tensor:
        """The self-adversarial loss of the micro-batch's triples against their negatives."""
        embedding = _embedding_of(model)
        positives = torch.stack([inputs["head"], inputs["relation"], targets], dim=1)
        rows = positives.shape[0]
        half = (rows + 1) // 2
        total = positives.new_zeros((), dtype=torch.float32)
        halves: tuple[tuple[torch.Tensor, Predict], ...] = (
            (positives[:half], "tail"),
            (positives[half:], "head"),
        )
        for part, side in halves:
            if part.shape[0] == 0:
                continue
            negatives = torch.randint(
                embedding.num_entities, (part.shape[0], self.sampling.negatives), device=part.device
            )
            batch = NegativeBatch(part, negatives, side)
            total = total + negative_sampling_loss(embedding, batch, self.sampling.alpha) * (
                part.shape[0] / rows
            )
        return total

    def evaluate(
        self, model: torch.nn.Module, data: TaskData, split: SplitData
    ) -> dict[str, float]:
        """Filtered MRR, MR and Hits@1/3/10 of `split`, predicting tails and heads."""
        embedding = _embedding_of(model)
        metrics = evaluate_ranking(
            embedding, triple_ids(split), self._known_triples(data), self.eval_batch
        )
        return metrics.as_dict()

    def evaluate_served(
        self, served: torch.nn.Module, data: TaskData, split: SplitData
    ) -> dict[str, float]:
        """Filtered `tail_` MRR, MR and Hits@1/3/10 of `split` by the served scores.

        `served(head=..., relation=...)` returns every entity's score as the tail [B, E].
        An ONNX graph of `forward` holds a [B, E, width] temporary, so few triples go to
        one call: about `_SERVED_SCORES` scores, whatever the graph's size.
        """
        known = self._known_triples(data)
        entities = len(TripleVocab.from_task(data).entities)
        rows = max(1, min(self.eval_batch, _SERVED_SCORES // max(1, entities)))

        def scorer(head: torch.Tensor, relation: torch.Tensor) -> torch.Tensor:
            scores: torch.Tensor = served(head=head, relation=relation)
            return scores

        ranks = filtered_tail_ranks(scorer, triple_ids(split), known, rows)
        return {f"tail_{name}": value for name, value in ranking_metrics(ranks).as_dict().items()}

    def _known_triples(self, data: TaskData) -> KnownTriples:
        if self._known is None or self._known[0] != id(data):
            splits = [s for s in (data.train, data.eval, data.test) if s is not None and len(s)]
            relations = len(TripleVocab.from_task(data).relations)
            self._known = (id(data), KnownTriples([triple_ids(s) for s in splits], relations))
        return self._known[1]


def _embedding_of(model: torch.nn.Module) -> KGEmbedding:
    if not isinstance(model, KGEmbedding):
        raise ConfigError(
            f"The negative sampling objective trains RotatE or TransE, not {type(model).__name__}."
        )
    return model
