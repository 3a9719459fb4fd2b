from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from forgeml.core.errors import ConfigError
from forgeml.train import models
from forgeml.train.models import (
    ModelFamily,
    family_names,
    family_of,
    family_record,
    get_family,
    register_family,
)
from tests.train.test_models import custom_builder, make_task


@pytest.fixture(autouse=True)
def _private_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(models, "_REGISTERED", dict(models._REGISTERED))
    monkeypatch.setattr(models, "_ORIGIN", dict(models._ORIGIN))
    yield


def one_sentence(error: pytest.ExceptionInfo[Exception]) -> str:
    message = str(error.value)
    assert message.endswith(".") and "\n" not in message
    return message


BUILT_IN_TASKS = {
    "mlp": make_task(input_shape=(4,)),
    "cnn": make_task(input_shape=(1, 8, 8)),
    "text_classifier": make_task(),
    "tiny_gpt": make_task("language_modeling", (16,), None),
}


@pytest.mark.parametrize("name", sorted(BUILT_IN_TASKS))
def test_a_built_in_family_names_its_models_forward_keywords_as_inputs(name: str) -> None:
    family = get_family(name)
    model = family.build(BUILT_IN_TASKS[name], {})
    serving = family.serving_module(model)
    assert tuple(inspect.signature(model.forward).parameters) == family.inputs
    assert tuple(inspect.signature(serving.forward).parameters) == family.inputs
    assert family.name == name and name in family_names()


def test_the_text_family_serves_the_logits_it_trains_with_and_the_sentence_vectors() -> None:
    family = get_family("text_classifier")
    assert family.tokenizer is not None
    model = family.build(make_task(num_classes=3), {}).eval()
    inputs = family.tokenizer(models.TokenizerSource({}))(["a guitar", "the market"])
    with torch.inference_mode():
        logits, embeddings = family.serving_module(model)(**inputs)
        expected = model(**inputs)
    assert family.outputs == ("logits", "embeddings")
    torch.testing.assert_close(logits, expected)
    assert embeddings.shape == (2, 384)


def _fields(**overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "name": "scaler",
        "builder": custom_builder,
        "modality": "tabular",
        "inputs": ("features",),
    }
    return fields | overrides


def test_a_registered_family_is_found_by_name_and_its_bundle_records_where_it_came_from() -> None:
    family = register_family(**_fields())
    assert get_family("scaler") is family
    record = family_record(family)
    assert record == {"name": "scaler", "modality": "tabular", "module": __name__}
    assert family_of({"model": {"name": "scaler"}, "family": record}) is family


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"name": "mlp"}, "'mlp' is built in"),
        ({"modality": "audio"}, "modality 'audio'"),
        ({"colour": "red"}, "'colour'"),
    ],
)
def test_register_family_rejects_a_bad_record_with_one_sentence(
    overrides: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(ConfigError) as error:
        register_family(**_fields(**overrides))
    assert fragment in one_sentence(error)


@pytest.mark.parametrize(
    ("family", "fragment"),
    [
        ({"module": "no_such_package.families"}, "'no_such_package.families'"),
        ({"module": None}, "not registered in this process"),
        (None, "not registered in this process"),
    ],
)
def test_a_bundle_whose_family_cannot_be_found_says_which_and_where(
    family: dict[str, Any] | None, fragment: str
) -> None:
    description = {"model": {"name": "unheard_of"}, "family": family}
    with pytest.raises(ConfigError) as error:
        family_of(description)
    assert fragment in one_sentence(error)


def test_a_bundle_finds_its_family_by_importing_the_module_that_registered_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(sys.modules, "tests.serve._word_family", raising=False)
    models._REGISTERED.pop("word_bag", None)
    record = {"name": "word_bag", "modality": "text", "module": "tests.serve._word_family"}
    family = family_of({"model": {"name": "word_bag"}, "family": record})
    assert (family.name, family.inputs) == ("word_bag", ("token_ids", "mask"))


def test_a_bare_builder_by_entry_point_is_a_tabular_family() -> None:
    family = get_family("tests.train.test_models:custom_builder")
    assert isinstance(family, ModelFamily)
    assert (family.modality, family.inputs, family.outputs) == (
        "tabular",
        ("features",),
        ("logits",),
    )
