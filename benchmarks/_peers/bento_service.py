"""A BentoML 1.4 service in front of the benchmark's two models.

    FORGEML_HOME=HOME bentoml serve bento_service:Peers --port PORT   (from _peers/)

`POST /predict` takes `{"instances": [record, ...]}` (`:predict`'s body) and answers a list
of `{"label", "probabilities"}`; `POST /embeddings` takes `{"input": [text, ...]}` and
answers one vector per text. Both APIs are `batchable` (BentoML's adaptive batching, at
most 32 rows, as forgeml's server batches).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import bentoml
from model import embeddings as embed_texts
from model import predictions, served

MAX_BATCH = 32


@bentoml.service(workers=1)
class Peers:
    def __init__(self) -> None:
        home = Path(os.environ["FORGEML_HOME"])
        self.adult = served(home, "adult-mlp")
        self.minilm = served(home, "sst2-minilm")

    @bentoml.api(batchable=True, max_batch_size=MAX_BATCH)
    def predict(self, instances: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return predictions(self.adult, instances)

    @bentoml.api(batchable=True, max_batch_size=MAX_BATCH)
    def embeddings(self, input: list[str]) -> list[list[float]]:
        return embed_texts(self.minilm, input)
