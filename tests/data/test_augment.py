from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from PIL import Image

from forgeml.core.configfile import parse_model
from forgeml.core.errors import ConfigError, InvalidDataError, MissingColumnError
from forgeml.data._augment_text import builtin_synonyms
from forgeml.data._parquet import write_frame
from forgeml.data.augment import AugmentParams, apply, load_word_list

ADULT_INTS = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]


def _split_by_position(frame: pl.DataFrame) -> pl.DataFrame:
    position = pl.int_range(pl.len()) % 5
    split = (
        pl.when(position == 0)
        .then(pl.lit("validation"))
        .when(position == 1)
        .then(pl.lit("test"))
        .otherwise(pl.lit("train"))
    )
    return frame.with_columns(split.alias("__split__"))


@pytest.fixture(scope="module")
def adult(shared_data: Path) -> pl.DataFrame:
    frame = pl.read_csv(shared_data / "adult" / "adult.data", infer_schema=False, n_rows=3000)
    frame = frame.rename({name: name.strip() for name in frame.columns})
    frame = frame.with_columns(pl.all().str.strip_chars())
    frame = frame.with_columns(
        pl.when(pl.all() == "?").then(None).otherwise(pl.all()).name.keep()
    ).with_columns(pl.col(ADULT_INTS).cast(pl.Int64))
    return _split_by_position(frame)


@pytest.fixture(scope="module")
def sst2(shared_data: Path) -> pl.DataFrame:
    frame = pl.read_csv(
        shared_data / "sst2" / "train.tsv", separator="\t", quote_char=None, n_rows=2000
    )
    return _split_by_position(frame)


def _png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def _pixels(blob: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(blob)) as image:
        return np.asarray(image)


def _gradient(width: int, height: int, shift: int) -> np.ndarray:
    ys, xs = np.mgrid[0:height, 0:width]
    channels = [xs * 25 + shift, ys * 30, (xs * ys + shift) % 256]
    return np.stack(channels, axis=-1).astype(np.uint8)


@pytest.fixture
def images() -> pl.DataFrame:
    # train images are 8x6, validation / test ones 5x7, so a leaked source shows in the size
    splits = ["train", "validation", "train", "test", "train", "train"]
    blobs = [
        _png(_gradient(8, 6, shift) if split == "train" else _gradient(5, 7, shift))
        for shift, split in enumerate(splits)
    ]
    sizes = [Image.open(io.BytesIO(blob)).size for blob in blobs]
    return pl.DataFrame(
        {
            "image": blobs,
            "width": [size[0] for size in sizes],
            "height": [size[1] for size in sizes],
            "label": [0, 1, 0, 1, 1, 0],
            "__split__": splits,
        },
        schema_overrides={"width": pl.Int32, "height": pl.Int32},
    )


def _params(**sections: Any) -> AugmentParams:
    return AugmentParams.model_validate(sections)


def _new_rows(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.filter(pl.col("__augmented__"))


def _source_rows(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.filter(pl.col("__split__") == "train")


def _assert_one_sentence(message: str) -> None:
    assert message.endswith(".")
    assert message.count(". ") == 0
    assert "\n" not in message


# ---- contract: split, row order, flags -------------------------------------------------


def test_apply_without_split_column_is_refused() -> None:
    frame = pl.DataFrame({"sentence": ["a b c"]})
    with pytest.raises(InvalidDataError) as caught:
        apply(frame, _params(text={"column": "sentence"}))
    assert str(caught.value) == (
        "augment needs a split version so augmented rows stay in train; "
        "run `forgeml data split` first."
    )


def test_apply_without_train_rows_is_refused() -> None:
    frame = pl.DataFrame({"sentence": ["a b c"], "__split__": ["test"]})
    with pytest.raises(InvalidDataError, match="no original train rows") as caught:
        apply(frame, _params(text={"column": "sentence"}))
    _assert_one_sentence(str(caught.value))


def test_recipe_without_section_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_model(AugmentParams, {"seed": 3}, "recipe.yaml")
    assert "recipe.yaml" in str(caught.value)
    assert "no section" in str(caught.value)


def test_recipe_with_unknown_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'text\.colour'"):
        parse_model(AugmentParams, {"text": {"column": "s", "colour": 1}}, "recipe.yaml")


def test_original_rows_come_first_unchanged(sst2: pl.DataFrame) -> None:
    out = apply(sst2, _params(text={"column": "sentence", "copies": 2}))
    head = out.frame.head(sst2.height)
    assert head.drop("__augmented__").equals(sst2)
    assert not head["__augmented__"].any()
    new = out.frame.slice(sst2.height)
    assert new["__augmented__"].all()
    assert new["__split__"].unique().to_list() == ["train"]
    assert new.height == 2 * _source_rows(sst2).height
    assert out.report["rows_added"] == new.height
    json.dumps(out.report)


def test_rows_already_augmented_are_not_sources_again(sst2: pl.DataFrame) -> None:
    params = _params(text={"column": "sentence"})
    once = apply(sst2, params).frame
    twice = apply(once, params)
    assert twice.report["source_rows"] == _source_rows(sst2).height
    assert twice.frame.head(once.height).equals(once)


@pytest.mark.parametrize("section", ["text", "image", "tabular"])
def test_output_is_byte_identical_for_a_seed_and_differs_across_seeds(
    section: str,
    sst2: pl.DataFrame,
    images: pl.DataFrame,
    adult: pl.DataFrame,
    tmp_path: Path,
) -> None:
    frame, recipe = {
        "text": (sst2, {"column": "sentence"}),
        "image": (images, {"ops": ["hflip", "crop", "rotate", "noise"], "copies": 2}),
        "tabular": (adult, {"label": "Y"}),
    }[section]
    digests = []
    for run, seed in enumerate([7, 7, 8]):
        path = tmp_path / f"{run}.parquet"
        write_frame(apply(frame, _params(seed=seed, **{section: recipe})).frame, path)
        digests.append(path.read_bytes())
    assert digests[0] == digests[1]
    assert digests[0] != digests[2]


# ---- errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "recipe"),
    [
        ("text", {"column": "nope"}),
        ("image", {"column": "nope"}),
        ("tabular", {"label": "nope"}),
    ],
)
def test_missing_column_is_named(section: str, recipe: dict[str, Any]) -> None:
    frame = pl.DataFrame({"sentence": ["a b"], "__split__": ["train"]})
    with pytest.raises(MissingColumnError, match="names column 'nope'") as caught:
        apply(frame, _params(**{section: recipe}))
    _assert_one_sentence(str(caught.value))


def test_text_column_that_is_not_string_is_refused() -> None:
    frame = pl.DataFrame({"n": [1, 2], "__split__": ["train", "train"]})
    with pytest.raises(InvalidDataError, match="text column 'n' has type Int64") as caught:
        apply(frame, _params(text={"column": "n"}))
    _assert_one_sentence(str(caught.value))


def test_image_column_that_is_not_binary_is_refused() -> None:
    frame = pl.DataFrame({"image": ["x.png"], "__split__": ["train"]})
    with pytest.raises(InvalidDataError, match="image column 'image' has type String") as caught:
        apply(frame, _params(image={}))
    _assert_one_sentence(str(caught.value))


def test_undecodable_image_names_its_row(images: pl.DataFrame) -> None:
    blobs = images["image"].to_list()
    blobs[4] = b"not a png at all"
    frame = images.with_columns(pl.Series("image", blobs, dtype=pl.Binary))
    with pytest.raises(InvalidDataError, match=r"row 4 \(0-based\)") as caught:
        apply(frame, _params(image={}))
    _assert_one_sentence(str(caught.value))


def test_label_with_a_single_class_is_refused(adult: pl.DataFrame) -> None:
    frame = adult.filter(pl.col("sex") == "Female")
    with pytest.raises(InvalidDataError, match="a single class \\('Female'\\)") as caught:
        apply(frame, _params(tabular={"label": "sex"}))
    _assert_one_sentence(str(caught.value))


def test_k_neighbors_larger_than_a_class_is_refused(adult: pl.DataFrame) -> None:
    few = adult.filter((pl.col("Y") == "<=50K") | (pl.int_range(pl.len()) < 20))
    rare = _source_rows(few).filter(pl.col("Y") == ">50K").height
    with pytest.raises(InvalidDataError, match=f"has {rare} train rows") as caught:
        apply(few, _params(tabular={"label": "Y", "k_neighbors": rare}))
    assert "lower k_neighbors" in str(caught.value)
    _assert_one_sentence(str(caught.value))


def test_target_naming_an_unknown_class_is_refused(adult: pl.DataFrame) -> None:
    with pytest.raises(InvalidDataError, match="class 'rich'") as caught:
        apply(adult, _params(tabular={"label": "Y", "target": {"rich": 10}}))
    _assert_one_sentence(str(caught.value))


# ---- text ------------------------------------------------------------------------------


def _pairs(frame: pl.DataFrame, out: pl.DataFrame) -> list[tuple[list[str], list[str]]]:
    sources = _source_rows(frame)["sentence"].to_list()
    new = _new_rows(out)["sentence"].to_list()
    return [(before.split(), after.split()) for before, after in zip(sources, new, strict=True)]


def test_swap_keeps_the_words_in_another_order(sst2: pl.DataFrame) -> None:
    out = apply(sst2, _params(text={"column": "sentence", "ops": ["swap"], "p": 0.2}))
    pairs = _pairs(sst2, out.frame)
    assert all(sorted(before) == sorted(after) for before, after in pairs)
    # one swap of two different words always shows (several swaps may undo each other)
    single = [b != a for b, a in pairs if len(set(b)) == len(b) > 1 and round(0.2 * len(b)) <= 1]
    assert len(single) > 100
    assert all(single)
    assert sum(b != a for b, a in pairs) > 0.9 * len(pairs)
    assert out.report["text"]["rows_per_op"] == {"swap": len(pairs)}


def test_delete_drops_words_but_never_all(sst2: pl.DataFrame) -> None:
    out = apply(sst2, _params(text={"column": "sentence", "ops": ["delete"], "p": 0.3}))
    pairs = _pairs(sst2, out.frame)
    for before, after in pairs:
        assert 1 <= len(after) <= len(before)
        remaining = iter(before)
        assert all(word in remaining for word in after)  # a subsequence
    dropped = sum(len(before) - len(after) for before, after in pairs)
    total = sum(len(before) for before, _ in pairs)
    assert 0.2 < dropped / total < 0.4


def test_synonym_replaces_words_with_listed_synonyms(sst2: pl.DataFrame) -> None:
    out = apply(sst2, _params(text={"column": "sentence", "ops": ["synonym"]}))
    table = builtin_synonyms()
    replaced = 0
    for before, after in _pairs(sst2, out.frame):
        assert len(before) == len(after)
        for old, new in zip(before, after, strict=True):
            if old != new:
                assert new.lower() in table[old.lower()]
                replaced += 1
    assert replaced > 100


def test_synonym_replacement_preserves_case() -> None:
    frame = pl.DataFrame({"s": ["Good GOOD good film"], "__split__": ["train"]})
    recipe = {"column": "s", "ops": ["synonym"], "p": 0.9, "synonyms": {"good": ["great"]}}
    out = apply(frame, _params(text=recipe))
    assert _new_rows(out.frame)["s"].to_list() == ["Great GREAT great film"]


def test_blank_and_null_texts_are_not_sources() -> None:
    frame = pl.DataFrame({"s": ["one two", None, "   "], "__split__": ["train"] * 3})
    out = apply(frame, _params(text={"column": "s", "copies": 3}))
    assert _new_rows(out.frame).height == 3
    assert out.report["text"]["blank_sources_skipped"] == 2


def test_text_of_validation_and_test_rows_never_leaks(sst2: pl.DataFrame) -> None:
    held_out = pl.col("__split__") != "train"
    marked = sst2.with_columns(
        pl.when(held_out).then(pl.lit("zzleak ") + pl.col("sentence")).otherwise("sentence")
    )
    out = apply(marked, _params(text={"column": "sentence", "copies": 3, "p": 0.5}))
    assert not _new_rows(out.frame)["sentence"].str.contains("zzleak").any()


def test_word_list_file_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "words.txt"
    path.write_text("# mine\nFast: quick, rapid\n\nfast: swift, quick  # again\n", "utf-8")
    assert load_word_list(path) == {"fast": ["quick", "rapid", "swift"]}


@pytest.mark.parametrize("line", ["no colon here", "word:", ": orphan"])
def test_word_list_with_a_bad_line_names_file_and_line(tmp_path: Path, line: str) -> None:
    path = tmp_path / "words.txt"
    path.write_text(f"good: fine\n{line}\n", "utf-8")
    with pytest.raises(ConfigError, match=r"words\.txt:2: expected") as caught:
        load_word_list(path)
    _assert_one_sentence(str(caught.value))


def test_builtin_word_list_is_a_few_hundred_words() -> None:
    table = builtin_synonyms()
    assert len(table) > 250
    assert "great" in table["good"]
    assert all(names and word not in names for word, names in table.items())


# ---- images ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "expected"),
    [("hflip", lambda p: p[:, ::-1]), ("vflip", lambda p: p[::-1])],
)
def test_flip_really_mirrors_the_pixels(images: pl.DataFrame, op: str, expected: Any) -> None:
    out = apply(images, _params(image={"ops": [op], "flip_probability": 1.0}))
    sources = _source_rows(images)["image"].to_list()
    new = _new_rows(out.frame)["image"].to_list()
    assert len(new) == len(sources)
    for before, after in zip(sources, new, strict=True):
        assert np.array_equal(_pixels(after), expected(_pixels(before)))


def test_flip_with_probability_zero_keeps_the_image(images: pl.DataFrame) -> None:
    out = apply(images, _params(image={"ops": ["hflip", "vflip"], "flip_probability": 0.0}))
    for before, after in zip(
        _source_rows(images)["image"], _new_rows(out.frame)["image"], strict=True
    ):
        assert np.array_equal(_pixels(after), _pixels(before))


@pytest.mark.parametrize(
    "recipe", [{"ops": ["crop"], "crop_fraction": 1.0}, {"ops": ["rotate"], "max_degrees": 0}]
)
def test_identity_crop_and_rotation_keep_the_pixels(
    images: pl.DataFrame, recipe: dict[str, Any]
) -> None:
    out = apply(images, _params(image=recipe))
    for before, after in zip(
        _source_rows(images)["image"], _new_rows(out.frame)["image"], strict=True
    ):
        assert np.array_equal(_pixels(after), _pixels(before))


def test_crop_zooms_into_a_part_of_the_image() -> None:
    ramp = np.tile(np.arange(0, 200, 10, dtype=np.uint8), (20, 1))  # 20x20, left dark
    frame = pl.DataFrame({"image": [_png(ramp)], "__split__": ["train"]})
    out = apply(frame, _params(image={"ops": ["crop"], "crop_fraction": 0.5, "copies": 4}))
    for blob in _new_rows(out.frame)["image"]:
        zoomed = _pixels(blob).astype(int)
        assert zoomed.shape == (20, 20)
        span = zoomed[0, -1] - zoomed[0, 0]
        assert 80 <= span <= 100  # half the ramp (0..190) stretched over the full width
        assert (np.diff(zoomed[0]) >= 0).all()


def test_rotation_keeps_size_and_centre() -> None:
    square = np.zeros((9, 9), dtype=np.uint8)
    square[4, 4] = 255
    square[0, :] = 100  # an edge that must move
    frame = pl.DataFrame({"image": [_png(square)], "__split__": ["train"]})
    recipe = {"ops": ["rotate"], "max_degrees": 45, "copies": 3}
    for blob in _new_rows(apply(frame, _params(image=recipe)).frame)["image"]:
        turned = _pixels(blob)
        assert turned.shape == (9, 9)
        assert turned[4, 4] == 255
        assert not np.array_equal(turned, square)


def test_noise_has_the_requested_spread_and_spares_alpha() -> None:
    rgba = np.full((32, 32, 4), 128, dtype=np.uint8)
    rgba[..., 3] = 77
    frame = pl.DataFrame({"image": [_png(rgba)], "__split__": ["train"]})
    out = apply(frame, _params(image={"ops": ["noise"], "noise_std": 0.05}))
    noisy = _pixels(_new_rows(out.frame)["image"][0]).astype(float)
    assert noisy.shape == (32, 32, 4)
    assert (noisy[..., 3] == 77).all()
    assert abs((noisy[..., :3] - 128).std() - 0.05 * 255) < 1.0


@pytest.mark.parametrize("mode", ["L", "RGB", "RGBA", "P"])
def test_image_modes_survive(mode: str) -> None:
    image = Image.fromarray(_gradient(8, 6, 0)).convert(mode)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    frame = pl.DataFrame({"image": [buffer.getvalue()], "__split__": ["train"]})
    out = apply(frame, _params(image={"ops": ["hflip", "noise"]}))
    with Image.open(io.BytesIO(_new_rows(out.frame)["image"][0])) as result:
        assert result.mode == ("RGB" if mode == "P" else mode)
        assert result.size == (8, 6)


def test_width_and_height_stay_consistent_and_sources_are_train_only(
    images: pl.DataFrame,
) -> None:
    recipe = {"ops": ["hflip", "vflip", "crop", "rotate", "noise"], "copies": 2}
    out = apply(images, _params(image=recipe))
    new = _new_rows(out.frame)
    assert new.height == 2 * _source_rows(images).height
    assert new.schema["width"] == pl.Int32
    for blob, width, height in new.select("image", "width", "height").iter_rows():
        assert Image.open(io.BytesIO(blob)).size == (width, height) == (8, 6)
    assert out.report["image"]["rows_added"] == new.height


# ---- tabular ---------------------------------------------------------------------------


def _train_counts(frame: pl.DataFrame, label: str) -> dict[str, int]:
    counts = _source_rows(frame)[label].value_counts()
    return dict(zip(counts[label].to_list(), counts["count"].to_list(), strict=True))


@pytest.mark.parametrize("label", ["Y", "sex"])
def test_smote_balances_adult_classes(adult: pl.DataFrame, label: str) -> None:
    before = _train_counts(adult, label)
    out = apply(adult, _params(tabular={"label": label}))
    after = _train_counts(out.frame, label)
    assert set(after.values()) == {max(before.values())}
    per_class = out.report["tabular"]["per_class"]
    for value, count in before.items():
        assert per_class[value] == {
            "before": count,
            "added": max(before.values()) - count,
            "after": max(before.values()),
        }
    assert _train_counts(out.frame.filter(~pl.col("__augmented__")), label) == before


def test_smote_rows_stay_inside_their_class(adult: pl.DataFrame) -> None:
    out = apply(adult, _params(tabular={"label": "Y"}))
    new = _new_rows(out.frame)
    assert new.schema == out.frame.schema
    rich = _source_rows(adult).filter(pl.col("Y") == ">50K")
    assert new["Y"].unique().to_list() == [">50K"]
    for name in ADULT_INTS:
        assert new[name].dtype == pl.Int64
        assert new[name].to_numpy().min() >= rich[name].to_numpy().min()
        assert new[name].to_numpy().max() <= rich[name].to_numpy().max()
    for name in ["workclass", "education", "occupation", "native-country"]:
        assert set(new[name].to_list()) <= set(rich[name].to_list())


def test_smote_target_counts_per_class(adult: pl.DataFrame) -> None:
    before = _train_counts(adult, "Y")
    goal = before[">50K"] + 123
    out = apply(adult, _params(tabular={"label": "Y", "target": {">50K": goal, "<=50K": 5}}))
    assert _train_counts(out.frame, "Y") == {"<=50K": before["<=50K"], ">50K": goal}
    assert out.report["tabular"]["rows_added"] == 123


def test_smote_never_uses_validation_or_test_rows(adult: pl.DataFrame) -> None:
    held_out = pl.col("__split__") != "train"
    poisoned = adult.with_columns(
        pl.when(held_out).then(999).otherwise("age").alias("age"),
        pl.when(held_out).then(pl.lit("LEAK")).otherwise("workclass").alias("workclass"),
    )
    new = _new_rows(apply(poisoned, _params(tabular={"label": "Y"})).frame)
    assert (new["age"] < 100).all()
    assert "LEAK" not in new["workclass"].to_list()


def _line_frame(xs: list[float | None], tags: list[str]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "x": xs + [50.0] * 12,
            "tag": tags + ["z"] * 12,
            "y": ["rare"] * len(xs) + ["common"] * 12,
            "__split__": ["train"] * (len(xs) + 12),
        }
    )


def test_smote_interpolates_between_nearest_neighbours_only() -> None:
    frame = _line_frame([0.0, 1.0, 10.0, 11.0], ["a", "b", "c", "d"])
    out = apply(frame, _params(tabular={"label": "y", "k_neighbors": 1}))
    new = _new_rows(out.frame)
    assert new.height == 8
    for x, tag in new.select("x", "tag").iter_rows():
        assert 0 <= x <= 1 or 10 <= x <= 11
        # the categorical value comes from the nearer parent
        expected = {0: "ab", 10: "cd"}[int(x // 10) * 10][round(x % 10)]
        assert tag == expected


def test_smote_copies_missing_numbers_from_the_nearer_parent() -> None:
    frame = _line_frame([0.0, None, 2.0, 3.0], ["a", "b", "c", "d"])
    new = _new_rows(apply(frame, _params(tabular={"label": "y", "k_neighbors": 2})).frame)
    assert new.height == 8
    assert new["x"].is_null().to_list() == (new["tag"] == "b").to_list()
