"""examples/wordnet/make_graph.py on an excerpt in wndb(5) format and on WordNet 3.0 itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import torch
from examples.wordnet import make_graph

from forgeml.train.models.kg import (
    FitSettings,
    KnownTriples,
    NegativeSamplingParams,
    build_rotate,
    evaluate_ranking,
    fit_kg,
    read_triples,
    triple_ids,
    triples_task,
)
from tests.cli.conftest import json_out
from tests.conftest import CliResult
from tests.test_examples import readme_commands
from tests.train.conftest import EXAMPLES, REPO

HEADER = "  1 This software and database is being provided to you, the LICENSEE, by  \n"
# an excerpt in the format of WordNet's data files; offsets are made up, pointers are real
# symbols: dog is a canine (@), a member of Canis (#m), has a flag (%p), relates to bark (+)
DATA = {
    "noun": [
        "00000001 05 n 02 dog 0 domestic_dog 0 004 @ 00000002 n 0000 #m 00000003 n 0000 "
        "%p 00000004 n 0000 + 00000010 v 0101 | a domesticated canid  ",
        "00000002 05 n 01 canine 0 002 ~ 00000001 n 0000 @ 00000005 n 0000 | a carnivore  ",
        "00000003 05 n 01 Canis 0 001 %m 00000001 n 0000 | type genus of the dogs  ",
        "00000004 05 n 01 flag 0 001 #p 00000001 n 0000 | a conspicuous tail  ",
        "00000005 05 n 01 mammal 0 001 ~ 00000002 n 0000 | a warm-blooded animal  ",
    ],
    "verb": [
        "00000010 32 v 01 bark 0 002 + 00000001 n 0101 $ 00000011 v 0000 01 + 02 00 "
        "| make barking sounds  ",
        "00000011 32 v 01 yap 0 001 $ 00000010 v 0000 01 + 02 00 | bark sharply  ",
    ],
    "adj": [
        "00000020 00 a 01 long(a) 0 001 & 00000021 s 0000 | primarily temporal sense  ",
        "00000021 00 s 01 lengthy 0 001 & 00000020 a 0000 | overlong  ",
    ],
    "adv": [],
}
INDEX = {
    "noun": [
        "canine n 1 2 @ ~ 1 0 00000002  ",
        "canis n 1 1 %m 1 0 00000003  ",
        "dog n 2 4 @ #m %p + 2 1 00000099 00000001  ",  # the excerpt's dog is sense 2
        "flag n 1 1 #p 1 0 00000004  ",
        "mammal n 1 1 ~ 1 0 00000005  ",
    ],
    "verb": ["bark v 1 2 + $ 1 0 00000010  ", "yap v 1 1 $ 1 0 00000011  "],
    "adj": ["lengthy a 1 1 & 1 0 00000021  ", "long a 1 1 & 1 0 00000020  "],
    "adv": [],
}
WN18RR_RELATIONS = {
    "_also_see",
    "_derivationally_related_form",
    "_has_part",
    "_hypernym",
    "_instance_hypernym",
    "_member_meronym",
    "_member_of_domain_region",
    "_member_of_domain_usage",
    "_similar_to",
    "_synset_domain_topic_of",
    "_verb_group",
}


@pytest.fixture
def excerpt(tmp_path: Path) -> Path:
    folder = tmp_path / "dict"
    folder.mkdir()
    for name in ("noun", "verb", "adj", "adv"):
        (folder / f"data.{name}").write_text(HEADER + "".join(f"{x}\n" for x in DATA[name]))
        (folder / f"index.{name}").write_text(HEADER + "".join(f"{x}\n" for x in INDEX[name]))
    return folder


@pytest.fixture(scope="module")
def wordnet() -> Path:
    if not (make_graph.WORDNET / "data.verb").is_file():
        pytest.skip(
            f"WordNet 3.0 is not at {make_graph.WORDNET}: install the Debian package wordnet-base"
        )
    return make_graph.WORDNET


@pytest.fixture(scope="module")
def verb_graph(wordnet: Path) -> make_graph.Graph:
    """The verbs' 2-core: a small real graph (hypernym, verb group, also see)."""
    return make_graph.build_graph(wordnet, min_degree=2, parts="v")


def _frame(graph: make_graph.Graph, triples: list[make_graph.Triple]) -> pl.DataFrame:
    rows = [(graph.names[h], r, graph.names[t]) for h, r, t in triples]
    return pl.DataFrame(rows, schema=["head", "relation", "tail"], orient="row")


# --- the parser ----------------------------------------------------------------------------


def test_a_data_line_gives_the_synset_its_words_pointers_and_gloss() -> None:
    dog = make_graph.parse_data_line(DATA["noun"][0])
    long = make_graph.parse_data_line(DATA["adj"][0])
    lengthy = make_graph.parse_data_line(DATA["adj"][1])

    assert dog is not None
    assert dog.key == "n00000001"
    assert dog.words == ("dog", "domestic_dog")
    assert dog.pointers == (
        ("@", "n00000002"),
        ("#m", "n00000003"),
        ("%p", "n00000004"),
        ("+", "v00000010"),
    )
    assert dog.gloss == "a domesticated canid"
    assert long is not None
    assert long.words == ("long",)  # the syntactic marker (a) is not part of the word
    assert lengthy is not None
    assert (lengthy.key, lengthy.ss_type) == ("a00000021", "s")  # satellites are in data.adj
    assert make_graph.parse_data_line(HEADER) is None


def test_synsets_are_named_by_first_lemma_type_and_sense_number(excerpt: Path) -> None:
    synsets = make_graph.read_synsets(excerpt)

    names = make_graph.synset_names(synsets, make_graph.sense_numbers(excerpt))

    assert names["n00000001"] == "dog.n.02"
    assert names["n00000003"] == "canis.n.01"
    assert names["a00000020"] == "long.a.01"
    assert names["a00000021"] == "lengthy.s.01"


def test_the_kept_relations_are_wn18rrs_and_their_inverses_are_dropped(excerpt: Path) -> None:
    triples = make_graph.kept_triples(make_graph.read_synsets(excerpt))

    assert set(make_graph.KEPT.values()) == WN18RR_RELATIONS
    assert len(make_graph.INVERSES) == 7
    assert not set(make_graph.INVERSES) & set(make_graph.KEPT)
    assert triples == {
        ("n00000001", "_hypernym", "n00000002"),
        ("n00000002", "_hypernym", "n00000005"),
        ("n00000001", "_has_part", "n00000004"),
        ("n00000003", "_member_meronym", "n00000001"),
        ("n00000001", "_derivationally_related_form", "v00000010"),
        ("v00000010", "_derivationally_related_form", "n00000001"),
        ("v00000010", "_verb_group", "v00000011"),
        ("v00000011", "_verb_group", "v00000010"),
        ("a00000020", "_similar_to", "a00000021"),
        ("a00000021", "_similar_to", "a00000020"),
    }  # no hyponym (~), member holonym (#m) or part of (#p)


def test_reading_fewer_parts_of_speech_keeps_only_their_triples(excerpt: Path) -> None:
    triples = make_graph.kept_triples(make_graph.read_synsets(excerpt, parts="v"))

    assert {r for _, r, _ in triples} == {"_verb_group"}  # bark's `+` points at a noun


# --- the entity subset and the splits ------------------------------------------------------


def test_the_k_core_peels_entities_with_too_few_triples() -> None:
    triangle = {("x", "r", "y"), ("y", "r", "z"), ("z", "r", "x")}
    chain = {("a", "r", "b"), ("b", "r", "c"), ("c", "r", "x")}

    assert make_graph.k_core(triangle | chain, 2) == triangle
    assert make_graph.k_core(triangle | chain, 1) == triangle | chain
    assert make_graph.k_core(triangle, 3) == set()


def test_the_largest_component_is_kept() -> None:
    big = {("a", "r", "b"), ("b", "r", "c")}
    small = {("x", "r", "y")}

    assert make_graph.largest_component(big | small) == big


def test_held_out_entities_and_relations_all_appear_in_train(
    verb_graph: make_graph.Graph,
) -> None:
    splits = verb_graph.splits
    train_entities = {e for h, _, t in splits.train for e in (h, t)}
    held = [*splits.valid, *splits.test]

    assert {e for h, _, t in held for e in (h, t)} <= train_entities
    assert {r for _, r, _ in held} <= {r for _, r, _ in splits.train}
    assert len(splits.valid) == len(splits.test) == round(0.025 * (len(splits.train) + len(held)))
    everything = [*splits.train, *held]
    assert len(set(everything)) == len(everything)  # the splits are disjoint


def test_the_split_is_the_same_for_a_seed_and_another_for_another_seed() -> None:
    triples = {(f"e{i}", "r", f"e{j}") for i in range(20) for j in range(20) if i != j}

    first = make_graph.split_triples(triples, 10, 10, seed=0)
    again = make_graph.split_triples(triples, 10, 10, seed=0)
    other = make_graph.split_triples(triples, 10, 10, seed=1)

    assert first == again
    assert first.test != other.test
    with pytest.raises(ValueError, match="4 triples were asked for, but only 1 can be held out"):
        make_graph.split_triples({("a", "r", "b"), ("b", "r", "c"), ("c", "r", "a")}, 2, 2, 0)


# --- WordNet 3.0 itself --------------------------------------------------------------------


def test_the_verb_graph_of_wordnet_3_has_known_counts_and_names(
    verb_graph: make_graph.Graph,
) -> None:
    splits = verb_graph.splits

    assert len(verb_graph.entities()) == 2770
    assert (len(splits.train), len(splits.valid), len(splits.test)) == (4560, 120, 120)
    assert {r for _, r, _ in splits.train} == {"_also_see", "_hypernym", "_verb_group"}
    assert verb_graph.names["v00001740"] == "breathe.v.01"


def test_the_written_graph_reads_back_as_a_task(
    verb_graph: make_graph.Graph, tmp_path: Path
) -> None:
    counts = make_graph.write_graph(verb_graph, tmp_path)

    parts = [read_triples(tmp_path / f"{name}.csv") for name in ("train", "valid", "test")]
    task = triples_task(*parts)
    entities = pl.read_csv(tmp_path / "entities.csv")

    assert counts["entities"] == task.num_classes == 2770 == entities.height
    assert counts["triples"] == {"train": 4560, "valid": 120, "test": 120}
    assert counts["relations"] == 3
    assert entities.columns == ["entity", "synset_type", "offset", "definition"]
    assert parts[0].row(0) == _frame(verb_graph, verb_graph.splits.train[:1]).row(0)


def test_a_short_rotate_run_on_wordnet_verbs_beats_an_untrained_model(
    verb_graph: make_graph.Graph,
) -> None:
    splits = verb_graph.splits
    task = triples_task(*(_frame(verb_graph, s) for s in (splits.train, splits.valid, splits.test)))
    train, test = triple_ids(task.train), triple_ids(task.test)
    assert task.eval is not None and task.test is not None
    known = KnownTriples([train, triple_ids(task.eval), test], num_relations=3)
    torch.manual_seed(0)
    model = build_rotate(task, dim=16)
    untrained = evaluate_ranking(model, test, known)

    settings = FitSettings(40, 512, 0.05, NegativeSamplingParams(negatives=16))
    losses = fit_kg(model, train, settings, torch.Generator().manual_seed(0))
    trained = evaluate_ranking(model, test, known)

    assert untrained.mrr < 0.005  # random ranks over 2,770 entities: about 3 / 1,000
    assert trained.mrr > 0.05
    assert trained.hits_at_10 > 0.1
    assert losses[-1] < losses[0]


# --- the example's README ------------------------------------------------------------------


@pytest.mark.slow
def test_the_wordnet_example_runs_as_its_readme_says(
    wordnet: Path, cli: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    run = cli  # the `cli` fixture: forgeml in-process against a fresh FORGEML_HOME
    added, trained = {}, {}
    for tokens in readme_commands(EXAMPLES / "wordnet"):
        args = [
            str(tmp_path / t.removeprefix("/tmp/")) if t.startswith("/tmp/") else t for t in tokens
        ]
        if args[0] == "python":
            if args[1] == "benchmarks/kg_wordnet.py":
                args.append("--quick")  # the README's full run trains for tens of minutes
            subprocess.run([sys.executable, *args[1:]], check=True, cwd=REPO, timeout=600)
            continue
        if args[1] == "train":  # the README's run takes minutes; the same config, shorter
            args += ["--set", "max_steps=4", "--set", "eval_every_steps=4"]
            args += ["--set", "model.params.dim=4", "--set", "model.params.negatives=4"]
        result: CliResult = run(*args[1:], "--json")  # type: ignore[operator]
        assert result.code == 0, result.stderr
        if args[1:3] == ["data", "add"]:
            added[args[3]] = json_out(result)
        if args[1] == "train":
            trained = json_out(result)

    assert sorted(added) == ["wn18rr-test", "wn18rr-train", "wn18rr-valid"]
    assert {"mrr", "hits_at_1", "hits_at_10"} <= set(trained["metrics"])
    assert added["wn18rr-train"]["rows"] == len(read_triples(tmp_path / "wn18rr" / "train.csv"))
