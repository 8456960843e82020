"""Record embeddings as a memory-mapped float16 matrix with an id map (numpy only)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

def save_as(path: Path, matrix: np.ndarray) -> Path:
    import numpy as np

    # float32 on disk: the reader memory-maps it as is (no conversion on the hook's
    # path), and numpy has a BLAS path for float32 but not for float16.
    with path.open("wb") as handle:
        np.save(handle, np.ascontiguousarray(matrix, dtype=np.float32))
    return path


def load_file(path: Path, rows: int | None = None) -> np.ndarray:
    """The memory-mapped matrix; ValueError unless it is a float matrix (of ``rows`` rows, if given)."""
    import numpy as np

    matrix = np.load(path, mmap_mode="r")
    if matrix.ndim != 2 or matrix.dtype.kind != "f" or (rows is not None and matrix.shape[0] != rows):
        expected = f"{rows} rows of floats" if rows is not None else "a float matrix"
        raise ValueError(f"{matrix.dtype} array of shape {matrix.shape}, not {expected}")
    return matrix


def top_k(matrix: np.ndarray, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
    """Rows with the highest cosine to ``query`` (rows and query are L2-normalised)."""
    if matrix.shape[0] == 0:
        return []
    return best_of(cosines(matrix, query), k, allowed)


def cosines(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """The cosine of every row to ``query`` (rows and query are L2-normalised)."""
    import numpy as np

    return np.asarray(matrix @ query.astype(matrix.dtype), dtype=np.float32)


def best_of(scores: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
    """The ``k`` rows of ``scores`` with the highest score among the allowed ones, best first."""
    import numpy as np

    if scores.shape[0] == 0:
        return []
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)
    k = min(k, scores.shape[0])
    part = np.argpartition(-scores, k - 1)[:k]
    order = part[np.argsort(-scores[part], kind="stable")]
    return [(int(i), float(scores[i])) for i in order if np.isfinite(scores[i])]
