"""Static embeddings with model2vec: the only module that imports model2vec.

The bundled model lives in ``lore/model/`` so semantic search works offline.
``LORE_EMBED_MODEL`` may name another model2vec model by path or hub id.
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from lore.errors import ModelError

if TYPE_CHECKING:
    import numpy as np

BUNDLED_MODEL_DIR = Path(__file__).resolve().parent.parent / "model"


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


class Embedder:
    """Encode texts to L2-normalised float32 vectors."""

    def __init__(self, spec: str | None = None) -> None:
        self.spec = spec or model_spec()
        self.identity = model_identity(self.spec)
        try:
            from model2vec import StaticModel

            path = Path(self.spec).expanduser()
            if path.exists():
                self._model = StaticModel.from_pretrained(str(path))
            else:
                # Hub ids only work online or from the local hub cache.
                self._model = StaticModel.from_pretrained(self.spec)
        except Exception as exc:  # model2vec raises many kinds; all mean "unusable"
            raise ModelError(
                f"cannot load embedding model {self.spec!r}: {exc.__class__.__name__}: {exc}",
                hint="unset LORE_EMBED_MODEL to use the bundled model; lexical search keeps working",
            ) from exc
        self.dim = int(self._model.dim)

    def encode(self, texts: list[str], batch_size: int = 1024) -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(texts, batch_size=batch_size, show_progress_bar=False, use_multiprocessing=False)
        vectors = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return vectors / norms

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


@lru_cache(maxsize=4)
def get_embedder(spec: str | None = None) -> Embedder:
    return Embedder(spec)
