"""The rotate and transe model families through `forgeml train`, on WordNet 3.0's verbs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from forgeml.core.errors import ConfigError
from forgeml.tracking import download_bundle, get_model_version
from forgeml.train.models import get_family
from forgeml.train.models.kg import (
    KGEmbedding,
    NegativeBatch,
    TripleVocab,
    negative_sampling_loss,
    rank_tails,
    triples_task,
)
from forgeml.train.models.kg._objective import NegativeSamplingObjective, NegativeSamplingParams
from forgeml.train.recipe import load_bundle_model
from tests.cli.conftest import json_out
from tests.serve.conftest import open_home
from tests.train._kg_home import (
    MODEL,
    run_metrics,
    train_config,
    wordnet_data_template,
    wordnet_trained_template,
)
from tests.train.conftest import copy_home

pytestmark = pytest.mark.slow

RANKING = {"mrr", "mr", "hits_at_1", "hits_at_3", "hits_at_10"}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return wordnet_trained_template(tmp_path_factory)


def test_a_rotate_run_logs_filtered_ranking_on_validation(trained: Path) -> None:
    metrics = run_metrics(trained)

    assert set(metrics) == RANKING
    # random ranks over 2,770 entities give an MRR about 3 / 1,000; 40 steps learn the graph
    assert metrics["mrr"] > 0.1
    assert metrics["hits_at_1"] <= metrics["hits_at_3"] <= metrics["hits_at_10"] <= 1


def test_the_bundle_keeps_the_vocabulary_as_json_and_rebuilds_the_model(
    trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    workspace = open_home(copy_home(trained, tmp_path / "home"))
    try:
        record = get_model_version(workspace, f"{MODEL}@v1")
        bundle = download_bundle(workspace, record, tmp_path / "bundle")
    finally:
        workspace.close()
    description = json.loads((bundle / "model.json").read_text())
    vocab = TripleVocab.from_state(description["tokenizer"])
    model = load_bundle_model(bundle)

    assert sorted(path.name for path in bundle.iterdir()) == ["model.json", "model.safetensors"]
    assert description["family"] == {"name": "rotate", "modality": "triples", "module": None}
    assert len(vocab.entities) == 2770
    assert vocab.relations == ("_also_see", "_hypernym", "_verb_group")
    assert isinstance(model, KGEmbedding)
    assert len(rank_tails(model, vocab, "exhale.v.01", "_hypernym", k=3)) == 3


def _write_config(path: Path, **changes: object) -> Path:
    path.write_text(yaml.safe_dump(train_config(**changes)))  # type: ignore[arg-type]
    return path


def test_transe_trains_through_the_cli(
    cli: object, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    copy_home(wordnet_data_template(tmp_path_factory), tmp_path / "home")
    config = _write_config(tmp_path / "transe.yaml", name="wn-transe", model="transe")

    result = cli("train", str(config), "--json")  # type: ignore[operator]

    assert result.code == 0, result.stderr
    summary = json_out(result)
    assert set(summary["metrics"]) >= RANKING
    assert summary["metrics"]["mrr"] > 0.02


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"workers": 2}, "trains with its own objective, which runs in one process"),
        ({"model": {"name": "rotate", "params": {"dim": 8, "margin": 3}}}, "margin"),
    ],
)
def test_a_graph_run_it_cannot_do_is_one_sentence(
    cli: object,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    changes: dict[str, object],
    message: str,
) -> None:
    copy_home(wordnet_data_template(tmp_path_factory), tmp_path / "home")
    config = train_config()
    config.update(changes)
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(config))

    result = cli("train", str(tmp_path / "bad.yaml"))  # type: ignore[operator]

    assert result.code == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_rotate_on_a_dataset_without_triples_names_the_missing_columns(
    cli: object, tmp_path: Path
) -> None:
    (tmp_path / "pairs.csv").write_text("head,tail\na,b\nb,c\nc,a\n")
    assert cli("data", "add", "pairs", str(tmp_path / "pairs.csv")).code == 0  # type: ignore[operator]
    config = train_config(data={"dataset": "pairs", "train_split": None, "test_split": None})
    config["data"]["eval_split"] = None
    (tmp_path / "pairs.yaml").write_text(yaml.safe_dump(config))

    result = cli("train", str(tmp_path / "pairs.yaml"))  # type: ignore[operator]

    assert result.code == 1
    assert "has no column relation; a graph needs head, relation, tail" in result.stderr


# --- the objective ----------------------------------------------------------------------


def test_the_objective_corrupts_tails_of_one_half_and_heads_of_the_other() -> None:
    import polars as pl

    frame = pl.DataFrame(
        {"head": ["a", "b", "c", "d"], "relation": ["r"] * 4, "tail": ["b", "c", "d", "a"]}
    )
    task = triples_task(frame)
    torch.manual_seed(0)
    model = get_family("rotate").build(task, {"dim": 4})
    assert isinstance(model, KGEmbedding)
    objective = NegativeSamplingObjective(NegativeSamplingParams(negatives=3, alpha=0.5))
    inputs, targets = task.train.inputs, task.train.targets

    torch.manual_seed(1)
    loss = objective.loss(model, inputs, targets)
    torch.manual_seed(1)
    positives = torch.stack([inputs["head"], inputs["relation"], targets], dim=1)
    tails = NegativeBatch(positives[:2], torch.randint(4, (2, 3)), "tail")
    heads = NegativeBatch(positives[2:], torch.randint(4, (2, 3)), "head")
    expected = (
        negative_sampling_loss(model, tails, 0.5) + negative_sampling_loss(model, heads, 0.5)
    ) / 2

    torch.testing.assert_close(loss, expected)


def test_the_objective_refuses_a_model_that_is_not_a_graph_embedding() -> None:
    objective = NegativeSamplingObjective(NegativeSamplingParams())
    with pytest.raises(ConfigError, match="trains RotatE or TransE, not Linear"):
        objective.loss(
            torch.nn.Linear(2, 2),
            {"head": torch.zeros(1), "relation": torch.zeros(1)},
            torch.zeros(1),
        )
