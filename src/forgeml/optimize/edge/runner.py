"""Run a forgeml edge bundle with only onnxruntime and numpy (copied into every bundle).

    python runner.py BUNDLE_DIR < rows.jsonl > answers.jsonl

One JSON row per input line: a record of raw fields (tabular), a string (text), or the
graph's inputs (imported graph); one JSON answer per output line, as `forgeml serve`'s
predict protocol answers it: `{"label": ..., "probabilities": {class: p}}` for a classifier,
a number for a regressor, the graph's outputs otherwise. From Python:
`EdgeModel(folder).predict(rows)`.

The manifest's SHA-256 digests are checked before anything is loaded. Text is tokenized
here, without the `tokenizers` library: BERT's normalizer, pre-tokenizer, WordPiece and
[CLS]/[SEP] template, read from the bundle's tokenizer.json (Devlin et al. 2019;
Hugging Face tokenizers' BertNormalizer, BertPreTokenizer and WordPiece). Tabular records
go through features.json: the fitted FeatureSpec's steps, as forgeml's serving applies them.

This file imports nothing from forgeml, torch, transformers or tokenizers.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import unicodedata
from pathlib import Path
from typing import Any

import numpy as np

MANIFEST = "manifest.json"
NULL, OTHER = "__null__", "__other__"


class BundleError(Exception):
    """The bundle is incomplete or altered, or a row does not fit the model."""


def verify(folder: Path) -> dict[str, Any]:
    """The manifest, after checking every file it lists against its SHA-256."""
    try:
        manifest: dict[str, Any] = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError) as error:
        raise BundleError(f"{folder} has no readable {MANIFEST} ({error}).") from None
    for name, expected in sorted(manifest["files"].items()):
        path = folder / name
        if Path(name).is_absolute() or ".." in Path(name).parts or not path.is_file():
            raise BundleError(f"The bundle file {name} listed in the manifest is missing.")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != expected:
            raise BundleError(f"{name} does not match its manifest digest; the bundle was altered.")
    return manifest


# --- text: BERT WordPiece --------------------------------------------------------------


def _is_punctuation(char: str) -> bool:
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_chinese(code: int) -> bool:
    ranges = (
        (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
    )  # fmt: skip
    return any(low <= code <= high for low, high in ranges)


class WordPiece:
    """tokenizer.json's BERT pipeline: ids and attention mask, padded to the longest text."""

    def __init__(self, spec: dict[str, Any], max_length: int) -> None:
        model, normalizer = spec["model"], spec.get("normalizer") or {}
        if model.get("type") != "WordPiece" or normalizer.get("type") != "BertNormalizer":
            raise BundleError("This runner reads BERT WordPiece tokenizers only.")
        self.vocab: dict[str, int] = model["vocab"]
        self.unk = self.vocab[model["unk_token"]]
        self.prefix = model.get("continuing_subword_prefix", "##")
        self.max_chars = int(model.get("max_input_chars_per_word", 100))
        self.lowercase = bool(normalizer.get("lowercase", True))
        accents = normalizer.get("strip_accents")
        self.strip_accents = self.lowercase if accents is None else bool(accents)
        self.chinese = bool(normalizer.get("handle_chinese_chars", True))
        special = (spec.get("post_processor") or {}).get("special_tokens") or {}
        self.cls = special.get("[CLS]", {}).get("ids", [self.vocab["[CLS]"]])[0]
        self.sep = special.get("[SEP]", {}).get("ids", [self.vocab["[SEP]"]])[0]
        padding = spec.get("padding") or {}
        self.pad = int(padding.get("pad_id", self.vocab.get("[PAD]", 0)))
        self.max_length = max_length
        added = {t["content"]: t["id"] for t in spec.get("added_tokens", []) if t.get("special")}
        self.added = added
        pattern = "|".join(re.escape(t) for t in sorted(added, key=len, reverse=True))
        self._added = re.compile(f"({pattern})") if pattern else None

    def _normalize(self, text: str) -> str:
        out = []
        for char in text:
            code = ord(char)
            if code in (0, 0xFFFD) or (
                unicodedata.category(char).startswith("C") and char not in "\t\n\r"
            ):
                continue
            if char in " \t\n\r" or unicodedata.category(char) == "Zs":
                out.append(" ")
            elif self.chinese and _is_chinese(code):
                out.append(f" {char} ")
            else:
                out.append(char)
        text = "".join(out)
        if self.strip_accents:
            text = "".join(
                c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn"
            )
        return text.lower() if self.lowercase else text

    def _words(self, text: str) -> list[str]:
        words = []
        for chunk in text.split():
            current = ""
            for char in chunk:
                if _is_punctuation(char):
                    words += [current] if current else []
                    words.append(char)
                    current = ""
                else:
                    current += char
            words += [current] if current else []
        return words

    def _pieces(self, word: str) -> list[int]:
        if len(word) > self.max_chars:
            return [self.unk]
        ids, start = [], 0
        while start < len(word):
            end, found = len(word), None
            while start < end:
                piece = (self.prefix if start else "") + word[start:end]
                if piece in self.vocab:
                    found = self.vocab[piece]
                    break
                end -= 1
            if found is None:
                return [self.unk]
            ids.append(found)
            start = end
        return ids

    def ids(self, text: str) -> list[int]:
        """The token ids of one text, [CLS] and [SEP] included, cut to `max_length`."""
        parts = self._added.split(text) if self._added else [text]
        ids: list[int] = []
        for part in parts:
            if part in self.added:
                ids.append(self.added[part])
                continue
            for word in self._words(self._normalize(part)):
                ids += self._pieces(word)
        return [self.cls, *ids[: self.max_length - 2], self.sep]

    def __call__(self, texts: list[str]) -> dict[str, np.ndarray]:
        rows = [self.ids(text) for text in texts]
        width = max(len(row) for row in rows)
        input_ids = np.full((len(rows), width), self.pad, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, row in enumerate(rows):
            input_ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        return {"input_ids": input_ids, "attention_mask": mask}


# --- tabular: the fitted FeatureSpec's steps -------------------------------------------


def _number(value: Any, column: str) -> float:
    if value is None:
        return float("nan")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BundleError(f"Field '{column}' is {value!r} but must be a number or null.")
    return float(value)


def _key(value: Any, column: str) -> str:
    if value is None:
        return NULL
    if not isinstance(value, str):
        raise BundleError(f"Field '{column}' is {value!r} but must be a string or null.")
    return value


def _bucket(value: str, buckets: int) -> int:
    digest = hashlib.blake2b(value.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % buckets


class Features:
    """Records -> float32 [N, F], one step per fitted feature (features.json)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.columns: list[str] = spec["inputs"]
        self.width = int(spec["width"])
        self.steps: list[dict[str, Any]] = spec["steps"]

    def _check(self, record: Any, position: int) -> None:
        if not isinstance(record, dict):
            raise BundleError(f"Row {position} is not an object of raw fields.")
        unknown = sorted(set(record) - set(self.columns))
        missing = [name for name in self.columns if name not in record]
        if unknown or missing:
            what = f"has field '{unknown[0]}'" if unknown else f"has no field '{missing[0]}'"
            raise BundleError(f"Row {position} {what} (fields: {', '.join(self.columns)}).")

    def _write(self, step: dict[str, Any], value: Any, row: np.ndarray) -> None:
        kind, column = step["kind"], step["column"]
        if kind == "scaled":
            x = _number(value, column)
            x = step["fill"] if np.isnan(x) else x
            row[step["position"]] = np.float32((x - step["shift"]) / step["scale"])
        elif kind == "passthrough":
            row[step["position"]] = 0.0 if value is None else np.float32(_number(value, column))
        elif kind == "onehot":
            index = step["index"].get(_key(value, column), len(step["positions"]) - 1)
            row[step["positions"][index]] = 1.0
        elif kind == "ordinal":
            row[step["position"]] = step["index"].get(_key(value, column), -1)
        elif kind == "hash":
            bucket = _bucket(_key(value, column), step["buckets"])
            if step["index_output"]:
                row[step["positions"][0]] = bucket
            else:
                row[step["positions"][bucket]] = 1.0

    def __call__(self, records: list[Any]) -> dict[str, np.ndarray]:
        out = np.zeros((len(records), self.width), dtype=np.float32)
        for position, record in enumerate(records):
            self._check(record, position)
            for step in self.steps:
                self._write(step, record[step["column"]], out[position])
        return {"features": out}


# --- the model ---------------------------------------------------------------------------


class EdgeModel:
    """A verified edge bundle behind an ONNX Runtime session."""

    def __init__(self, folder: str | Path, threads: int | None = None) -> None:
        import onnxruntime as ort

        self.folder = Path(folder)
        self.manifest = verify(self.folder)
        self.model: dict[str, Any] = json.loads((self.folder / "model.json").read_text())
        options = ort.SessionOptions()
        if threads is not None:
            options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(
            str(self.folder / self.model["file"]), options, providers=["CPUExecutionProvider"]
        )
        kind = self.model["kind"]
        if kind == "text":
            spec = json.loads((self.folder / "tokenizer.json").read_text())
            self.encode: Any = WordPiece(spec, int(self.model["max_length"]))
        elif kind == "tabular":
            self.encode = Features(json.loads((self.folder / "features.json").read_text()))
        else:
            self.encode = self._graph_inputs

    def _graph_inputs(self, rows: list[Any]) -> dict[str, np.ndarray]:
        inputs = self.model["inputs"]
        if len(inputs) == 1 and not isinstance(rows[0], dict):
            rows = [{inputs[0]["name"]: row} for row in rows]
        return {
            i["name"]: np.asarray([row[i["name"]] for row in rows], dtype=i["dtype"])
            for i in inputs
        }

    def run(self, rows: list[Any]) -> dict[str, np.ndarray]:
        """The graph's raw outputs for `rows`, as one batch."""
        feeds = self.encode(rows)
        names = [o.name for o in self.session.get_outputs()]
        return dict(zip(names, self.session.run(names, feeds), strict=True))

    def predict(self, rows: list[Any]) -> list[Any]:
        """One answer per row, as `forgeml serve`'s predict protocol gives it."""
        raw = self.run(rows)
        task = self.model["task"]
        if self.model["kind"] != "graph" and task == "classification":
            logits = raw["logits"].astype(np.float64)
            exp = np.exp(logits - logits.max(axis=1, keepdims=True))
            probabilities = (exp / exp.sum(axis=1, keepdims=True)).astype(np.float32)
            names = self.model["class_names"] or [str(i) for i in range(logits.shape[1])]
            return [
                {
                    "label": names[int(r.argmax())],
                    "probabilities": dict(zip(names, r.tolist(), strict=True)),
                }
                for r in probabilities
            ]
        if self.model["kind"] != "graph" and task == "regression":
            return [float(v) for v in raw["logits"].reshape(len(rows), -1)[:, 0]]
        return [{name: _plain(value[i]) for name, value in raw.items()} for i in range(len(rows))]


def _plain(value: Any) -> Any:
    """A numpy value as JSON takes it (a string output's items are str already)."""
    return value.tolist() if isinstance(value, np.ndarray | np.generic) else value


def main(argv: list[str]) -> int:
    """`runner.py BUNDLE_DIR`: JSON rows on stdin, JSON answers on stdout."""
    if len(argv) != 1:
        sys.stderr.write("usage: python runner.py BUNDLE_DIR < rows.jsonl\n")
        return 2
    try:
        model = EdgeModel(argv[0])
        rows = [json.loads(line) for line in sys.stdin if line.strip()]
        answers = model.predict(rows) if rows else []
    except (BundleError, ValueError, KeyError) as error:
        sys.stderr.write(f"error: {error}\n")
        return 1
    for answer in answers:
        sys.stdout.write(json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
