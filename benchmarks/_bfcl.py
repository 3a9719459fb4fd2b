"""BFCL's data for the benchmarks: the `bfcl-eval` wheel, its questions, its functions as tools.

BFCL (the Berkeley Function Calling Leaderboard) ships its questions, function docs and
possible answers inside the PyPI package `bfcl-eval`. The benchmarks download its wheel with
`pip download --no-deps` into benchmarks/out/rag/bfcl/ (gitignored) and read it as a zip;
bfcl-eval is never installed, nor a dependency of forgeml. `load_items` reads one category's
questions with their possible answers; `openai_tools` turns BFCL's function docs (their own
types: "dict", "float", "tuple", ...) into OpenAI `tools` with JSON schemas, as BFCL's
OpenAI handler does.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BFCL_PIN = "bfcl-eval==2026.3.23"
FOLDER = Path(__file__).resolve().parent / "out" / "rag" / "bfcl"


def fetch_bfcl_wheel(folder: Path = FOLDER) -> Path:
    """bfcl-eval's wheel in `folder`, downloaded there on first use (no dependencies).

    Raises:
        subprocess.CalledProcessError: pip could not download it (PyPI unreachable).
    """
    wheels = sorted(folder.glob("bfcl_eval-*.whl"))
    if not wheels:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", BFCL_PIN]
        subprocess.run([*command, "-d", str(folder)], check=True, timeout=600)
        wheels = sorted(folder.glob("bfcl_eval-*.whl"))
    return wheels[0]


# -- questions, functions and possible answers ---------------------------------------------

_DATA = "bfcl_eval/data/"
CATEGORY_FILES = {
    "simple": "BFCL_v4_simple_python.json",
    "multiple": "BFCL_v4_multiple.json",
    "parallel": "BFCL_v4_parallel.json",
    "irrelevance": "BFCL_v4_irrelevance.json",
}
# BFCL's own map from its function docs' types to JSON schema's
# (bfcl_eval/constants/type_mappings.py, GORILLA_TO_OPENAPI; the Python ones it uses)
TYPE_TO_JSON_SCHEMA = {
    "integer": "integer",
    "number": "number",
    "float": "number",
    "string": "string",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "dict": "object",
    "object": "object",
    "tuple": "array",
    "any": "string",
}
# keys of BFCL's docs that are not JSON schema ("optional") or that forgeml's constrained
# decoding cannot enforce and so refuses (one "maximum" in these four categories)
_DROPPED_KEYS = frozenset({"optional", "format", "maximum", "minimum"})

Answer = dict[str, dict[str, list[Any]]]  # {function name: {parameter: possible values}}


@dataclass(frozen=True)
class Item:
    """One BFCL question: its messages, the functions offered, and its possible answers
    (one `Answer` per call it expects; empty for irrelevance, where no call is right)."""

    id: str
    category: str
    messages: list[dict[str, str]]
    functions: list[dict[str, Any]]
    answers: list[Answer]


def load_items(wheel: Path, category: str) -> list[Item]:
    """Every question of `category` (a key of CATEGORY_FILES) in the wheel, in its order."""
    name = CATEGORY_FILES[category]
    with zipfile.ZipFile(wheel) as archive:
        questions = _lines(archive, _DATA + name)
        answers = {} if category == "irrelevance" else {
            row["id"]: row["ground_truth"]
            for row in _lines(archive, f"{_DATA}possible_answer/{name}")
        }  # fmt: skip
    return [
        Item(
            id=row["id"],
            category=category,
            messages=row["question"][0],  # single-turn: the first (only) turn
            functions=row["function"],
            answers=answers.get(row["id"], []),
        )
        for row in questions
    ]


def _lines(archive: zipfile.ZipFile, name: str) -> list[dict[str, Any]]:
    text = archive.read(name).decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def spread(items: list[Item], count: int) -> list[Item]:
    """`count` items taken evenly over the whole list (every n-th), so a sample covers it."""
    step = max(1, len(items) // count)
    return items[::step][:count]


def tool_name(name: str) -> str:
    """A BFCL function name as an OpenAI tool name (`^[a-zA-Z0-9_-]{1,64}$`): dots become
    underscores, as BFCL's own OpenAI handler does."""
    return name.replace(".", "_")


def json_schema(doc: Any) -> Any:
    """A BFCL parameters doc as JSON schema: BFCL's types mapped, non-schema keys dropped."""
    if isinstance(doc, list):
        return [json_schema(item) for item in doc]
    if not isinstance(doc, dict):
        return doc
    schema: dict[str, Any] = {}
    for key, value in doc.items():
        if key in _DROPPED_KEYS:
            continue
        if key == "type" and isinstance(value, str):
            schema[key] = TYPE_TO_JSON_SCHEMA.get(value, "string")
        elif key == "properties":
            schema[key] = {name: json_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties"):
            schema[key] = json_schema(value)
        else:
            schema[key] = value
    return schema


def openai_tools(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """BFCL's function docs as OpenAI `tools` entries."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool_name(function["name"]),
                "description": function.get("description", ""),
                "parameters": {**json_schema(function["parameters"]), "type": "object"},
            },
        }
        for function in functions
    ]
