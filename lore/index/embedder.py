"""Static embeddings with model2vec: the only module that imports model2vec.

The bundled model lives in ``lore/model/`` so semantic search works offline.
``LORE_EMBED_MODEL`` may name another model2vec model by path or hub id; lore
never downloads, so a hub id must already be in the local Hugging Face cache.
A model that cannot be loaded raises ``ModelError`` naming it: lexical search
still works.
"""

from __future__ import annotations

import hashlib
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from lore.errors import ModelError

if TYPE_CHECKING:
    import numpy as np

BUNDLED_MODEL_DIR = Path(__file__).resolve().parent.parent / "model"

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


def model_spec() -> str:
    """The configured model: a path or hub id, or the bundled model's path."""
    return os.environ.get("LORE_EMBED_MODEL") or str(BUNDLED_MODEL_DIR)


def model_identity(spec: str | None = None) -> str:
    """A stable identity for the model; a change of identity means re-embedding."""
    spec = spec or model_spec()
    path = Path(spec).expanduser()
    if path.is_dir():
        digest = hashlib.sha256()
        for name in ("model.safetensors", "config.json", "tokenizer.json"):
            file = path / name
            if file.exists():
                stat = file.stat()
                digest.update(f"{name}:{stat.st_size}:{int(stat.st_mtime)}".encode())
        label = "bundled" if path.resolve() == BUNDLED_MODEL_DIR.resolve() else str(path.resolve())
        return f"{label}@{digest.hexdigest()[:16]}"
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
        self.spec = spec or model_spec()
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
    """The embedder for ``spec`` (cached). Pass the spec: ``None`` caches whichever model was configured first."""
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


class QueryEncoder:
    """model2vec's mean-of-token-embeddings for a local model, without importing model2vec.

    Importing model2vec costs ~0.5 s on a small machine; a query needs only the
    tokenizer and a memory-mapped matrix. ``tests/test_index.py`` checks that it
    matches ``StaticModel.encode`` exactly.
    """

    def __init__(self, model_dir: Path) -> None:
        import json

        from tokenizers import Tokenizer

        self.model_dir = model_dir
        tensors = _read_safetensors(model_dir / "model.safetensors")
        self.embedding = tensors.get("embeddings", tensors.get("embedding.weight"))
        if self.embedding is None:
            raise _model_error(str(model_dir), "model.safetensors has no 'embeddings' tensor")
        self.weights = tensors.get("weights")
        self.mapping = tensors.get("mapping")
        self.dim = int(self.embedding.shape[1])
        config = json.loads((model_dir / "config.json").read_text()) if (model_dir / "config.json").exists() else {}
        self.max_length = config.get("max_length", 512)
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.no_padding()
        if self.max_length is not None:
            self.tokenizer.enable_truncation(self.max_length)
        unk = getattr(self.tokenizer.model, "unk_token", None)
        self.unk_id = self.tokenizer.token_to_id(unk) if unk else None
        self._median_token_length: int | None = None

    @property
    def median_token_length(self) -> int:
        """model2vec's character cut-off unit; read from the vocabulary only when a text could need the cut.

        Computing it costs ~16 ms per load (32,000 tokens); a text no longer than ``max_length``
        characters cannot exceed ``max_length`` tokens times a median of at least one character,
        so the prompt hook and a refresh of short records never need it.
        """
        if self._median_token_length is None:
            import numpy as np

            vocab = self.tokenizer.get_vocab()
            self._median_token_length = int(np.median([len(token) for token in vocab])) if vocab else 1
        return self._median_token_length

    def encode(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        texts = [fold_title_case(t) for t in texts]
        if self.max_length is not None and any(len(t) > self.max_length for t in texts):
            limit = self.max_length * self.median_token_length
            texts = [t[:limit] for t in texts]
        for row, encoding in enumerate(self.tokenizer.encode_batch_fast(texts, add_special_tokens=False)):
            ids = [i for i in encoding.ids if i != self.unk_id]
            if not ids:
                continue
            index = self.mapping[ids] if self.mapping is not None else ids
            assert self.embedding is not None
            vectors = np.asarray(self.embedding[index], dtype=np.float32)
            if self.weights is not None:
                vectors = vectors * np.asarray(self.weights[ids], dtype=np.float32)[:, None]
            out[row] = vectors.mean(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms


def get_query_encoder(spec: str | None = None) -> QueryEncoder | Embedder:
    """The cheapest encoder for ``spec`` (default: the configured model): the light reader for local dirs, model2vec otherwise."""
    return _query_encoder(spec or model_spec())


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
