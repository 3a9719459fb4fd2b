"""Text augmentation by random word swap, deletion and synonym replacement.

The three operations of "EDA: Easy Data Augmentation Techniques for Boosting Performance
on Text Classification Tasks" (Wei & Zou, EMNLP 2019): each new row gets ONE operation
drawn uniformly from the recipe's `ops`; with `n = max(1, round(p * words))`, swap
exchanges two different words n times, synonym replaces n distinct words that have an
entry in the word list, and delete drops each word with probability p (never all).

Words are runs of non-whitespace (SST-2 is already tokenised, punctuation apart), so a
new text joins its words with single spaces. Null or blank texts are not used as sources.
All rows are done at once on flat numpy arrays of words (a row is a slice of them), so
no Python code runs per row.
"""

from __future__ import annotations

from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import pyarrow as pa

from forgeml.core.errors import ConfigError, InvalidDataError
from forgeml.data._frame import require_columns

if TYPE_CHECKING:
    from forgeml.data.augment import TextAugmentParams

_BUILTIN_LIST = ("wordlists", "synonyms_en.txt")


def load_word_list(path: str | Path) -> dict[str, list[str]]:
    """Read a synonym list: one `word: synonym, synonym` a line, `#` starts a comment.

    Args:
        path: the UTF-8 text file.

    Returns:
        {word (lower case): [synonyms in file order]}; repeated words are merged.

    Raises:
        ConfigError: the file is missing, not UTF-8, or a line is not `word: synonyms`.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such word-list file.") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: the word list is not UTF-8 text.") from None
    return parse_word_list(text, str(path))


def parse_word_list(text: str, source: str) -> dict[str, list[str]]:
    """Parse the text of a synonym list (see `load_word_list`); `source` names it in errors."""
    synonyms: dict[str, list[str]] = {}
    for line_number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        word, colon, rest = line.partition(":")
        found = [name.strip() for name in rest.split(",") if name.strip()]
        if not colon or not word.strip() or not found:
            raise ConfigError(
                f"{source}:{line_number}: expected `word: synonym, synonym`, got {raw.strip()!r}."
            )
        known = synonyms.setdefault(word.strip().lower(), [])
        known.extend(name for name in found if name not in known)
    return synonyms


@lru_cache(maxsize=1)
def builtin_synonyms() -> dict[str, list[str]]:
    """The English synonym list shipped in `forgeml/data/wordlists/synonyms_en.txt`."""
    resource = files("forgeml.data").joinpath(*_BUILTIN_LIST)
    return parse_word_list(resource.read_text(encoding="utf-8"), "/".join(_BUILTIN_LIST))


def augment_text(
    sources: pl.DataFrame, params: TextAugmentParams, rng: np.random.Generator
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Make `params.copies` new rows from each source row with a non-blank text.

    Args:
        sources: the train rows to copy; every column is kept, the text one rewritten.
        params: the text section of the recipe.
        rng: the section's generator.

    Returns:
        The new rows (source order, copies of a row adjacent) and the section's report.

    Raises:
        MissingColumnError: the column is not in the data.
        InvalidDataError: the column does not hold strings.
    """
    column = params.column
    require_columns(sources, [column], "the text section of the recipe")
    dtype = sources.schema[column]
    if dtype != pl.String:
        raise InvalidDataError(
            f"text column '{column}' has type {dtype}, not string; "
            "name a string column in the recipe's text section."
        )
    words = sources[column].str.extract_all(r"\S+")
    counts = words.list.len().fill_null(0).to_numpy().astype(np.int64)
    picked = np.repeat(np.flatnonzero(counts > 0), params.copies)
    lengths = counts[picked]
    flat = words.gather(picked).explode()
    ops = np.array(params.ops)[rng.integers(len(params.ops), size=len(picked))]
    synonyms = params.synonyms if params.synonyms is not None else builtin_synonyms()
    texts = _rewrite(flat, lengths, ops, params.p, synonyms, rng)
    before = words.gather(picked).list.join(" ")
    report = {
        "column": column,
        "rows_added": len(picked),
        "blank_sources_skipped": int((counts == 0).sum()),
        "rows_per_op": {op: int((ops == op).sum()) for op in dict.fromkeys(params.ops)},
        "rows_unchanged": int((texts == before).sum()),
    }
    return sources[picked].with_columns(texts.alias(column)), report


def _rewrite(
    flat: pl.Series,
    lengths: np.ndarray,
    ops: np.ndarray,
    p: float,
    synonyms: dict[str, list[str]],
    rng: np.random.Generator,
) -> pl.Series:
    # Draw every random number up front in one fixed order: the output then depends only
    # on the seed and the data, whatever mix of ops the rows got.
    starts = np.cumsum(lengths) - lengths
    row_of = np.repeat(np.arange(len(lengths)), lengths)
    delete_draw, rank_draw, choice_draw = rng.random((3, len(flat)))
    changes = np.maximum(1, np.rint(p * lengths)).astype(np.int64)
    words = _replace_synonyms(
        flat, row_of, starts, changes * (ops == "synonym"), synonyms, rank_draw, choice_draw
    )
    keep = _kept_words(row_of, starts, ops == "delete", p, delete_draw)
    order = _swapped_order(lengths, starts, changes * (ops == "swap"), rng)
    words = words.gather(order).filter(pl.Series(keep))
    offsets = np.concatenate([[0], np.cumsum(np.bincount(row_of[keep], minlength=len(lengths)))])
    lists = pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), words.to_arrow())
    return pl.Series("text", lists).list.join(" ")


def _kept_words(
    row_of: np.ndarray, starts: np.ndarray, deleting: np.ndarray, p: float, draw: np.ndarray
) -> np.ndarray:
    keep = ~(deleting[row_of] & (draw < p))
    emptied = np.bincount(row_of[keep], minlength=len(starts)) == 0
    if emptied.any():
        # EDA keeps one random word of a sentence it would empty: the one with the top draw
        top = np.maximum.reduceat(draw, starts)
        keep |= emptied[row_of] & (draw == top[row_of])
    return keep


def _swapped_order(
    lengths: np.ndarray, starts: np.ndarray, swaps: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    order = np.arange(int(lengths.sum()))
    swaps = np.where(lengths >= 2, swaps, 0)
    for round_number in range(int(swaps.max(initial=0))):
        rows = np.flatnonzero(swaps > round_number)
        size = lengths[rows]
        first = rng.integers(0, size)
        # a second position different from the first, uniform over the others
        second = (first + 1 + rng.integers(0, size - 1)) % size
        a, b = starts[rows] + first, starts[rows] + second
        order[a], order[b] = order[b], order[a]  # fancy indexing reads copies
    return order


def _replace_synonyms(
    flat: pl.Series,
    row_of: np.ndarray,
    starts: np.ndarray,
    replacements: np.ndarray,
    synonyms: dict[str, list[str]],
    rank_draw: np.ndarray,
    choice_draw: np.ndarray,
) -> pl.Series:
    table = {word.lower(): names for word, names in sorted(synonyms.items()) if names}
    if not table or not replacements.any():
        return flat
    entry = flat.str.to_lowercase().replace_strict(
        {word: index for index, word in enumerate(table)}, default=-1, return_dtype=pl.Int64
    )
    entry_of = entry.to_numpy()
    candidate = (replacements[row_of] > 0) & (entry_of >= 0)
    # rank the candidate words of each row in random order; the first n are replaced
    ordered = np.lexsort((rank_draw, ~candidate, row_of))
    rank = np.empty(len(flat), dtype=np.int64)
    rank[ordered] = np.arange(len(flat)) - starts[row_of[ordered]]
    chosen = np.flatnonzero(candidate & (rank < replacements[row_of]))
    sizes = np.array([len(names) for names in table.values()])
    first = np.cumsum(sizes) - sizes
    pick = first[entry_of[chosen]] + (choice_draw[chosen] * sizes[entry_of[chosen]]).astype(int)
    names = pl.Series([name for names in table.values() for name in names], dtype=pl.String)
    cased = _match_case(flat.gather(chosen), names.gather(pick))
    return flat.clone().scatter(chosen, cased)


def _match_case(originals: pl.Series, replacements: pl.Series) -> pl.Series:
    frame = pl.DataFrame({"word": originals, "new": replacements})
    word, new = pl.col("word"), pl.col("new")
    head = word.str.slice(0, 1)
    shouting = (word == word.str.to_uppercase()) & (word != word.str.to_lowercase())
    capital = (head == head.str.to_uppercase()) & (head != head.str.to_lowercase())
    cased = (
        pl.when(shouting & (word.str.len_chars() > 1))
        .then(new.str.to_uppercase())
        .when(capital)
        .then(new.str.slice(0, 1).str.to_uppercase() + new.str.slice(1))
        .otherwise(new)
    )
    return frame.select(cased.alias("word")).to_series()
