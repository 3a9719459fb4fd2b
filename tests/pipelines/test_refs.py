from __future__ import annotations

import pytest

from forgeml.pipelines._refs import Reference, ReferenceSyntaxError, references, substitute

OUTPUTS = {"train": {"model": "adult@v3", "run_id": "abc"}, "split": {"rows": 120}}


def test_a_whole_string_reference_keeps_the_values_type() -> None:
    assert substitute("${steps.split.rows}", {}, OUTPUTS) == 120
    assert substitute("${params.lr}", {"lr": 0.1}, OUTPUTS) == 0.1


def test_a_reference_inside_a_string_becomes_its_text() -> None:
    value = substitute("--model=${steps.train.model} --rows ${steps.split.rows}", {}, OUTPUTS)

    assert value == "--model=adult@v3 --rows 120"


def test_references_are_substituted_inside_lists_and_mappings() -> None:
    value = {"argv": ["serve", "${steps.train.model}"], "params": {"seed": "${params.seed}"}}

    assert substitute(value, {"seed": 4}, OUTPUTS) == {
        "argv": ["serve", "adult@v3"],
        "params": {"seed": 4},
    }


def test_references_name_the_key_path_that_holds_them() -> None:
    found = list(references({"argv": ["x", "${steps.train.model}"], "d": "${params.lr}"}))

    assert found == [
        ("argv.1", Reference("${steps.train.model}", "steps", "train", "model")),
        ("d", Reference("${params.lr}", "params", "lr")),
    ]


@pytest.mark.parametrize("text", ["${steps.train}", "${env.HOME}", "${}", "${params.a.b}"])
def test_a_reference_of_no_known_form_is_refused_with_its_key(text: str) -> None:
    with pytest.raises(ReferenceSyntaxError, match=r"^key 'argv\.0': .* is not a reference"):
        list(references({"argv": [text]}))


def test_text_without_references_is_left_alone() -> None:
    assert substitute("$HOME {x} $", {}, OUTPUTS) == "$HOME {x} $"
    assert list(references("$HOME {x} $")) == []
