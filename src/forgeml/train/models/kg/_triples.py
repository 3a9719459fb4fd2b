"""Triples as tensors: the entity and relation vocabulary, and link prediction as a task.

A knowledge graph is a table of (head, relation, tail) names. Tail prediction, "which
entity completes (head, relation, ?)", is classification over the entities, so a graph
becomes a `TaskData` the zoo already knows: inputs `head` and `relation` (long [N]),
targets the tail ids [N], `num_classes` and `class_names` the entities, and
`meta["relations"]` the relation names. A model's `forward(head, relation)` returns one
score per entity [N, E], higher for more plausible tails. The vocabulary is also the task's
`tokenizer` state (`TripleVocab.state`), the JSON a trained bundle keeps to map names to
ids when it is served.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl
import torch

from forgeml.core.errors import InvalidDataError, MissingColumnError, NotFoundError
from forgeml.train.task import SplitData, TaskData

TRIPLE_COLUMNS = ("head", "relation", "tail")
RELATIONS_META = "relations"  # TaskData.meta key holding the relation names


@dataclass(frozen=True)
class TripleVocab:
    """Entity and relation names; a name's id is its position."""

    entities: tuple[str, ...]
    relations: tuple[str, ...]

    @classmethod
    def from_frames(cls, frames: Iterable[pl.DataFrame]) -> TripleVocab:
        """Every entity and relation named in `frames`, each sorted by name."""
        entities: set[str] = set()
        relations: set[str] = set()
        for frame in frames:
            entities.update(frame["head"].to_list(), frame["tail"].to_list())
            relations.update(frame["relation"].to_list())
        return cls(tuple(sorted(entities)), tuple(sorted(relations)))

    @classmethod
    def from_task(cls, task: TaskData) -> TripleVocab:
        """The vocabulary `triples_task` stored in a task (or a bundle restored into one)."""
        if task.tokenizer and "entities" in task.tokenizer:
            return cls.from_state(task.tokenizer)
        return cls(tuple(task.class_names), tuple(task.meta.get(RELATIONS_META, ())))

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> TripleVocab:
        """The vocabulary of `state()`'s JSON."""
        return cls(tuple(state["entities"]), tuple(state["relations"]))

    def state(self) -> dict[str, list[str]]:
        """The JSON a bundle keeps: entity and relation names, each in id order."""
        return {"entities": list(self.entities), "relations": list(self.relations)}

    @cached_property
    def entity_ids(self) -> dict[str, int]:
        return {name: index for index, name in enumerate(self.entities)}

    @cached_property
    def relation_ids(self) -> dict[str, int]:
        return {name: index for index, name in enumerate(self.relations)}

    def entity_id(self, name: str) -> int:
        """The id of entity `name`; NotFoundError names the graph's size when it is unknown."""
        try:
            return self.entity_ids[name]
        except KeyError:
            raise NotFoundError(
                f"Entity '{name}' is not one of the graph's {len(self.entities)} entities."
            ) from None

    def relation_id(self, name: str) -> int:
        """The id of relation `name`; NotFoundError lists the relations when it is unknown."""
        try:
            return self.relation_ids[name]
        except KeyError:
            raise NotFoundError(
                f"Relation '{name}' is not one of the graph's: {', '.join(self.relations)}."
            ) from None

    def encode(self, triples: Iterable[Sequence[str]]) -> torch.Tensor:
        """(head, relation, tail) names -> long [N, 3] ids; NotFoundError on an unknown name."""
        rows = [(self.entity_id(h), self.relation_id(r), self.entity_id(t)) for h, r, t in triples]
        return torch.tensor(rows, dtype=torch.long).reshape(-1, 3)


def require_triples(frame: pl.DataFrame, source: str) -> pl.DataFrame:
    """The head, relation and tail columns of `frame` as strings, with no nulls.

    Raises:
        MissingColumnError: a column is missing.
        InvalidDataError: a cell is empty.
    """
    missing = [name for name in TRIPLE_COLUMNS if name not in frame.columns]
    if missing:
        raise MissingColumnError(
            f"{source} has no column {', '.join(missing)}; a graph needs head, relation, tail."
        )
    triples = frame.select(pl.col(name).cast(pl.String) for name in TRIPLE_COLUMNS)
    nulls = [name for name in TRIPLE_COLUMNS if triples[name].null_count()]
    if nulls:
        raise InvalidDataError(f"{source} has empty cells in column {', '.join(nulls)}.")
    return triples


def read_triples(path: Path) -> pl.DataFrame:
    """Read a CSV or Parquet file of head, relation, tail columns (all strings).

    Raises:
        InvalidDataError: the file is not .csv or .parquet, or has empty cells.
        MissingColumnError: a column is missing.
    """
    if path.suffix == ".parquet":
        frame = pl.read_parquet(path)
    elif path.suffix == ".csv":
        frame = pl.read_csv(path, infer_schema=False)  # names such as `1.n.01` stay text
    else:
        raise InvalidDataError(f"{path}: give a .csv or .parquet file of triples.")
    return require_triples(frame, str(path))


def _split(vocab: TripleVocab, frame: pl.DataFrame) -> SplitData:
    ids = vocab.encode(frame.iter_rows())
    return SplitData(inputs={"head": ids[:, 0], "relation": ids[:, 1]}, targets=ids[:, 2])


def triples_task(
    train: pl.DataFrame, eval_frame: pl.DataFrame | None = None, test: pl.DataFrame | None = None
) -> TaskData:
    """The splits of a graph as a tail-prediction task over every entity they name.

    Raises:
        MissingColumnError: a frame lacks head, relation or tail.
        InvalidDataError: a cell is empty, or train has no triples.
    """
    parts = {"train": train, "eval": eval_frame, "test": test}
    frames = {k: require_triples(f, f"The {k} triples") for k, f in parts.items() if f is not None}
    if frames["train"].is_empty():
        raise InvalidDataError("The train triples are empty; a graph needs at least one.")
    vocab = TripleVocab.from_frames(frames.values())
    splits = {part: _split(vocab, frame) for part, frame in frames.items()}
    return TaskData(
        task="classification",
        train=splits["train"],
        eval=splits.get("eval"),
        test=splits.get("test"),
        num_classes=len(vocab.entities),
        class_names=list(vocab.entities),
        tokenizer=vocab.state(),
        meta={RELATIONS_META: list(vocab.relations)},
    )


def triple_ids(split: SplitData) -> torch.Tensor:
    """A tail-prediction split back as long [N, 3] (head, relation, tail) ids."""
    return torch.stack([split.inputs["head"], split.inputs["relation"], split.targets], dim=1)
