from __future__ import annotations

from forgeml.pipelines.graph import dependents, find_cycle, render_text, topological_order

DIAMOND = {"d": ["b", "c"], "b": ["a"], "c": ["a"], "a": [], "e": []}


def test_the_order_puts_dependencies_first_and_keeps_file_order_among_ready_steps() -> None:
    assert topological_order(DIAMOND) == ["a", "b", "c", "d", "e"]


def test_a_dag_has_no_cycle_and_a_cycle_is_named_along_its_steps() -> None:
    assert find_cycle(DIAMOND) is None
    assert find_cycle({"a": ["b"], "b": ["c"], "c": ["a"]}) == ["a", "b", "c", "a"]
    assert find_cycle({"x": [], "a": ["a"]}) == ["a", "a"]


def test_dependents_are_direct_and_indirect() -> None:
    assert dependents(DIAMOND, "a") == {"b", "c", "d"}
    assert dependents(DIAMOND, "e") == set()


def test_the_text_drawing_indents_each_step_below_what_it_needs() -> None:
    kinds = dict.fromkeys(DIAMOND, "command")

    assert render_text(DIAMOND, kinds).splitlines() == [
        "a (command)",
        "  b (command)  <- a",
        "  c (command)  <- a",
        "    d (command)  <- b, c",
        "e (command)",
    ]
