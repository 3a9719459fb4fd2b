"""From dataset versions to tensors: what `forgeml train` feeds the model.

Five modalities; the model's family (`forgeml.train.models`) says which one it reads:

| modality | needs | inputs | targets |
|---|---|---|---|
| tabular | `data.feature_spec` | `features` float32 [N, F] | class ids [N] or floats [N] |
| image | a binary image column | `images` float32 [N, C, H, W] | class ids [N] |
| text | `data.text_column`, `data.target` | the family tokenizer's tensors [N, T] | class ids [N] |
| language_model | a text column | `input_ids` long [N, T] (bytes) | next byte [N, T] |
| triples | head, relation, tail columns | `head`, `relation` ids long [N] | tail ids [N] |

Tabular rows are read RAW and go through the fitted FeatureSpec here, the very code path
serving applies to requests (`feature_tensor`), so training and serving cannot skew.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import polars as pl
import torch

from forgeml.core.errors import ConfigError, InvalidDataError
from forgeml.core.store import DatasetVersion, FeatureSpecVersion
from forgeml.core.workspace import Workspace
from forgeml.data import catalog
from forgeml.data._frame import require_columns
from forgeml.data.features import FeatureSpec, feature_matrix
from forgeml.train.config import DataConfig, TrainConfig
from forgeml.train.models import ModelFamily, TokenizerSource, get_family
from forgeml.train.task import SplitData, TaskData
from forgeml.train.thresholds import NULL_SLICE

BYTE_VOCAB = 256
_GRAY_MODES = frozenset({"1", "L", "LA", "I", "I;16", "F"})


@dataclass
class _Sources:
    """The resolved records a run reads."""

    version: DatasetVersion
    spec: FeatureSpecVersion | None
    eval_version: DatasetVersion | None


@dataclass
class _Frames:
    """Raw rows of each part; an eval or test part without rows is None."""

    train: pl.DataFrame
    eval: pl.DataFrame | None
    test: pl.DataFrame | None

    def parts(self) -> list[tuple[str, pl.DataFrame]]:
        found = [("train", self.train), ("eval", self.eval), ("test", self.test)]
        return [(part, frame) for part, frame in found if frame is not None]


def load_task_data(workspace: Workspace, config: TrainConfig) -> TaskData:
    """Read the configured dataset version(s) and turn every split into tensors.

    Args:
        workspace: where the dataset versions and the feature spec are stored.
        config: the training config (its `data` and `model` sections are used).

    Returns:
        The task: train split, eval and test splits when configured and not empty,
        the head's size (classes or vocabulary), the input shape, and provenance in `meta`.

    Raises:
        NotFoundError: the dataset, eval dataset or feature spec does not exist.
        OtherProjectError: one of them is (fitted on) a dataset of another project.
        UsageError: the version has no splits (run `forgeml data split` first).
        ConfigError: the config does not say, or contradicts, what to train on.
        MissingColumnError: the target, text, image or a slice column is missing.
        InvalidDataError: the train split is empty, a label is not one the model knows,
            images differ in size, or there is too little text.
    """
    data = config.data
    family = get_family(config.model.name)
    sources = _resolve(workspace, data)
    frames = _read_frames(workspace, sources, data)
    if family.modality == "tabular":
        if sources.spec is None:
            raise ConfigError(
                f"Model '{config.model.name}' trains on tabular features; set "
                "data.feature_spec to the feature spec fitted on this dataset."
            )
        task = _tabular(load_feature_spec(workspace, sources.spec), frames, data)
    elif family.modality == "image":
        task = _image(frames, data)
    elif family.modality == "text":
        if data.text_column is None or data.target is None:
            raise ConfigError(
                f"Model '{config.model.name}' classifies text; set data.text_column and "
                "data.target."
            )
        task = _text(frames, data.text_column, data.target, family, config.model.params)
    elif family.modality == "triples":
        task = _triples(frames)
    else:
        task = _language_model(frames, data, config.model.params)
    if task.task != "language_modeling":
        _attach_slices(task, frames, data.slices)
    task.meta = _meta(sources, frames, task)
    return task


def _resolve(workspace: Workspace, data: DataConfig) -> _Sources:
    with workspace.store.session() as session:
        version = catalog.resolve_to_read(workspace, session, data.dataset)
        spec = None
        if data.feature_spec is not None:
            spec = catalog.resolve_feature_spec(session, data.feature_spec)
            # a spec holds statistics of the rows it was fitted on: those of its dataset
            catalog.check_readable(workspace, spec.dataset_version)
            if spec.dataset_version_id == version.id:
                parents = [edge.parent.ref for edge in version.parent_edges]
                raise ConfigError(
                    f"{version.ref} holds rows the feature spec already transformed; set "
                    f"data.dataset to its raw parent {parents[0] if parents else ''} so the "
                    "spec is applied to raw rows, as serving does."
                )
        eval_version = (
            catalog.resolve_to_read(workspace, session, data.eval_dataset)
            if data.eval_dataset
            else None
        )
    return _Sources(version, spec, eval_version)


def _read_frames(workspace: Workspace, sources: _Sources, data: DataConfig) -> _Frames:
    """Raw rows per part; an eval or test split without rows counts as not configured."""
    version = sources.version
    train = catalog.read_frame(workspace, version, data.train_split)
    if train.is_empty():
        where = f"The '{data.train_split}' split of" if data.train_split else "The dataset"
        raise InvalidDataError(
            f"{where} {version.ref} has no rows; re-split it with a larger train share or "
            "choose another data.train_split."
        )
    if data.max_rows is not None:
        train = train.head(data.max_rows)  # the first rows: the same subset every run
    evaluated = None
    if sources.eval_version is not None:
        evaluated = catalog.read_frame(workspace, sources.eval_version)
        require_columns(evaluated, list(data.eval_rename), "data.eval_rename")
        evaluated = evaluated.rename(data.eval_rename)
    elif data.eval_split is not None:
        evaluated = catalog.read_frame(workspace, version, data.eval_split)
    tested = None
    if data.test_split is not None:
        tested = catalog.read_frame(workspace, version, data.test_split)
    return _Frames(train, _rows_or_none(evaluated), _rows_or_none(tested))


def _rows_or_none(frame: pl.DataFrame | None) -> pl.DataFrame | None:
    return frame if frame is not None and not frame.is_empty() else None


# --- tabular ----------------------------------------------------------------------------


def load_feature_spec(workspace: Workspace, spec: FeatureSpecVersion) -> FeatureSpec:
    """The fitted FeatureSpec document of a recorded spec version."""
    return FeatureSpec.from_dict(orjson.loads(workspace.artifacts.get_bytes(spec.digest)))


def feature_tensor(spec: FeatureSpec, frame: pl.DataFrame) -> torch.Tensor:
    """Raw rows -> model input float32 [N, F]: `spec.transform`, then `feature_matrix`.

    Serving encodes a request with the same `feature_matrix` after `spec.transform_records`,
    so a request is encoded exactly as training rows.
    """
    return torch.from_numpy(feature_matrix(spec, spec.transform(frame)))


def _tabular(spec: FeatureSpec, frames: _Frames, data: DataConfig) -> TaskData:
    if data.target and spec.target and data.target != spec.target:
        raise ConfigError(
            f"data.target is '{data.target}' but the feature spec {data.feature_spec} was "
            f"fitted with target '{spec.target}'; use the same label column."
        )
    target = data.target or spec.target
    if target is None:
        raise ConfigError("Neither data.target nor the feature spec names a label column.")
    train_labels = _labels(frames.train, target, "train")
    classes = spec.label_classes if spec.target == target else None
    if classes is None and not train_labels.dtype.is_float():
        classes = _sorted_classes(train_labels)
    splits = {}
    for part, frame in frames.parts():
        labels = _labels(frame, target, part)
        targets = (
            _float_targets(labels, part) if classes is None else _class_ids(labels, classes, part)
        )
        splits[part] = SplitData({"features": feature_tensor(spec, frame)}, targets, rows=frame)
    task = _classification(splits, classes) if classes is not None else _regression(splits)
    task.input_shape = (int(splits["train"].inputs["features"].shape[1]),)
    task.meta["label_column"] = target
    return task


def _float_targets(labels: pl.Series, part: str) -> torch.Tensor:
    if labels.null_count():
        raise InvalidDataError(
            f"The {part} split has {labels.null_count()} rows without a value in "
            f"'{labels.name}'; drop or fill them (`forgeml data clean`) before training."
        )
    return torch.from_numpy(labels.cast(pl.Float32).to_numpy().copy())


# --- labels -----------------------------------------------------------------------------


def _labels(frame: pl.DataFrame, target: str, part: str) -> pl.Series:
    require_columns(frame, [target], f"data.target (in the {part} split)")
    return frame.get_column(target)


def _sorted_classes(labels: pl.Series) -> list[Any]:
    """Sorted distinct train labels: numbers in numeric order, anything else as text."""
    if not (labels.dtype.is_integer() or labels.dtype == pl.Boolean):
        labels = labels.cast(pl.String)
    return labels.drop_nulls().unique().sort().to_list()


def _class_ids(labels: pl.Series, classes: list[Any], part: str) -> torch.Tensor:
    """Each label's position in `classes`; a label the model head lacks is an error."""
    if len(classes) < 2:
        raise InvalidDataError(
            f"The label column '{labels.name}' has {len(classes)} class(es) in the train "
            "split; a classifier needs at least 2, so check the target and the split."
        )
    if isinstance(classes[0], str):
        labels = labels.cast(pl.String)
    ids = labels.replace_strict(
        classes, list(range(len(classes))), default=None, return_dtype=pl.Int64
    )
    unknown = labels.filter(ids.is_null())
    if unknown.len():
        value = "a missing (null) value" if unknown[0] is None else repr(unknown[0])
        shown = ", ".join(repr(c) for c in classes[:10]) + (", ..." if len(classes) > 10 else "")
        raise InvalidDataError(
            f"The {part} split has label {value} in '{labels.name}', which is not one of the "
            f"model's {len(classes)} classes ({shown}); fix or drop those rows, or re-split "
            "(and refit the feature spec) so the train split holds every class."
        )
    return torch.from_numpy(ids.to_numpy().copy())


def _classification(splits: dict[str, SplitData], classes: list[Any]) -> TaskData:
    return TaskData(
        task="classification",
        train=splits["train"],
        eval=splits.get("eval"),
        test=splits.get("test"),
        num_classes=len(classes),
        class_names=[str(value) for value in classes],
    )


def _regression(splits: dict[str, SplitData]) -> TaskData:
    return TaskData(
        task="regression", train=splits["train"], eval=splits.get("eval"), test=splits.get("test")
    )


# --- images -----------------------------------------------------------------------------


def _image(frames: _Frames, data: DataConfig) -> TaskData:
    target = data.target or "label"  # the class sub-folder column of image ingest
    classes = _sorted_classes(_labels(frames.train, target, "train"))
    mode, size = "", (0, 0)
    splits = {}
    for part, frame in frames.parts():
        require_columns(frame, [data.image_column], f"data.image_column (in the {part} split)")
        images = _open_images(frame.get_column(data.image_column).to_list(), part)
        if part == "train":
            gray = all(image.mode in _GRAY_MODES for image in images)
            mode, size = ("L" if gray else "RGB"), images[0].size
        pixels = _pixels(images, mode, size, part)
        labels = _class_ids(_labels(frame, target, part), classes, part)
        splits[part] = SplitData({"images": pixels}, labels)
    task = _classification(splits, classes)
    task.input_shape = tuple(int(n) for n in splits["train"].inputs["images"].shape[1:])
    task.meta["label_column"] = target
    return task


def _open_images(encoded: list[bytes | None], part: str) -> list[Any]:
    from PIL import Image, UnidentifiedImageError

    images = []
    for row, value in enumerate(encoded):
        try:
            image = Image.open(io.BytesIO(value or b""))
            image.load()
        except (OSError, UnidentifiedImageError, ValueError):
            raise InvalidDataError(
                f"Row {row} of the {part} split is not a decodable image; re-ingest the "
                "image folder (it skips or names undecodable files)."
            ) from None
        images.append(image)
    return images


def _pixels(images: list[Any], mode: str, size: tuple[int, int], part: str) -> torch.Tensor:
    """float32 [N, C, H, W] in [0, 1]; every image must have the train images' size."""
    for image in images:
        if image.size != size:
            raise InvalidDataError(
                f"The {part} split has a {image.size[0]}x{image.size[1]} image but the train "
                f"images are {size[0]}x{size[1]}; resize every image to one size and re-ingest."
            )
    # [N, H, W] for grayscale, [N, H, W, C] for colour
    stacked = np.stack([np.asarray(image.convert(mode), dtype=np.uint8) for image in images])
    if stacked.ndim == 3:
        stacked = stacked[..., None]
    pixels = torch.from_numpy(stacked).permute(0, 3, 1, 2).contiguous()
    return pixels.to(torch.float32) / 255.0


# --- text -------------------------------------------------------------------------------


def _texts(frame: pl.DataFrame, column: str, part: str) -> list[str]:
    require_columns(frame, [column], f"data.text_column (in the {part} split)")
    texts = frame.get_column(column).cast(pl.String)
    if texts.null_count():
        raise InvalidDataError(
            f"The {part} split has {texts.null_count()} rows without text in '{column}'; "
            "drop or fill them (`forgeml data clean`) before training."
        )
    return texts.to_list()


def _text(
    frames: _Frames, column: str, target: str, family: ModelFamily, params: dict[str, Any]
) -> TaskData:
    """Texts through the family's tokenizer, fitted on the train split's texts."""
    if family.tokenizer is None:
        raise ConfigError(f"Model family '{family.name}' reads text but names no tokenizer.")
    classes = _sorted_classes(_labels(frames.train, target, "train"))
    tokenizer = family.tokenizer(
        TokenizerSource(params, texts=_texts(frames.train, column, "train"))
    )
    splits = {}
    for part, frame in frames.parts():
        inputs = tokenizer(_texts(frame, column, part))
        labels = _class_ids(_labels(frame, target, part), classes, part)
        splits[part] = SplitData(inputs, labels)
    task = _classification(splits, classes)
    task.input_shape = (int(next(iter(splits["train"].inputs.values())).shape[1]),)
    task.vocab_size = tokenizer.vocab_size
    task.tokenizer = tokenizer.state()
    task.meta = {"label_column": target, "text_column": column}
    return task


def _language_model(frames: _Frames, data: DataConfig, params: dict[str, Any]) -> TaskData:
    """Byte-level next-token prediction over the split's rows joined by newlines."""
    if data.slices:
        raise ConfigError(
            "data.slices needs one label per row, which language modelling does not have; "
            "remove data.slices."
        )
    block_size = params.get("block_size", 128)
    if not isinstance(block_size, int) or isinstance(block_size, bool) or block_size < 1:
        raise ConfigError(
            f"model.params.block_size must be a positive integer, not {block_size!r}."
        )
    column = data.text_column or "text"  # the column of text-folder ingest
    splits = {}
    for part, frame in frames.parts():
        inputs, targets = byte_windows(_texts(frame, column, part), block_size, part)
        splits[part] = SplitData({"input_ids": inputs}, targets)
    return TaskData(
        task="language_modeling",
        train=splits["train"],
        eval=splits.get("eval"),
        test=splits.get("test"),
        input_shape=(block_size,),
        vocab_size=BYTE_VOCAB,
        meta={"tokenizer": "utf-8 bytes", "text_column": column},
    )


def byte_windows(texts: list[str], block_size: int, part: str) -> tuple[torch.Tensor, torch.Tensor]:
    """UTF-8 bytes of `texts` joined by "\\n", cut into non-overlapping windows.

    Returns:
        inputs [N, block_size] and targets [N, block_size] (the next byte), both long;
        the tail shorter than one window is dropped.
    """
    encoded = "\n".join(texts).encode("utf-8")
    window = block_size + 1
    count = len(encoded) // window
    if count == 0:
        raise InvalidDataError(
            f"The {part} split has {len(encoded)} bytes of text, fewer than one window of "
            f"block_size + 1 = {window}; add text or lower model.params.block_size."
        )
    tokens = np.frombuffer(encoded, dtype=np.uint8)[: count * window].reshape(count, window)
    windows = torch.from_numpy(tokens.astype(np.int64))
    return windows[:, :-1].contiguous(), windows[:, 1:].contiguous()


# --- knowledge-graph triples ----------------------------------------------------------


def _triples(frames: _Frames) -> TaskData:
    """Every split's (head, relation, tail) names as ids of one vocabulary (all splits')."""
    from forgeml.train.models.kg import triples_task

    return triples_task(frames.train, frames.eval, frames.test)


# --- slices and provenance --------------------------------------------------------------


def _attach_slices(task: TaskData, frames: _Frames, columns: list[str]) -> None:
    for part, frame in frames.parts():
        require_columns(frame, columns, f"data.slices (in the {part} split)")
        split: SplitData = getattr(task, part)
        split.slices = {
            name: frame.get_column(name).cast(pl.String).fill_null(NULL_SLICE).to_list()
            for name in columns
        }


def _meta(sources: _Sources, frames: _Frames, task: TaskData) -> dict[str, Any]:
    spec = sources.spec
    meta: dict[str, Any] = {
        "dataset": sources.version.ref,
        "dataset_digest": sources.version.digest,
        "feature_spec": f"{spec.name}@v{spec.version}" if spec else None,
        "feature_spec_digest": spec.digest if spec else None,
        "label_column": None,
        "rows": {part: frame.height for part, frame in frames.parts()},
        **task.meta,
    }
    if sources.eval_version is not None:
        meta["eval_dataset"] = sources.eval_version.ref
        meta["eval_dataset_digest"] = sources.eval_version.digest
    return meta
