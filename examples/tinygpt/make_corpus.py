"""Write the Python standard library's own documentation as a text corpus (offline).

python examples/tinygpt/make_corpus.py /tmp/pydoc-corpus
forgeml data add pydoc /tmp/pydoc-corpus --format text
"""

from __future__ import annotations

import importlib
import pydoc
import sys
from pathlib import Path

MODULES = (
    "json",
    "csv",
    "pathlib",
    "itertools",
    "functools",
    "collections",
    "string",
    "textwrap",
    "datetime",
    "random",
    "statistics",
    "heapq",
    "bisect",
    "shutil",
    "argparse",
    "logging",
)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name in MODULES:
        module = importlib.import_module(name)
        text = pydoc.render_doc(module, renderer=pydoc.plaintext)
        (out / f"{name}.txt").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("pydoc-corpus"))
