"""Build a WN18RR-style knowledge graph from WordNet 3.0, as head,relation,tail CSV files.

    python examples/wordnet/make_graph.py /tmp/wn18rr
    forgeml data add wn18rr-train /tmp/wn18rr/train.csv

The input is WordNet 3.0's own database (Debian's `wordnet-base`, /usr/share/wordnet),
read as wndb(5) documents it: one synset a line, its pointers as
`symbol target_offset target_pos source/target`.

WN18 (Bordes et al. 2013) took 18 relations from WordNet; WN18RR (Dettmers et al.,
AAAI 2018) dropped the 7 that are the inverse of another (hyponym of hypernym, part of of
has part, ...), because a test triple's inverse in train gives its answer away. The 11
kept are KEPT below, under WN18's names; the 7 dropped are INVERSES. The other pointers
(antonym, entailment, cause, attribute, pertainym, ...) were never in WN18.

The entities: WN18 used a subset of 40,943 synsets, nearly all nouns and verbs (its
adjective relation, similar to, has under a hundred triples in WN18RR). This script keeps
the noun and verb synsets of the graph's 2-core (each entity in at least 2 triples,
peeled until that holds), restricted to its largest connected component: about 54,000
entities and 127,000 triples, hypernym (40%) and derivationally related form (31%) the
largest relations as in WN18RR. It has 10 of WN18RR's 11 relations: similar to links
adjectives only (`--parts nva` adds them). Over all parts of speech, or as a 3-core, the symmetric
relations (derivation, similar to, also see, verb group: a test triple's reverse is
usually in train, an easy answer) grow from a third to half or more of the triples.
Entities are named as NLTK names synsets (`dog.n.01`: first lemma, synset type, sense
number).

Valid and test triples are drawn with a seeded shuffle, and a triple is held out only if
both its entities (and its relation) keep a triple in train, as in WN18RR, where every
valid/test entity appears in train.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

WORDNET = Path("/usr/share/wordnet")
POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}

# wndb(5) pointer symbol -> WN18's relation name (the 11 that WN18RR keeps)
KEPT = {
    "@": "_hypernym",
    "@i": "_instance_hypernym",
    "+": "_derivationally_related_form",
    "^": "_also_see",
    "%m": "_member_meronym",
    "%p": "_has_part",
    ";c": "_synset_domain_topic_of",
    "-u": "_member_of_domain_usage",
    "-r": "_member_of_domain_region",
    "$": "_verb_group",
    "&": "_similar_to",
}
# the 7 WN18 relations that WN18RR removed: each is the inverse of one in KEPT
INVERSES = {
    "~": "_hyponym",
    "~i": "_instance_hyponym",
    "#m": "_member_holonym",
    "#p": "_part_of",
    "-c": "_member_of_domain_topic",
    ";u": "_synset_domain_usage_of",
    ";r": "_synset_domain_region_of",
}
_ADJECTIVE_MARKER = re.compile(r"\((?:a|p|ip)\)$")  # `long(a)`: syntactic position

Triple = tuple[str, str, str]


@dataclass(frozen=True)
class Synset:
    """One line of a data.POS file: its key (`n02084071`), type, words, gloss, pointers."""

    key: str
    ss_type: str  # n, v, a, s (adjective satellite) or r
    words: tuple[str, ...]
    gloss: str
    pointers: tuple[tuple[str, str], ...]  # (symbol, target key)


def _key(offset: str, pos: str) -> str:
    # satellites live in data.adj, and pointers name them with pos `s` or `a`
    return ("a" if pos == "s" else pos) + offset


def parse_data_line(line: str) -> Synset | None:
    """Parse one data.POS line; the licence header (lines starting with spaces) gives None."""
    if line.startswith("  ") or not line.strip():
        return None
    fields_part, _, gloss = line.partition(" | ")
    fields = fields_part.split()
    offset, ss_type = fields[0], fields[2]
    word_count = int(fields[3], 16)
    words = tuple(_ADJECTIVE_MARKER.sub("", fields[4 + 2 * i]) for i in range(word_count))
    at = 4 + 2 * word_count
    pointer_count = int(fields[at])
    pointers = []
    for i in range(pointer_count):
        symbol, target, target_pos = fields[at + 1 + 4 * i : at + 4 + 4 * i]
        pointers.append((symbol, _key(target, target_pos)))
    return Synset(_key(offset, ss_type), ss_type, words, gloss.strip(), tuple(pointers))


def read_synsets(folder: Path = WORDNET, parts: str = "nvar") -> dict[str, Synset]:
    """Every synset of the data files of `parts` (n, v, a, r), by key."""
    synsets: dict[str, Synset] = {}
    for name in (POS_FILES[pos] for pos in parts):
        with (folder / f"data.{name}").open(encoding="latin-1") as lines:
            for line in lines:
                synset = parse_data_line(line)
                if synset is not None:
                    synsets[synset.key] = synset
    return synsets


def sense_numbers(folder: Path = WORDNET, parts: str = "nvar") -> dict[tuple[str, str], int]:
    """(lemma, synset key) -> sense number, from the index files (wndb(5) `index.POS`)."""
    senses: dict[tuple[str, str], int] = {}
    for pos, name in ((pos, POS_FILES[pos]) for pos in parts):
        with (folder / f"index.{name}").open(encoding="latin-1") as lines:
            for line in lines:
                if line.startswith("  "):
                    continue
                fields = line.split()
                lemma, synset_count = fields[0], int(fields[2])
                for number, offset in enumerate(fields[-synset_count:], start=1):
                    senses[(lemma, _key(offset, pos))] = number
    return senses


def synset_names(synsets: dict[str, Synset], senses: dict[tuple[str, str], int]) -> dict[str, str]:
    """Key -> NLTK-style name `lemma.type.NN` (first lemma, lower case, its sense number)."""
    names = {}
    for key, synset in synsets.items():
        lemma = synset.words[0].lower()
        names[key] = f"{lemma}.{synset.ss_type}.{senses[(lemma, key)]:02d}"
    if len(set(names.values())) != len(names):
        raise ValueError("Two synsets got the same name; the index files do not match the data.")
    return names


def kept_triples(synsets: dict[str, Synset]) -> set[Triple]:
    """The distinct (head key, relation, tail key) of the kept relations among `synsets`.

    A pointer is read from its source synset: `@` at `dog` naming `canine` is
    (dog, _hypernym, canine). Lexical pointers (between two words, such as `+`) become
    links between the words' synsets, so several can collapse into one triple. Self-loops
    and pointers to synsets not in `synsets` (a part of speech not read) are left out.
    """
    triples = set()
    for synset in synsets.values():
        for symbol, target in synset.pointers:
            if symbol in KEPT and target != synset.key and target in synsets:
                triples.add((synset.key, KEPT[symbol], target))
    return triples


def k_core(triples: set[Triple], k: int) -> set[Triple]:
    """The triples among entities that each take part in at least `k` of them.

    Peels entities of degree below `k` one at a time (each removal lowers its
    neighbours' degrees), so the result is the same whatever the order.
    """
    listed = sorted(triples)
    incident: dict[str, list[int]] = defaultdict(list)
    for index, (head, _, tail) in enumerate(listed):
        incident[head].append(index)
        incident[tail].append(index)
    degree = {entity: len(indices) for entity, indices in incident.items()}
    alive = [True] * len(listed)
    peel = [entity for entity, count in degree.items() if count < k]
    peeled = set(peel)
    while peel:
        for index in incident[peel.pop()]:
            if not alive[index]:
                continue
            alive[index] = False
            for entity in (listed[index][0], listed[index][2]):
                degree[entity] -= 1
                if degree[entity] < k and entity not in peeled:
                    peeled.add(entity)
                    peel.append(entity)
    return {triple for triple, kept in zip(listed, alive, strict=True) if kept}


def largest_component(triples: set[Triple]) -> set[Triple]:
    """The triples of the largest weakly connected component (ties: the smallest entity)."""
    neighbours: dict[str, list[str]] = defaultdict(list)
    for head, _, tail in triples:
        neighbours[head].append(tail)
        neighbours[tail].append(head)
    component_of: dict[str, int] = {}
    sizes: list[int] = []
    for start in sorted(neighbours):
        if start in component_of:
            continue
        component_of[start], stack = len(sizes), [start]
        size = 0
        while stack:
            node = stack.pop()
            size += 1
            for other in neighbours[node]:
                if other not in component_of:
                    component_of[other] = len(sizes)
                    stack.append(other)
        sizes.append(size)
    biggest = max(range(len(sizes)), key=lambda c: sizes[c])
    return {t for t in triples if component_of[t[0]] == biggest}


@dataclass(frozen=True)
class Splits:
    train: list[Triple]
    valid: list[Triple]
    test: list[Triple]


def split_triples(triples: set[Triple], valid: int, test: int, seed: int) -> Splits:
    """Hold out `valid` + `test` triples whose entities and relation stay in train.

    The triples are sorted, then shuffled by `random.Random(seed)`, so the same graph and
    seed give the same splits on any machine. Walking that order, a triple is held out
    when its head and its tail each keep another triple in train; too few such triples
    for the sizes asked is an error.
    """
    order = sorted(triples)
    random.Random(seed).shuffle(order)
    degree: Counter[str] = Counter()
    per_relation: Counter[str] = Counter()
    for head, relation, tail in order:
        degree[head] += 1
        degree[tail] += 1
        per_relation[relation] += 1
    wanted = valid + test
    held: list[Triple] = []
    train: list[Triple] = []
    for triple in order:
        head, relation, tail = triple
        movable = degree[head] > 1 and degree[tail] > 1 and per_relation[relation] > 1
        if len(held) < wanted and movable and head != tail:
            held.append(triple)
            degree[head] -= 1
            degree[tail] -= 1
            per_relation[relation] -= 1
        else:
            train.append(triple)
    if len(held) < wanted:
        raise ValueError(
            f"{wanted} triples were asked for, but only {len(held)} can be held out "
            "with their entities kept in train."
        )
    return Splits(sorted(train), sorted(held[:valid]), sorted(held[valid:]))


@dataclass(frozen=True)
class Graph:
    splits: Splits
    names: dict[str, str]  # synset key -> entity name
    synsets: dict[str, Synset]

    def entities(self) -> list[str]:
        """Keys of the synsets that take part in a triple, sorted."""
        found = {e for t in self.splits.train for e in (t[0], t[2])}
        return sorted(found)


def build_graph(
    folder: Path = WORDNET,
    min_degree: int = 2,
    held_out: float = 0.025,
    seed: int = 0,
    parts: str = "nv",
) -> Graph:
    """Read WordNet at `folder` and build the splits (`held_out` of the triples each).

    `parts` picks the parts of speech read (n, v, a, r); fewer make a smaller graph.
    """
    synsets = read_synsets(folder, parts)
    names = synset_names(synsets, sense_numbers(folder, parts))
    triples = largest_component(k_core(kept_triples(synsets), min_degree))
    count = round(held_out * len(triples))
    return Graph(split_triples(triples, count, count, seed), names, synsets)


def _write_triples(path: Path, triples: list[Triple], names: dict[str, str]) -> None:
    with path.open("w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["head", "relation", "tail"])
        writer.writerows((names[h], r, names[t]) for h, r, t in triples)


def write_graph(graph: Graph, out: Path) -> dict[str, object]:
    """Write train/valid/test.csv and entities.csv into `out`; return the counts."""
    out.mkdir(parents=True, exist_ok=True)
    splits = graph.splits
    for part, triples in (("train", splits.train), ("valid", splits.valid), ("test", splits.test)):
        _write_triples(out / f"{part}.csv", triples, graph.names)
    with (out / "entities.csv").open("w", encoding="utf-8", newline="") as entities:
        writer = csv.writer(entities)
        writer.writerow(["entity", "synset_type", "offset", "definition"])
        for key in graph.entities():
            synset = graph.synsets[key]
            writer.writerow([graph.names[key], synset.ss_type, key[1:], synset.gloss])
    every = [*splits.train, *splits.valid, *splits.test]
    return {
        "entities": len(graph.entities()),
        "relations": len({r for _, r, _ in every}),
        "triples": {
            "train": len(splits.train),
            "valid": len(splits.valid),
            "test": len(splits.test),
        },
        "per_relation": dict(Counter(r for _, r, _ in every).most_common()),
    }


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, nargs="?", default=Path("wn18rr"))
    parser.add_argument("--wordnet", type=Path, default=WORDNET, help="WordNet 3.0 dict folder")
    parser.add_argument("--min-degree", type=int, default=2, help="k of the k-core")
    parser.add_argument("--held-out", type=float, default=0.025, help="share for valid, and test")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--parts", default="nv", help="parts of speech read: n, v, a, r")
    return parser.parse_args(argv)


def main(argv: list[str]) -> None:
    args = _arguments(argv)
    if not (args.wordnet / "data.noun").is_file():
        sys.exit(f"WordNet 3.0 is not at {args.wordnet}: install Debian's wordnet-base.")
    graph = build_graph(args.wordnet, args.min_degree, args.held_out, args.seed, args.parts)
    sys.stdout.write(json.dumps(write_graph(graph, args.out), indent=2) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
