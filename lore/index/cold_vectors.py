"""The vector channel's cosine for a few hits, in pure Python: the cold prompt path's semantic evidence.

The cold prompt hook (``lore.rank.cold``) ranks with BM25 alone and must not import
numpy (~100 ms) or ``tokenizers`` (55-120 ms to load). The injection decision still
reads the cosine between the prompt and each of its five hits best, and five rows
need no matrix product. This module computes, without numpy:

* the query's model2vec vector, as ``QueryEncoder.encode`` does (title case folded,
  unknown tokens dropped, the mean of the token rows, optional ``weights`` and
  ``mapping`` tensors, L2-normalised): ``embedder.PureBpe`` gives the token ids, and
  each token's float16 row is read from ``model.safetensors`` where its header says;
* the hits' rows of the index generation's matrix (``vectors-N.npy``, and after a
  delta refresh the base's live rows then ``delta-vectors-N.npy``, as
  ``reader.IndexReader.vectors`` stacks them), through ``lore.index.cold.load_npy``;
* the cosine the warm pipeline gives a hit (``pipeline.run``): the query vector plus
  ``vector_feedback`` times the mean of BM25's five best rows, normalised again; a
  score the vector channel would not keep (zero or less) is none.

Loading the tokenizer's JSON costs ~35 ms, more than the whole rest of the cold
answer. Its vocabulary and merge ranks are kept instead in ``query_tokens.bin`` beside
the index (``CACHE_FILE``, written by the first cold answer that misses it): two
open-addressing hash tables read through ``mmap``, so a prompt touches only the
slots of its own words. The file records the model's identity and is ignored once
that changes.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import struct
import sys
from collections.abc import Iterator, Mapping, Sequence
from itertools import chain, pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from zlib import crc32

from lore.embedder import PureBpe, fold_title_case, model_identity, model_spec

if TYPE_CHECKING:
    from lore.index.cold import ColdReader
    from lore.index.layout import GenerationMeta

CACHE_FILE = "query_tokens.bin"  # no "-": a refresh's clean-up keeps it (``Builder.collect_old_revisions``)
_MAGIC = b"LORETOK1"
_SLOT = struct.Struct("<III")  # the key's crc32, (blob offset << 8) | byte length (0: empty), the value
_FLOAT16 = {"F16": ("e", 2), "F32": ("f", 4), "F64": ("d", 8)}
_INTEGER = {"I32": ("i", 4), "I64": ("q", 8)}
ROW_CACHE = 4096  # token rows an encoder keeps (~2 KB each): a prompt and its hits' passages use a few hundred
FEEDBACK_ROWS = 5  # BM25's best rows whose mean vector ``pipeline.run`` adds to the query's (``vector_feedback``)


class HashTable(Mapping[str, int]):
    """A read-only ``str -> int`` mapping in a byte buffer: what ``PureBpe`` asks of its vocabulary and merge ranks.

    A look-up reads one slot or a few (and compares the key's bytes); iterating reads them all.
    """

    __slots__ = ("blob", "count", "data", "mask", "slots")

    def __init__(self, data: bytes | mmap.mmap, slots: int, size: int, blob: int, count: int) -> None:
        self.data, self.slots, self.mask, self.blob, self.count = data, slots, size - 1, blob, count

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[str]:
        for index in range(self.mask + 1):
            _, place, _ = _SLOT.unpack_from(self.data, self.slots + 12 * index)
            if place:
                start = self.blob + (place >> 8)
                yield bytes(self.data[start : start + (place & 0xFF)]).decode("utf-8", "surrogatepass")

    def get(self, key: str, default: int | None = None) -> int | None:  # type: ignore[override]
        raw = key.encode("utf-8", "surrogatepass")
        code = crc32(raw)
        index = code & self.mask
        data, unpack = self.data, _SLOT.unpack_from
        while True:
            found, place, value = unpack(data, self.slots + 12 * index)
            if not place:
                return default
            if found == code:
                start = self.blob + (place >> 8)
                if data[start : start + (place & 0xFF)] == raw:
                    return value
            index = (index + 1) & self.mask

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def __getitem__(self, key: str) -> int:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value


def _hash_table(items: dict[str, int]) -> tuple[bytes, bytes, int]:
    """The slots and the key blob of ``items`` (a load of at most a half), and the slot count."""
    size = 1
    while size < 2 * len(items):
        size *= 2
    mask = size - 1
    codes = [0] * size
    places = [0] * size
    values = [0] * size
    blob = bytearray(b"\0")  # offset 0 marks an empty slot
    for key, value in items.items():
        raw = key.encode("utf-8", "surrogatepass")
        if len(raw) > 0xFF:
            raise ValueError(f"token of {len(raw)} bytes")
        code = crc32(raw)
        index = code & mask
        while places[index]:
            index = (index + 1) & mask
        codes[index], places[index], values[index] = code, (len(blob) << 8) | len(raw), value
        blob += raw
    slots = bytearray(12 * size)
    for index in range(size):
        if places[index]:
            _SLOT.pack_into(slots, 12 * index, codes[index], places[index], values[index])
    return bytes(slots), bytes(blob), size


def median_token_length(tokens: Sequence[str]) -> int:
    """``int(numpy.median(lengths))`` of the tokens' lengths (``QueryEncoder.median_token_length``)."""
    lengths = sorted(len(token) for token in tokens)
    if not lengths:
        return 1
    middle = len(lengths) // 2
    return int(lengths[middle] if len(lengths) % 2 else (lengths[middle - 1] + lengths[middle]) / 2)


def write_token_cache(path: Path, bpe: PureBpe, identity: str) -> None:
    """Write what ``load_token_cache`` reads for ``bpe`` (vocabulary, merge ranks, settings) to ``path``, atomically."""
    vocab, ranks = dict(bpe.vocab), dict(bpe.ranks)
    vocab_slots, vocab_blob, vocab_size = _hash_table(vocab)
    rank_slots, rank_blob, rank_size = _hash_table(ranks)
    header = {"identity": identity, "unk": bpe.unk, "byte_fallback": bpe.byte_fallback, "fuse_unk": bpe.fuse_unk,
              "added": bpe.added, "by_word": bpe.by_word, "median": median_token_length(bpe.vocabulary()),
              "vocab": [vocab_size, len(vocab_slots), len(vocab_blob), len(vocab)],
              "ranks": [rank_size, len(rank_slots), len(rank_blob), len(ranks)]}  # fmt: skip
    head = json.dumps(header).encode()
    body = b"".join([_MAGIC, struct.pack("<I", len(head)), head, vocab_slots, vocab_blob, rank_slots, rank_blob])
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        temporary.write_bytes(body)
        os.replace(temporary, path)
    finally:
        if temporary.exists():
            temporary.unlink()


class TokenCache:
    """A ``PureBpe`` over ``query_tokens.bin``'s hash tables, and the tokenizer facts the query encoder needs."""

    def __init__(self, bpe: PureBpe, median: int) -> None:
        self.bpe = bpe
        self.median = median

    @classmethod
    def load(cls, path: Path, identity: str) -> TokenCache | None:
        """The cache in ``path`` if it is one, written for model ``identity``; None otherwise."""
        try:
            with path.open("rb") as handle:
                data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            if data[:8] != _MAGIC:
                return None
            (length,) = struct.unpack_from("<I", data, 8)
            header = json.loads(data[12 : 12 + length])
            if not isinstance(header, dict) or header.get("identity") != identity:
                return None
            start = 12 + length
            tables = []
            for name in ("vocab", "ranks"):
                size, slots, blob, count = (int(v) for v in header[name])
                if size & (size - 1) or slots != 12 * size:
                    return None
                tables.append(HashTable(data, start, size, start + slots, count))
                start += slots + blob
            if start != len(data):
                return None
            bpe = PureBpe(tables[0], tables[1], header["unk"], bool(header["byte_fallback"]), bool(header["fuse_unk"]),
                          [str(t) for t in header["added"]], by_word=bool(header["by_word"]))  # fmt: skip
            return cls(bpe, int(header["median"]))
        except (OSError, ValueError, KeyError, TypeError, struct.error):
            return None


class Tensor:
    """One tensor of a ``.safetensors`` file, read a row (or a value) at a time by seeking."""

    def __init__(self, data: mmap.mmap, start: int, end: int, dtype: str, shape: Sequence[int]) -> None:
        kinds = _FLOAT16 | _INTEGER
        if dtype not in kinds:
            raise ValueError(f"tensor type {dtype}")
        self.code, self.width = kinds[dtype]
        self.shape = tuple(int(n) for n in shape)
        self.columns = self.shape[1] if len(self.shape) == 2 else 1
        count = 1
        for n in self.shape:
            count *= n
        if end - start != count * self.width:
            raise ValueError("tensor size does not match its shape")
        self.data, self.start = data, start
        self.row_format = struct.Struct(f"<{self.columns}{self.code}")

    def row(self, index: int) -> tuple[float, ...]:
        if not 0 <= index < self.shape[0]:
            raise IndexError(index)
        return self.row_format.unpack_from(self.data, self.start + index * self.columns * self.width)

    def value(self, index: int) -> float:
        return self.row(index)[0]


def read_safetensors(path: Path) -> dict[str, Tensor]:
    """The tensors of a ``.safetensors`` file, memory-mapped (the JSON header parsed here: no numpy)."""
    with path.open("rb") as handle:
        data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    (length,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8 : 8 + length])
    base = 8 + length
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        first, last = info["data_offsets"]
        tensors[name] = Tensor(data, base + first, base + last, info["dtype"], info["shape"])
    return tensors


class QueryVector:
    """``QueryEncoder.encode([text])[0]`` as Python floats, for one model directory and its token cache."""

    def __init__(self, model_dir: Path, tokens: TokenCache) -> None:
        tensors = read_safetensors(model_dir / "model.safetensors")
        embedding = tensors.get("embeddings", tensors.get("embedding.weight"))
        if embedding is None or len(embedding.shape) != 2 or embedding.code not in ("e", "f", "d"):
            raise ValueError("model.safetensors has no float 'embeddings' matrix")
        self.embedding = embedding
        self.weights = tensors.get("weights")
        self.mapping = tensors.get("mapping")
        self.dim = embedding.shape[1]
        config_path = model_dir / "config.json"
        config = json.loads(config_path.read_bytes()) if config_path.exists() else {}
        self.max_length = config.get("max_length", 512)
        self.bpe = tokens.bpe
        self.median = tokens.median
        self.unk_id = self.bpe.vocab.get(self.bpe.unk) if self.bpe.unk else None
        self._rows: dict[int, Sequence[float]] = {}

    def token_ids(self, text: str) -> list[int] | None:
        """``QueryEncoder.token_ids([text])[0]``; None for a text ``PureBpe`` leaves to ``tokenizers``."""
        text = fold_title_case(text)
        if self.max_length is not None and len(text) > self.max_length:
            text = text[: self.max_length * self.median]
        return self.bpe.token_ids(text, self.max_length)

    def token_row(self, token: int) -> Sequence[float]:
        """A token's (weighted) embedding row, read once per encoder: passages of a prompt's hits share many."""
        row = self._rows.get(token)
        if row is None:
            index = int(self.mapping.value(token)) if self.mapping is not None else token
            row = self.embedding.row(index)
            if self.weights is not None:
                row = tuple(map(self.weights.value(token).__mul__, row))
            if len(self._rows) >= ROW_CACHE:  # a long-lived reader (a bench) would keep the whole vocabulary
                self._rows.clear()
            self._rows[token] = row
        return row

    def encode(self, text: str) -> list[float] | None:
        """The text's unit vector (all zeros when every token is unknown); None when not computable here."""
        ids = self.token_ids(text)
        if ids is None:
            return None
        return self.vector_of(ids)

    def vector_of(self, ids: Sequence[int]) -> list[float]:
        """The unit vector of a text's token ids (``encode`` once they are known: a passage's, from ``PassageTokens``)."""
        rows = [self.token_row(token) for token in ids if token != self.unk_id]
        if not rows:
            return [0.0] * self.dim
        # Column sums of the rows in C (``zip``/``sum``): a running total per token costs twice as much.
        return unit([total / len(rows) for total in map(sum, zip(*rows, strict=True))])


def unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(math.fsum(value * value for value in vector))
    return [value / norm for value in vector] if norm else list(vector)


class IndexRows:
    """Rows of a generation's vector matrix as ``IndexReader.vectors`` numbers them (a delta's rows after the base's live ones)."""

    def __init__(self, directory: Path, files: dict[str, str], rows: int, dead: Sequence[int]) -> None:
        from lore.index.cold import load_npy

        self.base = load_npy(directory / files["vectors"], files["vectors"])
        self.delta = load_npy(directory / files["delta_vectors"], files["delta_vectors"]) if "delta_vectors" in files else None
        self.dead = sorted(set(dead))
        parts = [self.base] if self.delta is None else [self.base, self.delta]
        if any(len(part.shape) != 2 or part.format != "f" for part in parts):
            raise ValueError("the vector matrix is not float32 rows")
        self.dim = self.base.shape[1]
        self.delta_start = self.base.shape[0] - len(self.dead)
        delta_rows = 0 if self.delta is None else self.delta.shape[0]
        if (self.delta is not None and self.delta.shape[1] != self.dim) or self.delta_start + delta_rows != rows:
            raise ValueError(f"the vector matrix has {self.delta_start + delta_rows} live rows, the table {rows}")
        if self.dead and not 0 <= self.dead[0] <= self.dead[-1] < self.base.shape[0]:
            raise ValueError("a dead row out of range")

    def row(self, row: int) -> list[float]:
        """Table row ``row``'s vector."""
        dim = self.dim
        if row >= self.delta_start:
            assert self.delta is not None
            at = row - self.delta_start
            values = self.delta.values
        else:
            at = row
            for dead in self.dead:  # the row-th live row of the base: skip the dead rows before it
                if dead > at:
                    break
                at += 1
            values = self.base.values
        found: list[float] = values[at * dim : (at + 1) * dim].tolist()
        return found


def channel_vector(query: Sequence[float], feedback: Sequence[Sequence[float]], weight: float) -> list[float] | None:
    """The vector the warm pipeline's vector channel ranks with (``retrieval.Dense.vectors``).

    The query's plus ``weight`` times the mean of ``feedback`` (BM25's five best rows),
    normalised; None when it is all zeros (the vector channel does not run).
    """
    vector = list(query)
    if weight and feedback:
        mean = [math.fsum(column) / len(feedback) for column in zip(*feedback, strict=True)]
        boosted = [q + weight * m for q, m in zip(query, mean, strict=True)]
        if any(boosted):
            vector = unit(boosted)
    return vector if any(vector) else None


def cosine(row: Sequence[float], vector: Sequence[float]) -> float:
    """A unit row's cosine with a unit vector: their dot product."""
    return math.fsum(map(float.__mul__, row, vector))


def channel_cosines(query: Sequence[float], feedback: Sequence[Sequence[float]], hits: Sequence[Sequence[float]],
                    weight: float) -> list[float] | None:  # fmt: skip
    """Each hit's cosine to ``channel_vector(query, feedback, weight)``; None when that is all zeros."""
    vector = channel_vector(query, feedback, weight)
    if vector is None:
        return None
    return [cosine(row, vector) for row in hits]


class RowCosines(dict[int, float]):
    """Each table row's cosine with one vector, computed when first asked (a row read from the matrix, a dot product)."""

    def __init__(self, rows: IndexRows, vector: Sequence[float]) -> None:
        super().__init__()
        self.rows, self.vector = rows, vector

    def __missing__(self, row: int) -> float:
        value = self[row] = cosine(self.rows.row(row), self.vector)
        return value


class ColdVectors:
    """The query vector and the index rows of one generation: ``cosines`` gives hits the vector channel's cosine."""

    def __init__(self, encoder: QueryVector, rows: IndexRows, passages: PassageTokens | None = None) -> None:
        if encoder.dim != rows.dim:
            raise ValueError(f"model of {encoder.dim} dimensions, index of {rows.dim}")
        self.encoder, self.rows = encoder, rows
        self.passages = passages

    @classmethod
    def open(cls, directory: Path, files: dict[str, str], rows: int, dead: Sequence[int], model: str | None,
             spec: str | None = None) -> ColdVectors | None:  # fmt: skip
        """The generation's vectors and the configured model's encoder; None if either is unusable here.

        None: no vectors, a model other than the one the index was embedded with (``model``,
        the generation's ``meta.model``), a model that is not a local model2vec directory
        whose tokenizer ``PureBpe`` reproduces, or files that do not read.
        """
        spec = model_spec(spec)
        model_dir = Path(spec).expanduser()
        if "vectors" not in files or model is None or not model_dir.is_dir():
            return None
        try:
            identity = model_identity(spec)
            if identity != model:
                return None
            tokens = token_cache(directory, model_dir, identity)
            if tokens is None:
                return None
            passages = PassageTokens.load(directory / PASSAGE_FILE, identity, directory / files["docs"]) if "docs" in files else None
            return cls(QueryVector(model_dir, tokens), IndexRows(directory, files, rows, dead), passages)
        except (OSError, ValueError, KeyError, TypeError, IndexError, struct.error):
            return None

    def cosines(self, query: str, feedback_rows: Sequence[int], hit_rows: Sequence[int],
                weight: float) -> dict[int, float] | None:  # fmt: skip
        """Each hit row's cosine (``channel_cosines``) by row; None when the query has no vector here."""
        vector = self.encoder.encode(query)
        if vector is None:
            return None
        found = channel_cosines(vector, [self.rows.row(r) for r in feedback_rows], [self.rows.row(r) for r in hit_rows], weight)
        return None if found is None else dict(zip(hit_rows, found, strict=True))


PASSAGE_FILE = "passage_tokens.bin"  # no "-": a refresh's clean-up keeps it (it names the docs file it was made from)
_PASSAGE_MAGIC = b"LOREPAS1"
# Its arrays, in file order: each doc line's byte offset, the crc32 of its passages ("\n"-joined),
# its first passage, each passage's first token, then the tokens.
_PASSAGE_ARRAYS = (("offsets", "q"), ("checks", "I"), ("doc_first", "I"), ("passage_first", "I"))


def passage_check(passages: Sequence[str]) -> int:
    """What ``PassageTokens`` keeps to tell that a row's passages are still the ones tokenised at build time."""
    return crc32("\n".join(passages).encode("utf-8", "surrogatepass"))


def write_passage_tokens(path: Path, docs_path: Path, identity: str, tokenizer: Any, pure: PureBpe,
                         max_length: int | None, median: int) -> None:  # fmt: skip
    """Tokenise every base row's passages (``analysis.passages`` of its doc's title and content) into ``path``, atomically.

    The cold hook's passage evidence then reads numbers: the pure-Python BPE over five
    hits' passages cost it ~25 ms of a prompt at 10,000 long records. The ids are
    ``QueryVector.token_ids``' (title case folded, the character cut, ``max_length``),
    taken word by word (the bundled tokenizer's BPE never merges across a word's start:
    ``PureBpe.by_word``) from ``tokenizer`` (the build's ``tokenizers.Tokenizer``), each
    distinct word once. A doc whose passages hold an added token or a lone surrogate
    is left out: the hook tokenises those itself, as before.
    """
    from array import array

    from lore.analysis import passages as passages_of

    offsets: list[int] = []
    checks: list[int] = []
    doc_first: list[int] = []
    passage_first = [0]
    flat = array("I")  # 4 bytes a token while it grows: a list of ints took ~7x that at 50,000 records
    word_ids: dict[str, list[int]] = {}
    pending: list[tuple[int, int, list[list[str]]]] = []  # a chunk of docs: offset, check, passages (as words)

    def flush() -> None:
        unknown = sorted({word for _, _, passages in pending for each in passages for word in each if word not in word_ids})
        word_ids.update(_word_ids(unknown, tokenizer, pure))
        for offset, check, passages in pending:
            if not all(word in word_ids for passage_words in passages for word in passage_words):
                continue  # a character tokenizers cannot take: the hook tokenises (and skips) it itself
            offsets.append(offset)
            checks.append(check)
            doc_first.append(len(passage_first) - 1)
            for passage_words in passages:
                ids = list(chain.from_iterable(map(word_ids.__getitem__, passage_words)))
                flat.extend(ids if max_length is None else ids[:max_length])
                passage_first.append(len(flat))
        pending.clear()

    import orjson  # the build's (every doc line); the cold reader parses only the short headers, with json

    position = 0
    with docs_path.open("rb") as handle:  # line by line: the docs file is ~1.6 KB a record
        for line in handle:
            if line.strip():
                doc = orjson.loads(line)
                found = passages_of(str(doc.get("title") or ""), str(doc.get("content") or "")) if isinstance(doc, dict) else []
                words = [_passage_words(text, pure.added, max_length, median) for text in found]
                if None not in words:
                    pending.append((position, passage_check(found), cast("list[list[str]]", words)))
                    if len(pending) >= PASSAGE_CHUNK:
                        flush()
            position += len(line)
    flush()
    doc_first.append(len(passage_first) - 1)
    code = "H" if not flat or max(flat) < 1 << 16 else "I"
    header = json.dumps({"identity": identity, "docs": docs_path.name, "docs_size": position, "docs_count": len(offsets),
                         "passages": len(passage_first) - 1, "tokens": len(flat), "token_format": code}).encode()  # fmt: skip
    header += b" " * (-(len(_PASSAGE_MAGIC) + 4 + len(header)) % 8)  # the arrays start 8-byte aligned
    parts = [_PASSAGE_MAGIC, struct.pack("<I", len(header)), header]
    for values, (_, array_code) in zip((offsets, checks, doc_first, passage_first), _PASSAGE_ARRAYS, strict=True):
        parts.append(struct.pack(f"<{len(values)}{array_code}", *values))
    tokens = flat if code == "I" else array("H", flat)
    if sys.byteorder != "little":
        tokens.byteswap()
    parts.append(tokens.tobytes())
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        temporary.write_bytes(b"".join(parts))
        os.replace(temporary, path)
    finally:
        if temporary.exists():
            temporary.unlink()


def _passage_words(text: str, added: Sequence[str], max_length: int | None, median: int) -> list[str] | None:
    """The words ``PureBpe.token_ids`` tokenizes alone for ``QueryVector.token_ids(text)``; None where it gives no ids."""
    from lore.embedder import _METASPACE, _WORDS, fold_title_case

    text = fold_title_case(text)
    if max_length is not None and len(text) > max_length:
        text = text[: max_length * median]
    if not text:
        return []
    normalized = _METASPACE + text.replace(" ", _METASPACE)
    if any(token in text or token in normalized for token in added):
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return _WORDS.findall(normalized)


# Docs read before their new words are tokenised: the words of all 50,000 at once held ~0.3 GB.
PASSAGE_CHUNK = 2000
# Words tokenised per call of the Rust tokenizer, joined by spaces: one call per word cost 3x as much.
WORDS_PER_CALL = 64


def _word_ids(words: Sequence[str], tokenizer: Any, pure: PureBpe) -> dict[str, list[int]]:
    """Each word's ids (a word: a run of metaspaces and the characters up to the next one), from ``tokenizer``.

    Words that start with one metaspace are tokenised many to a call, joined by spaces,
    and split again where a token starts with a metaspace (only a word's first token
    can). A batch that does not split back into its words (its ids cut at the
    tokenizer's truncation: long identifiers and hashes), and a word led by several
    metaspaces (an indented line's first word), are tokenised one word to a text
    instead: the word less its first metaspace, spaces for the others, normalises back
    to the word. ``pure`` takes only a lone metaspace and a word the tokenizer cut (the
    same ids: tests/test_embedder_pure.py); it cost 2.4 s of a 10,000-commit build when
    every word of a failed batch went to it.
    """
    from lore.embedder import _METASPACE

    found: dict[str, list[int]] = {}
    single = [w for w in words if len(w) > 1 and w[0] == _METASPACE and w[1] != _METASPACE]
    alone = [w for w in words if len(w) > 1 and w[1] == _METASPACE]
    rest = [w for w in words if len(w) <= 1]
    limit = (tokenizer.truncation or {}).get("max_length") or 1 << 62
    starts = {token_id for token, token_id in pure.vocab.items() if token.startswith(_METASPACE)}
    batches = [single[i : i + WORDS_PER_CALL] for i in range(0, len(single), WORDS_PER_CALL)]
    texts = [" ".join(word[1:] for word in batch) for batch in batches]
    for batch, encoding in zip(batches, tokenizer.encode_batch_fast(texts, add_special_tokens=False), strict=True):
        ids = encoding.ids
        cuts = [at for at, token_id in enumerate(ids) if token_id in starts]  # where each word's first token is
        if len(cuts) == len(batch) and cuts[0] == 0 and len(ids) < limit:
            cuts.append(len(ids))
            found.update(zip(batch, [ids[a:b] for a, b in pairwise(cuts)], strict=True))
        else:
            alone.extend(batch)
    texts = [word[1:].replace(_METASPACE, " ") for word in alone]
    for word, encoding in zip(alone, tokenizer.encode_batch_fast(texts, add_special_tokens=False), strict=True):
        if 0 < len(encoding.ids) < limit:
            found[word] = list(encoding.ids)
        else:
            rest.append(word)
    for word in rest:
        ids = pure._ids(word)
        if ids is not None:
            found[word] = ids
    return found


class PassageTokens:
    """``passage_tokens.bin`` through ``mmap``: a base row's passages as token ids, found by its doc line's offset."""

    def __init__(self, arrays: dict[str, Any], tokens: Any) -> None:
        self.offsets, self.checks = arrays["offsets"], arrays["checks"]
        self.doc_first, self.passage_first = arrays["doc_first"], arrays["passage_first"]
        self.tokens = tokens

    @classmethod
    def load(cls, path: Path, identity: str, docs_path: Path) -> PassageTokens | None:
        """The file if it was written for model ``identity`` from ``docs_path`` as it is; None otherwise."""
        try:
            with path.open("rb") as handle:
                data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            if data[:8] != _PASSAGE_MAGIC or sys.byteorder != "little":
                return None
            (length,) = struct.unpack_from("<I", data, 8)
            header = json.loads(data[12 : 12 + length])
            if (not isinstance(header, dict) or header.get("identity") != identity or header.get("docs") != docs_path.name
                    or header.get("docs_size") != docs_path.stat().st_size):  # fmt: skip
                return None
            docs, passages, count = int(header["docs_count"]), int(header["passages"]), int(header["tokens"])
            code = str(header["token_format"])
            view: Any = memoryview(data)
            start = 12 + length
            arrays: dict[str, Any] = {}
            for (name, array_code), size in zip(_PASSAGE_ARRAYS, (docs, docs, docs + 1, passages + 1), strict=True):
                width = struct.calcsize(array_code)
                arrays[name] = view[start : start + size * width].cast(array_code)
                start += size * width
            width = struct.calcsize(code)
            if code not in ("H", "I") or start + count * width != len(data):
                return None
            return cls(arrays, view[start:].cast(code))
        except (OSError, ValueError, KeyError, TypeError, struct.error):
            return None

    def token_ids(self, offset: int, passages: Sequence[str]) -> list[list[int]] | None:
        """The token ids of the passages of the doc line at byte ``offset``; None unless they are ``passages``."""
        from bisect import bisect_left

        offsets = self.offsets
        at = bisect_left(offsets, offset)
        if at >= len(offsets) or offsets[at] != offset or self.checks[at] != passage_check(passages):
            return None
        first, last = self.doc_first[at], self.doc_first[at + 1]
        if last - first != len(passages):
            return None
        bounds, tokens = self.passage_first, self.tokens
        return [tokens[bounds[i] : bounds[i + 1]].tolist() for i in range(first, last)]


def token_cache(directory: Path, model_dir: Path, identity: str) -> TokenCache | None:
    """The generation's token cache; written from ``tokenizer.json`` first if missing or stale (None: not a ``PureBpe`` tokenizer)."""
    path = directory / CACHE_FILE
    found = TokenCache.load(path, identity)
    if found is not None:
        return found
    bpe = PureBpe.load(model_dir / "tokenizer.json")
    if bpe is None:
        return None
    try:
        write_token_cache(path, bpe, identity)
    except OSError:  # a read-only index: this answer still gets its cosines
        return TokenCache(bpe, median_token_length(bpe.vocabulary()))
    return TokenCache.load(path, identity) or TokenCache(bpe, median_token_length(bpe.vocabulary()))


def prepare(directory: Path, meta: GenerationMeta) -> None:
    """Write the generation's hook files if missing (``lore.index.manager`` after a build or refresh).

    Nothing for an index without vectors. A large build's worker has usually written them
    already, beside the rest of the build (``lore.index.build_worker``).
    """
    if not meta.embeddings or meta.model is None:
        return
    docs = meta.files.get("docs")
    write_hook_files(directory, directory / docs if docs else None, meta.model_spec, meta.model)


def write_hook_files(directory: Path, docs: Path | None, configured: str | None, identity: str) -> None:
    """The cold hook's token cache and the passage tokens of ``docs``, for the model embedded with (``identity``).

    ``configured``: ``Settings.embed_model`` (None: the bundled model). Nothing for a model this module cannot
    read (not a local model2vec directory, or no longer the one configured); a failure to
    write is left to the first cold answer.
    """
    spec = model_spec(configured)
    model_dir = Path(spec).expanduser()
    try:
        if not model_dir.is_dir() or model_identity(spec) != identity:
            return
        if not (directory / CACHE_FILE).exists():
            token_cache(directory, model_dir, identity)
        passages = directory / PASSAGE_FILE
        if docs is not None and PassageTokens.load(passages, identity, docs) is None:
            from lore.embedder import QueryEncoder, get_query_encoder

            encoder = get_query_encoder(spec)  # cached: in the build's worker, the one that embedded
            if isinstance(encoder, QueryEncoder) and encoder.pure is not None and encoder.pure.by_word:
                write_passage_tokens(passages, docs, identity, encoder.tokenizer, encoder.pure,
                                     encoder.max_length, encoder.median_token_length)  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError):
        return


def for_reader(reader: ColdReader) -> ColdVectors | None:
    """The cold reader's generation's ``ColdVectors``, opened once per reader; None without usable vectors."""
    if reader.cold_vectors is None:
        meta = reader.meta
        found = None
        if meta.embeddings:
            found = ColdVectors.open(reader.directory, meta.files, len(reader.table), reader.dead_rows, meta.model, meta.model_spec)
        reader.cold_vectors = found if found is not None else False
    return reader.cold_vectors or None
