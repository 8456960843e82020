"""The team harness: many clones of one bare remote over a store of real records, syncing all at once.

One clone holds a store of real decisions (the git-commit corpus) and publishes
it; the others join with the two commands every teammate runs (``lore init
--git``, ``lore sync --setup URL``). Then, in each racing round, every clone
appends a few new decisions (the next commits of the corpus) and all run
``lore sync`` at once, as separate processes. A final round does the same one
clone at a time (a sync with nobody else syncing), and every clone syncs until
all sit on the remote's commit. Measured:

* sync wall time, p50/p95/max, racing and alone; push retries; syncs that gave up
  (with git's words) and which went through a rebase or a record merge;
* bytes the remote's and a clone's object stores grew by, per record synced,
  and each object store's loose objects and packs at the end; a clone's ``.git``
  against the size of its record files;
* the first ``lore search`` after a pull against a no-op ``lore index`` on the
  same clone (its index built before the final round), and whether that refresh
  took the delta path or rebuilt;
* convergence: identical record files everywhere, no record lost (each
  written id is on every clone), no id held twice.

``sharded`` (the default) splits clone 0's store with ``lore migrate --shard`` before it
publishes (timed), so every clone's records live in month shards and a sync rewrites the
current month's file; ``sharded=False`` keeps the single ``decisions.jsonl``. The new
decisions of the rounds are stamped with the time they are written, as ``lore remember``
stamps them (the corpus's own dates are years old).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from benchmarks import corpora
from lore.interpreter import lore_argv
from lore.store.layout import DECISIONS, is_sharded, jsonl_files, shard_dir, shard_name
from lore.store.records import format_time, parse_time

QUERY = "pack window memory"


@dataclass
class TeamSettings:
    clones: int = 8
    records: int = 20000  # decisions in the shared store before the rounds
    rounds: int = 3  # racing rounds (every clone at once), then one round one clone at a time
    per_round: int = 3  # decisions each clone appends before each of its syncs
    search: bool = True  # time the first search after a pull (builds one clone's index first)
    sharded: bool = True  # month shards (lore migrate --shard before publishing), else the single decisions.jsonl


def _dir_bytes(path: Path) -> int:
    from lore.index.layout import tree_size

    return tree_size(path)


def _objects(git_dir: Path) -> dict[str, int]:
    """Loose objects and packs of an object store, and its size in bytes."""
    objects = git_dir / "objects"
    loose = sum(1 for d in objects.glob("[0-9a-f][0-9a-f]") for _ in d.iterdir())
    packs = sum(1 for _ in (objects / "pack").glob("*.pack"))
    return {"loose": loose, "packs": packs, "bytes": _dir_bytes(objects)}


def _percentile(values: list[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))], 2)


def _spread(values: list[float]) -> dict[str, Any]:
    return {"n": len(values), "p50": _percentile(values, 0.5), "p95": _percentile(values, 0.95),
            "max": round(max(values), 2) if values else None}  # fmt: skip


class _Clone:
    def __init__(self, index: int, path: Path, work: Path, env: dict[str, str]) -> None:
        self.index = index
        self.path = path
        self.env = {**env, "LORE_ACTOR": f"team:clone{index}", "LORE_INDEX_DIR": str(work / f"index-{index}")}

    def run(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(lore_argv("--data-dir", str(self.path), *args), env=self.env,
                              capture_output=True, check=False)  # fmt: skip

    def start_sync(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(lore_argv("--data-dir", str(self.path), "sync", "--json"), env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def _check(done: subprocess.CompletedProcess[bytes], what: str) -> bytes:
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}): {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


class _Syncs:
    """Every sync's outcome: wall seconds, the report (or the error of one that gave up)."""

    def __init__(self) -> None:
        self.racing: list[float] = []
        self.alone: list[float] = []
        self.reports: list[dict[str, Any]] = []
        self.gave_up: list[str] = []

    def finish(self, process: subprocess.Popen[bytes], started: float, into: list[float]) -> None:
        stdout, stderr = process.communicate()
        into.append(time.perf_counter() - started)
        if process.returncode != 0:
            self.gave_up.append(stderr.decode(errors="replace").strip().splitlines()[0][:300] if stderr.strip() else "no message")
            return
        self.reports.append(orjson.loads(stdout))


def _ids_in(clone: Path) -> Counter[str]:
    counts: Counter[str] = Counter()
    for path in jsonl_files(clone, DECISIONS):
        for line in path.read_bytes().splitlines():
            if line.strip():
                counts[str(orjson.loads(line).get("id"))] += 1
    return counts


def _records_bytes(clone: Path) -> int:
    return sum(path.stat().st_size for path in jsonl_files(clone, DECISIONS))


def _append(clone: Path, raw: dict[str, Any]) -> None:
    """Append a decision where ``lore remember`` would: the single file, or the shard of its month."""
    if not is_sharded(clone, DECISIONS):
        corpora.append_decision(clone, raw)
        return
    path = clone / shard_dir(DECISIONS) / shard_name(parse_time(raw.get("timestamp")))
    with path.open("ab") as handle:
        handle.write(orjson.dumps(raw) + b"\n")


def _record_files(clone: Path) -> dict[str, bytes]:
    found = {}
    for item in sorted(clone.rglob("*")):
        parts = item.relative_to(clone).parts
        if item.is_file() and parts[0] not in (".git", "audit", "backups") and item.name != ".lore.lock":
            found["/".join(parts)] = item.read_bytes()
    return found


def run(shared: Path, work: Path, settings: TeamSettings | None = None,
        progress: Callable[[str], None] = lambda m: None) -> dict[str, Any]:  # fmt: skip
    from lore.sync.git import Git

    settings = settings or TeamSettings()
    started = time.perf_counter()
    work.mkdir(parents=True, exist_ok=True)
    new_per_clone = settings.per_round * (settings.rounds + 1)
    wanted = settings.records + settings.clones * new_per_clone
    raws = corpora.commit_raws_at_least(shared, wanted)
    if len(raws) < wanted:
        raise RuntimeError(f"the git corpus holds {len(raws)} distinct decisions, {wanted} needed")
    store_raws, fresh = raws[: settings.records], raws[settings.records : wanted]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"LORE_CACHE_DIR": str(work / "cache"), "LORE_STATE_DIR": str(work / "state"), "LORE_HOOK": "off",
                "LORE_SERVER": "off"})  # fmt: skip
    env.pop("LORE_DATA_DIR", None)
    remote = work / "team.git"
    Git(work).run("init", "-q", "--bare", str(remote))
    clones = [_Clone(i, work / f"clone-{i}", work, env) for i in range(settings.clones)]

    progress(f"team: clone 0 publishes {settings.records:,} decisions")
    first = clones[0]
    _check(first.run("init", "--git"), "lore init --git")
    corpora.write_decisions(first.path, store_raws)
    migrate_seconds = None
    if settings.sharded:
        t = time.perf_counter()
        _check(first.run("migrate", "--shard"), "lore migrate --shard")
        migrate_seconds = round(time.perf_counter() - t, 2)
        progress(f"team: clone 0 split its store into month shards ({migrate_seconds}s)")
    t = time.perf_counter()
    _check(first.run("sync", "--setup", str(remote), "--json"), "lore sync --setup (publish)")
    publish_seconds = time.perf_counter() - t
    join_seconds = []
    for clone in clones[1:]:
        _check(clone.run("init", "--git"), "lore init --git")
        t = time.perf_counter()
        _check(clone.run("sync", "--setup", str(remote), "--json"), "lore sync --setup (join)")
        join_seconds.append(time.perf_counter() - t)
        progress(f"team: clone {clone.index} joined ({join_seconds[-1]:.1f}s)")
    records_bytes = _records_bytes(first.path)
    remote_start, clone_start = _objects(remote), _objects(first.path / ".git")

    syncs = _Syncs()
    written: list[str] = [str(r["id"]) for r in store_raws]
    next_fresh = iter(fresh)

    def write_round() -> None:
        for clone in clones:
            for _ in range(settings.per_round):
                raw = {**next(next_fresh), "timestamp": format_time(datetime.now(UTC))}
                _append(clone.path, raw)
                written.append(str(raw["id"]))

    for round_number in range(settings.rounds):
        write_round()
        t = time.perf_counter()
        running = [(clone.start_sync(), time.perf_counter()) for clone in clones]
        for process, begun in running:
            syncs.finish(process, begun, syncs.racing)
        progress(f"team: racing round {round_number + 1}/{settings.rounds}: {time.perf_counter() - t:.1f}s, "
                 f"{len(syncs.gave_up)} gave up so far")  # fmt: skip

    # The final round, one clone at a time. The searching clone syncs last, so its sync pulls the
    # others' records; it searched after writing its own (its index holds them), as a teammate would.
    searcher = clones[-1]
    search: dict[str, Any] = {}
    write_round()
    if settings.search:
        progress("team: building the searching clone's index")
        t = time.perf_counter()
        _check(searcher.run("search", QUERY, "--json"), "lore search")
        search["build_seconds"] = round(time.perf_counter() - t, 2)
    for clone in clones:
        t = time.perf_counter()
        process = clone.start_sync()
        syncs.finish(process, t, syncs.alone)
        if clone is searcher and syncs.reports and process.returncode == 0:
            search["pulled"] = sum(syncs.reports[-1]["received"]["new"].values())
    if settings.search:
        t = time.perf_counter()
        _check(searcher.run("search", QUERY, "--json"), "lore search")
        search["first_search_seconds"] = round(time.perf_counter() - t, 3)
        search["after_pull"] = _index_meta(work / f"index-{searcher.index}")
        t = time.perf_counter()
        _check(searcher.run("search", QUERY, "--json"), "lore search")
        search["next_search_seconds"] = round(time.perf_counter() - t, 3)
        t = time.perf_counter()
        _check(searcher.run("index"), "lore index (no-op)")
        search["noop_index_seconds"] = round(time.perf_counter() - t, 3)
        search["beyond_noop_seconds"] = round(search["first_search_seconds"] - search["noop_index_seconds"], 3)
    progress("team: final round done; converging")
    converge_syncs = 0
    for _ in range(3):
        for clone in clones:
            done = clone.run("sync", "--json")
            converge_syncs += 1
            if done.returncode != 0:
                syncs.gave_up.append(done.stderr.decode(errors="replace").strip()[:300])
        heads = {Git(c.path).head() for c in clones} | {Git(work).out("--git-dir", str(remote), "rev-parse", "main")}
        if len(heads) == 1:
            break

    progress("team: checking the clones")
    _wait_for_gc(remote)
    files = [_record_files(c.path) for c in clones]
    expected = set(written)
    per_clone = []
    for clone in clones:
        ids = _ids_in(clone.path)
        git_dir = clone.path / ".git"
        per_clone.append({"clone": clone.index, "records": sum(ids.values()), "lost": len(expected - set(ids)),
                          "duplicated": sum(n - 1 for n in ids.values() if n > 1), "git_bytes": _dir_bytes(git_dir),
                          **{f"objects_{k}": v for k, v in _objects(git_dir).items()}})  # fmt: skip
    synced = settings.clones * new_per_clone
    remote_end, clone_end = _objects(remote), _objects(first.path / ".git")
    # What the remote keeps once git's prune expiry has passed: the objects of lost pushes gone.
    Git(work).run("--git-dir", str(remote), "gc", "-q", "--prune=now")
    remote_pruned = _objects(remote)
    records_end = _records_bytes(first.path)
    shards = [p.stat().st_size for p in jsonl_files(first.path, DECISIONS) if p.parent.name != "data"]
    reports = syncs.reports
    return {
        "settings": asdict(settings),
        "records_bytes": records_end, "records_bytes_start": records_bytes, "migrate_seconds": migrate_seconds,
        "shards": len(shards), "largest_shard_bytes": max(shards, default=0),
        "publish_seconds": round(publish_seconds, 2), "join": _spread(join_seconds),
        "racing": _spread(syncs.racing), "alone": _spread(syncs.alone),
        "syncs": len(syncs.racing) + len(syncs.alone), "gave_up": len(syncs.gave_up), "gave_up_messages": syncs.gave_up[:5],
        "push_retries": sum(max(0, int(r.get("push_attempts") or 0) - 1) for r in reports),
        "max_push_attempts": max((int(r.get("push_attempts") or 0) for r in reports), default=0),
        "backoff_seconds": round(sum(float(r.get("backoff_seconds") or 0) for r in reports), 1),
        "rebased": sum(1 for r in reports if r.get("rebased")), "merged": sum(1 for r in reports if r.get("merged")),
        "repacked": sum(1 for r in reports if r.get("repacked")),
        "records_synced": synced,
        "remote_bytes_per_record": round((remote_end["bytes"] - remote_start["bytes"]) / synced),
        "clone_bytes_per_record": round((clone_end["bytes"] - clone_start["bytes"]) / synced),
        "remote_bytes_per_record_pruned": round((remote_pruned["bytes"] - remote_start["bytes"]) / synced),
        "remote_objects": remote_end, "remote_objects_pruned": remote_pruned, "clone0_objects": clone_end,
        "clone_git_to_records": round(max(c["git_bytes"] for c in per_clone) / records_end, 2),
        "search": search,
        "per_clone": per_clone, "converge_syncs": converge_syncs,
        "identical": all(f == files[0] for f in files[1:]),
        "same_commit": len({Git(c.path).head() for c in clones}) == 1,
        "lost": max(c["lost"] for c in per_clone), "duplicated": max(c["duplicated"] for c in per_clone),
        "seconds": round(time.perf_counter() - started, 1),
    }  # fmt: skip


def _wait_for_gc(repository: Path, limit_seconds: float = 120.0) -> None:
    """Let a `git gc --auto` the remote started after a push (in the background) finish before sizing it."""
    deadline = time.monotonic() + limit_seconds
    while (repository / "gc.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.2)


def _index_meta(index_root: Path) -> dict[str, Any]:
    """The searching clone's live index generation: built by a full build or refreshed, and its revision.

    A delta refresh writes a new revision of the same generation (revision > 1, ``delta_table`` among its
    files); a full build or full refresh writes delta-free files.
    """
    from lore.index.layout import current_dir

    found = [current_dir(p.parent) for p in index_root.rglob("CURRENT")]
    live = next((d for d in found if d is not None and (d / "meta.json").exists()), None)
    if live is None:
        return {}
    meta = orjson.loads((live / "meta.json").read_bytes())
    return {"generation": live.name, "revision": meta.get("revision"),
            "delta": "delta_table" in (meta.get("files") or {})}  # fmt: skip
