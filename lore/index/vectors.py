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


class StackedMatrix:
    """The live rows of a base matrix, then a delta segment's rows: one read-only matrix to the pipeline.

    Supports what a search does with the vectors (``@`` a query, rows by index,
    ``shape``/``dtype``) without copying the memory-mapped base.
    """

    ndim = 2

    def __init__(self, base: np.ndarray, keep: np.ndarray | None, delta: np.ndarray) -> None:
        import numpy as np

        self.base, self.keep, self.delta = base, keep, np.asarray(delta, dtype=np.float32)
        self.delta_start = base.shape[0] if keep is None else len(keep)
        self.shape = (self.delta_start + self.delta.shape[0], base.shape[1])
        self.dtype = np.dtype(np.float32)

    def __len__(self) -> int:
        return self.shape[0]

    def __matmul__(self, query: np.ndarray) -> np.ndarray:
        import numpy as np

        scores = self.base @ query
        if self.keep is not None:
            scores = scores[self.keep]
        return np.concatenate([np.asarray(scores, dtype=np.float32), np.asarray(self.delta @ query, dtype=np.float32)])

    def __getitem__(self, rows: object) -> np.ndarray:
        import numpy as np

        picked = np.asarray(rows, dtype=np.int64)
        flat = np.atleast_1d(picked)
        out = np.zeros((len(flat), self.shape[1]), dtype=np.float32)
        in_base = flat < self.delta_start
        base_rows = flat[in_base] if self.keep is None else self.keep[flat[in_base]]
        if len(base_rows):
            out[in_base] = self.base[np.asarray(base_rows, dtype=np.int64)]
        if (~in_base).any():
            out[~in_base] = self.delta[flat[~in_base] - self.delta_start]
        return out[0] if picked.ndim == 0 else out


def cosines(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """The cosine of every row to ``query`` (rows and query are L2-normalised)."""
    import numpy as np

    return np.asarray(matrix @ query.astype(matrix.dtype), dtype=np.float32)


# Rows a query's pass reads at a time: a block (1 MB of float32 at 256 dimensions) stays in a
# core's cache while each query reads it, so the matrix comes from memory once for all queries.
CHUNK_ROWS = 1024


def cosines_of(matrix: np.ndarray, queries: np.ndarray) -> list[np.ndarray]:
    """``cosines(matrix, query)`` for each of ``queries`` (one per row of it), reading the matrix once.

    A search asks up to three (the query, the query with feedback, HyDE's document). Each
    query's cosines are computed by the same product as ``cosines`` over blocks of rows, so
    they equal its results exactly, at about half the time of three whole passes.
    """
    import numpy as np

    if isinstance(matrix, StackedMatrix):
        base = cosines_of(matrix.base, queries)
        kept = base if matrix.keep is None else [scores[matrix.keep] for scores in base]
        return [np.concatenate([scores, np.asarray(matrix.delta @ query, dtype=np.float32)])
                for scores, query in zip(kept, queries, strict=True)]  # fmt: skip
    if matrix.dtype != np.float32:
        return [cosines(matrix, query) for query in queries]
    queries = np.asarray(queries, dtype=np.float32)
    out = np.empty((len(queries), matrix.shape[0]), dtype=np.float32)
    for start in range(0, matrix.shape[0], CHUNK_ROWS):
        block = matrix[start : start + CHUNK_ROWS]
        for column, query in enumerate(queries):
            np.dot(block, query, out=out[column, start : start + CHUNK_ROWS])
    return list(out)


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
