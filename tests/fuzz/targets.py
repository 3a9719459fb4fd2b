"""atheris fuzz targets: user-given text into forgeml's parsers. Each target lets only the
documented errors out (a ForgemlError subclass); anything else is a bug that atheris
reports with the input that raised it.

Run one: python -m tests.fuzz.targets TARGET [libFuzzer flags] (see test_fuzz.py).
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["forgeml"]):
    from forgeml.agents.spec import load_spec
    from forgeml.core.errors import ForgemlError
    from forgeml.core.ids import parse_ref, validate_alias
    from forgeml.pipelines.load import load_pipeline
    from forgeml.train.config import load_config

_SCRATCH = Path(tempfile.mkdtemp(prefix="forgeml-fuzz-")) / "input.yaml"


def ref(data: bytes) -> None:
    text = atheris.FuzzedDataProvider(data).ConsumeUnicodeNoSurrogates(256)
    try:
        parsed = parse_ref(text, "model")
    except ForgemlError:
        pass
    else:
        assert parse_ref(str(parsed), "model") == parsed, text  # a parsed ref round-trips
    with contextlib.suppress(ForgemlError):
        validate_alias(text)


def _yaml(loader: Callable[[str], object]) -> Callable[[bytes], None]:
    def target(data: bytes) -> None:
        _SCRATCH.write_bytes(data)
        with contextlib.suppress(ForgemlError):
            loader(str(_SCRATCH))

    return target


TARGETS: dict[str, Callable[[bytes], None]] = {
    "ref": ref,
    "pipeline": _yaml(load_pipeline),
    "agent_spec": _yaml(load_spec),
    "train_config": _yaml(load_config),
}

if __name__ == "__main__":
    name = sys.argv.pop(1)
    atheris.Setup(sys.argv, TARGETS[name])
    atheris.Fuzz()
