from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from forgeml.core.errors import ConfigError, InvalidDataError, NotFoundError
from forgeml.core.workspace import Workspace
from forgeml.governance.explain import explain_model
from forgeml.serve._integrated_gradients import explain_text, native_bf16
from forgeml.serve.explain import explain_rows, model_background
from forgeml.serve.model import LoadedModel, load_model
from forgeml.tracking import get_model_version
from tests.serve.conftest import adult_records, open_home
from tests.train.conftest import SST2_DIR, copy_home

TEXTS = ["a gripping , funny and deeply moving film", "the plot is dull and the acting worse"]


@pytest.fixture(scope="module")
def workspace(
    serve_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Workspace]:
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        home = copy_home(serve_template, tmp_path_factory.mktemp("explain") / "home")
        opened = open_home(home)
        yield opened
        opened.close()


@pytest.fixture(scope="module")
def adult(workspace: Workspace) -> LoadedModel:
    return load_model(workspace, get_model_version(workspace, "adult-mlp@v1"), "torch", None)


@pytest.fixture(scope="module")
def minilm(workspace: Workspace) -> LoadedModel:
    return load_model(workspace, get_model_version(workspace, "sst2-minilm@v1"), "torch", None)


def _served_probability(model: LoadedModel, rows: list[Any], label: str) -> np.ndarray:
    """The probability of `label` as the model server answers it."""
    found = model.run_rows(rows, {"probabilities"})["probabilities"]
    assert model.class_names is not None
    return found[:, model.class_names.index(label)].astype(np.float64)


def test_kernel_shap_values_add_up_to_the_served_prediction_minus_the_background_mean(
    workspace: Workspace, adult: LoadedModel
) -> None:
    rows = adult_records(3, offset=7)
    background = model_background(workspace, adult, size=20)
    assert background is not None and len(background) == 20
    for row, found in zip(rows, explain_rows(adult, rows, background), strict=True):
        assert found.label is not None
        served = _served_probability(adult, [row], found.label)[0]
        base = _served_probability(adult, background, found.label).mean()
        assert found.prediction == pytest.approx(served, abs=1e-5)
        assert found.base_value == pytest.approx(base, abs=1e-5)
        total = sum(a.value for a in found.attributions)
        assert total == pytest.approx(served - base, abs=1e-4)
        assert {a.feature for a in found.attributions} == set(row)


def test_kernel_shap_of_a_field_that_equals_every_background_value_is_zero(
    workspace: Workspace, adult: LoadedModel
) -> None:
    background = model_background(workspace, adult, size=10)
    assert background is not None
    row = adult_records(1)[0]
    flat = [{**record, "race": row["race"]} for record in background]  # race never varies
    (found,) = explain_rows(adult, [row], flat)
    race = next(a for a in found.attributions if a.feature == "race")
    assert race.value == pytest.approx(0.0, abs=1e-9)


def test_the_background_is_sampled_from_the_training_split_and_seeded(
    workspace: Workspace, adult: LoadedModel
) -> None:
    from forgeml.data import catalog

    record = get_model_version(workspace, "adult-mlp@v1")
    assert record.dataset_version is not None
    train = catalog.read_frame(workspace, record.dataset_version, "train")
    once = model_background(workspace, adult, size=15, seed=3)
    again = model_background(workspace, adult, size=15, seed=3)
    other = model_background(workspace, adult, size=15, seed=4)
    assert once == again and once != other
    assert once is not None
    training = {tuple(sorted(r.items(), key=str)) for r in train.select(list(once[0])).to_dicts()}
    assert all(tuple(sorted(r.items(), key=str)) in training for r in once)


def test_integrated_gradients_on_the_adult_mlp_is_complete(
    workspace: Workspace, adult: LoadedModel
) -> None:
    background = model_background(workspace, adult, size=30)
    assert background is not None
    rows = adult_records(2, offset=3)
    for row, found in zip(
        rows, explain_rows(adult, rows, background, "integrated_gradients"), strict=True
    ):
        assert found.label is not None and found.convergence_delta is not None
        assert found.prediction == pytest.approx(
            _served_probability(adult, [row], found.label)[0], abs=1e-5
        )
        total = sum(a.value for a in found.attributions)
        gap = found.prediction - found.base_value
        assert abs(total - gap) < 0.01
        assert abs(found.convergence_delta) < 0.01


def test_integrated_gradients_on_minilm_attributes_each_word_and_is_complete(
    minilm: LoadedModel,
) -> None:
    found = explain_rows(minilm, TEXTS)
    for text, explanation in zip(TEXTS, found, strict=True):
        assert explanation.method == "integrated_gradients"
        assert explanation.label is not None
        served = _served_probability(minilm, [text], explanation.label)[0]
        assert explanation.prediction == pytest.approx(served, abs=1e-4)
        words = sorted(explanation.attributions, key=lambda a: a.position or 0)
        assert " ".join(a.feature for a in words) == text
        total = sum(a.value for a in explanation.attributions)
        gap = explanation.prediction - explanation.base_value
        assert explanation.convergence_delta is not None
        assert abs(total - gap) < 0.02
        assert abs(explanation.convergence_delta) < 0.02


def _sst2_dev_sentences(count: int) -> list[str]:
    """The first SST-2 dev sentences, as benchmarks/explain.py takes them."""
    lines = (SST2_DIR / "dev.tsv").read_text(encoding="utf-8").splitlines()
    column = lines[0].split("\t").index("content")
    return [line.split("\t")[column] for line in lines[1 : count + 1]]


def test_integrated_gradients_in_bf16_ranks_words_as_fp32_does_and_stays_complete(
    minilm: LoadedModel,
) -> None:
    for text in _sst2_dev_sentences(8):  # the benchmark compares its 20 (top_word_agreement)
        fast = explain_text(minilm, text, 50, bf16=True)
        exact = explain_text(minilm, text, 50, bf16=False)
        assert (fast.details["precision"], exact.details["precision"]) == ("bf16", "fp32")
        assert (fast.prediction, fast.base_value) == (exact.prediction, exact.base_value)
        assert fast.attributions[0].feature == exact.attributions[0].feature, text
        assert fast.convergence_delta is not None and exact.convergence_delta is not None
        assert abs(fast.convergence_delta) < 0.02 and abs(exact.convergence_delta) < 0.02
        largest = abs(exact.attributions[0].value)
        in_order = [sorted(e.attributions, key=lambda a: a.position or 0) for e in (fast, exact)]
        for a, b in zip(*in_order, strict=True):
            assert (a.feature, a.position) == (b.feature, b.position)
            assert a.value == pytest.approx(b.value, abs=0.1 * largest)


def test_text_explanations_take_bf16_only_where_the_cpu_computes_it_natively(
    minilm: LoadedModel,
) -> None:
    import torch

    (found,) = explain_rows(minilm, TEXTS[:1])
    expected = "bf16" if native_bf16(torch.device("cpu")) else "fp32"
    assert found.details["precision"] == expected


def test_word_pieces_are_merged_into_their_word(minilm: LoadedModel) -> None:
    (found,) = explain_rows(minilm, ["unforgettably overwrought"])
    assert sorted(a.feature for a in found.attributions) == ["overwrought", "unforgettably"]


def test_explain_model_loads_the_version_and_answers_its_ref(workspace: Workspace) -> None:
    found = explain_model(workspace, "adult-mlp", adult_records(1), background_size=10)
    assert found.model == "adult-mlp@v2"
    answer = found.to_dict(top=3)
    (row,) = answer["explanations"]
    assert len(row["attributions"]) == 3
    values = [abs(a["value"]) for a in row["attributions"]]
    assert values == sorted(values, reverse=True)
    assert row["attributions_total"] == pytest.approx(
        row["prediction"] - row["base_value"], abs=1e-4
    )


@pytest.mark.parametrize(
    ("ref", "rows", "error", "words"),
    [
        ("adult-mlp@v1", [{"age": 39}], InvalidDataError, "has no field 'fnlwgt'"),
        ("adult-mlp@v1", [], InvalidDataError, "no rows to explain"),
        ("nosuch", ["x"], NotFoundError, "'nosuch' is not registered"),
        ("sst2-minilm@v1", [3], InvalidDataError, "takes strings"),
    ],
)
def test_bad_requests_fail_with_one_sentence(
    workspace: Workspace, ref: str, rows: list[Any], error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words):
        explain_model(workspace, ref, rows)


def test_text_models_refuse_kernel_shap(minilm: LoadedModel) -> None:
    with pytest.raises(ConfigError, match="integrated_gradients"):
        explain_rows(minilm, TEXTS[:1], method="kernel_shap")


def test_a_tabular_model_without_training_rows_cannot_be_explained(adult: LoadedModel) -> None:
    with pytest.raises(ConfigError, match="background rows"):
        explain_rows(adult, adult_records(1), None)
