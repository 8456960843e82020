"""Is the index up to date with the data dir? Stat calls only, unless a file's mtime moved.

A file whose size and mtime match the manifest in ``meta.json`` is unchanged;
one whose mtime moved but whose content digest matches was only touched.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from lore.index.layout import GenerationMeta, file_digest
from lore.store.layout import jsonl_kind, source_files

MODEL_CHANGED = "embedding model changed"
OTHER_DATA_DIR = "built for another data dir"


def source_manifest(data_dir: Path) -> dict[str, list[int]]:
    """Each source file (relative to ``data_dir``) and its [size, mtime_ns]."""
    manifest: dict[str, list[int]] = {}
    for path in source_files(data_dir):
        with contextlib.suppress(OSError):
            stat = path.stat()
            manifest[str(path.relative_to(data_dir))] = [stat.st_size, stat.st_mtime_ns]
    return manifest


def staleness(meta: GenerationMeta, data_dir: Path, model: str | None) -> str | None:
    """Why the index is out of step with ``data_dir`` and ``model`` (``Settings.embed_model``), or None if it is not."""
    from lore.embedder import model_identity, model_spec

    if meta.damaged:  # set by a reader that found a file unreadable
        return meta.damaged
    if meta.data_dir != str(data_dir.resolve()):
        return OTHER_DATA_DIR
    if meta.embeddings:
        if meta.model != model_identity(model):
            return MODEL_CHANGED
    elif meta.model_wanted is not None:
        # Built without embeddings because the configured model could not be loaded: only
        # another model (or this one appearing) makes re-embedding worth trying, not every search.
        if meta.model_wanted != model_identity(model):
            return f"{MODEL_CHANGED} (the index was built without embeddings)"
    elif meta.model_spec != model_spec(model):  # indexes from before ``model_wanted``
        return f"{MODEL_CHANGED} (the index was built without embeddings)"
    changed = changed_sources(meta, data_dir, first_only=True)
    if changed is None:
        return "files added or removed"
    return f"{changed[0]} changed" if changed else None


def changed_sources(meta: GenerationMeta, data_dir: Path, *, first_only: bool = False) -> list[str] | None:
    """The source files whose content differs from the manifest's; None if files were added or removed.

    A new JSONL shard (a month's first record: lore.store.layout) is a file that grew from
    nothing, listed as changed, so its records can go to a delta segment like any append.
    """
    indexed = meta.sources
    current = source_manifest(data_dir)
    added = set(current) - set(indexed)
    if set(indexed) - set(current) or any(jsonl_kind(name) is None for name in added):
        return None
    changed = [name for name in current if name in added]
    if first_only and changed:
        return changed[:1]
    for name, (size, mtime) in current.items():
        if name in added:
            continue
        old = indexed[name]
        if old[0] != size:
            changed.append(name)  # another size is another content: no digest to read (~40 ms at 50k records)
        elif old[1] != mtime:
            digest = meta.digests.get(name)
            if digest and digest == file_digest(data_dir / name):
                continue  # touched, not changed
            changed.append(name)
        if first_only and changed:
            break
    return changed


def needs_full_build(reason: str | None) -> bool:
    """Whether a staleness reason rules out refreshing (everything must be re-derived)."""
    return reason is not None and (reason.startswith(MODEL_CHANGED) or reason == OTHER_DATA_DIR)
