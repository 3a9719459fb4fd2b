"""Serving a graph model: rows of entity and relation names in, scores and best tails out.

A row is `{"head": name, "relation": name}`, with `"tail": name` to score that triple and
`"k": n` for the number of best tails (default 10). The served graph computes every
entity's score as the tail of (head, relation) (`logits` [N, E], the model's `forward`),
so one run answers both questions: `score` is the given tail's entry (NaN, null in JSON,
for a row without a tail), `tails` and `tail_scores` the k best entities, best first.
The decoder reads each row's tail and k from the encoded request, which the runtime
passes over (it takes `head` and `relation` only).

Every row of one request asks for the same k, so a request's `tails` is a [N, k] tensor
in KServe v2; an unknown name is refused before the batch runs, naming it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from forgeml.core.errors import ConfigError, InvalidDataError, NotFoundError
from forgeml.train.models._codec import InputField
from forgeml.train.models.kg._triples import TripleVocab

if TYPE_CHECKING:
    from forgeml.train.models._family import ServedBundle

DEFAULT_K = 10
_NAMES = ("head", "relation", "tail")


class TripleEncoder:
    """Rows of names -> `head`, `relation` ids for the runtime, `tail` (-1: none) and `k`."""

    scalar_rows = False

    def __init__(self, vocab: TripleVocab) -> None:
        self.vocab = vocab
        self.fields = [
            InputField("head", "BYTES"),
            InputField("relation", "BYTES"),
            InputField("tail", "BYTES", required=False),
            InputField("k", "INT64", required=False),
        ]
        self._known = {field.name for field in self.fields}

    def check(self, rows: list[Any]) -> None:
        """Every row names a known head and relation (and tail); one k for the request."""
        wanted = set()
        for position, row in enumerate(rows):
            self._check_row(position, row)
            wanted.add(row.get("k") or DEFAULT_K)
        if len(wanted) > 1:
            raise InvalidDataError(
                f"The instances of one request ask for different k ({sorted(wanted)}); send "
                "one k per request."
            )

    def _check_row(self, position: int, row: Any) -> None:
        if not isinstance(row, dict):
            raise InvalidDataError(
                f"Instance {position} is {type(row).__name__}, not an object with head, "
                "relation and an optional tail or k."
            )
        extra = [name for name in row if name not in self._known]
        if extra:
            raise InvalidDataError(
                f"Instance {position} has field '{extra[0]}', which the model does not take "
                "(fields: head, relation, tail, k)."
            )
        for name in _NAMES:
            value = row.get(name)
            if value is None and name != "tail":
                raise InvalidDataError(f"Instance {position} has no '{name}', which it needs.")
            if value is not None and not isinstance(value, str):
                raise InvalidDataError(f"Field '{name}' of instance {position} must be a name.")
        k = row.get("k")
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise InvalidDataError(f"Field 'k' of instance {position} is {k!r}; ask for 1 or more.")
        try:
            self.vocab.entity_id(row["head"])
            self.vocab.relation_id(row["relation"])
            if row.get("tail") is not None:
                self.vocab.entity_id(row["tail"])
        except NotFoundError as error:  # a bad row is 422; 404 would say the model is missing
            raise InvalidDataError(f"Instance {position}: {error}") from None

    def encode(self, rows: list[Any]) -> dict[str, np.ndarray]:
        """Ids of the (checked) rows; -1 for a row without a tail."""
        entity, relation = self.vocab.entity_ids, self.vocab.relation_ids
        tails = [row.get("tail") for row in rows]
        return {
            "head": np.array([entity[row["head"]] for row in rows], dtype=np.int64),
            "relation": np.array([relation[row["relation"]] for row in rows], dtype=np.int64),
            "tail": np.array([-1 if t is None else entity[t] for t in tails], dtype=np.int64),
            "k": np.array([row.get("k") or DEFAULT_K for row in rows], dtype=np.int64),
        }


class TripleAnswers:
    """Every entity's tail score [N, E] -> `score`, `tails` and `tail_scores`."""

    def __init__(self, vocab: TripleVocab) -> None:
        self.vocab = vocab
        self.outputs = [
            InputField("score", "FP32"),
            InputField("tails", "BYTES", (-1, -1)),
            InputField("tail_scores", "FP32", (-1, -1)),
        ]

    def needs(self, outputs: set[str]) -> list[str]:
        """`logits` for any answer."""
        return ["logits"] if outputs & {field.name for field in self.outputs} else []

    def decode(self, raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The given tail's score and the k best tails of each row, best first.

        `tails` and `tail_scores` are object arrays [N] of lists (k may differ by request).
        """
        if "logits" not in raw:
            return {}
        scores, tail, k = raw["logits"], raw["tail"], raw["k"]
        rows = np.arange(len(scores))
        given = tail >= 0
        score = np.full(len(scores), np.nan, dtype=np.float32)
        score[given] = scores[rows[given], tail[given]]
        names = np.empty(len(scores), dtype=object)
        values = np.empty(len(scores), dtype=object)
        for row in rows:
            best = _top(scores[row], int(min(k[row], scores.shape[1])))
            names[row] = [self.vocab.entities[int(i)] for i in best]
            values[row] = scores[row, best].astype(np.float32).tolist()
        return {"score": score, "tails": names, "tail_scores": values}


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k highest scores, highest first (ties: the lower index first)."""
    part = np.argpartition(-scores, k - 1)[:k]
    return part[np.lexsort((part, -scores[part]))]


def _vocab(bundle: ServedBundle) -> TripleVocab:
    state = bundle.description.get("tokenizer") or {}
    if "entities" not in state:
        raise ConfigError(
            f"The bundle of model family '{bundle.family.name}' has no graph vocabulary "
            "(model.json 'tokenizer'); train it again with this version of forgeml."
        )
    return TripleVocab.from_state(state)


def triple_requests(bundle: ServedBundle) -> TripleEncoder:
    """The request encoder of a served graph model, its vocabulary from the bundle."""
    return TripleEncoder(_vocab(bundle))


def triple_answers(bundle: ServedBundle) -> TripleAnswers:
    """The answer decoder of a served graph model."""
    return TripleAnswers(_vocab(bundle))
