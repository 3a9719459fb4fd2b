from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import polars as pl
import pytest
import torch
from PIL import Image

from forgeml.core.config import Settings
from forgeml.core.configfile import load_yaml
from forgeml.core.errors import (
    ConfigError,
    ForgemlError,
    InvalidDataError,
    MissingColumnError,
    NotFoundError,
    UsageError,
)
from forgeml.core.workspace import Workspace
from forgeml.data import catalog, pipeline
from forgeml.data.features import FeatureSpec, feature_columns
from forgeml.data.ingest import IngestOptions
from forgeml.train.config import TrainConfig
from forgeml.train.data import byte_windows, load_task_data

REPO = Path(__file__).resolve().parents[2]
ADULT_EXAMPLES = REPO / "examples" / "adult"


def make_config(
    model: str = "mlp", params: dict[str, Any] | None = None, **data: Any
) -> TrainConfig:
    return TrainConfig.model_validate(
        {"name": "t", "data": data, "model": {"name": model, "params": params or {}}, "epochs": 1}
    )


def add(workspace: Workspace, name: str, source: Path, **options: Any) -> str:
    return pipeline.add(workspace, name, source, IngestOptions(**options)).version.ref


def split(workspace: Workspace, ref: str, **params: Any) -> str:
    return pipeline.derive(workspace, "split", ref, params).main.version.ref


def rows_of(workspace: Workspace, ref: str, part: str | None = None) -> pl.DataFrame:
    with workspace.store.session() as session:
        version = catalog.resolve(session, ref)
    return catalog.read_frame(workspace, version, part)


def spec_of(workspace: Workspace, ref: str) -> FeatureSpec:
    with workspace.store.session() as session:
        digest = catalog.resolve_feature_spec(session, ref).digest
    return FeatureSpec.from_dict(orjson.loads(workspace.artifacts.get_bytes(digest)))


def raises_one_sentence(
    error: type[ForgemlError], workspace: Workspace, config: TrainConfig
) -> str:
    with pytest.raises(error) as caught:
        load_task_data(workspace, config)
    message = str(caught.value)
    assert message.endswith(".") and "\n" not in message and len(message) < 400, message
    return message


@pytest.fixture(scope="module")
def adult(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Iterator[Workspace]:
    source = shared_data / "adult" / "adult.data"
    workspace = Workspace(Settings(home=tmp_path_factory.mktemp("adult") / "home", user="tester"))
    add(workspace, "adult", source)
    pipeline.derive(workspace, "clean", "adult", load_yaml(ADULT_EXAMPLES / "clean.yaml"))
    split(workspace, "adult", stratify="Y", ratios=[0.8, 0.1, 0.1], seed=0)
    pipeline.derive(workspace, "features", "adult", load_yaml(ADULT_EXAMPLES / "features.yaml"))
    yield workspace
    workspace.close()


def adult_config(**data: Any) -> TrainConfig:
    return make_config(
        **{"dataset": "adult", "feature_spec": "adult-features", "target": "Y", **data}
    )


def test_adult_features_are_the_spec_applied_to_raw_rows(adult: Workspace) -> None:
    task = load_task_data(adult, adult_config(slices=["sex"]))
    spec = spec_of(adult, "adult-features")
    raw = rows_of(adult, "adult", "train")
    transformed = spec.transform(raw)
    columns = spec.output_columns  # every Adult feature is numeric
    expected = transformed.select(pl.col(columns).cast(pl.Float32)).to_numpy()

    assert task.task == "classification"
    assert feature_columns(spec, transformed.schema) == columns
    assert task.input_shape == (len(columns),) and len(columns) > 80
    assert task.train.inputs["features"].dtype == torch.float32
    np.testing.assert_array_equal(task.train.inputs["features"].numpy(), expected)
    assert (task.num_classes, task.class_names) == (2, ["<=50K", ">50K"])
    assert task.train.targets.dtype == torch.long
    assert task.train.targets.tolist() == [int(y == ">50K") for y in raw["Y"]]
    assert task.train.slices["sex"] == raw["sex"].to_list()
    assert set(task.train.slices["sex"]) == {"Male", "Female"}


def test_adult_splits_and_provenance(adult: Workspace) -> None:
    task = load_task_data(adult, adult_config(slices=["sex"]))
    full = rows_of(adult, "adult")
    counts = dict(full["__split__"].value_counts().iter_rows())

    assert task.eval is not None and task.test is not None
    assert (len(task.train), len(task.eval), len(task.test)) == (
        counts["train"],
        counts["validation"],
        counts["test"],
    )
    assert task.eval.inputs["features"].shape == (counts["validation"], task.input_shape[0])
    assert set(task.eval.targets.unique().tolist()) == {0, 1}
    assert len(task.test.slices["sex"]) == counts["test"]
    with adult.store.session() as session:
        version = catalog.resolve(session, "adult")
        spec = catalog.resolve_feature_spec(session, "adult-features")
    assert task.meta == {
        "dataset": version.ref,
        "dataset_digest": version.digest,
        "feature_spec": "adult-features@v1",
        "feature_spec_digest": spec.digest,
        "label_column": "Y",
        "rows": {
            "train": counts["train"],
            "eval": counts["validation"],
            "test": counts["test"],
        },
    }


def test_max_rows_keeps_the_first_training_rows(adult: Workspace) -> None:
    full = load_task_data(adult, adult_config(eval_split=None, test_split=None))
    capped = load_task_data(adult, adult_config(eval_split=None, test_split=None, max_rows=50))

    assert len(capped.train) == 50
    assert (capped.eval, capped.test) == (None, None)
    assert torch.equal(capped.train.inputs["features"], full.train.inputs["features"][:50])
    assert capped.meta["rows"] == {"train": 50}


def test_eval_dataset_replaces_the_eval_split(adult: Workspace, shared_data: Path) -> None:
    source = shared_data / "adult" / "adult.test"
    add(adult, "adult-heldout", source)
    pipeline.derive(adult, "clean", "adult-heldout", load_yaml(ADULT_EXAMPLES / "clean.yaml"))
    task = load_task_data(adult, adult_config(eval_dataset="adult-heldout", slices=["sex"]))
    heldout = rows_of(adult, "adult-heldout")

    assert task.eval is not None
    assert len(task.eval) == heldout.height
    assert task.eval.targets.tolist() == [int(y == ">50K") for y in heldout["Y"]]
    assert task.eval.slices["sex"] == heldout["sex"].to_list()
    assert task.meta["eval_dataset"] == "adult-heldout@v2"
    assert task.meta["rows"]["eval"] == heldout.height


def test_a_features_dataset_is_refused_naming_its_raw_parent(adult: Workspace) -> None:
    message = raises_one_sentence(ConfigError, adult, adult_config(dataset="adult-features"))
    assert "adult@v3" in message


@pytest.mark.parametrize(
    ("config", "error", "expected"),
    [
        (adult_config(dataset="nope"), NotFoundError, "Dataset 'nope' does not exist"),
        (adult_config(feature_spec="nope"), NotFoundError, "Feature spec 'nope' does not exist"),
        (adult_config(dataset="adult@v1"), UsageError, "forgeml data split adult@v1"),
        (adult_config(target="income"), ConfigError, "fitted with target 'Y'"),
        (adult_config(slices=["gender"]), MissingColumnError, "'gender'"),
        (adult_config(eval_dataset="adult@v1", eval_rename={"x": "y"}), MissingColumnError, "'x'"),
    ],
)
def test_bad_adult_configs_say_what_is_wrong(
    adult: Workspace, config: TrainConfig, error: type[ForgemlError], expected: str
) -> None:
    assert expected in raises_one_sentence(error, adult, config)


def test_an_eval_label_the_model_head_lacks_is_refused(adult: Workspace) -> None:
    rows = rows_of(adult, "adult", "test").head(20).drop("__split__")
    relabel = pl.when(pl.int_range(pl.len()) == 3).then(pl.lit("maybe")).otherwise("Y")
    rows = rows.with_columns(relabel.alias("Y"))
    path = adult.settings.home / "relabelled.parquet"
    rows.write_parquet(path)
    add(adult, "adult-relabelled", path)
    message = raises_one_sentence(
        InvalidDataError, adult, adult_config(eval_dataset="adult-relabelled")
    )
    assert "'maybe'" in message and "'Y'" in message


@pytest.fixture
def workspace_home(tmp_path: Path) -> Iterator[Workspace]:
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    yield workspace
    workspace.close()


def write_table(path: Path, rows: int = 40) -> Path:
    lines = ["x,city,score,label"]
    for i in range(rows):
        lines.append(f"{i},{['Oslo', 'Rome'][i % 2]},{i * 0.5 + 0.25},{['no', 'yes'][i % 2]}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_float_target_gives_regression(workspace_home: Workspace, tmp_path: Path) -> None:
    add(workspace_home, "table", write_table(tmp_path / "table.csv"))
    split(workspace_home, "table", ratios=[0.5, 0.5])
    features = {
        "target": "score",
        "features": [{"column": "x", "kind": "standardize"}, {"column": "city", "kind": "onehot"}],
        "passthrough": ["label"],  # a text passthrough is not a model input
    }
    pipeline.derive(workspace_home, "features", "table", features)
    config = make_config(dataset="table", feature_spec="table-features", eval_split=None)
    task = load_task_data(workspace_home, config)
    raw = rows_of(workspace_home, "table", "train")

    assert (task.task, task.num_classes, task.input_shape) == ("regression", None, (4,))
    assert task.train.targets.dtype == torch.float32
    assert task.train.targets.tolist() == raw["score"].to_list()
    assert task.test is not None and len(task.test) == 20
    assert task.meta["label_column"] == "score"


def write_images(root: Path, mode: str, sizes: list[tuple[int, int]]) -> Path:
    for index, size in enumerate(sizes):
        label = "cat" if index % 2 else "dog"
        (root / label).mkdir(parents=True, exist_ok=True)
        color = index * 20 if mode == "L" else (index * 20, 255 - index * 20, 7)
        Image.new(mode, size, color).save(root / label / f"{index:02d}.png")
    return root


@pytest.mark.parametrize(("mode", "channels"), [("L", 1), ("RGB", 3)])
def test_images_become_pixels_in_0_1(
    workspace_home: Workspace, tmp_path: Path, mode: str, channels: int
) -> None:
    root = write_images(tmp_path / "pics", mode, [(6, 5)] * 12)
    add(workspace_home, "pics", root, format="images")
    split(workspace_home, "pics", ratios=[0.5, 0.25, 0.25], stratify="label")
    task = load_task_data(workspace_home, make_config("cnn", dataset="pics", slices=["label"]))
    raw = rows_of(workspace_home, "pics", "train")
    pixels = task.train.inputs["images"]

    assert (task.task, task.class_names, task.input_shape) == (
        "classification",
        ["cat", "dog"],
        (channels, 5, 6),
    )
    assert pixels.dtype == torch.float32 and pixels.shape == (raw.height, channels, 5, 6)
    assert task.train.targets.tolist() == [int(label == "dog") for label in raw["label"]]
    first = int(Path(raw["path"][0]).stem)  # image k has value 20 k in its first channel
    assert pixels[0, 0, 0, 0].item() == pytest.approx(first * 20 / 255)
    assert float(pixels.max()) <= 1.0 and float(pixels.min()) >= 0.0
    assert (
        task.eval is not None
        and task.eval.slices["label"]
        == rows_of(workspace_home, "pics", "validation")["label"].to_list()
    )
    assert task.meta["label_column"] == "label"


def test_images_of_mixed_sizes_are_refused(workspace_home: Workspace, tmp_path: Path) -> None:
    sizes = [(6, 5)] * 8 + [(7, 5)]
    add(workspace_home, "pics", write_images(tmp_path / "pics", "L", sizes), format="images")
    split(workspace_home, "pics", ratios=[0.5, 0.5])
    message = raises_one_sentence(
        InvalidDataError, workspace_home, make_config("cnn", dataset="pics")
    )
    assert "7x5" in message and "6x5" in message


def test_a_missing_target_column_is_named(workspace_home: Workspace, tmp_path: Path) -> None:
    root = write_images(tmp_path / "pics", "L", [(4, 4)] * 8)
    add(workspace_home, "pics", root, format="images")
    split(workspace_home, "pics", ratios=[0.5, 0.5])
    config = make_config("cnn", dataset="pics", target="species")
    assert "'species'" in raises_one_sentence(MissingColumnError, workspace_home, config)


def test_an_empty_train_split_is_refused(workspace_home: Workspace, tmp_path: Path) -> None:
    root = write_images(tmp_path / "pics", "L", [(4, 4)] * 8)
    add(workspace_home, "pics", root, format="images")
    split(workspace_home, "pics", ratios=[0.5, 0.5])  # train and test: no validation rows
    config = make_config("cnn", dataset="pics", train_split="validation")
    assert "no rows" in raises_one_sentence(InvalidDataError, workspace_home, config)


def write_texts(root: Path, count: int = 8) -> Path:
    root.mkdir(parents=True)
    for i in range(count):
        text = f"file {i}: the quick brown fox jumps over the lazy dog, héllo {i}.\n" * 3
        (root / f"part{i}.txt").write_text(text, encoding="utf-8")
    return root


def test_language_modelling_windows_are_next_bytes(
    workspace_home: Workspace, tmp_path: Path
) -> None:
    add(workspace_home, "corpus", write_texts(tmp_path / "corpus"), format="text")
    split(workspace_home, "corpus", ratios=[0.5, 0.25, 0.25])
    config = make_config("tiny_gpt", {"block_size": 16}, dataset="corpus")
    task = load_task_data(workspace_home, config)
    joined = "\n".join(rows_of(workspace_home, "corpus", "train")["text"]).encode("utf-8")
    inputs, targets = task.train.inputs["input_ids"], task.train.targets

    assert (task.task, task.vocab_size, task.input_shape) == ("language_modeling", 256, (16,))
    assert inputs.shape == targets.shape == (len(joined) // 17, 16)
    assert inputs.dtype == targets.dtype == torch.long
    assert bytes(inputs[0].tolist()) == joined[:16]
    assert bytes(targets[0].tolist()) == joined[1:17]
    assert bytes(inputs[1].tolist()) == joined[17:33]
    assert task.eval is not None and task.test is not None
    assert task.meta["label_column"] is None and task.meta["rows"]["train"] == 4


def test_byte_windows_drop_the_short_tail() -> None:
    inputs, targets = byte_windows(["ab", "cd"], 2, "train")  # b"ab\ncd": one window of 3

    assert inputs.tolist() == [[ord("a"), ord("b")]]
    assert targets.tolist() == [[ord("b"), ord("\n")]]
    with pytest.raises(InvalidDataError, match="block_size"):
        byte_windows(["ab"], 2, "train")


def test_a_text_too_short_for_one_window_is_refused(
    workspace_home: Workspace, tmp_path: Path
) -> None:
    add(workspace_home, "corpus", write_texts(tmp_path / "corpus"), format="text")
    split(workspace_home, "corpus", ratios=[0.5, 0.5])
    config = make_config("tiny_gpt", {"block_size": 100_000}, dataset="corpus")
    assert "block_size" in raises_one_sentence(InvalidDataError, workspace_home, config)


def test_text_classification_tokenizes_with_the_model_tokenizer(
    workspace_home: Workspace, tmp_path: Path, shared_data: Path
) -> None:
    source = shared_data / "sst2" / "train.tsv"
    lines = source.read_text(encoding="utf-8").splitlines()[:61]
    small = tmp_path / "sst2.tsv"
    small.write_text("\n".join(lines) + "\n", encoding="utf-8")
    add(workspace_home, "sst2", small)
    split(workspace_home, "sst2", ratios=[0.6, 0.2, 0.2], stratify="label")
    config = make_config("text_classifier", dataset="sst2", text_column="sentence", target="label")
    task = load_task_data(workspace_home, config)
    raw = rows_of(workspace_home, "sst2", "train")
    ids, mask = task.train.inputs["input_ids"], task.train.inputs["attention_mask"]

    assert (task.task, task.class_names) == ("classification", ["0", "1"])
    assert ids.shape == mask.shape and ids.shape[0] == raw.height
    assert ids.dtype == mask.dtype == torch.long
    assert task.input_shape == (ids.shape[1],)
    assert task.train.targets.tolist() == raw["label"].to_list()
    assert task.meta["label_column"] == "label"


def test_a_dataset_without_splits_names_the_split_command(
    workspace_home: Workspace, tmp_path: Path
) -> None:
    shutil.copytree(write_texts(tmp_path / "corpus"), tmp_path / "copy")
    add(workspace_home, "corpus", tmp_path / "copy", format="text")
    config = make_config("tiny_gpt", dataset="corpus")
    assert "forgeml data split corpus@v1" in raises_one_sentence(UsageError, workspace_home, config)
