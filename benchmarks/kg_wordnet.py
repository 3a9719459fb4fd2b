"""Benchmark of issue 12: RotatE against TransE on a WN18RR-style graph from WordNet 3.0.

What is measured: RotatE (Sun et al., ICLR 2019) and TransE (Bordes et al., NeurIPS 2013),
forgeml.train.models.kg, trained with the same budget (steps, batch, negatives, learning
rate, embedding size k, γ, self-adversarial α, seed) by `fit_kg`, then ranked on the test
split with the filtered protocol (`evaluate_ranking`: every entity scored as the tail and
as the head of each test triple, the other known true triples of train, valid and test
filtered out, ties counted half). Figures: MRR, MR, Hits@1/3/10 for both models, per
relation, train and evaluation seconds; the published WN18RR figures beside them.

The graph: examples/wordnet/make_graph.py's output (`--graph DIR`), or built here by it
(full: its defaults, the 2-core of nouns and verbs over WN18RR's relations, about 54,000
entities; --quick: the verbs' 2-core, 2,770 entities).

The paper's WN18RR run (k = 500, 1,024 negatives, batch 512, lr 5e-5, 80,000 steps on a
GPU) is over 5,000 times this benchmark's work (steps x batch x negatives x k); the full
run here takes tens of minutes on one CPU core. Its settings (FULL below) were scaled down
from the paper's: k 100, 64 negatives, 1,200 steps (about 5 epochs), lr 3e-3 (Adam,
dropped tenfold at half the steps, as the authors' code does). One torch thread by
default: on a shared 2-core machine two threads ran slower than one (each small operation
waits for a thread that another process holds).

Run from the repository root (WordNet 3.0: Debian's wordnet-base):

    PYTHONPATH=src .venv/bin/python benchmarks/kg_wordnet.py                # tens of minutes
    PYTHONPATH=src .venv/bin/python benchmarks/kg_wordnet.py --quick        # under a minute
    PYTHONPATH=src .venv/bin/python benchmarks/kg_wordnet.py --graph /tmp/wn18rr --json
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _cli import make_parser, print_json

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # examples/wordnet/make_graph.py, as `examples.wordnet`

if TYPE_CHECKING:
    import polars as pl
    import torch

    from forgeml.train.models.kg import KGEmbedding, KnownTriples, TripleVocab

# Sun et al. 2019, Table 5 (WN18RR); the paper lists TransE's figures from earlier work
PUBLISHED = {
    "rotate": {
        "mrr": 0.476,
        "mr": 3340,
        "hits_at_1": 0.428,
        "hits_at_3": 0.492,
        "hits_at_10": 0.571,
    },
    "transe": {"mrr": 0.226, "mr": 3384, "hits_at_10": 0.501},
}
PAPER_SETTINGS = {
    "dim": 500,
    "gamma": 6.0,
    "alpha": 0.5,
    "negatives": 1024,
    "batch_size": 512,
    "lr": 5e-5,
    "steps": 80000,
}
METRICS = ("mrr", "mr", "hits_at_1", "hits_at_3", "hits_at_10")


@dataclass(frozen=True)
class Budget:
    """What each model gets: the same for RotatE and TransE."""

    steps: int
    dim: int
    negatives: int
    batch_size: int = 512
    lr: float = 3e-3
    gamma: float = 6.0
    alpha: float = 0.5


FULL = Budget(steps=1200, dim=100, negatives=64)
QUICK = Budget(steps=40, dim=16, negatives=16, lr=0.05)
QUICK_EVAL_TRIPLES = 300  # --quick on a large --graph ranks the first test triples only


def load_graph(graph: Path | None, quick: bool) -> tuple[dict[str, pl.DataFrame], float]:
    """The train, valid and test frames, read from `graph` or built by make_graph."""
    from forgeml.train.models.kg import read_triples

    start = time.perf_counter()
    if graph is None:
        from examples.wordnet import make_graph

        options = {"min_degree": 2, "parts": "v"} if quick else {}
        built = make_graph.build_graph(**options)  # type: ignore[arg-type]
        with tempfile.TemporaryDirectory(prefix="forgeml-bench-kg-") as scratch:
            make_graph.write_graph(built, Path(scratch))
            frames = {
                p: read_triples(Path(scratch) / f"{p}.csv") for p in ("train", "valid", "test")
            }
    else:
        frames = {p: read_triples(graph / f"{p}.csv") for p in ("train", "valid", "test")}
    return frames, time.perf_counter() - start


def reverse_in_train(test: torch.Tensor, train: torch.Tensor) -> float:
    """Share of test triples (h, r, t) whose reverse (t, r, h) is a train triple."""
    seen = {tuple(row) for row in train.tolist()}
    hits = sum((t, r, h) in seen for h, r, t in test.tolist())
    return hits / max(1, len(test))


def rank_both_sides(model: KGEmbedding, test: torch.Tensor, known: KnownTriples) -> torch.Tensor:
    """Filtered ranks [2, N]: tails, then heads, of each test triple."""
    import torch

    from forgeml.train.models.kg import filtered_ranks

    model.eval()
    return torch.stack([filtered_ranks(model, test, known, side) for side in ("tail", "head")])


def summarise(ranks: torch.Tensor, test: torch.Tensor, vocab: TripleVocab) -> dict[str, Any]:
    """Metrics over both sides, and MRR and count per relation."""
    from forgeml.train.models.kg import ranking_metrics

    overall = ranking_metrics(ranks.flatten()).as_dict()
    per_relation = {}
    for index, name in enumerate(vocab.relations):
        rows = test[:, 1] == index
        if bool(rows.any()):
            part = ranking_metrics(ranks[:, rows].flatten())
            per_relation[name] = {
                "mrr": part.mrr,
                "hits_at_10": part.hits_at_10,
                "test": int(rows.sum()),
            }
    return {"test": overall, "per_relation": per_relation}


def served_examples(
    model: KGEmbedding, vocab: TripleVocab, test: torch.Tensor
) -> list[dict[str, Any]]:
    """`rank_tails` for the first three test queries: what serving would answer."""
    from forgeml.train.models.kg import rank_tails, score_triple

    shown = []
    for h, r, t in test[:3].tolist():
        head, relation, tail = vocab.entities[h], vocab.relations[r], vocab.entities[t]
        top = rank_tails(model, vocab, head, relation, k=5)
        shown.append(
            {
                "query": f"({head}, {relation}, ?)",
                "true_tail": tail,
                "true_score": score_triple(model, vocab, head, relation, tail),
                "top5": [[name, round(score, 3)] for name, score in top],
            }
        )
    return shown


def train_and_rank(
    name: str, task: Any, known: KnownTriples, test: torch.Tensor, budget: Budget, seed: int
) -> dict[str, Any]:
    """Build model `name`, fit it with `budget`, and rank `test`."""
    import torch

    from forgeml.train.models.kg import (
        FitSettings,
        NegativeSamplingParams,
        TripleVocab,
        build_rotate,
        build_transe,
        fit_kg,
        triple_ids,
    )

    torch.manual_seed(seed)
    build = {"rotate": build_rotate, "transe": build_transe}[name]
    model = build(task, dim=budget.dim, gamma=budget.gamma)
    sampling = NegativeSamplingParams(negatives=budget.negatives, alpha=budget.alpha)
    settings = FitSettings(budget.steps, budget.batch_size, budget.lr, sampling)
    start = time.perf_counter()
    losses = fit_kg(model, triple_ids(task.train), settings, torch.Generator().manual_seed(seed))
    train_s = time.perf_counter() - start
    start = time.perf_counter()
    ranks = rank_both_sides(model, test, known)
    eval_s = time.perf_counter() - start
    vocab = TripleVocab.from_task(task)
    tail = min(50, len(losses))
    return {
        **summarise(ranks, test, vocab),
        "train_s": train_s,
        "steps_per_s": budget.steps / train_s,
        "eval_s": eval_s,
        "loss_first": losses[0],
        "loss_last_mean": sum(losses[-tail:]) / tail,
        "parameters": sum(p.numel() for p in model.parameters()),
        "served_examples": served_examples(model, vocab, test),
    }


def measure(graph: Path | None, quick: bool, budget: Budget, seed: int) -> dict[str, Any]:
    """Build or read the graph, then train and rank RotatE and TransE on it."""
    import torch

    from forgeml.train.models.kg import KnownTriples, triple_ids, triples_task

    load_start = os.getloadavg()[0]
    frames, load_s = load_graph(graph, quick)
    task = triples_task(frames["train"], frames["valid"], frames["test"])
    splits = [triple_ids(s) for s in (task.train, task.eval, task.test) if s is not None]
    known = KnownTriples(splits, len(task.meta["relations"]))
    test = splits[2]
    if quick and graph is not None:
        test = test[:QUICK_EVAL_TRIPLES]
    results = {
        name: train_and_rank(name, task, known, test, budget, seed) for name in ("rotate", "transe")
    }
    relations = Counter(frames["test"]["relation"].to_list())
    return {
        "quick": quick,
        "seed": seed,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average_1min": {"start": load_start, "end": os.getloadavg()[0]},
        "graph": {
            "source": str(graph) if graph else "built by examples/wordnet/make_graph.py",
            "entities": task.num_classes,
            "relations": len(task.meta["relations"]),
            "triples": {"train": len(task.train), "valid": len(splits[1]), "test": len(splits[2])},
            "test_triples_ranked": len(test),
            "test_per_relation": dict(relations.most_common()),
            "test_reverse_in_train": reverse_in_train(test, splits[0]),
            "load_s": load_s,
        },
        "budget": dataclasses.asdict(budget),
        "paper_settings": PAPER_SETTINGS,
        "results": results,
        "published_wn18rr": PUBLISHED,
        "rotate_minus_transe_mrr": results["rotate"]["test"]["mrr"]
        - results["transe"]["test"]["mrr"],
    }


def format_table(report: dict[str, Any]) -> str:
    """The figures as a plain-text table."""
    graph, budget, results = report["graph"], report["budget"], report["results"]
    load = report["load_average_1min"]
    triples = graph["triples"]
    lines = [
        f"WN18RR-style graph from WordNet 3.0: {graph['entities']:,} entities, "
        f"{graph['relations']} relations, triples train/valid/test "
        f"{triples['train']:,}/{triples['valid']:,}/{triples['test']:,} "
        f"(ranked {graph['test_triples_ranked']:,}; {100 * graph['test_reverse_in_train']:.0f}% "
        "of them have their reverse in train)",
        f"budget per model: {budget['steps']} steps, batch {budget['batch_size']}, "
        f"{budget['negatives']} negatives, k={budget['dim']}, lr {budget['lr']:g}, "
        f"gamma {budget['gamma']:g}, alpha {budget['alpha']:g}; {report['cpu_count']} CPUs, "
        f"{report['torch_threads']} torch threads, load {load['start']:.1f} -> {load['end']:.1f}"
        + ("; --quick" if report["quick"] else ""),
        f"{'filtered, test':<16}{'RotatE':>10}{'TransE':>10}"
        f"{'paper RotatE':>14}{'paper TransE':>14}",
    ]
    for metric in METRICS:
        ours = [results[name]["test"][metric] for name in ("rotate", "transe")]
        paper = [PUBLISHED[name].get(metric) for name in ("rotate", "transe")]
        cells = [f"{v:>10.1f}" if metric == "mr" else f"{v:>10.3f}" for v in ours]
        cells += [f"{'-':>14}" if v is None else f"{v:>14g}" for v in paper]
        lines.append(f"{metric:<16}" + "".join(cells))
    for key in ("train_s", "eval_s"):
        cells = "".join(f"{results[name][key]:>10,.1f}" for name in ("rotate", "transe"))
        lines.append(f"{key:<16}{cells}")
    cells = "".join(f"{results[name]['parameters']:>10,}" for name in ("rotate", "transe"))
    lines.append(f"{'parameters':<16}{cells}")
    lines.append("MRR per relation (test triples):  RotatE  TransE")
    for relation, part in results["rotate"]["per_relation"].items():
        other = results["transe"]["per_relation"][relation]["mrr"]
        lines.append(f"  {relation:<32}{part['mrr']:>8.3f}{other:>8.3f}  ({part['test']})")
    for example in results["rotate"]["served_examples"][:2]:
        top = ", ".join(name for name, _ in example["top5"])
        lines.append(f"RotatE rank_tails {example['query']}: {top}  (true: {example['true_tail']})")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    parser = make_parser(__doc__, "a small budget (and graph)")
    parser.add_argument("--graph", type=Path, help="make_graph.py's output folder")
    parser.add_argument("--steps", type=int, help="override the budget's steps")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    budget = QUICK if args.quick else FULL
    if args.steps:
        budget = dataclasses.replace(budget, steps=args.steps)
    report = measure(args.graph, args.quick, budget, args.seed)
    print(format_table(report))
    print_json(args, report)


if __name__ == "__main__":
    main(sys.argv[1:])
