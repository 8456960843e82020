"""A compact BM25F impact index in numpy: the lexical channel of every search.

Whoosh scores postings one by one in Python (about 170 ms per query at 10k
records here); this structure keeps each term's rows and frequencies in
arrays, so a query is a few array slices, one vectorised impact formula and one
``bincount``: well under a millisecond at 10k. Two layers:

- ``Forward``: per-row term counts for the title and body fields (what an
  incremental refresh edits: rows are re-assembled, changed ones re-analysed);
- ``Postings``: derived from it in one vectorised pass, term -> rows with their
  boosted frequency, memory-mapped by readers. A query turns its own terms'
  postings into impacts with the collection statistics of what it reads (a base
  segment, plus the delta segment a refresh appended: ``Delta``).

Scoring is BM25F (Robertson and Zaragoza 2009): per-field term frequencies are
length-normalised and weighted, summed into one pseudo-frequency, then
saturated once with k1. Text analysis comes from ``lore.analysis``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from lore.analysis import terms as analyse
from lore.index.scoring import FIELD_BOOSTS, K1, B, idf_value, impact  # noqa: F401  (re-exported)
from lore.index.table import IndexFileError, describe

if TYPE_CHECKING:
    import numpy as np


@dataclass
class Forward:
    """Per-row term counts: ``term_ids[rowptr[r]:rowptr[r+1]]`` are row r's distinct terms.

    ``sequence`` keeps every row's terms in text order (its title's, then its body's:
    ``lengths`` says how many of each), which is what quoted phrases are matched against
    (``phrase_rows``): the analysis that counts the terms yields their order for free.
    """

    vocab: dict[str, int]
    rowptr: np.ndarray  # int64, rows + 1
    term_ids: np.ndarray  # int32
    tf: np.ndarray  # int32, (entries, 2): title and body frequency
    lengths: np.ndarray  # float32, (rows, 2): title and body length in terms
    sequence: np.ndarray  # int32, lengths.sum(): the term ids in text order, row by row, title then body

    @property
    def rows(self) -> int:
        return int(self.rowptr.shape[0] - 1)


def analyse_fields(docs: Iterable[tuple[str, str]]) -> list[tuple[list[str], list[str]]]:
    """Title and body terms of each document."""
    return [(analyse(title), analyse(body)) for title, body in docs]


def forward_from_terms(
    analysed: Sequence[tuple[list[str], list[str]]], vocab: dict[str, int] | None = None
) -> Forward:
    """Count terms per row; new terms extend ``vocab`` (a copy), numbered in first-seen order."""
    vocab = dict(vocab or {})
    setdefault = vocab.setdefault
    occurrences: list[int] = []
    lengths: list[int] = []
    for title_terms, body_terms in analysed:
        occurrences.extend([setdefault(term, len(vocab)) for term in title_terms])
        occurrences.extend([setdefault(term, len(vocab)) for term in body_terms])
        lengths += (len(title_terms), len(body_terms))
    return _count(vocab, occurrences, lengths)


def build_forward(docs: Iterable[tuple[str, str]], vocab: dict[str, int] | None = None) -> Forward:
    """``forward_from_terms`` of the analysed ``docs``, analysing each distinct token once.

    ``analysis.terms`` of a text is the concatenation of its tokens' terms, and a corpus
    repeats its tokens (10k git commits: 1.1 million tokens, 5% of them distinct), so each
    distinct token is analysed and numbered once and every other occurrence is a dict
    look-up: 0.8 s instead of 2.5 s for 10k commits. Same terms, same ids, same order.
    """
    from itertools import chain

    from lore.analysis import tokens

    known = _TermIds(dict(vocab or {}))
    term_ids = known.__getitem__  # a miss analyses the token (``_TermIds.__missing__``)
    occurrences: list[int] = []
    lengths: list[int] = []
    for doc in docs:
        for text in doc:
            before = len(occurrences)
            occurrences.extend(chain.from_iterable(map(term_ids, tokens(text))))
            lengths.append(len(occurrences) - before)
    vocab = known.vocab
    del known, term_ids  # ~80 MB at 50k git commits: gone before the counting allocates its arrays
    return _count(vocab, occurrences, lengths)


class _TermIds(dict[str, tuple[int, ...]]):
    """Token -> the ids of its terms; a token met for the first time is analysed and its new terms numbered."""

    def __init__(self, vocab: dict[str, int]) -> None:
        super().__init__()
        self.vocab = vocab

    def __missing__(self, token: str) -> tuple[int, ...]:
        from lore.analysis import token_terms

        vocab = self.vocab
        ids = self[token] = tuple([vocab.setdefault(term, len(vocab)) for term in token_terms(token)])
        return ids


def _count(vocab: dict[str, int], occurrences: list[int], lengths: list[int]) -> Forward:
    """The forward index of term ids in text order (each row's title, then its body; ``lengths``: 2 per row).

    Python only maps each term occurrence to its id; the counting is numpy's: one
    in-place sort of a key per occurrence, ((row * vocabulary + term) * 2 + field), whose
    runs are the (row, term, field) counts. ``np.unique`` with its inverse (the way
    before) held six arrays of that size at once: 330 MB at 50k git commits, now ~110.
    Within a row, terms come in id order.
    """
    import numpy as np

    rows = len(lengths) // 2
    per_field = np.asarray(lengths, dtype=np.int64)
    sequence = np.asarray(occurrences, dtype=np.int32)
    occurrences.clear()  # the caller's list: 8 bytes an occurrence, the array holds them in 4
    width = max(len(vocab), 1)
    slot = np.repeat(np.arange(2 * rows, dtype=np.int64), per_field)  # 2 * row + field, per occurrence
    keys = ((slot >> 1) * width + sequence) * 2 + (slot & 1)
    del slot
    keys.sort()
    if len(keys):
        run_starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
        counts = np.diff(np.append(run_starts, len(keys)))
        pairs = keys[run_starts]
    else:
        counts = pairs = np.zeros(0, dtype=np.int64)
    del keys
    entry_keys = pairs >> 1  # row * vocabulary + term
    fields = pairs & 1
    new_entry = np.concatenate(([True], entry_keys[1:] != entry_keys[:-1])) if len(pairs) else np.zeros(0, dtype=bool)
    entry_of_pair = np.cumsum(new_entry) - 1
    entries = entry_keys[new_entry]
    tf = np.zeros((len(entries), 2), dtype=np.int32)
    tf[entry_of_pair, fields] = counts
    rowptr = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(entries // width, minlength=rows), out=rowptr[1:])
    return Forward(
        vocab,
        rowptr,
        (entries % width).astype(np.int32),
        tf,
        per_field.astype(np.float32).reshape(-1, 2),
        sequence,
    )


def reassemble(old: Forward, sources: Sequence[int], fresh: Sequence[tuple[str, str]]) -> Forward:
    """A forward index for new rows: ``sources[r]`` is an old row to keep, or -(k + 1) for ``fresh[k]``.

    Only the fresh documents are analysed; kept rows are copied as array slices.
    """
    import numpy as np

    added = build_forward(fresh, old.vocab)
    # Pool the old and the fresh rows, then gather every new row's slice in one go.
    rowptr_pool = np.concatenate([old.rowptr, added.rowptr[1:] + old.rowptr[-1]])
    picks = np.asarray([s if s >= 0 else old.rows - s - 1 for s in sources], dtype=np.int64)
    starts = rowptr_pool[picks]
    counts = rowptr_pool[picks + 1] - starts
    rowptr = np.zeros(len(picks) + 1, dtype=np.int64)
    np.cumsum(counts, out=rowptr[1:])
    entries = np.arange(int(rowptr[-1]), dtype=np.int64) - np.repeat(rowptr[:-1] - starts, counts)
    lengths = np.concatenate([old.lengths, added.lengths])[picks].astype(np.float32).reshape(-1, 2)
    return Forward(
        added.vocab,
        rowptr,
        np.concatenate([old.term_ids, added.term_ids])[entries].astype(np.int32),
        np.concatenate([old.tf, added.tf])[entries].astype(np.int32).reshape(-1, 2),
        lengths,
        _gather_runs(np.concatenate([old.sequence, added.sequence]),
                     np.concatenate([_row_starts(old), _row_starts(added)[1:] + len(old.sequence)]), picks),
    )


def _row_starts(forward: Forward) -> np.ndarray:
    """Where each row's run of ``sequence`` starts (rows + 1 entries)."""
    import numpy as np

    starts = np.zeros(forward.rows + 1, dtype=np.int64)
    np.cumsum(np.asarray(forward.lengths, dtype=np.int64).sum(axis=1), out=starts[1:])
    return starts


def _gather_runs(values: np.ndarray, starts: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """The runs ``values[starts[p]:starts[p+1]]`` for each p of ``picks``, concatenated."""
    import numpy as np

    begin = starts[picks]
    counts = starts[picks + 1] - begin
    ends = np.cumsum(counts)
    entries = np.arange(int(ends[-1]) if len(ends) else 0, dtype=np.int64) - np.repeat(ends - counts - begin, counts)
    return np.asarray(values[entries], dtype=np.int32)


@dataclass
class Postings:
    """``rows[offsets[t]:offsets[t+1]]`` hold term t's rows (ascending), ``tf`` their boosted term frequency.

    Impacts are not stored: they depend on the collection's size, document
    frequencies and average length, which every appended record changes. A query
    computes them for its own terms (``impact``) from the collection statistics of
    whatever it reads (a base plus a delta segment, or a base alone), so both rank
    exactly alike; that costs well under a millisecond at 50k records.
    """

    offsets: np.ndarray  # int64, vocabulary + 1
    rows: np.ndarray  # int32
    tf: np.ndarray  # float64: the boosted title + body frequency (the BM25F pseudo-frequency before normalisation)


def derive(forward: Forward, *, boosts: Sequence[float] = FIELD_BOOSTS) -> Postings:
    """Invert the forward index in one vectorised pass."""
    import numpy as np

    n = forward.rows
    vocabulary = len(forward.vocab)
    counts = np.diff(forward.rowptr)
    entry_rows = np.repeat(np.arange(n, dtype=np.int32), counts)
    tf = (forward.tf * np.asarray(boosts, dtype=np.float64)).sum(axis=1)
    order = np.argsort(forward.term_ids, kind="stable")
    offsets = np.zeros(vocabulary + 1, dtype=np.int64)
    np.cumsum(np.bincount(forward.term_ids, minlength=vocabulary), out=offsets[1:])
    return Postings(offsets, entry_rows[order], tf[order])


def field_starts(forward: Forward) -> np.ndarray:
    """Where each field's run of ``sequence`` starts: row r's title at [2r], its body at [2r+1] (2 rows + 1 entries)."""
    import numpy as np

    starts = np.zeros(2 * forward.rows + 1, dtype=np.int64)
    np.cumsum(np.asarray(forward.lengths, dtype=np.int64).reshape(-1), out=starts[1:])
    return starts


def phrase_fields(sequence: np.ndarray, starts: np.ndarray, ids: Sequence[int], anchor: int) -> np.ndarray:
    """The fields (indexes into ``starts``) whose run of ``sequence`` holds ``ids`` contiguously.

    ``anchor`` is the position in ``ids`` of its rarest term: only that term's occurrences
    are looked at (one comparison over the whole sequence), then each candidate is checked
    at the other offsets and kept if it lies within one field.
    """
    import numpy as np

    width = len(ids)
    hits = np.flatnonzero(np.asarray(sequence) == ids[anchor]) - anchor
    hits = hits[(hits >= 0) & (hits + width <= len(sequence))]
    for offset, term in enumerate(ids):
        if offset != anchor and len(hits):
            hits = hits[np.asarray(sequence[hits + offset]) == term]
    if not len(hits):
        return np.zeros(0, dtype=np.int64)
    fields = np.searchsorted(starts, hits, side="right") - 1
    inside = hits + width <= np.asarray(starts)[fields + 1]
    return np.unique(fields[inside])


def _rows_of(fields: np.ndarray, title_only: bool) -> np.ndarray:
    """The rows of ``phrase_fields``' fields (a row's title is field 2r, the rest of its text 2r+1)."""
    return (fields[fields % 2 == 0] if title_only else fields) // 2


def row_lengths(forward: Forward) -> np.ndarray:
    """Each row's whole length in terms (title + body: one field for scoring), as float64 integers."""
    import numpy as np

    return np.asarray(forward.lengths, dtype=np.float64).sum(axis=1)


# -- files -------------------------------------------------------------------------
def file_names(revision: int) -> dict[str, str]:
    return {
        "bm25_vocab": f"bm25-vocab-{revision}.json",
        "bm25_terms": f"bm25-terms-{revision}.npy",
        "bm25_term_ids": f"bm25-termids-{revision}.npy",
        "bm25_offsets": f"bm25-offsets-{revision}.npy",
        "bm25_rows": f"bm25-rows-{revision}.npy",
        "bm25_tf": f"bm25-tf-{revision}.npy",
        "bm25_lengths": f"bm25-lengths-{revision}.npy",
        "bm25_forward": f"bm25-forward-{revision}.npz",
        "bm25_sequence": f"bm25-sequence-{revision}.npy",
        "bm25_fields": f"bm25-fields-{revision}.npy",
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
        ("bm25_tf", postings.tf),
        ("bm25_lengths", row_lengths(forward)),
        ("bm25_terms", terms),
        ("bm25_term_ids", term_ids),
        ("bm25_sequence", forward.sequence),
        ("bm25_fields", field_starts(forward)),
    ):
        with (directory / names[key]).open("wb") as handle:
            np.save(handle, np.ascontiguousarray(array))
    write_forward(forward, directory / names["bm25_vocab"], directory / names["bm25_forward"])


def write_forward(forward: Forward, vocab_path: Path, arrays_path: Path) -> None:
    """The forward index as two files: the vocabulary (JSON) and the count arrays (.npz)."""
    import numpy as np

    vocab_path.write_bytes(orjson.dumps(forward.vocab))
    with arrays_path.open("wb") as handle:
        np.savez(handle, rowptr=forward.rowptr, term_ids=forward.term_ids, tf=forward.tf, lengths=forward.lengths,
                 sequence=forward.sequence)  # fmt: skip


def read_forward(vocab_path: Path, arrays_path: Path) -> Forward:
    import numpy as np

    vocab = orjson.loads(vocab_path.read_bytes())
    with np.load(arrays_path) as arrays:
        return Forward(vocab, arrays["rowptr"], arrays["term_ids"], arrays["tf"], arrays["lengths"], arrays["sequence"])


def load_forward(directory: Path, names: dict[str, str]) -> Forward:
    return read_forward(directory / names["bm25_vocab"], directory / names["bm25_forward"])


@dataclass
class Delta:
    """The postings of a delta segment (records added since the base was written) and the base rows it retires.

    ``dead`` lists base rows that no longer count (a record deleted, or replaced by
    its newer version in the delta). Rows of the merged view: the live base rows in
    base order, then the delta rows.
    """

    vocab: dict[str, int]
    postings: Postings
    lengths: np.ndarray  # float64, (delta rows,)
    dead: np.ndarray  # int64, base rows, ascending
    sequence: np.ndarray  # int32: the delta rows' terms in text order (``Forward.sequence``)
    starts: np.ndarray  # int64: where each of their fields starts in it (``field_starts``)

    @classmethod
    def of(cls, forward: Forward, dead: Sequence[int]) -> Delta:
        import numpy as np

        return cls(forward.vocab, derive(forward), row_lengths(forward), np.asarray(sorted(dead), dtype=np.int64),
                   np.asarray(forward.sequence, dtype=np.int32), field_starts(forward))  # fmt: skip


class Bm25Index:
    """Read side: the sorted vocabulary and the postings, all memory-mapped, plus an optional delta segment."""

    def __init__(self, directory: Path, names: dict[str, str], rows: int, delta: Delta | None = None) -> None:
        import numpy as np

        self._directory = directory
        self._names = names
        self._phrase_arrays: tuple[np.ndarray, np.ndarray] | None = None  # read by the first quoted phrase
        load = self._load_array
        self.terms = load("bm25_terms")
        self.term_ids = load("bm25_term_ids")
        self.offsets = load("bm25_offsets")
        self.rows = load("bm25_rows")
        self.tf = load("bm25_tf")
        self.lengths = load("bm25_lengths")
        self.doc_count = rows
        # Shapes only (each a memory-map header or one element): a wrong file fails here, not mid-query.
        if self.terms.ndim != 1 or self.terms.dtype.kind != "S" or self.term_ids.shape != self.terms.shape:
            raise IndexFileError(names["bm25_terms"], "vocabulary and term ids do not match")
        if self.offsets.ndim != 1 or not len(self.offsets) or self.offsets.dtype.kind not in "iu":
            raise IndexFileError(names["bm25_offsets"], "not a postings offsets array")
        if self.rows.ndim != 1 or self.tf.shape != self.rows.shape or int(self.offsets[-1]) != len(self.rows):
            raise IndexFileError(names["bm25_rows"], "postings do not match their offsets")
        base_rows = self.lengths.shape[0] if self.lengths.ndim == 1 else -1
        self.delta = delta
        dead = delta.dead if delta is not None else np.zeros(0, dtype=np.int64)
        delta_rows = len(delta.lengths) if delta is not None else 0
        if base_rows - len(dead) + delta_rows != rows:
            raise IndexFileError(names["bm25_lengths"], f"lengths of {base_rows} rows do not fit {rows} records")
        # Base row -> merged row (-1: retired); None while no base row is retired.
        self.base_map: np.ndarray | None = None
        if len(dead):
            live = np.ones(base_rows, dtype=bool)
            live[dead] = False
            self.base_map = np.where(live, np.cumsum(live) - 1, -1)
        self.delta_start = base_rows - len(dead)
        # Lengths are whole numbers: their float64 sums are exact, so a base plus a delta
        # averages to exactly what one rebuilt segment would.
        total = float(self.lengths.sum()) - float(self.lengths[dead].sum())
        if delta is not None:
            total += float(delta.lengths.sum())
        self.average = total / rows if rows else 1.0

    def _load_array(self, key: str) -> np.ndarray:
        import numpy as np

        name = self._names[key]
        try:
            return np.load(self._directory / name, mmap_mode="r")
        except Exception as exc:  # numpy raises ValueError, OSError, EOFError... for a bad file
            raise IndexFileError(name, describe(exc)) from exc

    def term_id(self, term: str) -> int | None:
        """The base segment's id of ``term`` (None if the base does not hold it)."""
        import numpy as np

        key = term.encode()
        if len(key) > self.terms.dtype.itemsize:
            return None
        position = int(np.searchsorted(self.terms, np.bytes_(key)))
        if position < len(self.terms) and self.terms[position] == key:
            return int(self.term_ids[position])
        return None

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Merged rows (ascending) holding ``term``, with their boosted frequency and length."""
        import numpy as np

        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        term_id = self.term_id(term)
        if term_id is not None:
            start, end = int(self.offsets[term_id]), int(self.offsets[term_id + 1])
            rows = np.asarray(self.rows[start:end], dtype=np.int64)
            tf = np.asarray(self.tf[start:end], dtype=np.float64)
            lengths = np.asarray(self.lengths[rows], dtype=np.float64)
            if self.base_map is not None:
                mapped = self.base_map[rows]
                keep = mapped >= 0
                rows, tf, lengths = mapped[keep], tf[keep], lengths[keep]
            parts.append((rows, tf, lengths))
        delta = self.delta
        if delta is not None and (delta_id := delta.vocab.get(term)) is not None and delta_id + 1 < len(delta.postings.offsets):
            start, end = int(delta.postings.offsets[delta_id]), int(delta.postings.offsets[delta_id + 1])
            rows = np.asarray(delta.postings.rows[start:end], dtype=np.int64)
            parts.append((rows + self.delta_start, np.asarray(delta.postings.tf[start:end], dtype=np.float64),
                          np.asarray(delta.lengths[rows], dtype=np.float64)))  # fmt: skip
        if not parts:
            empty = np.zeros(0, dtype=np.float64)
            return np.zeros(0, dtype=np.int64), empty, empty
        if len(parts) == 1:
            return parts[0]
        return tuple(np.concatenate(column) for column in zip(*parts, strict=True))  # type: ignore[return-value]

    def phrase_rows(self, phrase_terms: Sequence[str], *, title_only: bool = False) -> np.ndarray:
        """Merged rows (ascending) whose title or whose body holds ``phrase_terms`` in order and adjacent.

        ``title_only``: whose title does (the query language's ``title:``).

        Terms are analysed ones (``analysis.terms``: stopwords and one-letter words are not
        counted, so "the cause of the bug" holds "cause bug"). A phrase never spans two fields.
        Costs one comparison over the term sequence (the file is only read by quoted-phrase
        queries) plus a check per occurrence of the phrase's rarest term.
        """
        import numpy as np

        if not phrase_terms:
            return np.zeros(0, dtype=np.int64)
        parts = []
        ids = [self.term_id(term) for term in phrase_terms]
        if all(i is not None for i in ids):
            base_ids = [int(i) for i in ids if i is not None]
            frequency = [int(self.offsets[i + 1] - self.offsets[i]) for i in base_ids]
            sequence, starts = self._sequence()
            rows = _rows_of(phrase_fields(sequence, starts, base_ids, frequency.index(min(frequency))), title_only)
            if self.base_map is not None:
                rows = self.base_map[rows]
                rows = rows[rows >= 0]
            parts.append(np.unique(rows))
        delta = self.delta
        if delta is not None and all(term in delta.vocab for term in phrase_terms):
            delta_ids = [delta.vocab[term] for term in phrase_terms]
            offsets = delta.postings.offsets
            frequency = [int(offsets[i + 1] - offsets[i]) if i + 1 < len(offsets) else 0 for i in delta_ids]
            rows = _rows_of(phrase_fields(delta.sequence, delta.starts, delta_ids, frequency.index(min(frequency))), title_only)
            parts.append(np.unique(rows) + self.delta_start)
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def terms_starting(self, prefix: str, limit: int) -> list[str]:
        """Up to ``limit`` terms of the vocabulary (base and delta) that start with ``prefix``, in order."""
        import numpy as np

        key = prefix.encode()
        found: list[str] = []
        if len(key) <= self.terms.dtype.itemsize and len(self.terms):
            start = int(np.searchsorted(self.terms, np.bytes_(key)))
            for raw in self.terms[start : start + limit]:
                if not bytes(raw).startswith(key):
                    break
                found.append(bytes(raw).decode())
        if self.delta is not None:
            found.extend(sorted(term for term in self.delta.vocab if term.startswith(prefix))[:limit])
        return list(dict.fromkeys(found))[:limit]

    def known_terms(self, candidates: Sequence[str]) -> list[str]:
        """The ``candidates`` the vocabulary (base or delta) holds, in their order."""
        import numpy as np

        width = self.terms.dtype.itemsize
        keys = [term for term in candidates if len(term.encode()) <= width]
        held: set[str] = set()
        if keys and len(self.terms):
            array = np.array([term.encode() for term in keys], dtype=self.terms.dtype)
            positions = np.minimum(np.searchsorted(self.terms, array), len(self.terms) - 1)
            held = {term for term, hit in zip(keys, self.terms[positions] == array, strict=True) if hit}
        if self.delta is not None:
            held |= {term for term in candidates if term in self.delta.vocab}
        return [term for term in candidates if term in held]

    def check_phrase_files(self) -> None:
        """Open the term sequence and its field starts and check their shapes (``IndexFileError`` if wrong)."""
        self._sequence()

    def _sequence(self) -> tuple[np.ndarray, np.ndarray]:
        if self._phrase_arrays is None:
            import numpy as np

            sequence, starts = self._load_array("bm25_sequence"), self._load_array("bm25_fields")
            if sequence.ndim != 1 or sequence.dtype.kind not in "iu":
                raise IndexFileError(self._names["bm25_sequence"], "not a term sequence")
            # Field starts that decrease or overrun would map a phrase to rows that do not exist.
            if (starts.ndim != 1 or starts.dtype.kind not in "iu" or len(starts) != 2 * len(self.lengths) + 1
                    or int(starts[0]) != 0 or int(starts[-1]) != len(sequence) or bool(np.any(np.diff(starts) < 0))):  # fmt: skip
                raise IndexFileError(self._names["bm25_fields"], "field starts do not fit the term sequence")
            self._phrase_arrays = sequence, starts
        return self._phrase_arrays

    def idf_of(self, query_terms: Sequence[str]) -> dict[str, float]:
        """BM25 idf of each term; a term no record contains gets the highest idf (df 0)."""
        n = self.doc_count
        return {t: idf_value(n, df) for t in query_terms for df in (self.document_frequency(t),)}

    def has_near_term(self, term: str) -> bool:
        """Whether the vocabulary holds a term one edit away from ``term`` (a likely typo of it)."""
        import numpy as np

        from lore.analysis import one_edit_away

        near = one_edit_away(term)
        if self.delta is not None and any(self.document_frequency(c) for c in near if c in self.delta.vocab):
            return True
        width = self.terms.dtype.itemsize
        candidates = [key for key in (c.encode() for c in near) if len(key) <= width]
        if not candidates or not len(self.terms):
            return False
        keys = np.array(candidates, dtype=self.terms.dtype)
        positions = np.minimum(np.searchsorted(self.terms, keys), len(self.terms) - 1)
        return bool(np.any(self.terms[positions] == keys))

    def document_frequency(self, term: str) -> int:
        if self.delta is None:
            term_id = self.term_id(term)
            return 0 if term_id is None else int(self.offsets[term_id + 1] - self.offsets[term_id])
        return len(self.postings(term)[0])

    def coverage(self, query_terms: Sequence[str], rows: Sequence[int] | np.ndarray) -> np.ndarray:
        """For each of ``rows``, the share of the query's idf mass it contains (0 to 1)."""
        import numpy as np

        rows = np.asarray(rows, dtype=np.int64)
        terms = list(dict.fromkeys(query_terms))
        share = np.zeros(len(rows), dtype=np.float64)
        idf = self.idf_of(terms)
        total = sum(idf.values())
        if not len(rows) or total <= 0:
            return share
        for term in terms:
            posting = self.postings(term)[0]
            if not len(posting):  # not in any record (or still in the vocabulary, no longer in any record)
                continue
            # A term's rows are in ascending order: membership is a binary search.
            at = np.minimum(np.searchsorted(posting, rows), len(posting) - 1)
            share += idf[term] * (posting[at] == rows)
        return share / total

    def scores(self, query_terms: Sequence[str]) -> np.ndarray:
        """BM25F score of every row (0 where no term matches); each distinct term counts once."""
        import numpy as np

        all_rows, weights = [], []
        for term in dict.fromkeys(query_terms):
            rows, tf, lengths = self.postings(term)
            if not len(rows):
                continue
            all_rows.append(rows)
            weights.append(impact(tf, lengths, idf_value(self.doc_count, len(rows)), self.average))
        if not all_rows:
            return np.zeros(self.doc_count, dtype=np.float64)
        return np.bincount(np.concatenate(all_rows), weights=np.concatenate(weights), minlength=self.doc_count)

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
