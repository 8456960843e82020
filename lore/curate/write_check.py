"""The write path's duplicate and contradiction check: refuse, merge or annotate a new record.

``lore.curate.dedup`` judges two records (its module doc has the layers and thresholds);
this module runs that judgement where a write happens: decisions against this process's
pool of them (``lore.curate.pool``: their word sets kept current, not the whole store read
on every write), patterns and lessons against the files that hold them. Its own module so
that the pool, which uses dedup's judgement, is not imported by it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from lore.curate import dedup
from lore.curate.dedup import KIND_GROUPS, DedupOutcome, Embed, Match, find_duplicate
from lore.errors import DataError, DuplicateError, ModelError

if TYPE_CHECKING:
    from lore.store.records import Record
    from lore.store.store import Snapshot, Store


def model_embed(notices: list[str], model: str | None) -> Embed | None:
    """The ``encode`` of ``model`` (``Settings.embed_model``; None: the bundled one), or None (with a notice) when it cannot load.

    The encoder the index embeds records with (``get_query_encoder``): for a local model it
    reads the model's matrix and tokenizer without importing model2vec, which cost a
    `lore remember` process 0.44 s; its vectors are model2vec's within 2e-3 (tests/test_index.py).
    """
    from lore.embedder import get_query_encoder

    try:
        embedder = get_query_encoder(model)
    except ModelError as exc:
        notices.append(f"semantic duplicate check skipped: {exc.message}")
        return None
    return embedder.encode


def _describe(match: Match) -> str:
    return f"{match.record.id} {match.record.title!r}"


def check_before_write(
    store: Store, kind: str, raw: dict[str, Any], *, force: bool, merge: bool, snapshot: Snapshot | None = None,
    model: str | None = None, pool_cache: Path | None = None,
) -> DedupOutcome:
    """Refuse, merge or annotate a write that duplicates or contradicts an existing record.

    ``snapshot``: the records to check against when the caller keeps them current (a batched
    import); by default the store is loaded. ``model``: the embedding model
    (``Settings.embed_model``; None: the bundled one). ``pool_cache``: where the pool of
    decisions is kept between processes (``lore.paths.write_check_dir``; None: not kept).
    """
    outcome = DedupOutcome()
    group = KIND_GROUPS.get(kind, (kind,))
    if snapshot is None and group == ("decision",):
        found = _check_pool(store, kind, raw, outcome.notices, model, pool_cache)
        if found is None:
            return outcome
        duplicate, contradictions = found
    else:
        if snapshot is None:
            snapshot = store.load(kinds=group)  # the files that hold them, not the whole store
        candidates = snapshot.of_kind(*group)
        if not candidates:
            return outcome
        embed = model_embed(outcome.notices, model)
        duplicate, contradictions = find_duplicate(candidates, kind, raw, embed, limit=dedup.EMBED_CANDIDATES)
    outcome.contradictions = contradictions
    for match in contradictions:
        other = match.record.id
        outcome.notices.append(
            f"contradicts {_describe(match)} (same topic, opposite advice): consider "
            f"`lore link {{new_id}} {other} contradicts` or `lore supersede {other} {{new_id}}`"
        )
    if duplicate is None:
        return outcome
    outcome.duplicate = duplicate
    percent = f"{duplicate.similarity:.0%}"
    if force:
        outcome.notices.append(
            f"written despite a likely duplicate of {_describe(duplicate)} ({percent}, {duplicate.layer}) (--force)"
        )
        return outcome
    if merge:
        outcome.merged = _merge(store, duplicate, kind, raw)
        outcome.notices.insert(
            0, f"merged into {_describe(duplicate)} ({percent}, {duplicate.layer}); nothing new written"
        )
        return outcome
    raise DuplicateError(
        f"likely duplicate of {_describe(duplicate)}: {percent} similar ({duplicate.layer})",
        existing_id=duplicate.record.id,
        similarity=duplicate.similarity,
        hint="--force writes anyway; --merge keeps the existing record",
    )


def _check_pool(store: Store, kind: str, raw: dict[str, Any], notices: list[str], model: str | None,
                pool_cache: Path | None) -> tuple[Match | None, list[Match]] | None:  # fmt: skip
    """``find_duplicate`` against the decisions of this process's pool (lore.curate.pool); None when there are none.

    The pool's lock is released before the caller merges or writes (``Store.add`` takes the
    data-dir lock, then the pool's).
    """
    from lore.curate.pool import pool_for

    pool = pool_for(store.data_dir, pool_cache)
    with pool.lock:
        pool.refresh(store)
        if not pool.present:
            return None
        embed = model_embed(notices, model)
        identity = None
        if embed is not None:
            from lore.embedder import model_identity

            identity = model_identity(model)  # the vectors the pool keeps on disk are this model's
        for _ in range(3):
            found = pool.find_duplicate(kind, raw, embed, limit=dedup.EMBED_CANDIDATES, identity=identity, model=model)
            if found is not None:
                return found
            pool.built = False  # a line moved under it (a rewrite after the refresh): read it all again
            pool.refresh(store)
    raise DataError(f"{pool.file} kept changing while it was read", hint="run the command again")


def _merge(store: Store, duplicate: Match, kind: str, raw: dict[str, Any]) -> Record:
    existing = duplicate.record
    incoming = raw.get("rule_confidence", raw.get("confidence"))
    new_confidence = (
        float(incoming) if isinstance(incoming, int | float) and not isinstance(incoming, bool) else 0.0
    )
    confidence = max(existing.confidence, new_confidence)
    key = (
        "rule_confidence" if existing.kind == "lesson" and "rule_confidence" in existing.raw else "confidence"
    )

    def mutate(target: dict[str, Any]) -> None:
        target[key] = round(confidence, 4)
        if existing.kind in ("pattern", "lesson"):
            validations = target.get("validations")
            target["validations"] = (validations if isinstance(validations, int) else 0) + 1

    detail = {"similarity": duplicate.similarity, "layer": duplicate.layer, "kind": kind,
              "confidence": round(confidence, 4)}  # fmt: skip
    return store.update(existing.id, mutate, op="merge", detail=detail)


def fill_process(data_dir: Path, cache_file: Path, lock: Path, model: str | None) -> int:
    """The detached fill ``text_vectors.spawn_fill`` starts: the pool from its cache file (brought current),
    every decision's texts encoded into a new main vectors file; ``lock`` removed when done."""
    import contextlib
    import os

    from lore.curate.pool import DecisionPool
    from lore.embedder import model_identity
    from lore.store import Store

    with contextlib.suppress(OSError):
        os.nice(10)  # behind the user's own commands
    try:
        pool = DecisionPool(data_dir, cache_file)
        pool.load(cache_file)
        with pool.lock:
            pool.refresh(Store(data_dir))
            embed = model_embed([], model)
            if embed is None:
                return 1
            vectors = pool.fill_vectors(embed, model_identity(model), inline=True)
            if vectors is None or not vectors.rewrite_main:
                return 1
            vectors.save(pool.live_keys)
    finally:
        with contextlib.suppress(OSError):
            lock.unlink()
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(fill_process(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4] or None))
