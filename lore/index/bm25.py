"""A compact BM25F impact index in numpy: the lexical channel of every search.

Whoosh scores postings one by one in Python (about 170 ms per query at 10k
records here); this structure precomputes each (term, record) contribution, so
a query is a few array slices and one ``bincount``: well under a millisecond at
10k. Two layers:

- ``Forward``: per-row term counts for the title and body fields (what an
  incremental refresh edits: rows are re-assembled, changed ones re-analysed);
- ``Postings``: derived from it in one vectorised pass, term -> rows with their
  BM25F impact (idf included), memory-mapped by readers.

Scoring is BM25F (Robertson and Zaragoza 2009): per-field term frequencies are
length-normalised and weighted, summed into one pseudo-frequency, then
saturated once with k1. Text analysis comes from ``lore.index.analysis``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from lore.index.analysis import terms as analyse
from lore.index.table import IndexFileError, describe

if TYPE_CHECKING:
    import numpy as np

# Two fields, title then body, in every (..., 2) array below, scored as one: the
# frequencies are summed and normalised by the record's whole length, which is the
# textbook BM25 over all of a record's text. A title boost of 1.5 with per-field
# length normalisation (BM25F) lost to it on the dev split of the demo, memory and
# known-item sets (docs/search.md, "The lexical channel"); the fields stay apart in
# the forward index so that a boost can be measured again without a rebuild format.
FIELD_BOOSTS = (1.0, 1.0)
K1 = 1.2
B = 0.75


@dataclass
class Forward:
    """Per-row term counts: ``term_ids[rowptr[r]:rowptr[r+1]]`` are row r's distinct terms."""

    vocab: dict[str, int]
    rowptr: np.ndarray  # int64, rows + 1
    term_ids: np.ndarray  # int32
    tf: np.ndarray  # int32, (entries, 2): title and body frequency
    lengths: np.ndarray  # float32, (rows, 2): title and body length in terms

    @property
    def rows(self) -> int:
        return int(self.rowptr.shape[0] - 1)


def analyse_fields(docs: Iterable[tuple[str, str]]) -> list[tuple[list[str], list[str]]]:
    """Title and body terms of each document."""
    return [(analyse(title), analyse(body)) for title, body in docs]


def forward_from_terms(
    analysed: Sequence[tuple[list[str], list[str]]], vocab: dict[str, int] | None = None
) -> Forward:
    """Count terms per row; new terms extend ``vocab`` (a copy), numbered in first-seen order.

    Python only maps each term occurrence to its id; the counting is numpy's
    (one ``unique`` over row * vocabulary + term keys), about 3x faster than
    counting per document with ``Counter``. Within a row, terms come in id order.
    """
    import numpy as np

    vocab = dict(vocab or {})
    setdefault = vocab.setdefault
    occurrences: list[int] = []
    lengths: list[int] = []
    for title_terms, body_terms in analysed:
        occurrences.extend([setdefault(term, len(vocab)) for term in title_terms])
        occurrences.extend([setdefault(term, len(vocab)) for term in body_terms])
        lengths += (len(title_terms), len(body_terms))
    rows = len(lengths) // 2
    per_field = np.asarray(lengths, dtype=np.int64)
    term = np.asarray(occurrences, dtype=np.int64)
    row = np.repeat(np.repeat(np.arange(rows, dtype=np.int64), 2), per_field)
    field = np.repeat(np.tile(np.array([0, 1], dtype=np.int64), rows), per_field)
    width = max(len(vocab), 1)
    keys, inverse = np.unique(row * width + term, return_inverse=True)
    inverse = inverse.ravel()
    tf = np.stack([np.bincount(inverse[field == f], minlength=len(keys)) for f in (0, 1)], axis=1)
    rowptr = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys // width, minlength=rows), out=rowptr[1:])
    return Forward(
        vocab,
        rowptr,
        (keys % width).astype(np.int32),
        tf.astype(np.int32).reshape(-1, 2),
        per_field.astype(np.float32).reshape(-1, 2),
    )


def build_forward(docs: Iterable[tuple[str, str]]) -> Forward:
    return forward_from_terms(analyse_fields(docs))


def reassemble(old: Forward, sources: Sequence[int], fresh: Sequence[tuple[str, str]]) -> Forward:
    """A forward index for new rows: ``sources[r]`` is an old row to keep, or -(k + 1) for ``fresh[k]``.

    Only the fresh documents are analysed; kept rows are copied as array slices.
    """
    import numpy as np

    added = forward_from_terms(analyse_fields(fresh), old.vocab)
    # Pool the old and the fresh rows, then gather every new row's slice in one go.
    rowptr_pool = np.concatenate([old.rowptr, added.rowptr[1:] + old.rowptr[-1]])
    picks = np.asarray([s if s >= 0 else old.rows - s - 1 for s in sources], dtype=np.int64)
    starts = rowptr_pool[picks]
    counts = rowptr_pool[picks + 1] - starts
    rowptr = np.zeros(len(picks) + 1, dtype=np.int64)
    np.cumsum(counts, out=rowptr[1:])
    entries = np.arange(int(rowptr[-1]), dtype=np.int64) - np.repeat(rowptr[:-1] - starts, counts)
    return Forward(
        added.vocab,
        rowptr,
        np.concatenate([old.term_ids, added.term_ids])[entries].astype(np.int32),
        np.concatenate([old.tf, added.tf])[entries].astype(np.int32).reshape(-1, 2),
        np.concatenate([old.lengths, added.lengths])[picks].astype(np.float32).reshape(-1, 2),
    )


@dataclass
class Postings:
    """``rows[offsets[t]:offsets[t+1]]`` hold term t's rows, ``impacts`` their BM25F contribution."""

    offsets: np.ndarray  # int64, vocabulary + 1
    rows: np.ndarray  # int32
    impacts: np.ndarray  # float32


def derive(
    forward: Forward, *, k1: float = K1, b: float = B, boosts: Sequence[float] = FIELD_BOOSTS
) -> Postings:
    """Invert the forward index and precompute every impact, in one vectorised pass."""
    import numpy as np

    n = forward.rows
    vocabulary = len(forward.vocab)
    counts = np.diff(forward.rowptr)
    entry_rows = np.repeat(np.arange(n, dtype=np.int32), counts)
    df = np.bincount(forward.term_ids, minlength=vocabulary).astype(np.float64)
    idf = np.log1p((n - df + 0.5) / (df + 0.5))
    lengths = forward.lengths.sum(axis=1)  # a record's whole length: one field for scoring
    average = float(lengths.mean()) if n else 1.0
    norm = 1.0 - b + b * lengths / (average if average > 0 else 1.0)  # (rows,)
    pseudo = (forward.tf * np.asarray(boosts, dtype=np.float64)).sum(axis=1) / norm[entry_rows]
    impacts = idf[forward.term_ids] * pseudo * (k1 + 1.0) / (k1 + pseudo)
    order = np.argsort(forward.term_ids, kind="stable")
    offsets = np.zeros(vocabulary + 1, dtype=np.int64)
    np.cumsum(np.bincount(forward.term_ids, minlength=vocabulary), out=offsets[1:])
    return Postings(offsets, entry_rows[order], impacts[order].astype(np.float32))


# -- files -------------------------------------------------------------------------
def file_names(revision: int) -> dict[str, str]:
    return {
        "bm25_vocab": f"bm25-vocab-{revision}.json",
        "bm25_terms": f"bm25-terms-{revision}.npy",
        "bm25_term_ids": f"bm25-termids-{revision}.npy",
        "bm25_offsets": f"bm25-offsets-{revision}.npy",
        "bm25_rows": f"bm25-rows-{revision}.npy",
        "bm25_impacts": f"bm25-impacts-{revision}.npy",
        "bm25_forward": f"bm25-forward-{revision}.npz",
    }


def save(directory: Path, names: dict[str, str], forward: Forward, postings: Postings) -> None:
    import numpy as np

    # Readers look terms up in a sorted array (binary search over a memory map)
    # instead of parsing the vocabulary: 43 ms of JSON at 50k records.
    # numpy sorts the encoded terms (byte order is code point order for UTF-8).
    encoded = np.array([t.encode() for t in forward.vocab] or [b""], dtype=np.bytes_)
    ids = (np.fromiter(forward.vocab.values(), dtype=np.int32, count=len(forward.vocab)) if forward.vocab
           else np.array([-1], dtype=np.int32))  # fmt: skip
    order = np.argsort(encoded, kind="stable")
    terms, term_ids = encoded[order], ids[order]
    for key, array in (
        ("bm25_offsets", postings.offsets),
        ("bm25_rows", postings.rows),
        ("bm25_impacts", postings.impacts),
        ("bm25_terms", terms),
        ("bm25_term_ids", term_ids),
    ):
        with (directory / names[key]).open("wb") as handle:
            np.save(handle, np.ascontiguousarray(array))
    write_forward(forward, directory / names["bm25_vocab"], directory / names["bm25_forward"])


def write_forward(forward: Forward, vocab_path: Path, arrays_path: Path) -> None:
    """The forward index as two files: the vocabulary (JSON) and the count arrays (.npz)."""
    import numpy as np

    vocab_path.write_bytes(orjson.dumps(forward.vocab))
    with arrays_path.open("wb") as handle:
        np.savez(handle, rowptr=forward.rowptr, term_ids=forward.term_ids, tf=forward.tf, lengths=forward.lengths)


def read_forward(vocab_path: Path, arrays_path: Path) -> Forward:
    import numpy as np

    vocab = orjson.loads(vocab_path.read_bytes())
    with np.load(arrays_path) as arrays:
        return Forward(vocab, arrays["rowptr"], arrays["term_ids"], arrays["tf"], arrays["lengths"])


def load_forward(directory: Path, names: dict[str, str]) -> Forward:
    return read_forward(directory / names["bm25_vocab"], directory / names["bm25_forward"])


class Bm25Index:
    """Read side: the sorted vocabulary and the postings, all memory-mapped."""

    def __init__(self, directory: Path, names: dict[str, str], rows: int) -> None:
        import numpy as np

        def load(key: str) -> np.ndarray:
            try:
                return np.load(directory / names[key], mmap_mode="r")
            except Exception as exc:  # numpy raises ValueError, OSError, EOFError... for a bad file
                raise IndexFileError(names[key], describe(exc)) from exc

        self.terms = load("bm25_terms")
        self.term_ids = load("bm25_term_ids")
        self.offsets = load("bm25_offsets")
        self.rows = load("bm25_rows")
        self.impacts = load("bm25_impacts")
        self.doc_count = rows
        # Shapes only (each a memory-map header or one element): a wrong file fails here, not mid-query.
        if self.terms.ndim != 1 or self.terms.dtype.kind != "S" or self.term_ids.shape != self.terms.shape:
            raise IndexFileError(names["bm25_terms"], "vocabulary and term ids do not match")
        if self.offsets.ndim != 1 or not len(self.offsets) or self.offsets.dtype.kind not in "iu":
            raise IndexFileError(names["bm25_offsets"], "not a postings offsets array")
        if self.rows.ndim != 1 or self.impacts.shape != self.rows.shape or int(self.offsets[-1]) != len(self.rows):
            raise IndexFileError(names["bm25_rows"], "postings do not match their offsets")

    def term_id(self, term: str) -> int | None:
        import numpy as np

        key = term.encode()
        if len(key) > self.terms.dtype.itemsize:
            return None
        position = int(np.searchsorted(self.terms, np.bytes_(key)))
        if position < len(self.terms) and self.terms[position] == key:
            return int(self.term_ids[position])
        return None

    def idf_of(self, query_terms: Sequence[str]) -> dict[str, float]:
        """BM25 idf of each term; a term no record contains gets the highest idf (df 0)."""
        n = self.doc_count
        return {t: math.log1p((n - df + 0.5) / (df + 0.5)) for t in query_terms for df in (self.document_frequency(t),)}

    def has_near_term(self, term: str) -> bool:
        """Whether the vocabulary holds a term one edit away from ``term`` (a likely typo of it)."""
        import numpy as np

        from lore.index.analysis import one_edit_away

        width = self.terms.dtype.itemsize
        candidates = [key for key in (c.encode() for c in one_edit_away(term)) if len(key) <= width]
        if not candidates or not len(self.terms):
            return False
        keys = np.array(candidates, dtype=self.terms.dtype)
        positions = np.minimum(np.searchsorted(self.terms, keys), len(self.terms) - 1)
        return bool(np.any(self.terms[positions] == keys))

    def document_frequency(self, term: str) -> int:
        term_id = self.term_id(term)
        return 0 if term_id is None else int(self.offsets[term_id + 1] - self.offsets[term_id])

    def coverage(self, query_terms: Sequence[str], rows: np.ndarray) -> np.ndarray:
        """For each of ``rows``, the share of the query's idf mass it contains (0 to 1)."""
        import numpy as np

        terms = list(dict.fromkeys(query_terms))
        share = np.zeros(len(rows), dtype=np.float64)
        idf = self.idf_of(terms)
        total = sum(idf.values())
        if not len(rows) or total <= 0:
            return share
        for term in terms:
            term_id = self.term_id(term)
            if term_id is None:
                continue
            # A term's rows are stored in ascending order: membership is a binary search.
            posting = self.rows[int(self.offsets[term_id]) : int(self.offsets[term_id + 1])]
            if not len(posting):  # still in the vocabulary, no longer in any record
                continue
            at = np.minimum(np.searchsorted(posting, rows), len(posting) - 1)
            share += idf[term] * (posting[at] == rows)
        return share / total

    def scores(self, query_terms: Sequence[str]) -> np.ndarray:
        """BM25F score of every row (0 where no term matches); each distinct term counts once."""
        import numpy as np

        spans = [
            (int(self.offsets[i]), int(self.offsets[i + 1]))
            for t in dict.fromkeys(query_terms)
            if (i := self.term_id(t)) is not None
        ]
        if not spans:
            return np.zeros(self.doc_count, dtype=np.float64)
        rows = np.concatenate([self.rows[a:b] for a, b in spans])
        weights = np.concatenate([self.impacts[a:b] for a, b in spans])
        return np.bincount(rows, weights=weights, minlength=self.doc_count)

    def search(
        self, query_terms: Sequence[str], limit: int, allowed: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        """The ``limit`` best rows with a positive score, best first (ties by row)."""
        import numpy as np

        scores = self.scores(query_terms)
        if allowed is not None:
            scores = np.where(allowed, scores, 0.0)
        return best_rows(scores, limit)


def best_rows(scores: np.ndarray, limit: int) -> list[tuple[int, float]]:
    """The ``limit`` rows of ``scores`` with the highest positive score, best first (ties by row)."""
    import numpy as np

    matched = np.flatnonzero(scores > 0)
    if limit <= 0 or matched.size == 0:
        return []
    if matched.size > limit:
        matched = matched[np.argpartition(-scores[matched], limit - 1)[:limit]]
    ordered = matched[np.lexsort((matched, -scores[matched]))]
    return [(int(row), float(scores[row])) for row in ordered]
