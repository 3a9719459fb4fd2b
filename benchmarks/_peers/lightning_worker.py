"""PyTorch Lightning's `Trainer` on the trainer benchmark's run, one fit per stdin line.

    python _peers/lightning_worker.py HOME STEPS   (PYTHONPATH: forgeml's src, benchmarks/)

The same Adult features (`load_task_data` of the same workspace), the same `mlp` with the
same initial weights (`build_model` under the same seed), optimiser (AdamW, lr 1e-3, no
weight decay), batch size, steps and batches: a batch sampler yields the rows of forgeml's
`epoch_order` in the same slices, fetched in one indexing (`__getitems__`) as forgeml's
loop gathers them. Everything else is the `Trainer`'s default (progress bar, model summary,
checkpoint at each epoch's end) with its `MLFlowLogger` on an SQLite store, as forgeml's
tracking uses one.

Each stdin line is a JSON object {"log_every_n_steps": N, "fused": true | null,
"tracking_uri": URI, "root": DIR, "weights": FILE} ("fused": AdamW's fused kernel, as
forgeml's optimiser asks for; null: torch's default, what a Lightning user writes); the
answer is one JSON line on stdout: the wall and CPU seconds of `trainer.fit` (the MLflow run
is created before the clock starts, as forgeml's side starts its run untimed), after the
final weights are written to FILE (safetensors).
"""

from __future__ import annotations

import copy
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 (the usual alias)

from trainer_overhead import BATCH_SIZE, LR, SEED, bench_config, cpu_seconds


class Rows(torch.utils.data.Dataset[Any]):
    """The train split's tensors, fetched a batch at a time."""

    def __init__(self, features: torch.Tensor, labels: torch.Tensor) -> None:
        self.features, self.labels = features, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitems__(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.features[index], self.labels[index]


class EpochBatches(torch.utils.data.Sampler[torch.Tensor]):
    """forgeml's data order: epoch e is randperm(N, seed + e) cut into full batches."""

    def __init__(self, rows: int) -> None:
        self.rows, self.epoch = rows, 0

    def __len__(self) -> int:
        return self.rows // BATCH_SIZE

    def __iter__(self) -> Iterator[torch.Tensor]:
        from forgeml.train.step import epoch_order

        order = epoch_order(self.rows, SEED, self.epoch)
        self.epoch += 1
        for batch in range(len(self)):
            yield order[batch * BATCH_SIZE : (batch + 1) * BATCH_SIZE]


def whole(batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    return batch  # already one batch: nothing to collate


def lightning_module(model: torch.nn.Module, fused: bool | None) -> Any:
    import lightning as L  # noqa: N812 (Lightning's own alias)

    class MLPModule(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> Any:
            features, labels = batch
            loss = F.cross_entropy(self.model(features=features), labels)
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.AdamW(self.parameters(), lr=LR, weight_decay=0.0, fused=fused)

    return MLPModule()


def fit_once(initial: torch.nn.Module, rows: Rows, steps: int, request: dict[str, Any]) -> dict:
    import lightning as L  # noqa: N812
    from lightning.pytorch.loggers import MLFlowLogger
    from safetensors.torch import save_file

    module = lightning_module(copy.deepcopy(initial), request.get("fused"))
    # its own generator: each epoch's iterator draws a seed, which from the global generator
    # would shift the dropout stream away from forgeml's
    loader = torch.utils.data.DataLoader(
        rows,
        batch_sampler=EpochBatches(len(rows)),
        collate_fn=whole,
        generator=torch.Generator().manual_seed(SEED),
    )
    logger = MLFlowLogger(experiment_name="peers-lightning", tracking_uri=request["tracking_uri"])
    _ = logger.experiment, logger.run_id  # the run exists before the clock starts
    trainer = L.Trainer(
        max_steps=steps,
        logger=logger,
        default_root_dir=request["root"],
        log_every_n_steps=request["log_every_n_steps"],
    )
    torch.manual_seed(SEED)  # the dropout stream forgeml's fit seeds too
    start, start_cpu = time.perf_counter(), cpu_seconds()
    trainer.fit(module, train_dataloaders=loader)
    wall, cpu = time.perf_counter() - start, cpu_seconds() - start_cpu
    weights = {name: p.detach().contiguous() for name, p in module.model.state_dict().items()}
    save_file(weights, request["weights"])
    return {"wall": wall, "cpu": cpu, "steps": trainer.global_step}


def main(home: str, steps: int) -> None:
    from forgeml.core.config import Settings
    from forgeml.core.workspace import Workspace
    from forgeml.train.data import load_task_data
    from forgeml.train.models import build_model

    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # Lightning's own prints go to stderr, the answers alone to stdout
    torch.set_num_threads(os.cpu_count() or 1)
    config = bench_config(steps)
    workspace = Workspace(Settings(home=Path(home), user="bench"))
    try:
        task = load_task_data(workspace, config)
    finally:
        workspace.close()
    rows = Rows(task.train.inputs["features"], task.train.targets)
    torch.manual_seed(SEED)
    initial = build_model("mlp", task, config.model.params)
    import lightning

    answers.write(json.dumps({"ready": True, "lightning": lightning.__version__}) + "\n")
    for line in sys.stdin:
        answers.write(json.dumps(fit_once(initial, rows, steps, json.loads(line))) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
