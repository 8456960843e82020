"""lore's benchmark harness (``python -m benchmarks`` in a checkout): retrieval quality, known-item search,
latency, indexing and scale figures.

It lives beside the package, not in it: an installed lore ships none of it (its
``lore bench`` measures the user's own store: lore.measure). The harness reads the
shared evaluation data by path (``../shared/`` beside the project root, or
``$LORE_SHARED_DIR``) and never copies it into the project.
Its scoring dependencies (ir-measures, pytrec_eval) live in the ``bench`` extra.
See docs/evaluation.md for what each figure means.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from lore.errors import LoreError, NotFoundError

if TYPE_CHECKING:
    from lore.paths import Locations
    from lore.settings import Settings

SECTIONS = ("quality", "stream", "duplicates", "latency", "indexing", "firstprompt", "surfaces", "soak", "import", "capture", "sync")
# `python -m benchmarks` without --only: the sync soak takes minutes of git merges and says nothing
# about search, so it runs when asked for (`python -m benchmarks --only sync`).
DEFAULT_SECTIONS = ("quality", "stream", "duplicates", "latency", "indexing", "firstprompt", "surfaces", "soak", "import", "capture")
# The evaluation sets of the quality section (benchmarks.sets), in the order they run.
SETS = ("scifact", "knownitem", "memory", "memory-fresh", "demo", "locomo")
DEFAULT_SIZES = (1000, 10000, 50000)
PROJECT_ROOT = Path(__file__).resolve().parent.parent


def require_extra() -> None:
    """Fail with an actionable error when the bench extra is not installed."""
    try:
        import ir_measures  # noqa: F401
        import pytrec_eval  # noqa: F401
    except ImportError as exc:
        raise LoreError("the benchmark harness needs the bench extra", hint="pip install -e '.[bench]'") from exc


def _candidates(env: str, name: str) -> list[Path]:
    """Where a directory beside the project may be: the variable, beside this checkout, beside the cwd."""
    value = os.environ.get(env)
    if value:
        return [Path(value).expanduser()]
    return [PROJECT_ROOT.parent / name, Path.cwd().parent / name, Path.cwd() / name]


def shared_dir(required: bool = True) -> Path | None:
    """``$LORE_SHARED_DIR``, else ``../shared`` beside the project root or beside the working directory.

    Found beside this checkout, or beside the working directory (or named by the variable).
    """
    for path in _candidates("LORE_SHARED_DIR", "shared"):
        if (path / "corpora").is_dir() or (path / "beir").is_dir():
            return path.resolve()
    if required:
        tried = ", ".join(str(p) for p in _candidates("LORE_SHARED_DIR", "shared"))
        raise NotFoundError(
            f"shared benchmark data not found (looked in {tried})",
            hint="set LORE_SHARED_DIR to the directory holding beir/ and corpora/",
        )
    return None


def bench_cache_dir() -> Path:
    """Where the bench keeps what it downloads (the LoCoMo file): ``$XDG_CACHE_HOME/lore-bench``, else ``~/.cache/lore-bench``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lore-bench"


def demo_dir() -> Path:
    """The bundled demo data dir: ``$LORE_DEMO_DIR``, else ``data/`` of the checkout or of the working directory."""
    value = os.environ.get("LORE_DEMO_DIR")
    candidates = [Path(value).expanduser()] if value else [PROJECT_ROOT / "data", Path.cwd() / "data"]
    for path in candidates:
        if (path / "journal" / "data" / "decisions.jsonl").is_file():
            return path.resolve()
    raise NotFoundError(
        "the demo data dir (data/ of a lore checkout) was not found (looked in "
        + ", ".join(str(p) for p in candidates) + ")",
        hint="run python -m benchmarks from a checkout of lore, or set LORE_DEMO_DIR",
    )


def settings() -> Settings:
    """lore's settings as the bench has set the environment for the section running (its own state and cache dirs)."""
    from lore.settings import Settings

    return Settings.from_env()


def locations(data_dir: Path, index_dir: Path) -> Locations:
    """A data dir and index dir of the bench's, with the state dir and model of the section's settings."""
    from lore.paths import Locations

    return Locations.resolve(data_dir, index_dir, settings())


@contextmanager
def environment(**values: str) -> Iterator[None]:
    """Set environment variables for the duration of a block (a section's own state and cache dirs)."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def compile_bytecode() -> bool:
    """Compile lore's modules to bytecode once, as ``pip install`` does for a wheel.

    An editable install under ``PYTHONDONTWRITEBYTECODE`` (set on these machines)
    would otherwise recompile every lore module in every measured process: ~100
    ms that no installed copy pays. Returns whether every module compiled.
    (Here, not in ``benchmarks.latency``: ``benchmarks.mcpstart`` needs it, and latency imports mcpstart.)
    """
    import compileall

    import lore

    return bool(compileall.compile_dir(str(Path(lore.__file__).parent), quiet=1))
