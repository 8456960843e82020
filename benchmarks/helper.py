"""The warm helper as the hooks use it: the first prompt after a session starts, and a soak.

``first_prompt``: each round starts with no helper, runs the session-start hook
(which spawns one and returns) and then the prompt hook, twice: at once (what
``claude -p`` does: the prompt follows the session start within milliseconds)
and once the helper is ready (a person typing for longer than the helper's
warm-up). Beside them, the same hooks with the helper turned off and the
interpreter's floor, all in the same rounds; and the spawn itself, timed in
process.

``soak``: one helper answers 2,000 prompts over its socket while 200 records
are written through the store (the helper refreshes in the background after
each); its resident memory, open file descriptors and threads are sampled
along the way, and every request that got no answer is counted.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

Progress = Callable[[str], None]


def _quiet(message: str) -> None:
    return None


def _proc(pid: int) -> dict[str, int]:
    """Resident memory (KiB), open file descriptors and threads of a process (Linux /proc)."""
    figures: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                figures["rss_kib"] = int(line.split()[1])
            elif line.startswith("Threads:"):
                figures["threads"] = int(line.split()[1])
        figures["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        pass
    return figures


def _wait_ready(index_dir: Path, timeout: float, settings: Any) -> dict[str, Any] | None:
    from lore.agent import client

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        status = client.read_status(index_dir, settings)
        if status is not None:
            return status
        time.sleep(0.01)
    return None


def _session_event(cwd: Path) -> bytes:
    return json.dumps({"session_id": "lore-bench", "cwd": str(cwd), "hook_event_name": "SessionStart",
                       "source": "startup"}).encode()  # fmt: skip


def first_prompt(data_dir: Path, index_dir: Path, work: Path, queries: Sequence[str], *, rounds: int,
                 progress: Progress = _quiet) -> dict[str, Any]:  # fmt: skip
    """Whole-process ms of the session-start and prompt hooks around a helper the session start spawns."""
    from benchmarks import environment
    from benchmarks import settings as lore_settings
    from benchmarks.latency import compile_bytecode, hook_event, lore_command, run_once, summary
    from lore.agent import client
    from lore.agent.hook import DEFAULT_DEADLINE_MS

    state, cache, cwd = work / "state", work / "cache", work / "cwd"
    for path in (state, cache, cwd):
        path.mkdir(parents=True, exist_ok=True)
    base = {k: v for k, v in os.environ.items() if k not in ("LORE_LLM_CMD", "LORE_HOOK", "LORE_SERVER")}
    base.update(LORE_DATA_DIR=str(data_dir), LORE_INDEX_DIR=str(index_dir), LORE_STATE_DIR=str(state),
                LORE_CACHE_DIR=str(cache), PYTHONDONTWRITEBYTECODE="1")  # fmt: skip
    on, off = {**base, "LORE_SERVER": "on"}, {**base, "LORE_SERVER": "off"}
    lore = lore_command()
    compile_bytecode()
    samples: dict[str, list[Any]] = {}
    warmups: list[float] = []
    spawns: list[float] = []

    def keep(name: str, sample: Any) -> None:
        samples.setdefault(name, []).append(sample)

    with environment(LORE_STATE_DIR=str(state), LORE_CACHE_DIR=str(cache), LORE_DATA_DIR=str(data_dir),
                     LORE_INDEX_DIR=str(index_dir), LORE_SERVER="on"):  # fmt: skip
        settings = lore_settings()  # the section's environment, as the hooks it runs read it
        try:
            for i in range(rounds + 1):  # round 0 is the warm-up
                query = queries[i % len(queries)]
                client.stop(index_dir, settings)
                start_event, prompt_event = _session_event(cwd), hook_event(query, cwd)
                measured = {
                    "python -c pass": run_once([sys.executable, "-c", "pass"], base, cwd),
                    "session-start hook, helper off": run_once([*lore, "hook", "session-start"], off, cwd, start_event),
                    "prompt hook, helper off (cold)": run_once([*lore, "hook", "prompt"], off, cwd, prompt_event),
                }
                measured["session-start hook, spawning the helper"] = run_once(
                    [*lore, "hook", "session-start"], on, cwd, _session_event(cwd))
                returned = time.monotonic()
                measured["first prompt at once (helper warming up)"] = run_once(
                    [*lore, "hook", "prompt"], on, cwd, hook_event(query, cwd))
                ready = _wait_ready(index_dir, 300, settings)
                if ready is not None:
                    warmed = time.monotonic() - returned
                    measured["first prompt once the helper is ready"] = run_once(
                        [*lore, "hook", "prompt"], on, cwd, hook_event(queries[(i + 3) % len(queries)], cwd))
                if i > 0:
                    for name, sample in measured.items():
                        keep(name, sample)
                    if ready is not None:
                        warmups.append(warmed * 1000)
                progress(f"first prompt: round {i}/{rounds}")
            # The spawn alone, in process: what the session-start hook adds to a session.
            for _ in range(max(3, rounds // 2)):
                client.stop(index_dir, settings)
                started = time.perf_counter()
                client.ensure_started(index_dir, data_dir, settings)
                spawns.append((time.perf_counter() - started) * 1000)
        finally:
            client.stop(index_dir, settings)

    floor = statistics.median(s.ms for s in samples["python -c pass"])
    result: dict[str, Any] = {"rounds": rounds, "deadline_ms": DEFAULT_DEADLINE_MS, "commands": {}}
    for name, got in samples.items():
        figures: dict[str, Any] = summary([s.ms for s in got])
        figures["ratio_to_python_floor"] = round(figures["p50"] / floor, 2) if floor else None
        figures["failures"] = sum(1 for s in got if s.returncode != 0)
        if "prompt" in name:
            figures["injected_share"] = round(sum(1 for s in got if s.stdout.strip()) / len(got), 3)
        result["commands"][name] = figures
    result["helper_ready_after_session_start_ms"] = summary(warmups)
    result["spawn_in_process_ms"] = summary(spawns)
    return result


# -- the soak ------------------------------------------------------------------------------


def _ask(socket_path: Path, request: dict[str, Any], timeout: float) -> tuple[str, int]:
    """One request on the helper's socket: ("ok", chars of context) or (what went wrong, 0)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(timeout)
            client.connect(str(socket_path))
            client.sendall(json.dumps(request).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = client.recv(65536)
                if not chunk:
                    break
                data += chunk
    except (OSError, TimeoutError) as error:
        return type(error).__name__, 0
    try:
        reply = json.loads(data)
    except ValueError:
        return "unreadable reply", 0
    if not reply.get("ok"):
        return f"error: {reply.get('error')}", 0
    return "ok", len(reply.get("text") or "")


def soak(data_dir: Path, index_dir: Path, work: Path, prompts: Sequence[str], *, total_prompts: int = 2000,
         total_writes: int = 200, progress: Progress = _quiet) -> dict[str, Any]:  # fmt: skip
    """2,000 prompts and 200 writes through one helper: memory, descriptors and lost answers."""
    from benchmarks import environment
    from benchmarks import settings as lore_settings
    from benchmarks.latency import summary
    from lore import capture
    from lore.agent import client
    from lore.capture import WriteOptions
    from lore.store import Store

    state, cache = work / "soak-state", work / "soak-cache"
    every = max(1, total_prompts // max(1, total_writes))
    with environment(LORE_STATE_DIR=str(state), LORE_CACHE_DIR=str(cache), LORE_DATA_DIR=str(data_dir),
                     LORE_INDEX_DIR=str(index_dir), LORE_SERVER="on"):  # fmt: skip
        settings = lore_settings()  # the section's environment, as the helper it starts reads it
        pid = client.start_detached(index_dir, settings, idle=600, data_dir=data_dir)
        started = time.monotonic()
        status = _wait_ready(index_dir, 300, settings)
        if status is None:
            client.stop(index_dir, settings)
            raise RuntimeError(f"the helper did not come up; see {client.server_paths(index_dir, settings)['log']}")
        ready_s = time.monotonic() - started
        socket_path = client.server_paths(index_dir, settings)["socket"]
        store = Store(data_dir, actor="bench-soak")
        outcomes: dict[str, int] = {}
        latencies: list[float] = []
        empty = 0
        writes = 0
        write_ms: list[float] = []
        samples: list[dict[str, Any]] = [{"prompts": 0, "writes": 0, **_proc(pid)}]
        resolved = str(data_dir.resolve())
        try:
            for i in range(total_prompts):
                if i % every == every // 2 and writes < total_writes:
                    t = time.perf_counter()
                    capture.remember(store, f"Soak decision {writes}: cap the export pool at {writes + 4} workers",
                                     project="soak", rationale=f"Soak write {writes} through the store",
                                     options=WriteOptions(check_duplicates=False))  # fmt: skip
                    write_ms.append((time.perf_counter() - t) * 1000)
                    writes += 1
                request = {"op": "context", "prompt": prompts[i % len(prompts)], "cwd": None, "budget": 1500,
                           "data_dir": resolved}  # fmt: skip
                t = time.perf_counter()
                outcome, chars = _ask(socket_path, request, timeout=10.0)
                latencies.append((time.perf_counter() - t) * 1000)
                outcomes[outcome] = outcomes.get(outcome, 0) + 1
                empty += outcome == "ok" and chars == 0
                if (i + 1) % 100 == 0:
                    current = client.read_status(index_dir, settings) or {}
                    samples.append({"prompts": i + 1, "writes": writes, "refreshes": current.get("refreshes"),
                                    "helper_pid": current.get("pid"), **_proc(pid)})  # fmt: skip
                    progress(f"soak: {i + 1}/{total_prompts} prompts, {writes} writes, "
                             f"RSS {samples[-1].get('rss_kib', 0) / 1024:.0f} MiB, fds {samples[-1].get('fds')}")  # fmt: skip
            # Let the last refresh land, then take the final sample.
            end = time.monotonic() + 120
            while time.monotonic() < end and (client.read_status(index_dir, settings) or {}).get("refreshing"):
                time.sleep(0.2)
            final = client.read_status(index_dir, settings) or {}
            samples.append({"prompts": total_prompts, "writes": writes, "refreshes": final.get("refreshes"),
                            "helper_pid": final.get("pid"), "final": True, **_proc(pid)})  # fmt: skip
        finally:
            client.stop(index_dir, settings)
    first = samples[0].get("rss_kib")
    settled = next((s.get("rss_kib") for s in samples if s["prompts"] >= total_prompts // 10), first)
    last = samples[-1].get("rss_kib")

    def growth(base: int | None) -> float | None:
        return round(100.0 * (last - base) / base, 1) if base and last else None

    lost = total_prompts - outcomes.get("ok", 0)
    return {
        "prompts": total_prompts, "writes": writes, "helper_ready_s": round(ready_s, 2),
        "outcomes": outcomes, "lost_answers": lost, "empty_answers": empty,
        "same_helper_throughout": all(s.get("helper_pid") in (None, pid) for s in samples),
        "refreshes": samples[-1].get("refreshes"),
        "request_ms": summary(latencies), "write_ms": summary(write_ms),
        "rss_mib": {"start": round(first / 1024, 1) if first else None,
                    "after_10pct": round(settled / 1024, 1) if settled else None,
                    "end": round(last / 1024, 1) if last else None,
                    "peak": round(max(s.get("rss_kib", 0) for s in samples) / 1024, 1)},
        "rss_growth_pct_from_start": growth(first), "rss_growth_pct_after_warmup": growth(settled),
        "fds": {"start": samples[0].get("fds"), "end": samples[-1].get("fds"),
                "max": max(s.get("fds", 0) for s in samples)},
        "threads": {"start": samples[0].get("threads"), "end": samples[-1].get("threads")},
        "samples": samples,
    }  # fmt: skip
