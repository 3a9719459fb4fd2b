"""POST /v1/embeddings: vectors from an encoder model, as floats or base64."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

from fastapi import Response

from forgeml.serve.protocols.openai._errors import error_response
from forgeml.serve.protocols.openai._generation import json_response
from forgeml.serve.protocols.openai._requests import EmbeddingRequest

if TYPE_CHECKING:
    from forgeml.serve.protocols.openai import OpenAIModels

__all__ = ["embeddings"]


async def embeddings(models: OpenAIModels, body: EmbeddingRequest) -> Response:
    """One vector per input of `body` from encoder model `body.model` of `models`."""
    texts = [body.input] if isinstance(body.input, str) else body.input
    vectors = await models.embed(body.model, texts)
    size = len(vectors[0]) if vectors else 0
    if body.dimensions is not None and body.dimensions != size:
        message = (
            f"The model '{body.model}' makes {size}-dimensional vectors, not {body.dimensions}."
        )
        return error_response(400, message, "dimensions")
    data = [
        {"object": "embedding", "index": index, "embedding": _encode(vector, body.encoding_format)}
        for index, vector in enumerate(vectors)
    ]
    # an estimate: the encoder's own tokenizer belongs to the runtime, so count words
    words = sum(len(text.split()) for text in texts)
    usage = {"prompt_tokens": words, "total_tokens": words}
    return json_response({"object": "list", "data": data, "model": body.model, "usage": usage})


def _encode(vector: list[float], encoding_format: str) -> list[float] | str:
    if encoding_format == "float":
        return vector
    import numpy as np

    # the client decodes base64 as little-endian float32
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")
