"""Knowledge-graph embeddings: RotatE, and TransE as its baseline.

RotatE (Sun, Deng, Nie and Tang, "RotatE: Knowledge Graph Embedding by Relational Rotation
in Complex Space", ICLR 2019) embeds an entity as k complex numbers and a relation as k
phases, a rotation r = e^{iθ} with |r_i| = 1; a triple (h, r, t) is true when the head
rotated by the relation lands on the tail, h ∘ r ≈ t, with distance
d_r(h, t) = ||h ∘ r − t|| (the sum over the k dimensions of the complex modulus, as the
authors' code computes it). TransE (Bordes et al., NeurIPS 2013) translates instead:
h + r ≈ t, d = ||h + r − t||₁.

Both score a triple γ − d (γ the margin), so higher is more plausible. Because |r_i| = 1,
||h ∘ r − t|| = ||h − t ∘ r̄||, and for TransE ||h + r − t|| = ||h − (t − r)||: predicting
a tail or a head is the same search, a query vector (h ∘ r, or t ∘ r̄) against every
entity's vector. Entity vectors of RotatE hold the real parts, then the imaginary parts.

Initialisation follows the authors' code: entities and relations uniform in ±(γ + 2)/k,
and a relation's value x in that range is the phase x·π/((γ + 2)/k) in ±π.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, PositiveInt
from torch import nn

from forgeml.core.configfile import parse_model
from forgeml.core.errors import ConfigError
from forgeml.train.models.kg._triples import TripleVocab
from forgeml.train.models.mlp import PARAMS_SOURCE
from forgeml.train.task import TaskData

Predict = Literal["head", "tail"]
_EPSILON = 2.0  # the authors' initialisation range is (γ + ε)/k
_TINY = 1e-30  # below any float32 modulus worth a gradient, above zero
_BLOCK_ELEMENTS = 1 << 17  # floats in one [B, block, D] temporary when scoring every entity


class KGParams(BaseModel):
    """The model's parameters of `rotate` and `transe` (`model.params` adds the objective's)."""

    model_config = ConfigDict(extra="forbid")

    dim: PositiveInt = Field(
        default=200,
        description="Embedding size: complex numbers per entity (rotate) or reals (transe).",
    )
    gamma: float = Field(default=6.0, gt=0, description="Margin γ: a triple scores γ − distance.")


class KGEmbedding(nn.Module, ABC):
    """Entity and relation embeddings scoring a triple γ − d(query, candidate entity)."""

    def __init__(
        self,
        num_entities: int,
        num_relations: int,
        dim: int,
        gamma: float,
        widths: tuple[int, int],
    ) -> None:
        """Make the tables, uniform in ±(γ + 2)/dim.

        Args:
            num_entities: E, the rows of the entity table.
            num_relations: R, the rows of the relation table.
            dim: k, the embedding size the range is computed from.
            gamma: the margin γ.
            widths: floats per entity and per relation row.
        """
        super().__init__()
        self.gamma = gamma
        self.embedding_range = (gamma + _EPSILON) / dim
        self.entity = nn.Embedding(num_entities, widths[0])
        self.relation = nn.Embedding(num_relations, widths[1])
        for table in (self.entity, self.relation):
            nn.init.uniform_(table.weight, -self.embedding_range, self.embedding_range)

    @abstractmethod
    def tail_query(self, head: torch.Tensor, relation: torch.Tensor) -> torch.Tensor:
        """Head vectors [B, D] and relation ids [B] -> the vector a true tail is near."""

    @abstractmethod
    def head_query(self, relation: torch.Tensor, tail: torch.Tensor) -> torch.Tensor:
        """Relation ids [B] and tail vectors [B, D] -> the vector a true head is near."""

    @abstractmethod
    def distance(self, query: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """d between query and candidate vectors [..., D] (broadcast) -> [...]."""

    @property
    def num_entities(self) -> int:
        return int(self.entity.num_embeddings)

    def query(self, anchor: torch.Tensor, relation: torch.Tensor, predict: Predict) -> torch.Tensor:
        """The query [B, D] for predicting the `predict` side of (anchor, relation)."""
        vectors = self.entity(anchor)
        if predict == "tail":
            return self.tail_query(vectors, relation)
        return self.head_query(relation, vectors)

    def score(self, head: torch.Tensor, relation: torch.Tensor, tail: torch.Tensor) -> torch.Tensor:
        """γ − d(h, t) of each triple: ids [B] each -> [B]."""
        query = self.query(head, relation, "tail")
        return self.gamma - self.distance(query, self.entity(tail))

    def score_candidates(self, query: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """γ − d of a query [B, D] against candidate entity ids [B, K] -> [B, K]."""
        return self.gamma - self.distance(query.unsqueeze(1), self.entity(candidates))

    def forward(self, head: torch.Tensor, relation: torch.Tensor) -> torch.Tensor:
        """Scores of every entity as the tail of (head, relation): ids [B] -> [B, E]."""
        query = self.query(head, relation, "tail")
        return self.gamma - self.distance(query.unsqueeze(1), self.entity.weight.unsqueeze(0))

    def score_all(
        self, anchor: torch.Tensor, relation: torch.Tensor, predict: Predict
    ) -> torch.Tensor:
        """Scores [B, E] of every entity as the `predict` side of (anchor, relation).

        For evaluation and serving: the same numbers as `forward` (for tails), by a faster
        path of each model's own (`distances_to_all`) that need not export or train.
        """
        return self.gamma - self.distances_to_all(self.query(anchor, relation, predict))

    def distances_to_all(self, query: torch.Tensor) -> torch.Tensor:
        """d of queries [B, D] to every entity [B, E], a block of entities at a time."""
        table = self.entity.weight
        block = _block(query.shape[0], table.shape[1])
        distances = [
            self.distance(query.unsqueeze(1), table[start : start + block].unsqueeze(0))
            for start in range(0, table.shape[0], block)
        ]
        return torch.cat(distances, dim=1)


def _block(queries: int, width: int) -> int:
    """Entities per block, so that a [queries, block, width] temporary stays in cache."""
    return max(1, _BLOCK_ELEMENTS // (queries * width))


class _Modulus(torch.autograd.Function):
    """|re + i·im| whose gradient at 0 is 0, where sqrt's is NaN.

    The authors' code takes the norm of the stacked parts, which is as safe but slower
    forward and back on a CPU; torch.hypot is not exported to ONNX.
    """

    @staticmethod
    def forward(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
        return torch.sqrt(re * re + im * im)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        ctx.save_for_backward(*inputs, output)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        re, im, modulus = ctx.saved_tensors
        scale = grad / modulus.clamp_min(_TINY)
        return scale * re, scale * im


class RotatE(KGEmbedding):
    """RotatE: entities in C^k, relations as rotations, d = Σ_i |h_i r_i − t_i|."""

    def __init__(self, num_entities: int, num_relations: int, dim: int, gamma: float) -> None:
        super().__init__(num_entities, num_relations, dim, gamma, (2 * dim, dim))

    def rotation(self, relation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos θ and sin θ of relation ids [B] -> ([B, k], [B, k])."""
        phase = self.relation(relation) * (math.pi / self.embedding_range)
        return torch.cos(phase), torch.sin(phase)

    def tail_query(self, head: torch.Tensor, relation: torch.Tensor) -> torch.Tensor:
        re_h, im_h = head.chunk(2, dim=-1)
        re_r, im_r = self.rotation(relation)
        return torch.cat([re_h * re_r - im_h * im_r, re_h * im_r + im_h * re_r], dim=-1)

    def head_query(self, relation: torch.Tensor, tail: torch.Tensor) -> torch.Tensor:
        re_t, im_t = tail.chunk(2, dim=-1)
        re_r, im_r = self.rotation(relation)  # t ∘ r̄ (the conjugate undoes the rotation)
        return torch.cat([re_t * re_r + im_t * im_r, im_t * re_r - re_t * im_r], dim=-1)

    def distance(self, query: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        re, im = (query - candidates).chunk(2, dim=-1)
        modulus: torch.Tensor = _Modulus.apply(re, im)
        return modulus.sum(dim=-1)

    def distances_to_all(self, query: torch.Tensor) -> torch.Tensor:
        # hypot of the two differences in one pass: faster than `distance`, no gradient needed
        re_q, im_q = (part.unsqueeze(1) for part in query.chunk(2, dim=-1))
        re_e, im_e = self.entity.weight.chunk(2, dim=-1)
        block = _block(query.shape[0], re_e.shape[1])
        distances = [
            torch.hypot(re_q - re_e[start : start + block], im_q - im_e[start : start + block]).sum(
                dim=-1
            )
            for start in range(0, re_e.shape[0], block)
        ]
        return torch.cat(distances, dim=1)


class TransE(KGEmbedding):
    """TransE: entities and relations in R^k, d = ||h + r − t||₁."""

    def __init__(self, num_entities: int, num_relations: int, dim: int, gamma: float) -> None:
        super().__init__(num_entities, num_relations, dim, gamma, (dim, dim))

    def tail_query(self, head: torch.Tensor, relation: torch.Tensor) -> torch.Tensor:
        return head + self.relation(relation)

    def head_query(self, relation: torch.Tensor, tail: torch.Tensor) -> torch.Tensor:
        return tail - self.relation(relation)

    def distance(self, query: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        return (query - candidates).abs().sum(dim=-1)

    def distances_to_all(self, query: torch.Tensor) -> torch.Tensor:
        # cdist's L1 kernel: faster than the broadcast difference, with no [B, E, k] temporary
        return torch.cdist(query, self.entity.weight, p=1)


def graph_size(task: TaskData, model_name: str) -> tuple[int, int]:
    """(entities, relations) of a task that `triples_task` made."""
    vocab = TripleVocab.from_task(task)
    if not vocab.relations or not vocab.entities:
        raise ConfigError(
            f"Model '{model_name}' needs a knowledge-graph task (head, relation, tail triples, "
            "see forgeml.train.models.kg.triples_task), not rows of features, images or text."
        )
    return len(vocab.entities), len(vocab.relations)


def build_rotate(task: TaskData, **params: Any) -> RotatE:
    """Build the `rotate` model for a graph task.

    Args:
        task: a task from `triples_task` (entities in `class_names`, relations in meta).
        **params: `KGParams` fields.

    Raises:
        ConfigError: bad params, or a task that is not a graph.
    """
    config = parse_model(KGParams, params, PARAMS_SOURCE)
    return RotatE(*graph_size(task, "rotate"), config.dim, config.gamma)


def build_transe(task: TaskData, **params: Any) -> TransE:
    """Build the `transe` model for a graph task (the same contract as `build_rotate`)."""
    config = parse_model(KGParams, params, PARAMS_SOURCE)
    return TransE(*graph_size(task, "transe"), config.dim, config.gamma)
