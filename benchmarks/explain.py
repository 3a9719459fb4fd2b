"""Explanation cost: Kernel SHAP s/row on the Adult MLP, Integrated Gradients ms/input on the
Adult MLP and the SST-2 MiniLM classifier, each beside its peer in the same run.

- Kernel SHAP: forgeml (`forgeml.serve.explain`: the 14 raw fields as players, 50
  background rows of the training split, every coalition one numpy gather) against
  `shap.KernelExplainer` as it is usually called on a preprocessed model (the peer:
  every encoded column a player, a 1,000-row background, the slowness shap#66 reports;
  100 rows under --quick), on a few rows under a cap. Both with shap's default sample
  count ("auto").
- Integrated Gradients, 50 steps: forgeml's explainer (served model, one batch of all
  steps, no weight gradients, per-field or per-word sums; MiniLM's path in bf16 autocast
  where the CPU has native bf16, its top words checked against an fp32 run, timed too)
  against captum called directly on the same torch module with its defaults
  (`IntegratedGradients` / `LayerIntegratedGradients` over the word embeddings, as
  captum's BERT tutorial does).
Medians over the rows; the first call of each is a warm-up and not counted.

    python benchmarks/explain.py [--quick] [--json]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _adult import prepare_adult
from _cli import make_parser, print_json

REPO = Path(__file__).resolve().parents[1]
SST2_DEV = REPO.parent / "shared" / "data" / "sst2" / "dev.tsv"


def _median_s(function: Callable[[Any], Any], items: list[Any]) -> float:
    function(items[0])  # warm-up: first-call allocations and lazy imports
    times = []
    for item in items:
        started = time.perf_counter()
        function(item)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _adult_rows(workspace: Any, ref: str, count: int) -> list[dict[str, Any]]:
    """Raw test-split rows of the model's dataset, the fields a request sends."""
    from forgeml.data import catalog
    from forgeml.tracking import get_model_version

    record = get_model_version(workspace, ref)
    assert record.dataset_version is not None
    frame = catalog.read_frame(workspace, record.dataset_version, "test").drop_nulls()
    return frame.head(count + 1).to_dicts()


def kernel_shap(
    workspace: Any, model: Any, rows: list[Any], peer_rows: int, peer_background: int
) -> dict[str, Any]:
    import shap

    from forgeml.serve._shap import FieldMasker
    from forgeml.serve.explain import model_background, training_background
    from forgeml.tracking import get_model_version

    fields = [f.name for f in model.row_encoder().fields]
    records = [{name: row[name] for name in fields} for row in rows]
    masker = FieldMasker(model, model_background(workspace, model) or [])
    ours = _median_s(masker.kernel_shap, records)

    record = get_model_version(workspace, model.ref)
    large = masker.encode(training_background(workspace, record, fields, peer_background, seed=0))

    def probabilities(features: np.ndarray) -> np.ndarray:
        return _softmax(masker.logits(features))

    explainer = shap.KernelExplainer(probabilities, large)
    encoded = [masker.encode([r]) for r in records[: peer_rows + 1]]
    peer = _median_s(lambda x: explainer.shap_values(x, silent=True), encoded)
    return {
        "fields": len(fields),
        "encoded_columns": int(large.shape[1]),
        "forgeml_background_rows": len(masker.background),
        "forgeml_rows": len(records) - 1,
        "forgeml_s_per_row": ours,
        "peer_background_rows": int(large.shape[0]),
        "peer_rows": len(encoded) - 1,
        "peer_s_per_row": peer,
    }


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def ig_adult(workspace: Any, model: Any, rows: list[Any]) -> dict[str, Any]:
    import torch
    from captum.attr import IntegratedGradients

    from forgeml.serve._integrated_gradients import explain_features
    from forgeml.serve._shap import FieldMasker
    from forgeml.serve.explain import model_background

    fields = [f.name for f in model.row_encoder().fields]
    records = [{name: row[name] for name in fields} for row in rows]
    masker = FieldMasker(model, model_background(workspace, model) or [])
    ours = _median_s(lambda r: explain_features(model, masker, r, 50), records)
    module = model.module
    baseline = torch.from_numpy(masker.encoded_background.mean(axis=0, keepdims=True))

    def captum_direct(record: dict[str, Any]) -> Any:
        inputs = torch.from_numpy(masker.encode([record]))
        target = int(module(inputs).argmax())
        forward = lambda x: module(x).softmax(-1)  # noqa: E731
        return IntegratedGradients(forward).attribute(
            inputs, baselines=baseline, target=target, n_steps=50
        )

    for parameter in module.parameters():  # as a user's freshly loaded module has them
        parameter.requires_grad_(True)
    peer = _median_s(captum_direct, records)
    return {"rows": len(records) - 1, "forgeml_ms": ours * 1000, "peer_ms": peer * 1000}


def ig_text(model: Any, texts: list[str]) -> dict[str, Any]:
    import torch
    from captum.attr import LayerIntegratedGradients

    from forgeml.serve._integrated_gradients import _tokenizer, explain_text

    found: list[Any] = []
    ours = _median_s(lambda t: found.append(explain_text(model, t, 50)), texts)
    exact: list[Any] = []  # the fp32 reference, timed the same way
    fp32 = _median_s(lambda t: exact.append(explain_text(model, t, 50, bf16=False)), texts)
    module = model.module
    tokenizer = _tokenizer(model)

    def captum_direct(text: str) -> Any:
        encoded = tokenizer([text], return_tensors="pt", return_token_type_ids=False)
        ids, mask = encoded["input_ids"], encoded["attention_mask"]
        baseline = torch.full_like(ids, tokenizer.pad_token_id)
        baseline[:, 0], baseline[:, -1] = ids[:, 0], ids[:, -1]  # keep [CLS] and [SEP]
        target = int(module(ids, mask).argmax())
        forward = lambda i, m: module(i, m).softmax(-1)  # noqa: E731
        layer = module.encoder.get_input_embeddings()
        return LayerIntegratedGradients(forward, layer).attribute(
            ids, baselines=baseline, additional_forward_args=(mask,), target=target, n_steps=50
        )

    for parameter in module.parameters():
        parameter.requires_grad_(True)
    peer = _median_s(captum_direct, texts)
    tokens = [len(tokenizer(t)["input_ids"]) for t in texts]
    timed = found[2:]  # the warm-up's and the first text's, as "texts" counts
    return {
        "texts": len(texts) - 1,
        "median_tokens": statistics.median(tokens),
        "precision": timed[0].details["precision"],
        "forgeml_ms": ours * 1000,
        "peer_ms": peer * 1000,
        # the fast path's correctness beside its speed: the top word of each text against
        # an fp32 run, and the largest completeness gap |sum - (f(x) - f(baseline))|
        "top_word_as_fp32": sum(
            a.attributions[0].feature == b.attributions[0].feature
            for a, b in zip(timed, exact[2:], strict=True)
        ),
        "max_abs_convergence_delta": max(abs(e.convergence_delta or 0.0) for e in timed),
        "fp32_max_abs_convergence_delta": max(abs(e.convergence_delta or 0.0) for e in exact[2:]),
        "forgeml_fp32_ms": fp32 * 1000,
    }


def _dev_texts(count: int) -> list[str]:
    lines = SST2_DEV.read_text(encoding="utf-8").splitlines()
    column = lines[0].split("\t").index("content")
    return [line.split("\t")[column] for line in lines[1 : count + 2]]


def measure(quick: bool) -> dict[str, Any]:
    import torch

    from forgeml.serve.model import load_model
    from forgeml.tracking import get_model_version
    from optimize import train_adult, train_minilm

    results: dict[str, Any] = {"quick": quick, "torch_threads": torch.get_num_threads()}
    with tempfile.TemporaryDirectory(prefix="forgeml-bench-explain-") as scratch:
        workspace = prepare_adult(Path(scratch) / "home")
        try:
            ref = train_adult(workspace, quick)
            adult = load_model(workspace, get_model_version(workspace, ref), "torch", None)
            rows = _adult_rows(workspace, ref, 2 if quick else 20)
            # quick: the peer's background is cut to 100 rows, its cost falls with it
            shap_ = kernel_shap(workspace, adult, rows, 1 if quick else 3, 100 if quick else 1000)
            results["kernel_shap"] = shap_
            results["ig_adult_mlp"] = ig_adult(workspace, adult, rows * (1 if quick else 2))
            text_ref = train_minilm(workspace, Path(scratch), True, 32 if quick else 400)
            minilm = load_model(workspace, get_model_version(workspace, text_ref), "torch", None)
            results["ig_minilm"] = ig_text(minilm, _dev_texts(1 if quick else 20))
        finally:
            workspace.close()
    return results


def format_table(results: dict[str, Any]) -> str:
    shap_, adult, text = results["kernel_shap"], results["ig_adult_mlp"], results["ig_minilm"]
    return "\n".join(
        [
            f"{'what':<44} {'forgeml':>10} {'peer':>10} {'target':>8}",
            f"{'Kernel SHAP, Adult MLP, s/row':<44} {shap_['forgeml_s_per_row']:>10.3f} "
            f"{shap_['peer_s_per_row']:>10.3f} {'<= 2':>8}",
            f"{'Integrated Gradients, Adult MLP, ms/input':<44} {adult['forgeml_ms']:>10.1f} "
            f"{adult['peer_ms']:>10.1f} {'<= 50':>8}",
            f"{'Integrated Gradients, MiniLM, ms/input':<44} {text['forgeml_ms']:>10.1f} "
            f"{text['peer_ms']:>10.1f} {'<= 500':>8}",
            f"SHAP: forgeml {shap_['fields']} fields x {shap_['forgeml_background_rows']} "
            f"background rows ({shap_['forgeml_rows']} rows); peer {shap_['encoded_columns']} "
            f"encoded columns x {shap_['peer_background_rows']} rows ({shap_['peer_rows']} rows)",
            f"IG: 50 steps; Adult {adult['rows']} rows, MiniLM {text['texts']} SST-2 dev "
            f"texts (median {text['median_tokens']} tokens); torch threads "
            f"{results['torch_threads']}",
            f"MiniLM in {text['precision']} ({text['forgeml_fp32_ms']:.1f} ms/input in fp32): "
            f"top word as fp32's in {text['top_word_as_fp32']} "
            f"of {text['texts']} texts; max |convergence delta| "
            f"{text['max_abs_convergence_delta']:.4f} (fp32 "
            f"{text['fp32_max_abs_convergence_delta']:.4f})",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = make_parser(
        __doc__,
        "2 rows, 1 peer SHAP row on a 100-row background, 1 SST-2 text, a 1-epoch Adult "
        "MLP and a 5-step MiniLM on 32 rows.",
    )
    args = parser.parse_args(argv)
    results = measure(args.quick)
    print(format_table(results))
    print_json(args, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
