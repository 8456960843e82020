"""The write check's pool of decisions (lore.curate.pool): always what a whole load would give.

Each test changes the data dir the way some writer does (lore in this process, another
process appending, a rewrite, a record of another file taking a decision's id, a line
half written) and compares the pool, brought current, with a pool built from a whole
load and with ``Store.load()`` itself; the check's answers are compared with
``find_duplicate`` over a whole load.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from lore import capture
from lore.capture import WriteOptions
from lore.curate import dedup, pool, write_check
from lore.curate.similarity import Bm25Stats
from lore.errors import DuplicateError
from lore.paths import write_check_dir
from lore.store import Store
from lore.store.store import _ID_FIELD
from tests.conftest import settings

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DECISIONS = Path("journal/data/decisions.jsonl")
OBSERVATIONS = Path("inbox/data/observations.jsonl")
PLAIN = WriteOptions(redact=False, check_duplicates=False)


def decision(record_id: str, text: str, rationale: str = "", **extra: Any) -> bytes:
    raw = {"id": record_id, "timestamp": "2026-01-01T00:00:00Z", "decision": text, "rationale": rationale,
           "status": "active", "schema_version": 1, **extra}  # fmt: skip
    return orjson.dumps(raw) + b"\n"


def state(p: pool.DecisionPool) -> tuple[list[str], dict[str, int], int, int, list[str]]:
    """What the check reads of a pool: live ids in order, document frequencies by term, count, tokens, the file's ids."""
    live = [p.ids[e] for e, alive in enumerate(p.live) if alive]
    df = {term: int(p.df[row]) for term, row in p.vocab.items() if p.df[row]}
    return live, df, p.count, p.total, sorted(p.file_ids)


def truth(data_dir: Path) -> tuple[list[str], dict[str, int], int, int, list[str]]:
    """The same, from a whole ``Store.load()`` and the file's bytes."""
    records = [r for r in Store(data_dir).load().of_kind("decision") if r.active]
    toks = [dedup.tokens(dedup._join(*dedup.compared_text(r.kind, r.raw))) for r in records]
    stats = Bm25Stats.build(toks)
    path = data_dir / DECISIONS
    content = path.read_bytes() if path.exists() else b""
    # Store.add takes the pool's ids only when the pool has read the whole file, whole lines.
    ids = sorted({m.decode() for m in _ID_FIELD.findall(content[: content.rfind(b"\n") + 1])})
    return [r.id for r in records], dict(stats.df), len(records), sum(len(t) for t in toks), ids


def current(p: pool.DecisionPool, data_dir: Path) -> tuple[list[str], dict[str, int], int, int, list[str]]:
    p.refresh(Store(data_dir))
    return state(p)


def check_same(p: pool.DecisionPool, data_dir: Path) -> None:
    expected = truth(data_dir)
    assert current(p, data_dir) == expected
    fresh = pool.DecisionPool(data_dir)
    assert current(fresh, data_dir) == expected


@pytest.fixture
def store(data_dir: Path) -> Store:
    store = Store(data_dir, actor="test")
    store.init()
    lines = [decision(f"dec-{i:08x}", f"Adopt service {i} for the billing workload", f"reason {i % 7}") for i in range(40)]
    lines.append(decision("dec-retired0", "Use Memcached for sessions", status="retracted"))
    store.path(DECISIONS).write_bytes(b"".join(lines))
    return store


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as handle:
        handle.write(data)


def test_the_pool_follows_every_kind_of_change(store: Store, data_dir: Path) -> None:
    p = pool.pool_for(data_dir, None)  # the pool Store.add tells
    check_same(p, data_dir)
    path = data_dir / DECISIONS
    # Another process appends: a new record, and a newer version of an old one (the original Lore did).
    append(path, decision("dec-feed0001", "Cache rendered invoices in Redis", "rendering is slow"))
    append(path, decision("dec-00000003", "Adopt service 3 for the ledger", "moved"))
    check_same(p, data_dir)
    assert p.builds == 1  # caught up with the appended lines, not read again
    # This process writes: Store.add takes the ids from the pool and tells it what it appended.
    capture.remember(store, "Pin the Python version in CI images", project="x", options=PLAIN)
    assert p.ids_if_current() is not None and len(p.chains["journal/data/decisions.jsonl"][0]) == 2  # no refresh: the chain went on
    check_same(p, data_dir)
    assert p.builds == 1
    # A version that retires a record, then one that brings it back.
    append(path, decision("dec-00000005", "Adopt service 5 for the billing workload", status="retracted"))
    check_same(p, data_dir)
    append(path, decision("dec-00000005", "Adopt service 5 again", status="active"))
    check_same(p, data_dir)
    # Observations appended between two decisions (an agent's captures) are read alone too.
    reads = p.later_reads
    capture.observe(store, "The ledger export runs at 02:00", project="x", options=PLAIN)
    append(data_dir / OBSERVATIONS, orjson.dumps({"id": "obs-feed0001", "content": "appended", "schema_version": 1}) + b"\n")
    check_same(p, data_dir)
    assert p.later_reads == reads
    # A later file holds a decision's id: it wins the id in Store.load, so the decision leaves the pool...
    append(data_dir / OBSERVATIONS, orjson.dumps({"id": "dec-00000007", "content": "an observation", "schema_version": 1}) + b"\n")
    check_same(p, data_dir)
    assert "dec-00000007" not in state(p)[0] and p.later_reads == reads
    # ...and comes back when that file no longer holds it (a rewrite: read again).
    (data_dir / OBSERVATIONS).write_bytes(b"")
    check_same(p, data_dir)
    assert "dec-00000007" in state(p)[0] and p.later_reads == reads + 1
    # A session file or patterns.yaml holding a decision's id wins it too.
    session = data_dir / "transfer/data/sessions/dec-00000008.json"
    session.parent.mkdir(parents=True, exist_ok=True)
    session.write_bytes(orjson.dumps({"summary": "a handoff", "handoff": {"message": "m"}}))
    check_same(p, data_dir)
    assert "dec-00000008" not in state(p)[0]
    session.unlink()
    capture.learn(store, "Ledger exports stream", project="x", solution="write rows as they come", options=PLAIN)
    check_same(p, data_dir)
    assert "dec-00000008" in state(p)[0]
    assert p.builds == 1 and p.later_reads == reads + 1
    # A line being written (no newline yet) is read once it is whole.
    append(path, decision("dec-feed0002", "Half written", "")[:20])
    check_same(p, data_dir)
    append(path, decision("dec-feed0002", "Half written", "")[20:])
    check_same(p, data_dir)
    # A rewrite (retract: an atomic replace), an edit in place behind the end, a truncation, removal.
    capture.retract(store, "dec-00000001", "replaced")
    check_same(p, data_dir)
    content = path.read_bytes()
    with path.open("r+b") as handle:  # same inode, same size: only the mtime (and content) moves
        handle.write(content.replace(b"Adopt service 2 ", b"Adopt servant 2 ", 1)[:100])
        handle.seek(0, os.SEEK_END)
        handle.write(decision("dec-feed0003", "Appended after an edit in place"))
    check_same(p, data_dir)
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2].rsplit(b"\n", 1)[0] + b"\n")
    check_same(p, data_dir)
    path.unlink()
    check_same(p, data_dir)
    assert state(p)[2] == 0


def test_a_line_the_store_would_warn_about_makes_the_pool_read_everything(store: Store, data_dir: Path) -> None:
    p = pool.DecisionPool(data_dir)
    check_same(p, data_dir)
    path = data_dir / DECISIONS
    append(path, b'{"id": "dec-bad00001", "decision": ""}\n' + decision("dec-feed0004", "Keep audit logs for a year"))
    check_same(p, data_dir)
    append(path, b"not json\n")
    check_same(p, data_dir)


def test_a_saved_pool_loads_as_it_was(store: Store, data_dir: Path, tmp_path: Path) -> None:
    p = pool.DecisionPool(data_dir)
    p.refresh(store)
    append(data_dir / DECISIONS, decision("dec-00000003", "Adopt service 3 for the ledger", "a newer version"))
    p.refresh(store)  # a dead entry, dropped when saved
    saved = tmp_path / "pool"
    p.save(saved)
    loaded = pool.DecisionPool(data_dir)
    assert loaded.load(saved)
    assert state(loaded) == state(p) == truth(data_dir)
    assert loaded.manifest == p.manifest and loaded.chains == p.chains
    capture.remember(store, "Rotate the signing keys every quarter", project="x", options=PLAIN)
    check_same(loaded, data_dir)  # the chain loaded from the file goes on
    other = pool.DecisionPool(tmp_path / "elsewhere")
    assert not other.load(saved)  # another data dir's pool is no cache
    saved.write_bytes(saved.read_bytes()[:-3])
    assert not pool.DecisionPool(data_dir).load(saved)


def test_the_ids_store_add_takes_are_the_files(store: Store, data_dir: Path) -> None:
    p = pool.pool_for(data_dir, None)
    p.refresh(store)
    path = data_dir / DECISIONS
    ids = p.ids_if_current()
    assert ids is not None and ids == {m.decode() for m in _ID_FIELD.findall(path.read_bytes())}
    append(path, decision("dec-feed0005", "Written by another process"))
    assert p.ids_if_current() is None  # not current: Store.add reads the file itself
    written = capture.remember(store, "Written here", project="x", options=PLAIN).record
    p.refresh(store)
    assert {"dec-feed0005", written.id} <= (p.ids_if_current() or set())
    assert state(p) == truth(data_dir)


NEW_TEXTS = [
    ("Adopt service 12 for the billing workload", "reason 5"),  # an exact copy
    ("adopt service 12 for the billing workload.", ""),  # the same, differently written
    ("Adopt service 13 for the billing workloads", "reason 6"),  # a specific changed
    ("Never adopt service 4 for the billing workload", "reason 4"),  # opposite advice
    ("Cache rendered invoices in Redis", "rendering is slow"),
    ("Something unrelated about office plants", ""),
]


def outcome_of(check: dedup.DedupOutcome | DuplicateError) -> tuple[Any, ...]:
    if isinstance(check, DuplicateError):
        return ("refused", check.existing_id, check.similarity, check.message)
    return ("written", check.notices, [(m.record.id, m.similarity, m.layer) for m in check.contradictions])


def checked(store: Store, raw: dict[str, Any]) -> tuple[Any, ...]:
    try:
        return outcome_of(write_check.check_before_write(store, "decision", raw, force=False, merge=False))
    except DuplicateError as error:
        return outcome_of(error)


def whole_load(store: Store, raw: dict[str, Any]) -> tuple[Any, ...]:
    """What the check answered before the pool: ``find_duplicate`` over ``Store.load()``."""
    outcome = dedup.DedupOutcome()
    embed = write_check.model_embed(outcome.notices, None)
    duplicate, contradictions = dedup.find_duplicate(store.load().of_kind("decision"), "decision", raw, embed,
                                                     limit=dedup.EMBED_CANDIDATES)  # fmt: skip
    outcome.contradictions = contradictions
    for match in contradictions:
        other = match.record.id
        outcome.notices.append(f"contradicts {write_check._describe(match)} (same topic, opposite advice): consider "
                               f"`lore link {{new_id}} {other} contradicts` or `lore supersede {other} {{new_id}}`")  # fmt: skip
    if duplicate is None:
        return outcome_of(outcome)
    return outcome_of(DuplicateError(
        f"likely duplicate of {write_check._describe(duplicate)}: {duplicate.similarity:.0%} similar ({duplicate.layer})",
        existing_id=duplicate.record.id, similarity=duplicate.similarity))  # fmt: skip


@pytest.mark.parametrize("limit", [dedup.EMBED_CANDIDATES, 5])
def test_the_check_answers_as_it_did_over_a_whole_load(store: Store, data_dir: Path, limit: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    # limit 5: the shortlist (41 decisions here) picks the records compared, as at 10,000.
    monkeypatch.setattr(dedup, "EMBED_CANDIDATES", limit)
    append(data_dir / DECISIONS, decision("dec-feed0001", "Cache rendered invoices in Redis", "rendering is slow"))
    for text, rationale in NEW_TEXTS:
        raw = {"decision": text, "rationale": rationale}
        assert checked(store, raw) == whole_load(store, raw), text
    kinds = [checked(store, {"decision": t, "rationale": r})[0] for t, r in NEW_TEXTS]
    assert kinds.count("refused") >= 2 and "written" in kinds


def test_the_check_answers_as_before_on_the_demo_store(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(PROJECT_ROOT / "data", data_dir)
    store = Store(data_dir, actor="test")
    monkeypatch.setattr(dedup, "EMBED_CANDIDATES", 20)
    records = [r for r in store.load().of_kind("decision") if r.active]
    assert len(records) > 100
    for record in records[::9]:
        for raw in ({"decision": record.raw["decision"], "rationale": record.raw.get("rationale") or ""},
                    {"decision": "Do not " + record.raw["decision"].lower(), "rationale": ""},
                    {"decision": record.raw["decision"] + " for the v2 API", "rationale": "a variant"}):  # fmt: skip
            assert checked(store, raw) == whole_load(store, raw), raw


def test_a_duplicate_of_a_record_another_process_appended_is_refused(data_dir: Path) -> None:
    """CLI processes: the second loads the first's cache, finds the file grew, and still sees the new record."""
    store = Store(data_dir, actor="test")
    store.init()
    store.path(DECISIONS).write_bytes(b"".join(decision(f"dec-{i:08x}", f"Adopt service {i} for billing") for i in range(60)))

    def lore(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-P", "-m", "lore", *args], capture_output=True, text=True, timeout=120)

    first = lore("remember", "Pin the Python version in CI images", "-r", "builds drifted")
    assert first.returncode == 0, first.stderr
    assert pool.cache_path(data_dir, write_check_dir(settings())).exists()
    append(data_dir / DECISIONS, decision("dec-feed0006", "Store money as integer cents", "floats lose pennies"))
    again = lore("remember", "Store money as integer cents", "-r", "floats lose pennies")
    assert again.returncode == 3, again.stderr
    assert "dec-feed0006" in again.stderr
    same = lore("remember", "Pin the Python version in CI images", "-r", "builds drifted")
    assert same.returncode == 3 and first.stdout.split()[2].rstrip(":") in same.stderr


def test_the_numpy_shortlist_is_dedup_shortlist(data_dir: Path) -> None:
    shutil.copytree(PROJECT_ROOT / "data", data_dir)
    store = Store(data_dir, actor="test")
    p = pool.DecisionPool(data_dir)
    p.refresh(store)
    records = [r for r in store.load().of_kind("decision") if r.active]
    docs = [dedup.tokens(dedup._join(*dedup.compared_text(r.kind, r.raw))) for r in records]
    live = [e for e, alive in enumerate(p.live) if alive]
    assert [p.ids[e] for e in live] == [r.id for r in records]
    for record in records[::7]:
        query = dedup.tokens(record.raw["decision"] + " with a few unseen words: zyzzyva quux")
        stats = Bm25Stats.build([*docs, query])
        for limit in (1, 5, 30):
            expected = dedup.shortlist(query, docs, stats, limit)
            assert [live.index(e) for e in p.shortlist(query, limit)] == expected
