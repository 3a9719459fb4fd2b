from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda folder: folder / "missing.gguf", "does not exist or is not a file"),
        (lambda folder: folder, "does not exist or is not a file"),
        (lambda folder: _write(folder / "fake.gguf", b"PK\x03\x04 not gguf"), "is not a GGUF file"),
        (
            lambda folder: _write(folder / "cut.gguf", b"GGUF\x03\x00\x00\x00cut short"),
            "transformers cannot load cut.gguf as a causal language model: unpack_from",
        ),
        (
            lambda folder: _write(folder / "v99.gguf", b"GGUF" + struct.pack("<IQQ", 99, 0, 0)),
            "v99.gguf is GGUF v99; this reader handles v2 and v3.\n",
        ),
    ],
    ids=["missing", "a-folder", "not-gguf", "truncated", "unknown-version"],
)
def test_importing_a_bad_gguf_is_one_sentence_and_records_nothing(
    cli: Any, tmp_path: Path, make: Any, message: str
) -> None:
    result = cli("models", "import", "lm", "--gguf", str(make(tmp_path)))
    assert result.code == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert cli("models", "list", "--json").stdout.strip() == "[]"


def test_a_bad_model_name_is_refused_before_reading_the_file(cli: Any, tmp_path: Path) -> None:
    result = cli("models", "import", "no spaces", "--gguf", str(tmp_path / "x.gguf"))
    assert result.code == 1
    assert "Traceback" not in result.stderr
    assert "Invalid model name 'no spaces'" in result.stderr  # not the missing file


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path
