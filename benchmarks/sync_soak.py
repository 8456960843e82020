"""The sync soak: teammates writing at once and syncing in random order must converge without losing a record.

Three clones of one bare remote each append records of every type (spread over
the rounds, as people work in parallel) and edit a set of shared patterns; each
round one or two clones (seeded choice) run ``lore sync`` as separate processes,
two at once when two are picked, so pushes race for real and some are refused
and retried. Some rounds also mint the same decision id on two clones, each
with an edge of its own. After the rounds every clone syncs until all sit on
the remote's commit. Then:

* identical: every clone's files are byte-identical (audit log and lock aside);
* lost / duplicated: every record written carries a unique ``x_soak`` key (a
  field lore does not know, so it also checks unknown fields survive); a key
  missing from a clone is lost, a key held by two records is duplicated;
* shared patterns: each ends with the solution of its newest edit, and the edit
  counter each clone keeps in its own field equals that clone's edits;
* duplicate ids: each minted pair became two records, each with its own edge;
* ``lore doctor --json`` reports no problem on any clone.

Record writes go through ``lore.store.Store`` in this process (the CLI per
record would measure interpreter start-up, not sync); every sync is a real
``lore sync`` process and every merge runs lore's git merge driver.
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from lore.interpreter import lore_argv

KINDS = ("decision", "pattern", "anti_pattern", "lesson", "handoff", "failure", "observation")
EPOCH = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


@dataclass
class SoakSettings:
    clones: int = 3
    per_type: int = 300  # records of each type each clone appends
    shared_patterns: int = 30
    rounds: int = 50
    edits_per_round: int = 1  # shared-pattern edits per clone per round
    collisions: int = 10  # decision ids minted on two clones
    seed: int = 17


def _lore(data_dir: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(lore_argv("--data-dir", str(data_dir), *args), env=env,
                          capture_output=True, check=False)  # fmt: skip


def _check(done: subprocess.CompletedProcess[bytes], what: str) -> bytes:
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}): {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


class _Ids:
    """Ids in lore's formats from the seeded generator: the same run mints the same ids."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def new(self, kind: str, moment: datetime) -> str:
        while True:
            hex8 = f"{self.rng.getrandbits(32):08x}"
            seconds = int(moment.timestamp())
            candidate = {
                "decision": f"dec-{hex8}", "failure": f"fail-{hex8}", "observation": f"obs-{hex8}",
                "pattern": f"pat-{seconds}-{hex8[:4]}", "lesson": f"pat-{seconds}-{hex8[:4]}",
                "anti_pattern": f"anti-{seconds}-{hex8[:4]}",
                "handoff": f"session-{moment.strftime('%Y%m%d-%H%M%S')}-{hex8}",
            }[kind]  # fmt: skip
            if candidate not in self.used:
                self.used.add(candidate)
                return candidate


def _raw(kind: str, key: str, clone: int, moment: datetime) -> dict[str, Any]:
    when = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    project = ("billing-api", "web", "infra")[zlib.crc32(key.encode()) % 3]
    text = f"{key}: clone {clone} wrote this {kind.replace('_', ' ')}"
    common = {"x_soak": key, "project": project, "schema_version": 1}
    if kind == "decision":
        return {"timestamp": when, "decision": text, "rationale": "soak", "outcome": "pending", **common}
    if kind in ("pattern", "lesson"):
        extra = {"kind": "lesson", "rule": text} if kind == "lesson" else {}
        return {"name": text, "solution": "soak", "created_at": when, "confidence": 0.5, **extra, **common}
    if kind == "anti_pattern":
        return {"name": text, "symptom": "soak", "fix": "soak", "severity": "low", "created_at": when, **common}
    if kind == "handoff":
        return {"started_at": when, "ended_at": when, "summary": text,
                "handoff": {"message": text, "next_steps": [], "created_at": when}, **common}  # fmt: skip
    if kind == "failure":
        return {"timestamp": when, "error_type": "SoakError", "error_message": text, **common}
    return {"timestamp": when, "content": text, "tags": [], **common}


class _Clone:
    def __init__(self, index: int, path: Path, env: dict[str, str]) -> None:
        from lore.store import Store

        self.index = index
        self.path = path
        self.env = {**env, "LORE_ACTOR": f"soak:clone{index}"}
        self.store = Store(path, actor=f"soak:clone{index}", clock=self.now)
        self.tick = 0

    def now(self) -> datetime:
        return EPOCH + timedelta(seconds=self.tick)

    def write(self, items: list[tuple[str, str, dict[str, Any]]]) -> None:
        """Append records as ``lore remember``/``learn``/... would: one lock, one audit entry each."""
        from lore.store.fileio import append_line, atomic_write, data_lock
        from lore.store.records import Record
        from lore.store.store import JSONL_FILES, PATTERN_SECTIONS, SESSIONS

        store = self.store
        with data_lock(self.path):
            pattern_items = [(kind, raw) for kind, _, raw in items if kind in PATTERN_SECTIONS]
            if pattern_items:

                def add(document: dict[str, Any]) -> None:
                    for kind, raw in pattern_items:
                        document.setdefault(PATTERN_SECTIONS[kind], []).append(raw)

                store.rewrite_patterns(add)
            for kind, record_id, raw in items:
                if kind in JSONL_FILES:
                    append_line(store.path(JSONL_FILES[kind]), orjson.dumps(raw), durable=False)
                elif kind == "handoff":
                    atomic_write(store.path(SESSIONS) / f"{record_id}.json", orjson.dumps(raw, option=orjson.OPT_INDENT_2) + b"\n")
                store.record_audit("retain", record_id, Record(kind, record_id, raw).project, raw)

    def sync(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(lore_argv("--data-dir", str(self.path), "sync", "--json"),
                                env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def _finish(process: subprocess.Popen[bytes], started: float) -> tuple[dict[str, Any], float]:
    stdout, stderr = process.communicate()
    seconds = time.perf_counter() - started
    if process.returncode != 0:
        raise RuntimeError(f"lore sync failed ({process.returncode}): {stderr.decode(errors='replace').strip()}")
    return orjson.loads(stdout), seconds


def _tracked_files(path: Path) -> dict[str, bytes]:
    files = {}
    for item in sorted(path.rglob("*")):
        parts = item.relative_to(path).parts
        if item.is_file() and parts[0] not in (".git", "audit") and item.name != ".lore.lock":
            files["/".join(parts)] = item.read_bytes()
    return files


def run(work: Path, settings: SoakSettings | None = None, progress: Callable[[str], None] = lambda m: None) -> dict[str, Any]:
    from lore.store import Store
    from lore.sync.git import Git

    settings = settings or SoakSettings()
    rng = random.Random(settings.seed)
    ids = _Ids(random.Random(settings.seed + 1))
    started = time.perf_counter()
    work.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"LORE_INDEX_DIR": str(work / "index"), "LORE_CACHE_DIR": str(work / "cache"),
                "LORE_STATE_DIR": str(work / "state"), "LORE_HOOK": "off"})  # fmt: skip
    env.pop("LORE_DATA_DIR", None)
    remote = work / "team.git"
    Git(work).run("init", "-q", "--bare", str(remote))
    clones = [_Clone(i, work / f"clone-{i}", env) for i in range(settings.clones)]

    # The first teammate brings the shared patterns; the others join with the same two commands.
    expected: set[str] = set()
    first = clones[0]
    _check(_lore(first.path, first.env, "init", "--git"), "lore init --git")
    shared: list[str] = []
    items = []
    for k in range(settings.shared_patterns):
        pattern_id = ids.new("pattern", EPOCH)
        raw = {"id": pattern_id, **_raw("pattern", f"shared-{k}", 0, EPOCH)}
        items.append(("pattern", pattern_id, raw))
        shared.append(pattern_id)
        expected.add(f"shared-{k}")
    first.write(items)
    for clone in clones:
        if clone is not first:
            _check(_lore(clone.path, clone.env, "init", "--git"), "lore init --git")
        _check(_lore(clone.path, clone.env, "sync", "--setup", str(remote), "--json"), "lore sync --setup")

    # Every clone spreads per_type records of each kind over the rounds.
    per_round = [settings.per_type // settings.rounds + (1 if r < settings.per_type % settings.rounds else 0)
                 for r in range(settings.rounds)]  # fmt: skip
    collision_rounds = sorted(rng.sample(range(settings.rounds), min(settings.collisions, settings.rounds)))
    last_edit: dict[str, tuple[int, str]] = {}
    edit_counts: Counter[tuple[str, int]] = Counter()
    collision_edges: list[tuple[str, str]] = []  # (own record's key, collided record's key)
    minted: dict[str, str] = {}  # x_soak key -> id it was written with
    tick = 0
    sync_seconds: list[float] = []
    reports: list[dict[str, Any]] = []
    concurrent_rounds = 0
    write_seconds = sync_wall_seconds = 0.0
    for round_number in range(settings.rounds):
        writing = time.perf_counter()
        for clone in clones:
            tick += 1
            clone.tick = tick
            moment = clone.now()
            batch = []
            for kind in KINDS:
                for n in range(per_round[round_number]):
                    key = f"c{clone.index}-{kind}-{round_number}-{n}"
                    record_id = ids.new(kind, moment)
                    batch.append((kind, record_id, {"id": record_id, **_raw(kind, key, clone.index, moment)}))
                    expected.add(key)
                    minted[key] = record_id
            clone.write(batch)
            for _ in range(settings.edits_per_round):
                tick += 1
                clone.tick = tick
                pattern_id = rng.choice(shared)
                solution = f"solution of clone {clone.index} at tick {tick}"
                counter = f"x_edits_clone{clone.index}"

                def edit(raw: dict[str, Any], solution: str = solution, counter: str = counter) -> None:
                    raw["solution"] = solution
                    raw[counter] = int(raw.get(counter) or 0) + 1

                clone.store.update(pattern_id, edit)
                last_edit[pattern_id] = (tick, solution)
                edit_counts[(pattern_id, clone.index)] += 1
        if round_number in collision_rounds:
            pair = rng.sample(clones, 2)
            moment = EPOCH + timedelta(seconds=tick)
            collided = ids.new("decision", moment)
            for clone in pair:
                key = f"collision-{round_number}-c{clone.index}"
                own_key = f"collision-{round_number}-c{clone.index}-own"
                own_id = ids.new("decision", moment)
                clone.write([("decision", collided, {"id": collided, **_raw("decision", key, clone.index, moment)}),
                             ("decision", own_id, {"id": own_id, **_raw("decision", own_key, clone.index, moment)})])  # fmt: skip
                clone.store.link(own_id, collided, "depends_on")
                expected.update((key, own_key))
                minted[key], minted[own_key] = collided, own_id
                collision_edges.append((own_key, key))
        write_seconds += time.perf_counter() - writing
        picked = rng.sample(clones, 2 if rng.random() < 0.3 else 1)
        concurrent_rounds += len(picked) > 1
        t = time.perf_counter()
        running = [(clone.sync(), time.perf_counter()) for clone in picked]
        for process, begun in running:
            report, seconds = _finish(process, begun)
            reports.append(report)
            sync_seconds.append(seconds)
        sync_wall_seconds += time.perf_counter() - t
        progress(f"sync soak: round {round_number + 1}/{settings.rounds} ({', '.join(f'clone {c.index}' for c in picked)}, "
                 f"{time.perf_counter() - t:.1f}s)")

    # Everyone syncs until all clones sit on the remote's commit.
    final_syncs = 0
    for _ in range(3):
        for clone in clones:
            t = time.perf_counter()
            report, seconds = _finish(clone.sync(), t)
            sync_wall_seconds += time.perf_counter() - t
            reports.append(report)
            sync_seconds.append(seconds)
            final_syncs += 1
        heads = {Git(c.path).head() for c in clones} | {Git(work).out("--git-dir", str(remote), "rev-parse", "main")}
        if len(heads) == 1:
            break

    progress("sync soak: checking the clones")
    files = [_tracked_files(c.path) for c in clones]
    identical = all(f == files[0] for f in files[1:])
    per_clone: list[dict[str, Any]] = []
    for clone in clones:
        snapshot = Store(clone.path).load()
        keys = Counter(str(r.raw.get("x_soak")) for r in snapshot.records.values() if r.raw.get("x_soak"))
        by_key = {str(r.raw["x_soak"]): r for r in snapshot.records.values() if r.raw.get("x_soak")}
        wrong_shared = 0
        for pattern_id in shared:
            record = snapshot.records.get(pattern_id)
            if record is None:
                wrong_shared += 1
                continue
            want = last_edit.get(pattern_id)
            counts_ok = all(int(record.raw.get(f"x_edits_clone{c.index}") or 0) == edit_counts[(pattern_id, c.index)] for c in clones)
            if (want is not None and record.raw.get("solution") != want[1]) or not counts_ok:
                wrong_shared += 1
        edges = {(e.source, e.target, e.relation) for e in snapshot.edges}
        wrong_edges = sum(
            1 for own, target in collision_edges
            if own not in by_key or target not in by_key
            or (by_key[own].id, by_key[target].id, "depends_on") not in edges
        )  # fmt: skip
        doctor = _lore(clone.path, clone.env, "doctor", "--json")
        doctor_report: dict[str, Any] = orjson.loads(doctor.stdout) if doctor.stdout.strip() else {"ok": False, "problems": ["no output"]}
        per_clone.append({
            "clone": clone.index, "records": len(snapshot.records),
            "lost": len(expected - set(keys)), "duplicated": sum(n - 1 for n in keys.values() if n > 1),
            "duplicate_ids": len(snapshot.duplicate_ids),
            "renamed": sum(1 for key, record in by_key.items() if minted.get(key, record.id) != record.id),
            "shared_patterns_wrong": wrong_shared, "collision_edges_wrong": wrong_edges,
            # The clone's data: the agent side (hooks, helper, hook log) is this machine's, not the clone's.
            "doctor_ok": doctor_report.get("problems") == [] and doctor.returncode in (0, 1),
            "doctor_problems": len(doctor_report.get("problems") or []),
            "audit_entries": doctor_report.get("audit_entries"),
        })  # fmt: skip
    return {
        "settings": asdict(settings),
        "records_written": len(expected),
        "per_clone": per_clone,
        "identical": identical,
        "same_commit": len({Git(c.path).head() for c in clones}) == 1,
        "lost": max(c["lost"] for c in per_clone),
        "duplicated": max(c["duplicated"] for c in per_clone),
        "doctor_clean": all(c["doctor_ok"] for c in per_clone),
        "syncs": len(reports), "final_syncs": final_syncs, "concurrent_rounds": concurrent_rounds,
        "merges": sum(1 for r in reports if r.get("merged")),
        "push_retries": sum(max(0, int(r.get("push_attempts") or 0) - 1) for r in reports),
        "conflicts_resolved": sum(len(r.get("conflicts") or []) for r in reports),
        "renames": sum(len(r.get("renames") or []) for r in reports),
        "sync_seconds_p50": round(statistics.median(sync_seconds), 2),
        "sync_seconds_max": round(max(sync_seconds), 2),
        "write_seconds": round(write_seconds, 1), "sync_wall_seconds": round(sync_wall_seconds, 1),
        "seconds": round(time.perf_counter() - started, 1),
    }  # fmt: skip
