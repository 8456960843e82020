"""`lore bench`: retrieval quality, known-item search, latency, indexing and scale figures.

The harness reads the shared evaluation data by path (``../shared/`` beside the
project root, or ``$LORE_SHARED_DIR``) and never copies it into the project.
Its scoring dependencies (ir-measures, pytrec_eval) live in the ``bench`` extra.
See docs/evaluation.md for what each figure means.
"""

from __future__ import annotations

import os
from pathlib import Path

from lore.errors import LoreError, NotFoundError

SECTIONS = ("quality", "knownitem", "latency", "indexing")
DEFAULT_SIZES = (1000, 10000, 50000)
PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent


def require_extra() -> None:
    """Fail with an actionable error when the bench extra is not installed."""
    try:
        import ir_measures  # noqa: F401
        import pytrec_eval  # noqa: F401
    except ImportError as exc:
        raise LoreError("lore bench needs the bench extra", hint="pip install 'lore[bench]'") from exc


def shared_dir(required: bool = True) -> Path | None:
    """``$LORE_SHARED_DIR``, else ``../shared`` beside the project root."""
    env = os.environ.get("LORE_SHARED_DIR")
    path = Path(env).expanduser() if env else PROJECT_ROOT.parent / "shared"
    if path.is_dir():
        return path.resolve()
    if required:
        raise NotFoundError(
            f"shared benchmark data not found at {path}",
            hint="set LORE_SHARED_DIR to the directory holding beir/ and corpora/",
        )
    return None
