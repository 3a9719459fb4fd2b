"""Labelled sets for retrieval evaluation: documents, queries and each query's gold ids.

Two are built offline from what every machine has (issue 14):

- the Python standard library: each public function, class and method with a docstring is
  a document; the docstring's first sentence is the query and the object's qualified name
  its gold answer (`stdlib_set`);
- the function documentation shipped in the PyPI package `bfcl-eval`: a question is the
  query and the function its ground truth calls the gold answer (`bfcl_set`, which reads
  a wheel fetched beforehand with `pip download --no-deps`; never a runtime dependency).

A user's own set is a JSONL file of `{"query": ..., "relevant": [...]}` (`load_jsonl`).
"""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forgeml.core.errors import InvalidDataError

__all__ = [
    "BFCL_CATEGORIES",
    "Document",
    "LabelledSet",
    "Query",
    "bfcl_set",
    "first_sentence",
    "load_jsonl",
    "merge_queries",
    "stdlib_modules",
    "stdlib_set",
]

_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


@dataclass(frozen=True)
class Document:
    """One retrievable text and its id (what a query's `relevant` names)."""

    id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Query:
    """A question and the ids of the documents that answer it."""

    id: str
    text: str
    relevant: frozenset[str]


@dataclass(frozen=True)
class LabelledSet:
    """Documents to index and queries with their gold document ids."""

    name: str
    documents: list[Document]
    queries: list[Query]


def first_sentence(docstring: str) -> tuple[str, str]:
    """Split a docstring into its first sentence and the rest.

    The sentence ends at the first `.`, `!` or `?` followed by white space, or at the end
    of the first paragraph; its white space is collapsed to single spaces.

    Args:
        docstring: a cleaned docstring (as `pydoc.getdoc` returns it).

    Returns:
        The first sentence and the remaining text, each stripped.
    """
    paragraph, _, after = docstring.strip().partition("\n\n")
    flat = " ".join(paragraph.split())
    match = _SENTENCE_END.search(flat)
    if match is None or match.end() == len(flat):
        return flat, after.strip()
    rest_of_paragraph = flat[match.end() :].strip()
    return flat[: match.end()], f"{rest_of_paragraph}\n\n{after}".strip()


def load_jsonl(path: Path) -> LabelledSet:
    """Read queries from a JSONL file, one `{"query": str, "relevant": [str, ...]}` a line.

    The set holds no documents: the index it is evaluated against already has them.

    Raises:
        InvalidDataError: the file cannot be read, is empty, or a line is not such an object.
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidDataError(f"Cannot read the labelled set {path}: {error}.") from error
    queries = [_query_of(path, number, line) for number, line in _numbered(lines)]
    if not queries:
        raise InvalidDataError(f"The labelled set {path} holds no queries.")
    return LabelledSet(name=path.stem, documents=[], queries=queries)


def _numbered(lines: list[str]) -> Iterator[tuple[int, str]]:
    return ((number, line) for number, line in enumerate(lines, 1) if line.strip())


def _query_of(path: Path, number: int, line: str) -> Query:
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        row = None
    text = row.get("query") if isinstance(row, dict) else None
    relevant = row.get("relevant") if isinstance(row, dict) else None
    if (
        not isinstance(text, str)
        or not text.strip()
        or not isinstance(relevant, list)
        or not relevant
        or not all(isinstance(item, str) for item in relevant)
    ):
        raise InvalidDataError(
            f"Line {number} of {path} is not a JSON object with a non-empty string "
            '"query" and a non-empty list of strings "relevant".'
        )
    return Query(id=f"{path.stem}:{number}", text=text, relevant=frozenset(relevant))


def merge_queries(pairs: Iterable[tuple[str, str]], prefix: str) -> list[Query]:
    """Queries from (text, gold id) pairs: identical texts become one query whose
    `relevant` holds every gold id it was paired with; order is first appearance."""
    gold: dict[str, set[str]] = {}
    for text, answer in pairs:
        gold.setdefault(text, set()).add(answer)
    return [
        Query(id=f"{prefix}:{number}", text=text, relevant=frozenset(answers))
        for number, (text, answers) in enumerate(gold.items())
    ]


# -- BFCL --------------------------------------------------------------------------------

_BFCL_DATA = "bfcl_eval/data/"
# the single-turn categories whose questions have a ground truth (possible_answer/)
BFCL_CATEGORIES = (
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
)
# categories with function docs but no answer: their functions join the corpus as distractors
BFCL_DISTRACTORS = ("irrelevance", "live_irrelevance", "live_relevance")


def bfcl_set(wheel: Path) -> LabelledSet:
    """The BFCL labelled set read straight out of a `bfcl-eval` wheel.

    Documents are the distinct function docs (by name and description) of every
    single-turn category; a document's text is its name, description and parameters.
    A query is a question's user text; its gold ids are the functions its ground truth
    calls. Identical questions are merged.

    Args:
        wheel: a `bfcl_eval-*.whl` fetched with `pip download --no-deps bfcl-eval`.

    Raises:
        InvalidDataError: the file is not a wheel holding BFCL's data files.
    """
    try:
        with zipfile.ZipFile(wheel) as archive:
            files = {
                name: _json_lines(archive, name)
                for name in archive.namelist()
                if name.startswith(_BFCL_DATA) and name.endswith(".json")
            }
    except (OSError, zipfile.BadZipFile) as error:
        raise InvalidDataError(f"Cannot read the bfcl-eval wheel {wheel}: {error}.") from error
    documents: dict[str, Document] = {}
    pairs: list[tuple[str, str]] = []
    for category in (*BFCL_CATEGORIES, *BFCL_DISTRACTORS):
        questions = _bfcl_file(files, wheel, f"BFCL_v4_{category}.json")
        answers = {}
        if category in BFCL_CATEGORIES:
            answers = {
                row["id"]: row
                for row in _bfcl_file(files, wheel, f"possible_answer/BFCL_v4_{category}.json")
            }
        for question in questions:
            ids = {doc["name"]: _bfcl_document(doc, documents) for doc in question["function"]}
            if question["id"] in answers:
                text = _bfcl_question(question)
                for call in answers[question["id"]]["ground_truth"]:
                    pairs.extend((text, ids[name]) for name in call)
    return LabelledSet(
        name="bfcl", documents=list(documents.values()), queries=merge_queries(pairs, "bfcl")
    )


def _json_lines(archive: zipfile.ZipFile, name: str) -> list[dict[str, Any]]:
    text = archive.read(name).decode("utf-8")
    try:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError:
        return []  # not JSON lines (format_sensitivity.json is one object): not a question file


def _bfcl_file(
    files: dict[str, list[dict[str, Any]]], wheel: Path, name: str
) -> list[dict[str, Any]]:
    rows = files.get(_BFCL_DATA + name)
    if not rows:
        raise InvalidDataError(f"The bfcl-eval wheel {wheel} has no data file {name}.")
    return rows


def _bfcl_document(doc: dict[str, Any], documents: dict[str, Document]) -> str:
    """The id of `doc`'s document, adding it on first sight: its name, suffixed with a
    digest of its description when another function already has that name."""
    name, description = doc["name"], doc.get("description", "")
    key = f"{name}\n{description}"
    digest = hashlib.sha1(key.encode()).hexdigest()[:8]
    for document in (documents.get(name), documents.get(f"{name}#{digest}")):
        if document is not None and document.metadata["key"] == key:
            return document.id
    doc_id = name if name not in documents else f"{name}#{digest}"
    parameters = json.dumps(doc.get("parameters", {}).get("properties", {}), sort_keys=True)
    text = f"{name}\n{description}\nParameters: {parameters}"
    documents[doc_id] = Document(id=doc_id, text=text, metadata={"key": key, "name": name})
    return doc_id


def _bfcl_question(question: dict[str, Any]) -> str:
    """The user text of a question's first turn (system prompts left out)."""
    turn = question["question"][0]
    return "\n".join(message["content"] for message in turn if message["role"] == "user").strip()


# -- the standard library ----------------------------------------------------------------

# packages and modules never imported: tests and demos, GUI toolkits, whose import acts
# (`this` prints, `antigravity` opens a browser), and those deprecated by PEP 594 or
# otherwise (their import warns, and they will be gone)
_STDLIB_SKIP = frozenset(
    {
        *("antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "pydoc_data"),
        *("test", "tests", "lib2to3", "ensurepip", "readline", "rlcompleter", "venv"),
        *("distutils", "msilib", "msvcrt", "winreg", "winsound", "nt", "aifc", "asynchat"),
        *("asyncore", "audioop", "cgi", "cgitb", "chunk", "crypt", "imghdr", "imp", "mailcap"),
        *("nis", "nntplib", "ossaudiodev", "pipes", "smtpd", "sndhdr", "spwd", "sunau"),
        *("telnetlib", "uu", "xdrlib", "sre_compile", "sre_constants", "sre_parse"),
    }
)
_MIN_QUERY_WORDS = 3


def stdlib_set(min_rest_chars: int = 1) -> LabelledSet:
    """The standard-library labelled set of this interpreter, in a deterministic order.

    Each public function, class and method (defined in the module that exports it) whose
    own docstring has a first sentence of at least three words (not an old-style
    `name(args) -> result` line) and at least `min_rest_chars` characters after it is an
    object. Its first sentence is the query and its qualified
    name the gold id; the document is its signature and the docstring *without* that
    sentence: left in, the query would be a verbatim substring of its own answer and
    retrieval trivial. Objects whose first sentences are identical share one query.

    Args:
        min_rest_chars: the least docstring text to keep after the first sentence.
    """
    documents: list[Document] = []
    pairs: list[tuple[str, str]] = []
    for qualified, obj in _stdlib_objects():
        doc = _getdoc(obj)
        query, rest = first_sentence(doc)
        if len(query.split()) < _MIN_QUERY_WORDS or len(rest) < min_rest_chars or "->" in query:
            continue  # too short to ask, nothing left to find it by, or a signature line
        text = f"{qualified}{_signature(obj)}\n\n{rest}"
        documents.append(Document(id=qualified, text=text, metadata={"kind": _kind(obj)}))
        pairs.append((query, qualified))
    return LabelledSet(name="stdlib", documents=documents, queries=merge_queries(pairs, "stdlib"))


def stdlib_modules() -> list[str]:
    """Every public standard-library module and submodule that imports cleanly, sorted."""
    import pkgutil
    import sys

    names: list[str] = []
    for top in sorted(sys.stdlib_module_names):
        if top.startswith("_") or top.startswith("xx") or top in _STDLIB_SKIP:
            continue
        module = _quiet_import(top)
        if module is None:
            continue
        names.append(top)
        for info in pkgutil.walk_packages(
            getattr(module, "__path__", []), f"{top}.", onerror=lambda _: None
        ):
            parts = info.name.split(".")
            if any(part.startswith("_") or part in _STDLIB_SKIP for part in parts):
                continue
            if _quiet_import(info.name) is not None:
                names.append(info.name)
    return sorted(names)


def _quiet_import(name: str) -> Any:
    """The module, or None when importing it fails or warns (a deprecated module)."""
    import importlib
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            module = importlib.import_module(name)
        except Exception:  # a platform's module missing here, a submodule needing an extra
            return None
    return None if caught else module


def _stdlib_objects() -> Iterator[tuple[str, Any]]:
    import inspect

    for module_name in stdlib_modules():
        module = _quiet_import(module_name)
        for name, obj in _public_members(module):
            if getattr(obj, "__module__", None) != module_name:
                continue  # re-exported: documented where it is defined
            if inspect.isclass(obj):
                yield f"{module_name}.{name}", obj
                for method, function in _public_members(obj, own=True):
                    if callable(function):
                        yield f"{module_name}.{name}.{method}", function
            elif inspect.isfunction(obj) or inspect.isbuiltin(obj):
                yield f"{module_name}.{name}", obj


def _public_members(owner: Any, own: bool = False) -> list[tuple[str, Any]]:
    names = vars(owner) if own else getattr(owner, "__all__", None) or vars(owner)
    members = []
    for name in sorted(set(names)):
        if name.startswith("_"):
            continue
        try:
            members.append((name, getattr(owner, name)))
        except AttributeError:  # in __all__ but not defined on this platform
            continue
    return members


def _getdoc(obj: Any) -> str:
    """The object's own docstring, cleaned; "" when it has none (pydoc.getdoc alone would
    fall back to a base class's docstring or to the comments above the source)."""
    import pydoc

    own = getattr(obj, "__doc__", None)
    return pydoc.getdoc(obj) if isinstance(own, str) and own.strip() else ""


def _signature(obj: Any) -> str:
    import inspect

    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return ""


def _kind(obj: Any) -> str:
    import inspect

    return "class" if inspect.isclass(obj) else "function"
