"""Static embeddings with model2vec: the only module that imports model2vec.

The bundled model lives in ``lore/model/`` so semantic search works offline.
``LORE_EMBED_MODEL`` may name another model2vec model by path or hub id (the
callers pass ``Settings.embed_model``: nothing here reads the environment); lore
never downloads, so a hub id must already be in the local Hugging Face cache.
A model that cannot be loaded raises ``ModelError`` naming it: lexical search
still works.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lore.errors import ModelError

if TYPE_CHECKING:
    import numpy as np

BUNDLED_MODEL_DIR = Path(__file__).resolve().parent / "model"

# A capitalised word followed only by lower-case letters ("Retry", "Use").
_TITLE_CASE_WORD = re.compile(r"\b([A-Z])([a-z]+)\b")


def fold_title_case(text: str) -> str:
    """Lower-case capitalised words, keeping acronyms and identifiers ("HTTP", "PostgreSQL", "BRCA1").

    The bundled model's vocabulary is cased: "Retry" at the start of a title
    and "retry" in a query are different tokens with unrelated vectors
    (cosine 0.12 against 0.40 once folded). Folding only title-case words
    keeps the case that carries meaning; on SciFact it scores slightly above
    both the cased text and full lower-casing (docs/embedding-model.md).
    """
    if text.isupper() and " " in text.strip():
        return text.lower()  # a shouted sentence, not a run of acronyms
    return _TITLE_CASE_WORD.sub(lambda m: m.group(1).lower() + m.group(2), text)


def model_spec(configured: str | None) -> str:
    """The model to use: the configured one (``Settings.embed_model``, a path or hub id), else the bundled model's path."""
    return configured or str(BUNDLED_MODEL_DIR)


# The SHA-256 of the bundled model's files (``bundled_model_digest``), the identity every
# index built with it records. Written here rather than computed: hashing the 18 MB
# costs ~60 ms, and every search checks the identity. Content, not path or mtime: two
# copies of one lore (a pip install and the checkout it came from, whose files differ
# in mtime) embed alike and must not re-embed each other's index. Replacing the model
# (scripts/distill_model.py --out lore/model) means updating this; a test fails until then.
BUNDLED_MODEL_SHA256 = "9a02f01450a1dabb4574c6eea77029a199f5de64e7b549d9e5d458fcd04785fc"
BUNDLED_MODEL_FILES = ("model.safetensors", "config.json", "tokenizer.json")


def bundled_model_digest(directory: Path = BUNDLED_MODEL_DIR) -> str:
    """The SHA-256 of the model files in ``directory``, in ``BUNDLED_MODEL_FILES`` order."""
    import hashlib  # here: the cold prompt hook imports this module (``lore.index.cold_vectors``)

    digest = hashlib.sha256()
    for name in BUNDLED_MODEL_FILES:
        digest.update((directory / name).read_bytes())
    return digest.hexdigest()


def model_identity(spec: str | None) -> str:
    """A stable identity for the model (``None``: the bundled one); a change of identity means re-embedding.

    The bundled model: its content digest. Another model directory: its path and its
    files' sizes and mtimes (stat calls only). A hub id: the id.
    """
    spec = model_spec(spec)
    path = Path(spec).expanduser()
    if path.is_dir():
        if path.resolve() == BUNDLED_MODEL_DIR.resolve():
            return f"bundled@{BUNDLED_MODEL_SHA256[:16]}"
        import hashlib

        digest = hashlib.sha256()
        for name in ("model.safetensors", "config.json", "tokenizer.json"):
            file = path / name
            if file.exists():
                stat = file.stat()
                digest.update(f"{name}:{stat.st_size}:{int(stat.st_mtime)}".encode())
        return f"{path.resolve()}@{digest.hexdigest()[:16]}"
    return f"hub:{spec}"


def _model_error(spec: str, reason: str) -> ModelError:
    return ModelError(
        f"cannot load embedding model {spec!r}: {reason}; lexical search still works",
        hint="point LORE_EMBED_MODEL at a model2vec model directory (or a hub id already in the local "
        "Hugging Face cache), or unset it to use the bundled model; then run `lore index`",
    )


def _not_found(spec: str) -> ModelError:
    return _model_error(spec, "it is neither a directory nor a loadable hub model "
                              "(lore never downloads: a hub model must already be in the local Hugging Face cache)")  # fmt: skip


# A hub id: ``name`` or ``namespace/name`` (what ``huggingface_hub`` accepts), not a path.
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")


def resolve_model_dir(spec: str) -> Path:
    """The local directory of model ``spec``: the path itself, or a hub id's snapshot in the local cache.

    lore runs offline: a hub id that is not cached is an error, never a download.
    """
    path = Path(spec).expanduser()
    if path.is_dir():
        return path
    if not path.exists() and _HUB_ID.fullmatch(spec) and not spec.startswith((".", "~")):
        try:
            from huggingface_hub import snapshot_download

            cached = Path(snapshot_download(spec, repo_type="model", local_files_only=True))
        except Exception:  # not cached, or not a valid id: either way not loadable offline
            cached = None
        if cached is not None and cached.is_dir():
            return cached
    raise _not_found(spec)


class Embedder:
    """Encode texts to L2-normalised float32 vectors."""

    def __init__(self, spec: str | None = None) -> None:
        self.spec = model_spec(spec)
        self.identity = model_identity(self.spec)
        folder = resolve_model_dir(self.spec)
        try:
            from model2vec import StaticModel

            # Always a local directory: model2vec would otherwise try to download.
            self._model = StaticModel.from_pretrained(str(folder))
        except Exception as exc:  # model2vec raises many kinds; all mean "unusable"
            raise _model_error(self.spec, f"{folder} is not a loadable model2vec model "
                                          f"({exc.__class__.__name__}: {_first_line(exc)})") from exc  # fmt: skip
        self.dim = int(self._model.dim)

    def encode(self, texts: list[str], batch_size: int = 1024) -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        texts = [fold_title_case(t) for t in texts]
        vectors = self._model.encode(texts, batch_size=batch_size, show_progress_bar=False, use_multiprocessing=False)
        vectors = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return vectors / norms


def _first_line(exc: BaseException, limit: int = 160) -> str:
    text = (str(exc).strip().splitlines() or [""])[0]
    return text if len(text) <= limit else text[: limit - 1] + "…"


@lru_cache(maxsize=4)
def get_embedder(spec: str | None = None) -> Embedder:
    """The embedder for ``spec`` (cached; ``None``: the bundled model)."""
    return Embedder(spec)


_SAFETENSORS_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I8": "i1", "I32": "<i4", "I64": "<i8", "U8": "u1"}


def _read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Memory-map the tensors of a safetensors file with numpy alone (no torch, no safetensors)."""
    import json
    import struct

    import numpy as np

    with path.open("rb") as handle:
        (header_len,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(header_len))
    base = 8 + header_len
    tensors: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = np.dtype(_SAFETENSORS_DTYPES[info["dtype"]])
        shape = tuple(info["shape"])
        tensors[name] = np.memmap(path, dtype=dtype, mode="r", offset=base + start, shape=shape) if end > start else np.zeros(shape, dtype)
    return tensors


# The one tokenizer shape ``PureBpe`` reproduces: a SentencePiece-style BPE as Hugging Face
# ``tokenizers`` stores it (LLaMA's, the bundled model's), the whole text one word.
_METASPACE = "\u2581"
_PURE_NORMALIZER = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": _METASPACE},
                    {"type": "Replace", "pattern": {"String": " "}, "content": _METASPACE}]}  # fmt: skip


# A token with a metaspace right after another character (which would let a merge cross a word's start).
_AFTER_CHARACTER = re.compile(f"[^{_METASPACE}\x00]{_METASPACE}")
# A run of metaspaces and the characters up to the next one: the unit ``PureBpe`` tokenizes alone.
_WORDS = re.compile(f"{_METASPACE}+[^{_METASPACE}]*")
# Words whose ids a ``PureBpe`` keeps (a process tokenizing text sees the same words again and again).
WORDS_KEPT = 1 << 16


class PureBpe:
    """The bundled model's tokenizer in pure Python: the same ids as ``tokenizers`` without loading it.

    Why: ``Tokenizer.from_file`` alone was most of what a refresh of one new record cost
    beyond a no-op ``lore index``; reading the vocabulary and merges here costs less, and a
    short text then tokenizes in about a millisecond (the Rust tokenizer stays the path for
    many texts; docs/index.md, "Whole process", has the figures).

    It reproduces ``tokenizers``' BPE step for step (``models/bpe/word.rs``: a heap of
    candidate merges by rank, then position; a popped merge is applied only if the pair at
    its position still makes the same token; characters outside the vocabulary fall back to
    their ``<0xXX>`` byte tokens, else a fused unknown token), after the normalizer
    (a leading metaspace, spaces to metaspaces) and without a pre-tokenizer: the shape of
    ``tokenizer.json`` is checked exactly (``load`` returns None for any other), and
    ``encode`` returns None for a text it does not handle (one holding an added token such
    as ``<s>``, or a lone surrogate): the caller uses ``tokenizers`` then.
    ``tests/test_index.py`` checks the ids against ``tokenizers`` over the repository's texts.
    """

    def __init__(self, vocab: Mapping[str, int], ranks: Mapping[str, int], unk: str | None, byte_fallback: bool,
                 fuse_unk: bool, added: list[str], by_word: bool | None = None) -> None:  # fmt: skip
        """``vocab`` and ``ranks``: dicts, or any mapping with ``in``, ``[]`` and ``get`` (``by_word`` given then:
        finding it reads every token; ``lore.index.cold_vectors`` keeps it in its file)."""
        self.vocab = vocab
        self.ranks = ranks  # "left right" -> rank (the merges' order)
        self.unk = unk if unk in vocab else None
        self.byte_fallback = byte_fallback
        self.fuse_unk = fuse_unk
        self.added = added
        # Word by word, when no token holds a metaspace after another character (the bundled
        # model's: a token is a run of metaspaces, or at most one followed by other characters):
        # then no merge joins a word to the metaspace that starts the next one, each run of
        # metaspaces and the word after it tokenizes alone, and a word seen before costs a look-up.
        if by_word is None:
            by_word = _METASPACE in vocab and not _AFTER_CHARACTER.search("\x00".join(vocab))
        self.by_word = by_word
        self._words: dict[str, list[int]] = {}

    @classmethod
    def load(cls, path: Path) -> PureBpe | None:
        """The tokenizer in ``path`` if it has the shape this class reproduces, else None."""
        import orjson

        try:
            data = orjson.loads(path.read_bytes())
            model = data["model"]
            if (model.get("type") != "BPE" or model.get("dropout") is not None or model.get("ignore_merges")
                    or model.get("continuing_subword_prefix") or model.get("end_of_word_suffix")
                    or data.get("normalizer") != _PURE_NORMALIZER or data.get("pre_tokenizer") is not None):  # fmt: skip
                return None
            vocab, merges = model["vocab"], model["merges"]
            if not isinstance(vocab, dict) or not isinstance(merges, list):
                return None
            if merges and not isinstance(merges[0], str):  # the newer format: [left, right] pairs
                merges = [" ".join(pair) for pair in merges]
            if " ".join(merges).count(" ") != 2 * len(merges) - 1:  # every merge is "left right"
                return None
            added = [token["content"] for token in data.get("added_tokens") or []]
            unk = model.get("unk_token")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        ranks = dict(zip(merges, range(len(merges)), strict=True))  # a repeated merge keeps its last rank, as in tokenizers
        return cls(vocab, ranks, unk, bool(model.get("byte_fallback")), bool(model.get("fuse_unk")), added)

    def token_ids(self, text: str, limit: int | None = None) -> list[int] | None:
        """The ids ``Tokenizer.encode(text, add_special_tokens=False)`` gives (first ``limit``); None if not handled."""
        if not text:
            return []
        normalized = _METASPACE + text.replace(" ", _METASPACE)
        if any(token in text or token in normalized for token in self.added):
            return None
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: tokenizers cannot take the text at all
            return None
        if not self.by_word:
            whole = self._ids(normalized)
            return whole if whole is None or limit is None else whole[:limit]
        ids: list[int] = []
        for word in _WORDS.findall(normalized):
            found = self._words.get(word)
            if found is None:
                found = self._ids(word)
                if found is None:
                    return None
                if len(self._words) < WORDS_KEPT:
                    self._words[word] = found
            ids.extend(found)
            if limit is not None and len(ids) >= limit:
                return ids[:limit]  # the words after it cannot change these ids
        return ids

    def _ids(self, normalized: str) -> list[int] | None:
        """The ids of ``normalized`` (metaspaces in), merged as one; None where ``tokenizers`` raises."""
        vocab = self.vocab
        symbols: list[str] = []
        unknown = False
        for char in normalized:
            if char in vocab:
                symbols.append(char)
                unknown = False
                continue
            if self.byte_fallback:
                pieces = [f"<0x{byte:02X}>" for byte in char.encode("utf-8")]
                if all(piece in vocab for piece in pieces):
                    symbols.extend(pieces)
                    unknown = False
                    continue
            if self.unk is None:
                return None  # tokenizers raises here
            if not (unknown and self.fuse_unk):
                symbols.append(self.unk)
            unknown = True
        return [vocab[token] for token in self._merge(symbols)]

    def _merge(self, symbols: list[str]) -> list[str]:
        import heapq

        ranks = self.ranks
        count = len(symbols)
        nexts = list(range(1, count + 1))
        prevs = list(range(-1, count - 1))
        alive = [True] * count
        heap: list[tuple[int, int, str]] = []
        for pos in range(count - 1):
            rank = ranks.get(symbols[pos] + " " + symbols[pos + 1])
            if rank is not None:
                heap.append((rank, pos, symbols[pos] + symbols[pos + 1]))
        heapq.heapify(heap)
        while heap:
            _, pos, merged = heapq.heappop(heap)
            if not alive[pos] or nexts[pos] >= count:
                continue
            right = nexts[pos]
            left_symbol, right_symbol = symbols[pos], symbols[right]
            # An entry whose pair no longer makes the same token has expired.
            if left_symbol + right_symbol != merged or (left_symbol + " " + right_symbol) not in ranks:
                continue
            symbols[pos] = merged
            alive[right] = False
            nexts[pos] = nexts[right]
            if nexts[right] < count:
                prevs[nexts[right]] = pos
            before = prevs[pos]
            if before >= 0:
                rank = ranks.get(symbols[before] + " " + merged)
                if rank is not None:
                    heapq.heappush(heap, (rank, before, symbols[before] + merged))
            after = nexts[pos]
            if after < count:
                rank = ranks.get(merged + " " + symbols[after])
                if rank is not None:
                    heapq.heappush(heap, (rank, pos, merged + symbols[after]))
        return [symbol for symbol, live in zip(symbols, alive, strict=True) if live]

    def vocabulary(self) -> list[str]:
        """Every token (``Tokenizer.get_vocab()``'s keys: the added tokens included)."""
        return list(dict.fromkeys([*self.vocab, *self.added]))


class QueryEncoder:
    """model2vec's mean-of-token-embeddings for a local model, without importing model2vec.

    Importing model2vec costs ~0.5 s on a small machine; a query needs only the
    tokenizer and a memory-mapped matrix. ``tests/test_index.py`` checks that it
    matches ``StaticModel.encode`` exactly.

    The tokenizer: ``PureBpe`` for a few short texts (a query, the records of a refresh)
    when the model's tokenizer has its shape, else the ``tokenizers`` one, loaded on first
    use (55-120 ms). Both give the same ids, so the same vectors.
    """

    # Past this many characters (in one process) the pure tokenizer has cost about what loading the
    # Rust one does, which is then faster per text: a full build goes straight to it, and a
    # long-lived process (the warm helper) switches once its queries add up to this.
    PURE_CHARACTERS = 20_000
    # Word by word (``PureBpe.by_word``) the pure one is about twice as fast, so it pays for longer
    # (docs/index.md, "Whole process").
    PURE_CHARACTERS_BY_WORD = 60_000

    def __init__(self, model_dir: Path) -> None:
        import json

        self.model_dir = model_dir
        tensors = _read_safetensors(model_dir / "model.safetensors")
        self.embedding = tensors.get("embeddings", tensors.get("embedding.weight"))
        if self.embedding is None:
            raise _model_error(str(model_dir), "model.safetensors has no 'embeddings' tensor")
        self.weights = tensors.get("weights")
        self.mapping = tensors.get("mapping")
        self.dim = int(self.embedding.shape[1])
        self._embedding32: np.ndarray | None = None  # a float32 copy, made for large batches (``encode``)
        config = json.loads((model_dir / "config.json").read_text()) if (model_dir / "config.json").exists() else {}
        self.max_length = config.get("max_length", 512)
        self._tokenizer: Any = None
        self.pure = PureBpe.load(model_dir / "tokenizer.json")
        if self.pure is not None:
            self.unk_id = self.pure.vocab.get(self.pure.unk) if self.pure.unk else None
        else:
            self.unk_id = self._unk_of(self.tokenizer)
        self._median_token_length: int | None = None
        self._pure_characters = 0  # tokenized by ``PureBpe`` so far
        if self.pure is not None and self.pure.by_word:
            self.PURE_CHARACTERS = self.PURE_CHARACTERS_BY_WORD

    @property
    def tokenizer(self) -> Any:
        """The ``tokenizers`` tokenizer (loaded on first use)."""
        if self._tokenizer is None:
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
            tokenizer.no_padding()
            if self.max_length is not None:
                tokenizer.enable_truncation(self.max_length)
            self._tokenizer = tokenizer
        return self._tokenizer

    @staticmethod
    def _unk_of(tokenizer: Any) -> int | None:
        unk = getattr(tokenizer.model, "unk_token", None)
        return tokenizer.token_to_id(unk) if unk else None

    @property
    def median_token_length(self) -> int:
        """model2vec's character cut-off unit; read from the vocabulary only when a text could need the cut.

        Computing it reads the whole vocabulary; a text no longer than ``max_length``
        characters cannot exceed ``max_length`` tokens times a median of at least one character,
        so the prompt hook and a refresh of short records never need it.
        """
        if self._median_token_length is None:
            import numpy as np

            vocab = self.pure.vocabulary() if self.pure is not None else list(self.tokenizer.get_vocab())
            self._median_token_length = int(np.median([len(token) for token in vocab])) if vocab else 1
        return self._median_token_length

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Each text's token ids (title case folded, model2vec's character cut and ``max_length`` applied)."""
        texts = [fold_title_case(t) for t in texts]
        if self.max_length is not None and any(len(t) > self.max_length for t in texts):
            limit = self.max_length * self.median_token_length
            texts = [t[:limit] for t in texts]
        characters = sum(len(t) for t in texts)
        pure = None
        if self.pure is not None and self._tokenizer is None and self._pure_characters + characters <= self.PURE_CHARACTERS:
            pure = self.pure
            self._pure_characters += characters
        ids: list[list[int] | None] = [pure.token_ids(t, self.max_length) for t in texts] if pure else [None] * len(texts)
        missing = [row for row, found in enumerate(ids) if found is None]
        if missing:
            encodings = self.tokenizer.encode_batch_fast([texts[row] for row in missing], add_special_tokens=False)
            for row, encoding in zip(missing, encodings, strict=True):
                ids[row] = list(encoding.ids)
        return [found or [] for found in ids]

    # Texts whose token vectors are gathered in one go: at most 32 x 512 tokens, so a build's
    # memory does not grow with the store (larger gathers, on fresh pages each time, were slower).
    GATHER_ROWS = 32

    def encode(self, texts: list[str]) -> np.ndarray:
        """model2vec's mean of (weighted) token vectors per text, L2-normalised; all-unknown texts stay zero.

        One gather of token vectors per batch of texts, not per row (numpy's per-call cost:
        docs/index.md, "Full build: what each part costs"). Each row is summed
        over its own tokens in order, whatever batch it is in, so a text gets the same vector
        alone (a refresh) or among thousands (a build).
        """
        import itertools

        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        assert self.embedding is not None
        all_ids = self.token_ids(texts)
        embedding = self.embedding
        if sum(len(ids) for ids in all_ids) >= len(embedding):
            # Many tokens (a build): converting the float16 table once beats converting every
            # gathered row; float16 -> float32 is exact, so the vectors are the same either way.
            # Below about one token per table row the copy costs more than it saves (the write
            # check's ~100 texts, 7,000-15,000 tokens: docs/performance.md, "Writes").
            if self._embedding32 is None:
                self._embedding32 = np.asarray(embedding, dtype=np.float32)
            embedding = self._embedding32
        for first in range(0, len(all_ids), self.GATHER_ROWS):
            batch = all_ids[first : first + self.GATHER_ROWS]
            lengths = [len(ids) for ids in batch]
            flat = np.fromiter(itertools.chain.from_iterable(batch), dtype=np.int64, count=sum(lengths))
            rows = np.repeat(np.arange(len(batch), dtype=np.int64), lengths)
            if self.unk_id is not None:
                known = flat != self.unk_id
                flat, rows = flat[known], rows[known]
            if not len(flat):
                continue
            counts = np.bincount(rows, minlength=len(batch))
            index = self.mapping[flat] if self.mapping is not None else flat
            vectors = np.asarray(embedding[index], dtype=np.float32)  # the float32 copy, for a build
            if self.weights is not None:
                vectors = vectors * np.asarray(self.weights[flat], dtype=np.float32)[:, None]
            # A sum per row over its contiguous slice (then divided, as ``mean`` does): faster here
            # than ``np.add.reduceat`` along the rows, and the same floats as a per-row ``mean``.
            start = 0
            sums = out[first : first + len(batch)]
            for row, count in enumerate(counts.tolist()):
                if count:
                    np.add.reduce(vectors[start : start + count], axis=0, out=sums[row])
                    start += count
            filled = counts > 0
            sums[filled] /= counts[filled, None].astype(np.float32)  # what ``mean`` divides by, row by row
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms


def get_query_encoder(spec: str | None = None) -> QueryEncoder | Embedder:
    """The cheapest encoder for ``spec`` (``None``: the bundled model): the light reader for local dirs, model2vec otherwise."""
    return _query_encoder(model_spec(spec))


@lru_cache(maxsize=4)
def _query_encoder(spec: str) -> QueryEncoder | Embedder:
    path = Path(spec).expanduser()
    if path.is_dir() and (path / "model.safetensors").exists() and (path / "tokenizer.json").exists():
        try:
            return QueryEncoder(path)
        except ModelError:
            raise
        except Exception as exc:
            raise _model_error(spec, f"{path} is not a loadable model2vec model "
                                     f"({exc.__class__.__name__}: {_first_line(exc)})") from exc  # fmt: skip
    if path.is_dir():
        raise _model_error(spec, f"{path} is not a model2vec model directory "
                                 "(it needs model.safetensors, tokenizer.json and config.json)")  # fmt: skip
    if path.exists() or spec.startswith((".", "/", "~")):
        raise _not_found(spec)
    return get_embedder(spec)
