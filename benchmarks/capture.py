"""The ``capture`` section: what session capture costs the Stop hook, and how well it captures.

Hook cost: ``lore hook stop`` as a whole process (python start-up included), with
capture on and off, alternated in the same run, on a generated 5,000-line transcript
in Claude Code's format; plus how long the detached capture then takes.

Quality: heuristic capture on the labelled transcripts of ``tests/data/transcripts/``
(``labels.jsonl``), each into a fresh data dir. A captured record is a true positive
when it matches a not yet matched expected item of the same kind (its text contains
every ``match`` substring, case-insensitive); precision = true positives / records
captured, recall = true positives / items expected. Also: the labelled secrets found
anywhere in the data dir or the capture state (must be 0) and the records a second
capture of the same transcript adds (must be 0).

Backfill: ``lore import claude-code`` as a whole process over a Claude Code config dir
holding ``BACKFILL_TRANSCRIPTS`` transcripts (copies of the labelled ones under new
session ids, in seven project folders): seconds, records added, and a second run's
seconds and records (must add nothing); and the same over ``BACKFILL_SMALL``
transcripts first, for the growth of the per-transcript time with the import's size
(linear: a ratio near 1).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from lore.interpreter import lore_argv

Progress = Callable[[str], None]
HOOK_LINES = 5_000
HOOK_RUNS = 5
BACKFILL_TRANSCRIPTS = 1000
BACKFILL_SMALL = 100


def _quiet(message: str) -> None:
    return None


def labelled_dir() -> Path | None:
    from benchmarks import PROJECT_ROOT

    path = PROJECT_ROOT / "tests" / "data" / "transcripts"
    return path if (path / "labels.jsonl").is_file() else None


def synthetic_transcript(path: Path, lines: int = HOOK_LINES, session: str = "bench-session") -> None:
    """``lines`` lines in Claude Code's format: prompts, tool calls (some failing), results, replies."""
    out: list[bytes] = []
    n = 0
    base = {"sessionId": session, "cwd": "/home/dev/projects/bench", "timestamp": "2026-11-20T10:00:00.000Z"}
    while len(out) < lines:
        n += 1
        tid = f"toolu_{n}"
        fails = n % 7 == 0
        out.append(orjson.dumps({**base, "type": "user", "message": {"role": "user", "content": f"step {n}: run the tests for module {n % 40}"}}))
        out.append(orjson.dumps({**base, "type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": f"python -m pytest tests/test_m{n % 40}.py"}}]}}))
        result = f"Exit code 1\nE   AssertionError: expected {n} got {n + 1}" if fails else f"{n % 9 + 1} passed"
        out.append(orjson.dumps({**base, "type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": tid, "content": result, "is_error": fails}]}}))
        out.append(orjson.dumps({**base, "type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": f"Module {n % 40} checked; moving on."}]}}))
    path.write_bytes(b"\n".join(out[:lines]) + b"\n")


def _stats(values: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(values), 1), "max": round(max(values), 1), "n": len(values)}


def hook_cost(work: Path, progress: Progress = _quiet) -> dict[str, Any]:
    from benchmarks import settings as lore_settings
    from lore.sessions import state
    from lore.store import Store

    data = work / "capture-hook-data"
    Store(data).init()
    transcript = work / "capture-hook.jsonl"
    synthetic_transcript(transcript)
    env = {**os.environ, "LORE_DATA_DIR": str(data), "LORE_INDEX_DIR": str(work / "capture-hook-index"),
           "LORE_STATE_DIR": str(work / "capture-hook-state"), "LORE_CACHE_DIR": str(work / "capture-hook-cache"),
           "LORE_SERVER": "off", "LORE_HOOK_HANDOFF": "off"}  # fmt: skip
    env.pop("LORE_CAPTURE", None)
    on: list[float] = []
    off: list[float] = []
    background: list[float] = []
    for run in range(HOOK_RUNS):
        for capture in (False, True):
            session = f"bench-{run}"
            event = json.dumps({"session_id": session, "transcript_path": str(transcript), "hook_event_name": "Stop"})
            args = lore_argv("hook", "stop", *(["--capture"] if capture else []))
            started = time.perf_counter()
            done = subprocess.run(args, input=event, capture_output=True, text=True, env=env, timeout=60)
            elapsed = (time.perf_counter() - started) * 1000
            if done.returncode != 0 or done.stdout.strip():
                raise RuntimeError(f"lore hook stop exited {done.returncode}: {done.stdout[:200]} {done.stderr[-300:]}")
            (on if capture else off).append(elapsed)
            if capture:  # wait for the background capture before the next timing (it shares the CPU)
                with _env(env):
                    state_file = state.root(data, lore_settings()) / f"{session}.json"
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline and not state_file.exists():
                    time.sleep(0.05)
                background.append((time.perf_counter() - started) * 1000)
        progress(f"capture: hook run {run + 1}/{HOOK_RUNS}")
    added = len(Store(data).load().records)
    return {"transcript_lines": HOOK_LINES, "hook_ms_capture_on": _stats(on), "hook_ms_capture_off": _stats(off),
            "ratio_on_to_off": round(statistics.median(on) / statistics.median(off), 2),
            "background_capture_ms": _stats(background), "records_after_runs": added}  # fmt: skip


class _env:
    def __init__(self, values: dict[str, str]) -> None:
        self.values, self.saved = values, dict(os.environ)

    def __enter__(self) -> None:
        os.environ.update(self.values)

    def __exit__(self, *exc: object) -> None:
        os.environ.clear()
        os.environ.update(self.saved)


def record_text(record: Any) -> str:
    raw = record.raw
    extra = " ".join(str(raw.get(k) or "") for k in ("command", "fix", "rule", "decision", "rationale"))
    return f"{record.content} {extra}".lower()


def score(captured: list[Any], expected: list[dict[str, Any]]) -> tuple[int, Counter[str], Counter[str], Counter[str]]:
    """True positives, and per kind: captured, expected, matched."""
    unmatched = list(range(len(expected)))
    per_captured: Counter[str] = Counter(r.kind for r in captured)
    per_expected: Counter[str] = Counter(str(e["kind"]) for e in expected)
    per_matched: Counter[str] = Counter()
    hits = 0
    for record in captured:
        text = record_text(record)
        for index in unmatched:
            item = expected[index]
            if item["kind"] == record.kind and all(str(m).lower() in text for m in item.get("match") or []):
                unmatched.remove(index)
                hits += 1
                per_matched[record.kind] += 1
                break
    return hits, per_captured, per_expected, per_matched


def quality(work: Path, folder: Path, progress: Progress = _quiet) -> dict[str, Any]:
    from benchmarks import settings as lore_settings
    from lore.sessions.pipeline import capture_session
    from lore.store import Store

    labels = [json.loads(line) for line in (folder / "labels.jsonl").read_text().splitlines() if line.strip()]
    totals = {"captured": Counter[str](), "expected": Counter[str](), "matched": Counter[str]()}
    secrets_stored: list[str] = []
    second_run_added = 0
    misses: list[str] = []
    extras: list[str] = []
    for number, label in enumerate(labels, 1):
        data, state_dir = work / f"capture-q{number}", work / f"capture-q{number}-state"
        store = Store(data)
        store.init()
        with _env({"LORE_STATE_DIR": str(state_dir), "LORE_CACHE_DIR": str(work / "capture-q-cache")}):
            for name in ("LORE_AUTO_ACCEPT", "LORE_CAPTURE_METHOD"):
                os.environ.pop(name, None)
            path = folder / label["file"]
            capture_session(store, path, method="heuristic", distill=False, settings=lore_settings())
            second_run_added += len(capture_session(store, path, method="heuristic", distill=False,
                                                    settings=lore_settings()).added)  # fmt: skip
            captured = list(store.load().records.values())
        expected = list(label.get("expected") or [])
        hits, per_captured, per_expected, per_matched = score(captured, expected)
        totals["captured"].update(per_captured)
        totals["expected"].update(per_expected)
        totals["matched"].update(per_matched)
        if hits < len(captured):
            extras.append(f"{label['file']}: {len(captured) - hits} unmatched capture(s)")
        if hits < len(expected):
            misses.append(f"{label['file']}: {len(expected) - hits} expected item(s) missed")
        blobs = [p.read_bytes() for base in (data, state_dir) for p in base.rglob("*") if p.is_file()]
        for secret in label.get("secrets") or []:
            if any(secret.encode() in blob for blob in blobs):
                secrets_stored.append(f"{label['file']}: {secret[:6]}…")
        progress(f"capture: {number}/{len(labels)} {label['file']}")
    captured_n, expected_n = sum(totals["captured"].values()), sum(totals["expected"].values())
    matched_n = sum(totals["matched"].values())
    per_kind = {kind: {"captured": totals["captured"][kind], "expected": totals["expected"][kind],
                       "matched": totals["matched"][kind]}
                for kind in sorted(set(totals["captured"]) | set(totals["expected"]))}  # fmt: skip
    return {"transcripts": len(labels), "captured": captured_n, "expected": expected_n, "true_positives": matched_n,
            "precision": round(matched_n / captured_n, 3) if captured_n else None,
            "recall": round(matched_n / expected_n, 3) if expected_n else None,
            "per_kind": per_kind, "secrets_stored": len(secrets_stored), "secrets_detail": secrets_stored,
            "second_run_added": second_run_added, "misses": misses, "extras": extras}  # fmt: skip


def backfill(work: Path, folder: Path, count: int, progress: Progress = _quiet) -> dict[str, Any]:
    import shutil
    import uuid

    from lore.store import Store

    sources = sorted(folder.glob("*.jsonl"))
    config = work / f"backfill-{count}-claude"
    for number in range(count):
        project = config / "projects" / f"-home-dev-projects-p{number % 7}"
        project.mkdir(parents=True, exist_ok=True)
        shutil.copy(sources[number % len(sources)], project / f"{uuid.UUID(int=number + 1)}.jsonl")
    data = work / f"backfill-{count}-data"
    Store(data).init()
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(config), "LORE_DATA_DIR": str(data),
           "LORE_INDEX_DIR": str(work / f"backfill-{count}-index"), "LORE_STATE_DIR": str(work / f"backfill-{count}-state"),
           "LORE_CACHE_DIR": str(work / "backfill-cache"), "LORE_SERVER": "off"}  # fmt: skip
    for name in ("LORE_AUTO_ACCEPT", "LORE_CAPTURE_METHOD"):
        env.pop(name, None)
    runs = []
    for attempt in (1, 2):
        progress(f"capture: lore import claude-code over {count} transcripts (run {attempt})")
        started = time.perf_counter()
        done = subprocess.run(lore_argv("import", "claude-code"), capture_output=True, text=True,
                              env=env, timeout=3600)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"lore import claude-code exited {done.returncode}: {done.stderr[-300:]}")
        runs.append((round(time.perf_counter() - started, 2), len(Store(data).load().records)))
    (first_s, first_records), (second_s, second_records) = runs
    return {"transcripts": count, "seconds": first_s, "records": first_records,
            "transcripts_per_s": round(count / first_s, 1), "ms_per_transcript": round(1000 * first_s / count, 1),
            "rerun_seconds": second_s,
            "rerun_added": second_records - first_records}  # fmt: skip


def measure(work: Path, progress: Progress = _quiet, *, backfill_transcripts: int = BACKFILL_TRANSCRIPTS,
            backfill_small: int = BACKFILL_SMALL) -> dict[str, Any]:  # fmt: skip
    work.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"hook": hook_cost(work, progress)}
    folder = labelled_dir()
    result["quality"] = quality(work, folder, progress) if folder else None
    result["backfill_small"] = backfill(work, folder, backfill_small, progress) if folder else None
    result["backfill"] = backfill(work, folder, backfill_transcripts, progress) if folder else None
    if folder:  # the per-transcript time of the large import over that of the small one, same run
        result["backfill_growth"] = round(result["backfill"]["ms_per_transcript"] / result["backfill_small"]["ms_per_transcript"], 2)
    return result
