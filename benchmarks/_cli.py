"""The command line every benchmark shares: `--quick`, `--json`, and one JSON object last.

Each benchmark prints its table for a reader, then, with `--json`, its figures as one JSON
object on the last line, which is what benchmarks/peers.py and the README's runs read.
"""

from __future__ import annotations

import argparse
import json
from typing import Any


def make_parser(doc: str | None, quick: str) -> argparse.ArgumentParser:
    """A parser described by the first line of the benchmark's docstring (`doc`), with
    `--quick` (`quick` says what it shortens) and `--json`; the benchmark adds its own."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    return parser


def print_json(args: argparse.Namespace, figures: dict[str, Any]) -> None:
    """With `--json`, print `figures` as one JSON object on one line (what JSON cannot
    hold, a path or a timestamp, as its text); without it, nothing."""
    if args.json:
        print(json.dumps(figures, default=str))
