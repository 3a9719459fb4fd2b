"""Ray Serve in front of the benchmark's two models, until SIGTERM.

    python _peers/ray_server.py HOME PORT

`POST /adult` takes `:predict`'s body (`{"instances": [record, ...]}`) and `POST /minilm`
OpenAI's embeddings body (`{"model": ..., "input": text or [texts]}`); each answers as
forgeml's server does. Each model is a Serve deployment (one replica) batching with
`@serve.batch` as forgeml's server does (at most 32 rows, no wait beyond what queued while
the last batch ran).
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from typing import Any

import orjson
import ray
from model import embedding_answer, embeddings, predictions, served
from ray import serve
from starlette.requests import Request
from starlette.responses import Response

MAX_BATCH = 32


def _json(payload: Any) -> Response:
    return Response(orjson.dumps(payload), media_type="application/json")


@serve.deployment(max_ongoing_requests=256, ray_actor_options={"num_cpus": 0})
class Adult:
    def __init__(self, home: str) -> None:
        self.model = served(Path(home), "adult-mlp")

    @serve.batch(max_batch_size=MAX_BATCH, batch_wait_timeout_s=0.0)
    async def predict(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return predictions(self.model, rows)

    async def __call__(self, request: Request) -> Response:
        instances = orjson.loads(await request.body())["instances"]
        answers = [await self.predict(row) for row in instances]
        return _json({"predictions": answers, "model_version": str(self.model.version)})


@serve.deployment(max_ongoing_requests=256, ray_actor_options={"num_cpus": 0})
class MiniLM:
    def __init__(self, home: str) -> None:
        self.model = served(Path(home), "sst2-minilm")

    @serve.batch(max_batch_size=MAX_BATCH, batch_wait_timeout_s=0.0)
    async def embed(self, texts: list[str]) -> list[list[float]]:
        return embeddings(self.model, texts)

    async def __call__(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        vectors = [await self.embed(text) for text in texts]
        return _json(embedding_answer(body["model"], texts, vectors))


def main(home: str, port: int) -> None:
    ray.init(include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(Adult.bind(home), name="adult", route_prefix="/adult")
    serve.run(MiniLM.bind(home), name="minilm", route_prefix="/minilm")
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    stopped.wait()
    serve.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
