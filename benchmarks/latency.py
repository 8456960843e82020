"""Whole-process latency of `lore search` and the prompt hook, beside the floors of the machine.

Each run is a fresh process timed from spawn to exit (under GNU time, which
reports its peak RSS and adds about a millisecond to every command alike). Commands are interleaved within each round, so background load
on the machine spreads evenly over them.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks import bash_original, compile_bytecode

# The timing helpers `lore bench` shares live in lore.measure; the harness's modules import them from here.
from lore.measure import (
    PYTHON_PASS,
    WRITE_COLD,  # noqa: F401  (the harness's tests and report name the rows from here)
    WRITE_WARM,  # noqa: F401
    WRITES_PER_ROUND,
    Sample,
    hook_event,
    lore_command,
    run_once,
    summary,
    time_writes,
    write_row,  # noqa: F401
)

Progress = Callable[[str], None]


def _quiet(message: str) -> None:
    return None


def first_content_word(question: str) -> str:
    from benchmarks.quality import _content_words

    words = _content_words(question)
    return max(words[:4], key=len) if words else "commit"


def server_available(env: Mapping[str, str], cwd: Path) -> bool:
    done = subprocess.run([*lore_command(), "server", "--help"], env=dict(env), cwd=cwd, capture_output=True,
                          check=False, timeout=60)  # fmt: skip
    return done.returncode == 0 and b"start" in done.stdout


# The warm helper's trivial prompt: refused by ``hook.is_trivial`` before any search.
TRIVIAL_PROMPT = "thanks"
WARM_TRIVIAL = "lore hook prompt (warm helper, trivial prompt)"


def measure(data_dir: Path, index_dir: Path, work: Path, queries: Sequence[str], *, runs: int,
            progress: Progress = _quiet, warm_helper: bool = True) -> dict[str, Any]:  # fmt: skip
    """p50/p95 wall ms and peak RSS of each command over ``runs`` rounds after one warm-up round."""
    state = work / "state"
    cache = work / "cache"
    cwd = work / "cwd"
    for path in (state, cache, cwd):
        path.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("LORE_LLM_CMD", "LORE_HOOK", "LORE_SERVER")}
    env.update(LORE_DATA_DIR=str(data_dir), LORE_INDEX_DIR=str(index_dir), LORE_STATE_DIR=str(state),
               LORE_CACHE_DIR=str(cache), LORE_SERVER="off", PYTHONDONTWRITEBYTECODE="1")  # fmt: skip
    lore = lore_command()
    compile_bytecode()

    # The cold hook as shipped (LORE_HOOK_COLD=light: BM25 reranked, without numpy) and the whole
    # pipeline in process (LORE_HOOK_COLD=full: what every cold prompt ran before).
    full_env = {**env, "LORE_HOOK_COLD": "full"}
    # The original bash Lore's `lore search` on the same decisions (benchmarks/bash_original.py).
    original = bash_original.baselines(data_dir, work / "bash-original", env)

    def commands(i: int) -> dict[str, tuple[list[str], bytes | None, dict[str, str]]]:
        query = queries[i % len(queries)]
        return {
            "python -c pass": ([*PYTHON_PASS], None, env),
            "grep -ril": (["grep", "-ril", first_content_word(query), str(data_dir)], None, env),
            "lore search --json": ([*lore, "search", query, "--json"], None, env),
            "lore hook prompt (cold)": ([*lore, "hook", "prompt"], hook_event(query, cwd), env),
            "lore hook prompt (cold, LORE_HOOK_COLD=full)": ([*lore, "hook", "prompt"], hook_event(query, cwd), full_env),
            **original.commands(query, first_content_word(query)),
        }

    samples: dict[str, list[Sample]] = {}
    for i in range(runs + 1):  # round 0 is the warm-up
        for name, (command, stdin, command_env) in commands(i).items():
            sample = run_once(command, command_env, cwd, stdin)
            if i > 0:
                samples.setdefault(name, []).append(sample)
        progress(f"latency: round {i}/{runs}")

    notes = list(original.notes)
    if not warm_helper:
        notes.append("warm-helper hook latency not requested")
    elif server_available(env, cwd):
        started = subprocess.run([*lore, "server", "start", "--idle", "120"], env=env, cwd=cwd, capture_output=True,
                                 check=False, timeout=120)  # fmt: skip
        if started.returncode == 0:
            try:
                for i in range(runs + 1):
                    query = queries[(i + 7) % len(queries)]
                    sample = run_once([*lore, "hook", "prompt"], env, cwd, hook_event(query, cwd))
                    if i > 0:
                        samples.setdefault("lore hook prompt (warm helper)", []).append(sample)
                    # A trivial prompt is refused before any search: it should cost little beyond the interpreter.
                    sample = run_once([*lore, "hook", "prompt"], env, cwd, hook_event(TRIVIAL_PROMPT, cwd))
                    if i > 0:
                        samples.setdefault(WARM_TRIVIAL, []).append(sample)
                    # The floor again, in the same rounds as the helper's rows (the machine's load moves).
                    sample = run_once([*PYTHON_PASS], env, cwd)
                    if i > 0:
                        samples.setdefault("python -c pass", []).append(sample)
                    # A terminal search asks the running helper too (lore.agent.remote).
                    sample = run_once([*lore, "search", query, "--json"], env, cwd)
                    if i > 0:
                        samples.setdefault("lore search --json (warm helper)", []).append(sample)
            finally:
                subprocess.run([*lore, "server", "stop"], env=env, cwd=cwd, capture_output=True, check=False, timeout=60)
        else:
            notes.append("lore server start failed: " + started.stderr.decode(errors="replace")[-300:])
    else:
        notes.append("no `lore server` command: warm-helper hook latency not measured")

    floor = statistics.median(s.ms for s in samples["python -c pass"])
    floor_cpus = [s.cpu_ms for s in samples["python -c pass"] if s.cpu_ms > 0]
    floor_cpu = statistics.median(floor_cpus) if floor_cpus else 0.0
    grep = statistics.median(s.ms for s in samples["grep -ril"])
    baseline_p50 = {key: statistics.median(s.ms for s in samples[row]) for key, row in
                    (("ratio_to_sqlite3_fts5", bash_original.SQLITE_ROW), ("ratio_to_bash_original", bash_original.ORIGINAL_ROW))
                    if samples.get(row)}  # fmt: skip
    result: dict[str, Any] = {"runs": runs, "commands": {}, "notes": notes}
    for name, got in samples.items():
        figures: dict[str, Any] = summary([s.ms for s in got])
        figures["ratio_to_python_floor"] = round(figures["p50"] / floor, 2) if floor else None
        figures["p95_ratio_to_python_floor"] = round(figures["p95"] / floor, 2) if floor else None
        figures["ratio_to_grep"] = round(figures["p50"] / grep, 2) if grep else None
        for key, base in baseline_p50.items():
            figures[key] = round(figures["p50"] / base, 2) if base else None
        # CPU time (user + system) moves less with the machine's load than wall time: its ratio too.
        cpu = [s.cpu_ms for s in got if s.cpu_ms >= 0]
        figures["cpu_ms_p50"] = round(statistics.median(cpu), 1) if cpu else None
        figures["cpu_ratio_to_python_floor"] = round(figures["cpu_ms_p50"] / floor_cpu, 2) if cpu and floor_cpu else None
        rss = [s.maxrss_kb for s in got if s.maxrss_kb >= 0]
        figures["peak_rss_mib"] = round(max(rss) / 1024, 1) if rss else None
        figures["failures"] = sum(1 for s in got if s.returncode != 0)
        if name.startswith("lore hook"):
            figures["injected_share"] = round(sum(1 for s in got if s.stdout.strip()) / len(got), 3)
        if name.startswith("lore search"):
            figures["with_results_share"] = round(sum(1 for s in got if b'"id"' in s.stdout) / len(got), 3)
        if name in bash_original.BASELINE_ROWS:
            figures["with_results_share"] = round(sum(1 for s in got if bash_original.result_lines(name, s.stdout)) / len(got), 3)
        result["commands"][name] = figures
    return result


def stage_timings(data_dir: Path, index_dir: Path, queries: Sequence[str], now: float) -> dict[str, Any]:
    """In-process pipeline time per stage (p50, p95 over the queries), warm session, full pipeline."""
    from benchmarks.quality import Searcher
    from lore.rank.pipeline import SearchOptions

    searcher = Searcher(data_dir, index_dir)
    searcher.query(queries[0], SearchOptions(now=now))  # warm-up: opens the index and loads the model
    per_stage: dict[str, list[float]] = {}
    for text in queries:
        response = searcher.query(text, SearchOptions(now=now))
        for stage, ms in response.timings_ms.items():
            per_stage.setdefault(stage, []).append(float(ms))
    searcher.close()
    return {stage: summary(values) for stage, values in per_stage.items()}


# The rows of the write measurement (``measure_writes``): lore.measure times them, for `lore bench` too.
MCP_REMEMBER = "MCP remember (lore mcp, one server)"
WRITES_PER_RUN = WRITES_PER_ROUND + 1  # and MCP remember


def measure_writes(data_dir: Path, index_dir: Path, work: Path, decisions: Sequence[tuple[str, str]], *, runs: int,
                   progress: Progress = _quiet) -> dict[str, Any]:  # fmt: skip
    """``lore.measure.time_writes`` (each write command without and with a warm helper, each beside
    `python -c pass`) on the store in ``data_dir``, then MCP `remember` (one `lore mcp`, a `tools/call` per run
    after a first call that loads what the check needs).

    ``decisions``: (decision, rationale) pairs, none stored yet, ``WRITES_PER_RUN`` a run.
    The store grows by the records written: measure it last.
    """
    from benchmarks.mcpstart import INITIALIZE, _Client

    state, cache, cwd = work / "state", work / "cache", work / "cwd"
    for path in (state, cache, cwd):
        path.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("LORE_LLM_CMD", "LORE_HOOK", "LORE_SERVER", "LORE_ACTOR")}
    env.update(LORE_DATA_DIR=str(data_dir), LORE_INDEX_DIR=str(index_dir), LORE_STATE_DIR=str(state),
               LORE_CACHE_DIR=str(cache), LORE_SERVER="off", PYTHONDONTWRITEBYTECODE="1")  # fmt: skip
    lore = lore_command()
    compile_bytecode()
    texts = iter(decisions)
    timed = time_writes(lore, env, cwd, texts, runs, progress=progress)
    result: dict[str, Any] = {"runs": runs, "commands": timed["commands"], "notes": timed["notes"], "load_average": _load()}
    notes: list[str] = result["notes"]

    # MCP: one server, its remember tool called once per run (the first call loads what the check needs).
    mcp = _Client([*lore, "mcp"], env, cwd)
    try:
        mcp.send(INITIALIZE)
        mcp.reply(1)
        mcp.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        calls: list[float] = []
        errors = 0
        for i in range(runs + 1):
            decision, rationale = next(texts)
            begun = time.perf_counter()
            mcp.send({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
                      "params": {"name": "remember", "arguments": {"decision": decision, "rationale": rationale}}})  # fmt: skip
            reply = mcp.reply(10 + i)
            calls.append((time.perf_counter() - begun) * 1000)
            errors += bool(reply.get("error") or reply.get("result", {}).get("isError"))
        figures = {"first call ms": round(calls[0], 2), **summary(calls[1:]), "errors": errors}
        result["commands"][MCP_REMEMBER] = figures
    except (OSError, TimeoutError, EOFError, ValueError) as error:
        notes.append(f"MCP remember not measured: {error!r}")
    finally:
        mcp.close()
    return result


def _load() -> list[float] | None:
    """The machine's load average (1, 5, 15 min) when the figures were taken: the wall times move with it."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None
