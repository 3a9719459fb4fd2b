"""Held-out inputs of a registered model: its dataset's splits, encoded as training did.

A model version's run config (a `TrainConfig`) names its dataset, feature spec and
tokenizer; optimised versions point at their parent, so the config is found by walking
the lineage. `load_task_data` then gives the very tensors training evaluated on: tabular
rows through the fitted FeatureSpec, text through the model's tokenizer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import ValidationError

from forgeml.core.errors import OptimizationError, UsageError
from forgeml.tracking import get_model_version

if TYPE_CHECKING:
    import torch

    from forgeml.core.store import ModelVersionRecord
    from forgeml.core.workspace import Workspace
    from forgeml.train.config import TrainConfig
    from forgeml.train.task import SplitData, TaskData

SPLITS = ("train", "validation", "test")
_MAX_LINEAGE = 32  # parents followed before giving up (a cycle cannot occur; a typo can)


def training_config(workspace: Workspace, record: ModelVersionRecord) -> TrainConfig:
    """The training config of `record`, or of the nearest ancestor that was trained.

    Raises:
        OptimizationError: no model in the lineage was trained by forgeml.
    """
    from forgeml.train.config import TrainConfig

    current: ModelVersionRecord | None = record
    for _ in range(_MAX_LINEAGE):
        if current is None:
            break
        try:
            return TrainConfig.model_validate(current.run.config)
        except ValidationError:
            parent = current.parent
            current = (
                None if parent is None or ":" in parent else get_model_version(workspace, parent)
            )
    raise OptimizationError(
        f"Model {record.ref} has no training run in its lineage, so there is no dataset to "
        "draw held-out inputs from; optimise a model trained with `forgeml train`."
    )


def split_of(task: TaskData, split: str, ref: str) -> SplitData:
    """The named split (`train`, `validation` = the evaluation split, `test`).

    Raises:
        UsageError: an unknown split name, or a split the model's data does not have.
    """
    if split not in SPLITS:
        raise UsageError(f"Unknown split '{split}': use one of {', '.join(SPLITS)}.")
    found = {"train": task.train, "validation": task.eval, "test": task.test}[split]
    if found is None or len(found) == 0:
        present = [name for name in SPLITS if name == "train" or _has(task, name)]
        raise UsageError(
            f"The data of {ref} has no {split} split; choose one of {', '.join(present)}."
        )
    return found


def _has(task: TaskData, split: str) -> bool:
    found = task.eval if split == "validation" else task.test
    return found is not None and len(found) > 0


def held_out(task: TaskData, ref: str) -> tuple[str, SplitData]:
    """The test split if the data has one, else the evaluation split.

    Raises:
        OptimizationError: the data has neither.
    """
    for name in ("test", "validation"):
        if _has(task, name):
            return name, split_of(task, name, ref)
    raise OptimizationError(
        f"The data of {ref} has no test or validation split to verify and score on; "
        "re-split the dataset with a test share."
    )


def batch_rows(split: SplitData, start: int, size: int) -> dict[str, torch.Tensor]:
    """Rows start..start+size of `split` (wrapping around), text padding trimmed.

    Trimming makes a batch cost what its longest text costs in every runtime, as
    `TextClassifier.forward` does for PyTorch.
    """
    import torch

    rows = (torch.arange(size) + start) % len(split)
    inputs = {name: tensor[rows] for name, tensor in split.inputs.items()}
    mask = inputs.get("attention_mask")
    if mask is not None and "input_ids" in inputs:
        from forgeml.train.models.text_classifier import trim_padding

        inputs["input_ids"], inputs["attention_mask"] = trim_padding(inputs["input_ids"], mask)
    return inputs
