"""The BM25 channel without numpy: what the prompt hook reads when no warm helper answers.

A cold ``lore hook prompt`` that imports numpy or loads the query encoder's
tokenizer cannot answer within 120 ms at 10k records (docs/index.md, "The cold
prompt hook"). This module reads the very files ``lore.index.bm25.Bm25Index`` reads (the sorted
vocabulary, the postings and the row lengths: ``.npy`` files whose headers are
parsed here and whose data are viewed through ``mmap`` and ``memoryview.cast``;
a delta segment's forward counts from its ``.npz``) and computes the same scores
with the same formula (``scoring.impact``, ``scoring.idf_value``) in the same order of
floating-point operations, so they are bit for bit the numpy channel's.

``ColdReader`` is an ``IndexReader`` whose ``bm25`` is this one and which loads no
numpy vectors (``has_vectors`` is False): the vector channel over BM25's candidates
reads their rows through ``lore.index.cold_vectors``; everything else (the table, the delta's dead rows, the graph, the checks
of ``load``) is the reader's own. Any file that does not look as expected raises
``IndexFileError``; the hook then injects nothing.
"""

from __future__ import annotations

import json
import mmap
import re
import sys
from bisect import bisect_left
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lore.analysis import one_edit_away
from lore.index.reader import IndexReader
from lore.index.scoring import FIELD_BOOSTS, K1, B, idf_value
from lore.index.table import IndexFileError, describe

_MAGIC = b"\x93NUMPY"
_HEADER = re.compile(rb"\{'descr': '([^']+)', 'fortran_order': (True|False), 'shape': \(([0-9, ]*)\), \}\s*$")
# numpy's type codes -> memoryview.cast formats (native order: checked little-endian below).
_FORMATS = {"<i8": "q", "<i4": "i", "<f8": "d", "<f4": "f"}


class Array:
    """One array of an ``.npy`` file (or of an ``.npz`` member): its shape and a flat, typed view of its data."""

    def __init__(self, data: Any, name: str) -> None:
        view = memoryview(data)
        if bytes(view[:6]) != _MAGIC or len(view) < 10:
            raise IndexFileError(name, "not an .npy file")
        major = view[6]
        if major == 1:
            header_len, start = int.from_bytes(view[8:10], "little"), 10
        elif major in (2, 3):
            header_len, start = int.from_bytes(view[8:12], "little"), 12
        else:
            raise IndexFileError(name, f".npy format version {major}")
        match = _HEADER.match(bytes(view[start:start + header_len]))
        if match is None:
            raise IndexFileError(name, "unexpected .npy header")
        descr, fortran, shape_text = match.group(1).decode(), match.group(2), match.group(3).decode()
        self.shape = tuple(int(part) for part in shape_text.split(",") if part.strip())
        count = 1
        for dim in self.shape:
            count *= dim
        if fortran == b"True" and len(self.shape) > 1:
            raise IndexFileError(name, "Fortran-ordered array")
        body = view[start + header_len:]
        if descr.startswith("|S"):
            self.width = int(descr[2:])
            self.format = "S"
            size = count * self.width
        elif descr in _FORMATS and sys.byteorder == "little":
            self.format = _FORMATS[descr]
            self.width = int(descr[2:])
            size = count * self.width
        else:
            raise IndexFileError(name, f"unexpected array type {descr}")
        if len(body) != size:
            raise IndexFileError(name, f"{len(body)} bytes of data, {size} expected")
        self.count = count
        flat: Any = body
        self.values: Any = body if self.format == "S" else flat.cast(self.format)

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 0


def load_npy(path: Path, name: str) -> Array:
    """Memory-map one ``.npy`` file (an empty file cannot be mapped: an error like any other)."""
    try:
        with path.open("rb") as handle:
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        raise IndexFileError(name, describe(exc)) from exc
    return Array(mapped, name)


def load_npz(path: Path, name: str) -> dict[str, Array]:
    """Every array of an ``.npz`` archive (``numpy.savez``: a zip of ``.npy`` members)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            return {member.removesuffix(".npy"): Array(archive.read(member), name) for member in archive.namelist()}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise IndexFileError(name, describe(exc)) from exc


class _Terms:
    """The sorted vocabulary as a sequence of fixed-width byte strings (for ``bisect``)."""

    def __init__(self, array: Array) -> None:
        self.view = array.values
        self.width = array.width
        self.count = len(array)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> bytes:
        start = index * self.width
        return bytes(self.view[start:start + self.width])

    def find(self, key: bytes) -> int | None:
        """The position of ``key`` (unpadded), or None."""
        if len(key) > self.width or not self.count:
            return None
        padded = key.ljust(self.width, b"\0")
        position = bisect_left(self, padded)
        return position if position < self.count and self[position] == padded else None


class ColdDelta:
    """A delta segment's postings for the terms asked, from its forward counts (``bm25.Delta`` without numpy)."""

    def __init__(self, vocab: dict[str, int], arrays: dict[str, Array], names: tuple[str, str], dead: Sequence[int]) -> None:
        try:
            rowptr, term_ids, tf, lengths = arrays["rowptr"], arrays["term_ids"], arrays["tf"], arrays["lengths"]
        except KeyError as exc:
            raise IndexFileError(names[1], f"no {exc.args[0]} array") from exc
        rows = len(rowptr) - 1
        if (rowptr.format != "q" or term_ids.format != "i" or tf.format != "i" or lengths.format != "f" or rows < 0
                or tf.shape != (len(term_ids), 2) or lengths.shape != (rows, 2)
                or rowptr.values[rows] != len(term_ids)):  # fmt: skip
            raise IndexFileError(names[1], "forward counts do not fit together")
        if not isinstance(vocab, dict):
            raise IndexFileError(names[0], "not a vocabulary")
        self.vocab = vocab
        self.rowptr, self.term_ids, self.tf = rowptr.values, term_ids.values, tf.values
        flat = lengths.values
        # bm25.row_lengths: title + body as float64 (whole numbers: exact).
        self.lengths = [float(flat[2 * r]) + float(flat[2 * r + 1]) for r in range(rows)]
        self.dead = sorted(dead)
        self._postings: dict[int, tuple[list[int], list[float]]] = {}

    def postings(self, term_id: int) -> tuple[list[int], list[float]]:
        """Delta rows holding the term (ascending) and their boosted frequency (``bm25.derive``)."""
        found = self._postings.get(term_id)
        if found is None:
            rows: list[int] = []
            tfs: list[float] = []
            rowptr, tf = self.rowptr, self.tf
            row = 0
            for entry, value in enumerate(self.term_ids):
                if value != term_id:
                    continue
                while rowptr[row + 1] <= entry:
                    row += 1
                rows.append(row)
                tfs.append(tf[2 * entry] * FIELD_BOOSTS[0] + tf[2 * entry + 1] * FIELD_BOOSTS[1])
            found = self._postings[term_id] = (rows, tfs)
        return found


class ColdBm25:
    """``bm25.Bm25Index``'s read side in pure Python: the same files, checks and scores."""

    def __init__(self, directory: Path, names: dict[str, str], rows: int, delta: ColdDelta | None = None) -> None:
        def load(key: str) -> Array:
            return load_npy(directory / names[key], names[key])

        terms, term_ids = load("bm25_terms"), load("bm25_term_ids")
        offsets, self.rows, self.tf, lengths = load("bm25_offsets"), load("bm25_rows"), load("bm25_tf"), load("bm25_lengths")
        self.doc_count = rows
        if len(terms.shape) != 1 or terms.format != "S" or term_ids.shape != terms.shape or term_ids.format != "i":
            raise IndexFileError(names["bm25_terms"], "vocabulary and term ids do not match")
        if len(offsets.shape) != 1 or not len(offsets) or offsets.format != "q":
            raise IndexFileError(names["bm25_offsets"], "not a postings offsets array")
        if (len(self.rows.shape) != 1 or self.rows.format != "i" or self.tf.format != "d" or self.tf.shape != self.rows.shape
                or offsets.values[len(offsets) - 1] != len(self.rows)):  # fmt: skip
            raise IndexFileError(names["bm25_rows"], "postings do not match their offsets")
        if lengths.format != "d":
            raise IndexFileError(names["bm25_lengths"], "not a lengths array")
        self.terms = _Terms(terms)
        self.term_ids, self.offsets, self.lengths = term_ids.values, offsets.values, lengths.values
        base_rows = len(lengths) if len(lengths.shape) == 1 else -1
        self.delta = delta
        dead = delta.dead if delta is not None else []
        delta_rows = len(delta.lengths) if delta is not None else 0
        if base_rows - len(dead) + delta_rows != rows:
            raise IndexFileError(names["bm25_lengths"], f"lengths of {base_rows} rows do not fit {rows} records")
        self.dead = dead
        self.delta_start = base_rows - len(dead)
        # As Bm25Index: whole numbers, so these float sums are exact whatever their order.
        total = float(sum(self.lengths)) - float(sum(self.lengths[row] for row in dead))
        if delta is not None:
            total += float(sum(delta.lengths))
        self.average = total / rows if rows else 1.0
        self._postings: dict[str, tuple[list[int], list[float], list[float]]] = {}

    def term_id(self, term: str) -> int | None:
        position = self.terms.find(term.encode())
        return None if position is None else int(self.term_ids[position])

    def postings(self, term: str) -> tuple[list[int], list[float], list[float]]:
        """Merged rows (ascending) holding ``term``, with their boosted frequency and length."""
        found = self._postings.get(term)
        if found is not None:
            return found
        rows: list[int] = []
        tfs: list[float] = []
        lengths: list[float] = []
        term_id = self.term_id(term)
        if term_id is not None:
            start, end = self.offsets[term_id], self.offsets[term_id + 1]
            base_rows = self.rows.values[start:end]
            base_tf = self.tf.values[start:end]
            dead, length_of = self.dead, self.lengths
            if not dead:
                rows = list(base_rows)
                tfs = list(base_tf)
                lengths = [length_of[row] for row in rows]
            else:
                retired = set(dead)
                for row, value in zip(base_rows, base_tf, strict=True):
                    if row not in retired:
                        rows.append(row - bisect_left(dead, row))
                        tfs.append(value)
                        lengths.append(length_of[row])
        delta = self.delta
        if delta is not None and (delta_id := delta.vocab.get(term)) is not None and delta_id < len(delta.vocab):
            delta_rows, delta_tf = delta.postings(delta_id)
            rows += [row + self.delta_start for row in delta_rows]
            tfs += delta_tf
            lengths += [delta.lengths[row] for row in delta_rows]
        found = self._postings[term] = (rows, tfs, lengths)
        return found

    def document_frequency(self, term: str) -> int:
        if self.delta is None:
            term_id = self.term_id(term)
            return 0 if term_id is None else self.offsets[term_id + 1] - self.offsets[term_id]
        return len(self.postings(term)[0])

    def idf_of(self, query_terms: Sequence[str]) -> dict[str, float]:
        n = self.doc_count
        return {t: idf_value(n, df) for t in query_terms for df in (self.document_frequency(t),)}

    def has_near_term(self, term: str) -> bool:
        """Whether the vocabulary holds a term one edit away from ``term`` (``Bm25Index.has_near_term``)."""
        near = one_edit_away(term)
        if self.delta is not None and any(self.document_frequency(c) for c in near if c in self.delta.vocab):
            return True
        terms = self.terms
        keys = [key for key in (c.encode() for c in near) if len(key) <= terms.width]
        if not keys or not len(terms):
            return False
        # Most neighbours keep the first letter: read that stretch of the vocabulary once.
        first = term.encode()[:1]
        low = bisect_left(terms, first.ljust(terms.width, b"\0"))
        high = bisect_left(terms, (first[:1] + b"\xff").ljust(terms.width, b"\0"), low)
        stretch = {terms[i].rstrip(b"\0") for i in range(low, high)} if first else set()
        return any(key in stretch if key[:1] == first else terms.find(key) is not None for key in keys)

    def coverage(self, query_terms: Sequence[str], rows: Sequence[int]) -> list[float]:
        """For each of ``rows``, the share of the query's idf mass it contains (``Bm25Index.coverage``)."""
        terms = list(dict.fromkeys(query_terms))
        share = [0.0] * len(rows)
        idf = self.idf_of(terms)
        total = sum(idf.values())
        if not len(rows) or total <= 0:
            return share
        for term in terms:
            holding = set(self.postings(term)[0])
            if not holding:
                continue
            weight = idf[term]
            share = [value + weight if row in holding else value for value, row in zip(share, rows, strict=True)]
        return [value / total for value in share]

    def scores(self, query_terms: Sequence[str]) -> dict[int, float]:
        """BM25F score of every row holding a query term (``Bm25Index.scores``: each term once, in order)."""
        scores: dict[int, float] = {}
        get = scores.get
        # ``scoring.impact`` written out (one call per posting was a third of the cold hook's
        # ranking time at 10k): the same operations in the same order, so the same floats.
        average = self.average if self.average > 0 else 1.0
        keep, k1_plus_1 = 1.0 - B, K1 + 1.0
        for term in dict.fromkeys(query_terms):
            rows, tfs, lengths = self.postings(term)
            if not rows:
                continue
            idf = idf_value(self.doc_count, len(rows))
            for row, tf, length in zip(rows, tfs, lengths, strict=True):
                pseudo = tf / (keep + B * length / average)
                scores[row] = get(row, 0.0) + idf * pseudo * k1_plus_1 / (K1 + pseudo)
        return scores


class ColdReader(IndexReader):
    """An ``IndexReader`` (table, delta rows, graph, checks) whose BM25 is ``ColdBm25``; vectors only through ``cold_vectors``."""

    numpy_free = True  # the pipeline retrieves with its sparse backend (lore.rank.retrieval.Sparse)
    lazy_table = True

    @property
    def has_vectors(self) -> bool:
        return False

    _cold_bm25: ColdBm25 | None = None

    @property
    def bm25(self) -> Any:
        if self._cold_bm25 is None:
            rows = len(self.table)
            self._cold_bm25 = self._load("bm25", lambda: ColdBm25(self.directory, self.meta.files, rows, self._cold_delta()))
        return self._cold_bm25

    # ``lore.index.cold_vectors.for_reader``'s ColdVectors, opened once (False: tried, none usable).
    cold_vectors: Any = None

    def close(self) -> None:
        super().close()
        self._cold_bm25 = None
        self.cold_vectors = None

    def _cold_delta(self) -> ColdDelta | None:
        if not self.has_delta:
            return None
        files = self.meta.files
        vocab_name, arrays_name = files["delta_bm25_vocab"], files["delta_bm25_forward"]
        vocab = self._load(vocab_name, lambda: json.loads((self.directory / vocab_name).read_bytes()))
        arrays = self._load(arrays_name, lambda: load_npz(self.directory / arrays_name, arrays_name))
        return self._load(arrays_name, lambda: ColdDelta(vocab, arrays, (vocab_name, arrays_name), self.dead_rows))
