"""Index build cost: lore's full build and single-record refresh beside a bare Whoosh writer.

The bare writer indexes the text lore gave Whoosh (``Record.fields()``) with the
schema it used (``benchmarks.whoosh_index.schema()``, lore/index/lexical.py then), single-process, and nothing else.
Builds wrote that index until format 11 (quoted phrases now come from the BM25
index's term sequence: docs/whoosh-choice.md); the row stays as the reference the
build is measured against, the part that once took most of it.
The embedding model is loaded before any timing starts (a separate embedding
worker process, where lore uses one, loads its own inside the timing).
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks import corpora
from lore.interpreter import lore_argv


def _locations(data_dir: Path, index_dir: Path) -> Any:
    from benchmarks import locations

    return locations(data_dir, index_dir)


def warm_model() -> None:
    from benchmarks import settings as lore_settings
    from lore.embedder import get_embedder
    from lore.errors import ModelError

    with contextlib.suppress(ModelError):
        get_embedder(lore_settings().embed_model)
    from lore.embedder import get_query_encoder

    with contextlib.suppress(ModelError):
        get_query_encoder(lore_settings().embed_model)  # what builds and refreshes embed with (its load: ~55 ms, paid by each `lore index` process)


def full_build(data_dir: Path, index_dir: Path, repeats: int) -> dict[str, Any]:
    from lore.index.manager import IndexManager, _tree_size

    warm_model()
    seconds, reports = [], []
    for _ in range(repeats):
        report = IndexManager(_locations(data_dir, index_dir)).build(rebuild=True)
        seconds.append(report.seconds)
        reports.append(report)
    last = reports[-1]
    return {
        "records": last.records, "mode": last.mode, "embeddings": last.embeddings,
        "seconds_p50": round(statistics.median(seconds), 3), "seconds_all": [round(s, 3) for s in seconds],
        "phases_last": {k: round(v, 3) for k, v in last.timings.items()},
        "index_bytes": _tree_size(index_dir),
    }  # fmt: skip


def bare_whoosh(data_dir: Path, work: Path, repeats: int) -> dict[str, Any]:
    """Single-process Whoosh writer over the same field text, same schema; text prepared untimed."""
    from whoosh import index

    from benchmarks import whoosh_index
    from lore.index.manager import _tree_size
    from lore.store import Store

    records = list(Store(data_dir).load().records.values())
    docs = []
    for record in records:
        fields = record.fields()
        docs.append((record.id, fields["title"], fields["body"], fields["extra"], fields["tags"]))
    seconds = []
    size = 0
    for _ in range(repeats):
        target = work / "bare-whoosh"
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        started = time.perf_counter()
        ix = index.create_in(str(target), whoosh_index.schema())
        writer = ix.writer(limitmb=256)
        for record_id, title, body, extra, tags in docs:
            writer.add_document(id=record_id, title=title, body=body, extra=extra, tags=tags)
        writer.commit()
        ix.close()
        seconds.append(time.perf_counter() - started)
        size = _tree_size(target)
        shutil.rmtree(target, ignore_errors=True)
    return {"seconds_p50": round(statistics.median(seconds), 3), "seconds_all": [round(s, 3) for s in seconds],
            "index_bytes": size}  # fmt: skip


def incremental(data_dir: Path, index_dir: Path, repeats: int, timestamp: str) -> dict[str, Any]:
    """Append one decision, then ``IndexManager.build()``; median over ``repeats`` appends."""
    from lore.index.manager import IndexManager

    warm_model()
    seconds, modes, noop = [], [], []
    for number in range(repeats):
        noop.append(IndexManager(_locations(data_dir, index_dir)).build().seconds)
        record_id = f"dec-ffff{number:04x}"
        corpora.append_decision(data_dir, corpora.decision_raw(
            record_id, timestamp, f"Benchmark refresh record {number}: cap pack window memory on small hosts",
            "Repacking on a 1 GiB runner ran out of memory; cap pack.windowMemory so incremental refreshes stay cheap.",
            tags=["bench"], project="git",
        ))  # fmt: skip
        report = IndexManager(_locations(data_dir, index_dir)).build()
        seconds.append(report.seconds)
        modes.append(report.mode)
    # The figure: what one new record costs beyond a no-op ``lore index`` (same run).
    beyond = [s - n for s, n in zip(seconds, noop, strict=True)]
    return {"seconds_p50": round(statistics.median(seconds), 3), "seconds_all": [round(s, 3) for s in seconds],
            "noop_seconds_p50": round(statistics.median(noop), 3),
            "beyond_noop_seconds_p50": round(statistics.median(beyond), 3), "modes": modes}  # fmt: skip


def _lore_index(env: dict[str, str]) -> tuple[float, str]:
    import subprocess

    started = time.perf_counter()
    done = subprocess.run(lore_argv("index"), env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"lore index exited {done.returncode}: {done.stderr.strip()[-300:]}")
    return seconds, done.stdout.strip()


def stop_helpers_of(index_dir: Path, timeout: float = 15.0) -> int:
    """SIGTERM every ``lore server run`` serving ``index_dir`` (found through /proc) and wait for them to go."""
    import os
    import signal

    marker = f"LORE_INDEX_DIR={index_dir}".encode()
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if b"server\0run" in (proc / "cmdline").read_bytes() and marker in (proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except (OSError, ValueError):
            continue
    for pid in found:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + timeout
    while time.monotonic() < end and any(Path(f"/proc/{pid}").exists() for pid in found):
        time.sleep(0.05)
    return len(found)


def whole_process(data_dir: Path, index_dir: Path, work: Path, repeats: int, timestamp: str) -> dict[str, Any]:
    """What a user waits for: ``lore index`` as a process, a no-op run against one right after one new decision.

    Alternating pairs (no-op, then append one decision and refresh), medians over ``repeats``;
    ``python -c pass`` timed in the same loop for scale. The child processes read bytecode
    from a cache of their own (``PYTHONPYCACHEPREFIX``, filled by an untimed first run), as an
    installed lore does: an environment with ``PYTHONDONTWRITEBYTECODE`` set would otherwise
    compile every module of lore on every run (~0.15 s here), which no figure should include.
    """
    import os
    import subprocess
    import sys

    env = {**os.environ, "LORE_DATA_DIR": str(data_dir), "LORE_INDEX_DIR": str(index_dir),
           "PYTHONPYCACHEPREFIX": str(work / "pycache")}  # fmt: skip
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    # A warm helper left serving this index (the first-prompt and latency sections start
    # them, each with its own cache dir) refreshes it in the background after each append,
    # racing the refresh this measures: end every one.
    stop_helpers_of(index_dir)
    _lore_index(env)  # untimed: brings the index up to date and fills the bytecode cache
    noop, refresh, python, modes = [], [], [], []
    for number in range(repeats):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
        python.append(time.perf_counter() - started)
        seconds, out = _lore_index(env)
        if not out.startswith("Index is up to date"):
            raise RuntimeError(f"expected a no-op run, got: {out}")
        noop.append(seconds)
        corpora.append_decision(data_dir, corpora.decision_raw(
            f"dec-eeee{number:04x}", timestamp, f"Whole-process refresh record {number}: cap pack window memory",
            "Repacking on a 1 GiB runner ran out of memory; cap pack.windowMemory so refreshes stay cheap.",
            tags=["bench"], project="git",
        ))  # fmt: skip
        seconds, out = _lore_index(env)
        if not out.startswith("Refreshed index: 1 added"):
            raise RuntimeError(f"expected a refresh adding one record, got: {out}")
        refresh.append(seconds)
        modes.append(out)
    beyond = [r - n for r, n in zip(refresh, noop, strict=True)]
    return {"noop_seconds_p50": round(statistics.median(noop), 3), "noop_seconds_all": [round(s, 3) for s in noop],
            "refresh_seconds_p50": round(statistics.median(refresh), 3),
            "refresh_seconds_all": [round(s, 3) for s in refresh],
            "beyond_noop_seconds_p50": round(statistics.median(beyond), 3),
            "beyond_noop_seconds_all": [round(s, 3) for s in beyond],
            "python_seconds_p50": round(statistics.median(python), 3), "repeats": repeats}  # fmt: skip


def rebuild_process(data_dir: Path, index_dir: Path, work: Path, repeats: int) -> dict[str, Any]:
    """``lore index --rebuild --json`` as a user runs it: whole process, peak RSS, time per part, beside ``python -c pass``.

    Alternating with the floor, medians over ``repeats``; the build report's ``timings``
    (seconds per part) are the last run's. Bytecode comes from a cache of the run's own,
    filled by an untimed first run (``whole_process``).
    """
    import json
    import os

    from lore.measure import PYTHON_PASS, run_once

    env = {**os.environ, "LORE_DATA_DIR": str(data_dir), "LORE_INDEX_DIR": str(index_dir),
           "PYTHONPYCACHEPREFIX": str(work / "pycache")}  # fmt: skip
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    work.mkdir(parents=True, exist_ok=True)
    stop_helpers_of(index_dir)
    _lore_index(env)  # untimed: fills the bytecode cache
    command = [*lore_argv("index", "--rebuild", "--json")]
    seconds, floors, rss, cpu = [], [], [], []
    timings: dict[str, Any] = {}
    for _ in range(repeats):
        floors.append(run_once(PYTHON_PASS, env, work).ms / 1000)
        sample = run_once(command, env, work)
        if sample.returncode != 0:
            raise RuntimeError(f"lore index --rebuild exited {sample.returncode}")
        seconds.append(sample.ms / 1000)
        rss.append(sample.maxrss_kb)
        cpu.append(sample.cpu_ms / 1000)
        with contextlib.suppress(ValueError):
            timings = json.loads(sample.stdout).get("timings") or {}
    floor = statistics.median(floors)
    p50 = statistics.median(seconds)
    return {"seconds_p50": round(p50, 3), "seconds_all": [round(s, 3) for s in seconds],
            "cpu_seconds_p50": round(statistics.median(cpu), 3), "python_seconds_p50": round(floor, 4),
            "ratio_to_python_floor": round(p50 / floor, 1) if floor else None,
            "peak_rss_mib": round(max(rss) / 1024, 1) if rss and max(rss) > 0 else None,
            "timings_last": {k: round(float(v), 3) for k, v in timings.items()}, "repeats": repeats}  # fmt: skip
