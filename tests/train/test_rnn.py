from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
import torch

from forgeml.core.errors import ConfigError
from forgeml.train.config import TrainConfig
from forgeml.train.logger import NullLogger
from forgeml.train.loop import fit
from forgeml.train.models import build_model, get_family
from forgeml.train.models.rnn import RNNClassifier, reverse_within, tokenize
from forgeml.train.task import SplitData, TaskData
from tests.train.conftest import SST2_DIR

SENTENCES = [
    "a gripping , funny and moving film",
    "dull",
    "the plot goes nowhere and the acting is wooden , flat and lifeless from start to end",
]
SMALL = {"embedding_dim": 16, "hidden_size": 8, "max_length": 32}


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread() -> Iterator[None]:
    """One intra-op thread: an RNN's small per-step kernels only lose time to hand-offs."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _task(num_classes: int = 2) -> TaskData:
    empty = SplitData({}, torch.empty(0))
    return TaskData(task="classification", train=empty, num_classes=num_classes)


def _model(**params: Any) -> RNNClassifier:
    torch.manual_seed(0)
    model = build_model("rnn", _task(), {**SMALL, **params})
    assert isinstance(model, RNNClassifier)
    return model.eval()


def _pad(inputs: dict[str, torch.Tensor], extra: int) -> dict[str, torch.Tensor]:
    return {name: torch.nn.functional.pad(t, (0, extra)) for name, t in inputs.items()}


def test_reverse_within_reverses_only_the_real_steps_and_is_its_own_inverse() -> None:
    x = torch.arange(10.0).view(2, 5, 1)
    lengths = torch.tensor([3, 5])

    flipped = reverse_within(x, lengths)

    assert flipped[:, :, 0].tolist() == [[2, 1, 0, 3, 4], [9, 8, 7, 6, 5]]
    assert torch.equal(reverse_within(flipped, lengths), x)


@pytest.mark.parametrize("pooling", ["max", "mean", "last"])
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_padding_does_not_change_the_logits(cell: str, pooling: str) -> None:
    model = _model(cell=cell, pooling=pooling, num_layers=2)
    alone = tokenize(SENTENCES[:1], {})
    batch = tokenize(SENTENCES, {})  # the first sentence padded to the longest one

    with torch.inference_mode():
        reference = model(**alone)
        padded = model(**_pad(alone, 7))
        in_batch = model(**batch)[:1]
        batch_padded = model(**_pad(batch, 5))[:1]

    assert batch["attention_mask"][0].sum() < batch["attention_mask"].shape[1]
    for logits in (padded, in_batch, batch_padded):
        torch.testing.assert_close(logits, reference, rtol=0, atol=1e-6)


def test_the_backward_direction_reads_the_text_so_order_matters() -> None:
    model = _model(bidirectional=True)
    inputs = tokenize(["not good , bad", "bad , not good"], {})

    with torch.inference_mode():
        logits = model(**inputs)

    assert not torch.allclose(logits[0], logits[1])


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"cell": "transformer"}, "cell"),
        ({"pooling": "first"}, "pooling"),
        ({"hidden": 8}, "hidden"),
        ({"tokenizer": "/no/such/folder"}, "tokenizer"),
    ],
)
def test_bad_params_are_one_config_error(params: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        build_model("rnn", _task(), params)


def test_the_family_is_a_text_model_with_a_dynamic_sequence_for_onnx() -> None:
    family = get_family("rnn")

    assert family.modality == "text"
    assert family.inputs == ("input_ids", "attention_mask")
    assert family.onnx is not None
    assert family.onnx.dynamic_axes["input_ids"] == {1: "sequence"}


@pytest.mark.slow
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_onnx_export_keeps_a_dynamic_sequence_and_matches_torch(cell: str, tmp_path: Path) -> None:
    import onnxruntime as ort

    from forgeml.optimize.onnx_export import export_onnx

    model = _model(cell=cell, num_layers=2)
    graph = export_onnx(
        model, tokenize(SENTENCES[:2], {}), tmp_path / "rnn.onnx", get_family("rnn")
    )
    inputs = _pad(tokenize(SENTENCES, {}), 3)  # another batch size and sequence length
    session = ort.InferenceSession(str(tmp_path / "rnn.onnx"), providers=["CPUExecutionProvider"])

    (logits,) = session.run(None, {name: t.numpy() for name, t in inputs.items()})

    with torch.inference_mode():
        expected = model(**inputs).numpy()
    assert graph.inputs == ["input_ids", "attention_mask"] and graph.outputs == ["logits"]
    np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_a_second_export_in_the_same_process_keeps_the_sequence_dynamic(
    cell: str, tmp_path: Path
) -> None:
    from forgeml.optimize.onnx_export import export_onnx

    family = get_family("rnn")
    first = export_onnx(_model(cell=cell), tokenize(SENTENCES[:2], {}), tmp_path / "a.onnx", family)
    second = export_onnx(
        _model(cell=cell, num_layers=2), tokenize(SENTENCES[1:], {}), tmp_path / "b.onnx", family
    )

    assert first.outputs == second.outputs == ["logits"]


# --- on SST-2 ---------------------------------------------------------------------------


def _sst2(path: Path, rows: int) -> tuple[list[str], torch.Tensor]:
    frame = pl.read_csv(path, separator="\t", quote_char=None, n_rows=rows)
    return frame.get_column(frame.columns[1]).to_list(), frame.get_column("label").to_torch()


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_a_short_training_on_sst2_beats_chance_on_dev_sentences(
    cell: str, shared_data: Path, tmp_path: Path
) -> None:
    params = {"cell": cell, "embedding_dim": 32, "hidden_size": 32, "max_length": 48}
    texts, labels = _sst2(shared_data / "sst2" / "train.tsv", 3000)
    dev_texts, dev_labels = _sst2(shared_data / "sst2" / "dev.tsv", 200)
    task = TaskData(
        task="classification",
        train=SplitData(tokenize(texts, params), labels),
        eval=SplitData(tokenize(dev_texts, params), dev_labels),
        num_classes=2,
        class_names=["0", "1"],
    )
    config = TrainConfig.model_validate(
        {
            "name": "sst2-rnn",
            "data": {"dataset": "sst2"},
            "model": {"name": "rnn", "params": params},
            "optimizer": {"name": "adam", "lr": 0.005},
            "epochs": 2,
            "batch_size": 64,
        }
    )
    torch.manual_seed(0)
    model = build_model("rnn", task, params)

    result = fit(model, task, config, run_dir=tmp_path, logger=NullLogger())

    majority = max(float(dev_labels.float().mean()), 1 - float(dev_labels.float().mean()))
    assert result.final_metrics["accuracy"] > majority + 0.05
    assert np.isfinite(result.final_metrics["loss"])


# --- trained by `forgeml train`'s path, exported and served -------------------------------

SERVED = ["a gorgeous , witty , seductive movie .", "the plot is nothing but boilerplate ."]


def _train_and_export(home: Path, scratch: Path) -> None:
    from forgeml.data import pipeline
    from forgeml.data.ingest import IngestOptions
    from forgeml.optimize import OptimizeRequest, optimize_model
    from forgeml.tracking.runner import run_training
    from tests.serve.conftest import open_home

    lines = (SST2_DIR / "train.tsv").read_text(encoding="utf-8").splitlines()[:801]
    (scratch / "sst2.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    workspace = open_home(home)
    try:
        pipeline.add(workspace, "sst2", scratch / "sst2.tsv", IngestOptions())
        pipeline.derive(workspace, "split", "sst2", {"ratios": [0.8, 0.1, 0.1], "seed": 0})
        config = {
            "name": "sst2-rnn",
            "data": {"dataset": "sst2", "target": "label", "text_column": "sentence"},
            "model": {"name": "rnn", "params": {**SMALL, "cell": "gru"}},
            "optimizer": {"name": "adam", "lr": 0.005},
            "max_steps": 20,
            "batch_size": 32,
        }
        run_training(workspace, TrainConfig.model_validate(config))
        optimize_model(workspace, "sst2-rnn@v1", OptimizeRequest("onnx", verify_rows=32))
    finally:
        workspace.close()


def _bundle_probabilities(home: Path, scratch: Path) -> np.ndarray:
    from forgeml.tracking import download_bundle, get_model_version
    from forgeml.train.recipe import load_bundle_model
    from tests.serve.conftest import open_home

    workspace = open_home(home)
    try:
        bundle = download_bundle(workspace, get_model_version(workspace, "sst2-rnn@v1"), scratch)
    finally:
        workspace.close()
    with torch.inference_mode():
        logits = load_bundle_model(bundle)(**tokenize(SERVED, SMALL))
    return torch.softmax(logits, dim=1).numpy()


def _ask(home: Path, ref: str, runtime: str) -> tuple[dict[str, Any], dict[str, Any]]:
    import httpx

    from forgeml.serve import ServeOptions
    from tests.serve.conftest import LiveServer, open_home

    workspace = open_home(home)
    server = LiveServer(workspace, [ref], ServeOptions(runtime=runtime)).start()
    try:
        v2 = httpx.post(
            f"{server.url}/v2/models/sst2-rnn/infer",
            json={"inputs": [{"name": "text", "datatype": "BYTES", "shape": [2], "data": SERVED}]},
        )
        predicted = httpx.post(
            f"{server.url}/v1/models/sst2-rnn:predict", json={"instances": SERVED}
        )
    finally:
        server.stop()
        workspace.close()
    assert v2.status_code == 200, v2.text
    assert predicted.status_code == 200, predicted.text
    return v2.json(), predicted.json()


@pytest.mark.slow
def test_a_trained_rnn_serves_over_v2_and_predict_with_torch_and_onnx(
    shared_data: Path,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.train.conftest import copy_empty_home

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    home = copy_empty_home(tmp_path_factory, tmp_path / "home")
    _train_and_export(home, tmp_path)
    expected = _bundle_probabilities(home, tmp_path / "bundle")
    labels = [str(int(row.argmax())) for row in expected]

    for ref, runtime in (("sst2-rnn@v1", "torch"), ("sst2-rnn@v2", "onnx")):
        v2, predicted = _ask(home, ref, runtime)

        outputs = {o["name"]: o for o in v2["outputs"]}
        got = np.array(outputs["probabilities"]["data"]).reshape(outputs["probabilities"]["shape"])
        np.testing.assert_allclose(got, expected, atol=1e-5)
        assert outputs["label"]["data"] == labels
        assert [p["label"] for p in predicted["predictions"]] == labels
