"""`lore bench`: what lore costs on your own store, timed the way the project's harness times it.

``measure_store`` reads the configured data dir and never writes to it, nor to the
index, state or cache dirs it uses: the writes it times go to a temporary copy of the
data dir, and every measured process runs on a temporary copy of the live index
generation (brought up to date there by the first ``lore index``) with temporary state
and cache dirs (the hook's session memory and the access log it
appends go there; the access log is copied in first, so reinforcement ranks as it
does for you). The warm-helper row starts a helper of its own on that copy, when the
settings let the hooks start one, and stops it afterwards.

The timing helpers here (``run_once``, ``summary``, ``hook_event``, ``lore_command``)
are the ones the project's full evaluation harness uses (``python -m benchmarks`` in a
checkout, which ships in no wheel).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lore.interpreter import lore_argv

if TYPE_CHECKING:
    from lore.paths import Locations
    from lore.settings import Settings

Progress = Callable[[str], None]

# The ratio base of every whole-process figure: the interpreter starting and stopping.
PYTHON_PASS = [sys.executable, "-c", "pass"]
TIME_BIN = Path("/usr/bin/time")


def _quiet(message: str) -> None:
    return None


def lore_command() -> list[str]:
    """The installed ``lore`` console script beside this interpreter, else ``python -m lore``."""
    script = Path(sys.executable).parent / "lore"
    if script.exists():
        return [str(script)]
    found = shutil.which("lore")
    return [found] if found else lore_argv()


@dataclass
class Sample:
    ms: float
    maxrss_kb: int
    returncode: int
    stdout: bytes
    cpu_ms: float = -1.0  # user + system time (GNU time): less moved by other work on a shared machine than wall time


def run_once(command: Sequence[str], env: Mapping[str, str], cwd: Path, stdin: bytes | None = None) -> Sample:
    """Spawn, feed stdin, wait: wall milliseconds and the child's own peak RSS.

    Peak RSS comes from GNU time (``%M``) when /usr/bin/time exists: a child
    spawned straight from the harness would report the harness's own RSS,
    which Linux carries over into the child's high-water mark at exec.
    """
    rss_kb, cpu_ms = -1, -1.0
    with tempfile.NamedTemporaryFile(prefix="lore-bench-rss-") as rss_file:
        full = list(command)
        if TIME_BIN.exists():
            full = [str(TIME_BIN), "-f", "%U %S %M", "-o", rss_file.name, *full]
        started = time.perf_counter()
        done = subprocess.run(full, input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
                              capture_output=True, env=dict(env), cwd=cwd, check=False)  # fmt: skip
        elapsed = (time.perf_counter() - started) * 1000
        if TIME_BIN.exists():
            fields = Path(rss_file.name).read_text(errors="replace").split()
            if len(fields) >= 3 and fields[-1].isdigit():  # (a failed command's line comes first)
                rss_kb = int(fields[-1])
                with contextlib.suppress(ValueError):
                    cpu_ms = (float(fields[-3]) + float(fields[-2])) * 1000
    return Sample(elapsed, rss_kb, done.returncode, done.stdout, cpu_ms)


def summary(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {}
    p95 = ordered[min(len(ordered) - 1, max(0, round(0.95 * (len(ordered) - 1))))]
    return {"p50": round(statistics.median(ordered), 2), "p95": round(p95, 2), "min": round(ordered[0], 2),
            "max": round(ordered[-1], 2), "n": len(ordered)}  # fmt: skip


def hook_event(prompt: str, cwd: Path) -> bytes:
    return json.dumps({
        "session_id": "lore-bench", "transcript_path": str(cwd / "transcript.jsonl"), "cwd": str(cwd),
        "hook_event_name": "UserPromptSubmit", "prompt": prompt,
    }).encode()  # fmt: skip


# -- `lore bench`: your own store ---------------------------------------------------------------

SEARCH = "lore search (in process)"
FLOOR = "python -c pass"
HOOK_COLD = "lore hook prompt (cold)"
HOOK_WARM = "lore hook prompt (warm helper)"
HOOK_TRIVIAL = "lore hook prompt (warm helper, a trivial prompt)"
TRIVIAL_PROMPT = "thanks"  # refused before any index file is opened: what it costs beyond starting Python
INDEX_FIRST = "lore index (first run on the copy)"
INDEX_NOOP = "lore index (no-op)"
QUERIES = 5
QUERY_WORDS = 8


def sample_queries(titles: Sequence[str], count: int = QUERIES) -> list[str]:
    """Up to ``count`` queries spread evenly over ``titles`` (each its first words), the same on every run."""
    usable = sorted({" ".join(t.split()[:QUERY_WORDS]) for t in titles if len(t.split()) >= 3})
    if len(usable) <= count:
        return usable
    step = len(usable) / count
    return [usable[int(i * step)] for i in range(count)]


def copy_index(index_dir: Path, target: Path) -> bool:
    """Copy the live generation of ``index_dir`` (and ``CURRENT``) into ``target``; False when there is none."""
    from lore.index.layout import CURRENT
    from lore.index.manager import IndexManager
    from lore.paths import Locations

    target.mkdir(parents=True, exist_ok=True)
    found = IndexManager(Locations(Path(), index_dir, Path())).read_meta()  # only its index dir is read
    if found is None:
        return False
    directory = found[0]
    shutil.copytree(directory, target / directory.name)
    shutil.copy(index_dir / CURRENT, target / CURRENT)
    return True


def _timed(samples: Sequence[Sample], floor: float | None) -> dict[str, Any]:
    figures: dict[str, Any] = summary([s.ms for s in samples])
    figures["ratio_to_python"] = round(figures["p50"] / floor, 2) if floor else None
    figures["p95_ratio_to_python"] = round(figures["p95"] / floor, 2) if floor else None
    figures["failures"] = sum(1 for s in samples if s.returncode != 0)
    figures["injected_share"] = round(sum(1 for s in samples if s.stdout.strip()) / len(samples), 3)
    return figures


def _bytecode_note() -> list[str]:
    if not _has_bytecode() and os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return ["lore's modules have no bytecode and PYTHONDONTWRITEBYTECODE is set: every lore process compiles "
                "them first (a wheel installed by pip has it)"]  # fmt: skip
    return []


def _has_bytecode() -> bool:
    """Whether lore's package was compiled (a process that finds no bytecode compiles each module it imports)."""
    import importlib.util

    import lore

    return Path(importlib.util.cache_from_source(str(Path(lore.__file__)))).exists()


def _time_index(lore: list[str], env: dict[str, str], cwd: Path, runs: int) -> dict[str, Any]:
    """``lore index`` on the copy: its first run (which brings the copied index up to date), then runs with nothing to do."""
    first = run_once([*lore, "index", "--json"], env, cwd)
    if first.returncode != 0:
        from lore.errors import LoreError

        raise LoreError(f"`lore index` exited {first.returncode} on the temporary copy of the index",
                        hint="run `lore index` and `lore doctor` to see why")  # fmt: skip
    mode = json.loads(first.stdout).get("mode")
    noop = [run_once([*lore, "index", "--json"], env, cwd) for _ in range(min(runs, 3))]
    return {INDEX_FIRST: {**summary([first.ms]), "mode": mode}, INDEX_NOOP: summary([s.ms for s in noop])}


def _time_searches(locations: Locations, queries: list[str], runs: int) -> tuple[float, list[float]]:
    """In process: the first search's ms (it opens the index and loads the model), then each of ``runs`` rounds of
    ``queries``' ms."""
    from lore.search import SearchSession, search, search_options

    session = SearchSession(locations)
    options = search_options(limit=10, include_candidates=True, phrases="filter")
    started = time.perf_counter()
    search(session, queries[0], options, policy="ignore", log_access=False, use_llm=False)
    first = round((time.perf_counter() - started) * 1000, 2)
    searched = []
    for _ in range(runs):
        for query in queries:
            started = time.perf_counter()
            search(session, query, options, policy="ignore", log_access=False, use_llm=False)
            searched.append((time.perf_counter() - started) * 1000)
    if session.reader is not None:
        session.reader.close()
    return first, searched


def _hook_rounds(name: str, lore: list[str], env: dict[str, str], cwd: Path, queries: list[str], runs: int,
                 floors: list[float], progress: Progress, trivial: list[Sample] | None = None) -> list[Sample]:  # fmt: skip
    """``runs`` rounds of the prompt hook after a warm-up round, each beside a ``python -c pass`` (into ``floors``),
    and a trivial prompt's (into ``trivial``, when given)."""
    taken = []
    for i in range(runs + 1):  # round 0 is the warm-up
        query = queries[i % len(queries)]
        floor = run_once(PYTHON_PASS, env, cwd)
        sample = run_once([*lore, "hook", "prompt"], env, cwd, hook_event(query, cwd))
        short = run_once([*lore, "hook", "prompt"], env, cwd, hook_event(TRIVIAL_PROMPT, cwd)) if trivial is not None else None
        if i > 0:
            floors.append(floor.ms)
            taken.append(sample)
            if trivial is not None and short is not None:
                trivial.append(short)
        progress(f"{name}: round {i}/{runs}")
    return taken


def measure_store(locations: Locations, settings: Settings, *, runs: int = 10, helper: bool = True,
                  writes: bool = True, progress: Progress = _quiet) -> dict[str, Any]:  # fmt: skip
    """Time search, the prompt hook (cold and warm), ``lore index`` and the writes on the store in ``data_dir``, read only.

    ``helper``: whether to time the prompt hook (and the writes) answered by a warm helper
    (one started on the copy for the purpose). ``writes``: whether to time the write
    commands, on a copy of the data dir (``time_writes``). Each whole-process command runs
    ``runs`` rounds after a warm-up round, interleaved with ``python -c pass`` so the ratios
    share the machine's load.
    """
    from lore.agent import client
    from lore.index.layout import tree_size
    from lore.index.manager import IndexManager
    from lore.paths import Locations
    from lore.store import Store

    data_dir, index_dir = locations.data_dir.resolve(), locations.index_dir
    locations = Locations(data_dir, index_dir, locations.state_dir, locations.embed_model)
    snapshot = Store(locations.data_dir).load()
    queries = sample_queries([record.title for record in snapshot.records.values() if record.active])
    if not queries:
        from lore.errors import NotFoundError

        raise NotFoundError(f"no record in {data_dir} has a title of three words or more to search for",
                            hint="remember a few decisions first (`lore remember ...`)")  # fmt: skip
    found = IndexManager(locations).read_meta()
    result: dict[str, Any] = {
        "data_dir": str(locations.data_dir), "index_dir": str(index_dir), "records": len(snapshot.records),
        "index_bytes": tree_size(found[0]) if found else 0,
        "index": "no usable index" if found is None else (IndexManager(locations).staleness(found[1]) or "up to date"),
        "runs": runs, "queries": queries, "timings": {}, "notes": [],
    }  # fmt: skip
    timings: dict[str, Any] = result["timings"]
    work = Path(tempfile.mkdtemp(prefix="lore-bench-"))
    lore = lore_command()
    copy = Locations(locations.data_dir, work / "index", work / "state", locations.embed_model)
    state, cwd = work / "state", work / "cwd"
    env = _copy_env(copy, work)
    try:
        if not copy_index(index_dir, copy.index_dir):
            result["notes"].append("no usable index: the first `lore index` built one in the temporary copy")
        _copy_access_log(locations, state)  # reinforcement ranks as it does for you

        progress("lore index on the copy")
        timings.update(_time_index(lore, env, cwd, runs))

        progress("lore search in process")
        result["first_search_ms"], searched = _time_searches(copy, queries, runs)
        timings[SEARCH] = summary(searched)

        floors: list[float] = []  # `python -c pass`, once in every round of either hook
        trivial: list[Sample] = []

        def rounds(name: str, command_env: dict[str, str]) -> list[Sample]:
            return _hook_rounds(name, lore, command_env, cwd, queries, runs, floors, progress,
                                trivial if name == HOOK_WARM else None)

        cold = rounds(HOOK_COLD, env)
        warm: list[Sample] = []
        if helper:
            warm = _warm_rounds(lore, env, cwd, rounds, result["notes"])
        else:
            result["notes"].append("warm helper not timed: the hooks start none (LORE_SERVER=off or `lore server disable`)")
        timings[FLOOR] = summary(floors)
        floor = statistics.median(floors)
        timings[HOOK_COLD] = _timed(cold, floor)
        if warm:
            timings[HOOK_WARM] = _timed(warm, floor)
            timings[HOOK_TRIVIAL] = _timed(trivial, floor)
        result["notes"].extend(_bytecode_note())
        if writes:
            result["writes"] = _writes_on_copy(locations.data_dir, copy.index_dir, snapshot, lore, env, work, runs,
                                               helper=helper, progress=progress)  # fmt: skip
        yours = client.read_status(index_dir, settings)
        result["your_helper"] = {"running": yours is not None, "pid": yours.get("pid") if yours else None}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result


def _copy_access_log(locations: Locations, state: Path) -> None:
    access = locations.access_log
    if access.is_file():
        (state / "access").mkdir()
        shutil.copy(access, state / "access" / access.name)


def _writes_on_copy(data_dir: Path, index_dir: Path, snapshot: Any, lore: list[str], env: dict[str, str], work: Path,
                    runs: int, *, helper: bool, progress: Progress) -> dict[str, Any]:  # fmt: skip
    """``time_writes`` on a copy of ``data_dir`` (its git history left out) and the index copy, re-pointed at it.

    The writes are your records' own titles and bodies again, with ``--force``: the duplicate
    check runs (and finds them) as on a new record, then the copy takes them anyway.
    """
    import itertools

    from lore.index.layout import META
    from lore.index.manager import IndexManager
    from lore.paths import Locations
    from lore.store.fileio import atomic_write

    data = work / "data"
    progress("writes: copying your data")
    shutil.copytree(data_dir, data, ignore=shutil.ignore_patterns(".git"))  # copy2: the index's manifest still matches
    found = IndexManager(Locations(Path(), index_dir, Path())).read_meta()
    if found is not None:
        directory, meta = found
        atomic_write(directory / META, meta._replace(data_dir=str(data.resolve())).to_json())
    records = [r for r in snapshot.records.values() if r.active and r.title.strip()]
    texts = itertools.cycle([(r.title, str(r.fields().get("body") or "")) for r in records[: max(1, WRITES_PER_ROUND * (runs + 1))]])
    write_env = {**env, "LORE_DATA_DIR": str(data)}  # LORE_SERVER=off, as for every timed process (``_copy_env``)
    return time_writes(lore, write_env, work / "cwd", texts, runs, force=True, helper=helper, progress=progress)


def _copy_env(copy: Locations, work: Path) -> dict[str, str]:
    """The environment of the commands timed on ``copy``: its directories (state, cache and a working directory
    made in ``work``), no helper started by the hooks, no LLM."""
    for name in ("state", "cache", "cwd"):
        (work / name).mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in ("LORE_LLM_CMD", "LORE_HOOK", "LORE_SERVER")}
    env.update(LORE_DATA_DIR=str(copy.data_dir), LORE_INDEX_DIR=str(copy.index_dir), LORE_STATE_DIR=str(work / "state"),
               LORE_CACHE_DIR=str(work / "cache"), LORE_SERVER="off")  # fmt: skip
    return env


def _warm_rounds(lore: list[str], env: dict[str, str], cwd: Path, rounds: Callable[[str, dict[str, str]], list[Sample]],
                 notes: list[str]) -> list[Sample]:  # fmt: skip
    """The prompt hook's rounds answered by a warm helper started on the copy (and stopped after); none, with a
    note, when it does not start."""
    on = {**env, "LORE_SERVER": "on"}
    started = subprocess.run([*lore, "server", "start", "--idle", "120"], env=on, cwd=cwd, capture_output=True,
                             check=False, timeout=180)  # fmt: skip
    if started.returncode != 0:
        notes.append("the warm helper did not start: " + started.stderr.decode(errors="replace").strip()[-300:])
        return []
    try:
        return rounds(HOOK_WARM, on)
    finally:
        subprocess.run([*lore, "server", "stop"], env=on, cwd=cwd, capture_output=True, check=False, timeout=60)


# -- writes: each write command without and with a warm helper ------------------------------------

WRITE_COLD = "lore remember (no helper)"
WRITE_WARM = "lore remember (warm helper running)"
# The write commands timed, each without and with the helper: argv after ``lore`` for a (subject, text) pair.
WRITE_KINDS: dict[str, Callable[[str, str], list[str]]] = {
    "remember": lambda subject, text: ["remember", f"--rationale={text}", "--", subject],
    "learn": lambda subject, text: ["learn", f"--solution={text[:400] or subject}", "--", subject],
    "lesson": lambda subject, text: ["lesson", f"--situation={subject}", f"--error-pattern={subject[:80]}",
                                     f"--oversight={text[:200] or subject}", "--fix=see the situation", f"--rule={subject}",
                                     "--severity=medium", "--scope=git"],
    "handoff": lambda subject, text: ["handoff", "--", f"{subject}: {text[:400]}"],
}
WRITES_PER_ROUND = 2 * len(WRITE_KINDS)  # (subject, text) pairs ``time_writes`` takes per round: each kind, cold and warm


def write_row(kind: str, warm: bool) -> str:
    return f"lore {kind} (warm helper running)" if warm else f"lore {kind} (no helper)"


def time_writes(lore: list[str], env: dict[str, str], cwd: Path, texts: Iterator[tuple[str, str]], runs: int, *,
                force: bool = False, helper: bool = True, progress: Progress = _quiet) -> dict[str, Any]:  # fmt: skip
    """Whole-process `lore remember`, `learn`, `lesson` and `handoff`, without and then with a warm helper.

    ``env`` names the (writable) data, index, state and cache dirs. Each phase runs
    ``runs`` rounds after a warm-up round, each a `python -c pass` and a write of the next
    of ``texts`` ((subject, text), ``WRITES_PER_ROUND`` a round); ``force``: written even
    when the duplicate check finds one (the check still runs). The warm-up write builds
    the duplicate check's pool; its vectors' fill is waited for, untimed. Between the
    phases `lore index` brings the index up to date, untimed. Returns ``{"commands":
    {row: figures}, "notes": [...]}``.
    """
    cache = Path(env["LORE_CACHE_DIR"])
    samples: dict[str, list[Sample]] = {}
    floors: dict[str, list[Sample]] = {}
    notes: list[str] = []

    def phase(kind: str, warm: bool) -> None:
        row = write_row(kind, warm)
        for i in range(runs + 1):  # round 0 is the warm-up
            floor = run_once(PYTHON_PASS, env, cwd)
            subject, text = next(texts)
            command = WRITE_KINDS[kind](subject, text)
            sample = run_once([*lore, *command[:1], *(["--force"] if force and kind != "handoff" else []), *command[1:]],
                              env, cwd)  # fmt: skip
            if i > 0:
                floors.setdefault(row, []).append(floor)
                samples.setdefault(row, []).append(sample)
            else:
                _wait_for_vectors_fill(cache, notes)
            progress(f"writes: {row}, round {i}/{runs}")

    for kind in WRITE_KINDS:
        phase(kind, warm=False)
    def warm_phases() -> None:
        for kind in WRITE_KINDS:
            phase(kind, warm=True)

    if helper:
        _with_helper(lore, env, cwd, warm_phases, len(WRITE_KINDS) * (runs + 1), notes)
    return {"commands": {row: _write_figures(got, floors[row]) for row, got in samples.items()}, "notes": notes}


def _with_helper(lore: list[str], env: dict[str, str], cwd: Path, phases: Callable[[], None], sent: int,
                 notes: list[str]) -> None:  # fmt: skip
    """Run ``phases`` (``sent`` writes) with a warm helper started for them on a current index, then stopped."""
    subprocess.run([*lore, "index"], env=env, cwd=cwd, capture_output=True, check=False)  # the helper serves a current index
    on = {**env, "LORE_SERVER": "on"}
    started = subprocess.run([*lore, "server", "start", "--idle", "300"], env=on, cwd=cwd, capture_output=True,
                             check=False, timeout=300)  # fmt: skip
    if started.returncode != 0:
        notes.append("lore server start failed: " + started.stderr.decode(errors="replace")[-300:])
        return
    try:
        before = _helper_writes(env)
        phases()
        deadline = time.monotonic() + 30  # the helper counts a write just after answering it
        while _helper_writes(env) - before < sent and time.monotonic() < deadline:
            time.sleep(0.02)
        answered = _helper_writes(env) - before
        if answered < sent:
            notes.append(f"the helper ran {answered} of the {sent} writes (the others ran in their own process)")
    finally:
        subprocess.run([*lore, "server", "stop"], env=on, cwd=cwd, capture_output=True, check=False, timeout=60)


def _write_figures(got: list[Sample], floors: list[Sample]) -> dict[str, Any]:
    floor = statistics.median(f.ms for f in floors)
    figures: dict[str, Any] = {"python -c pass p50": round(floor, 2), **summary([s.ms for s in got])}
    figures["ratio_to_python_floor"] = round(figures["p50"] / floor, 2) if floor else None
    cpu = [s.cpu_ms for s in got if s.cpu_ms >= 0]
    figures["cpu_ms_p50"] = round(statistics.median(cpu), 1) if cpu else None
    floor_cpu = [f.cpu_ms for f in floors if f.cpu_ms >= 0]
    figures["python -c pass cpu_ms_p50"] = round(statistics.median(floor_cpu), 1) if floor_cpu else None
    rss = [s.maxrss_kb for s in got if s.maxrss_kb >= 0]
    figures["peak_rss_mib"] = round(max(rss) / 1024, 1) if rss else None
    figures["exit_codes"] = {str(code): sum(1 for s in got if s.returncode == code) for code in sorted({s.returncode for s in got})}
    return figures


def _wait_for_vectors_fill(cache: Path, notes: list[str]) -> None:
    """Untimed: the warm-up write built the write check's pool; past ``text_vectors.INLINE_FILL`` texts a detached
    process fills its decisions' vectors (lore.curate.text_vectors). The rounds measure the writes after it."""
    started = time.monotonic()
    while list((cache / "write-check").glob("*.filling")) and time.monotonic() - started < 300:
        time.sleep(0.1)
    waited = time.monotonic() - started
    if waited >= 0.1:
        notes.append(f"the write check's vectors were filled {waited:.1f} s after the warm-up write (untimed)")


def _helper_writes(env: Mapping[str, str]) -> int:
    """The writes the helper of the index in ``env`` ran, from its status file in ``env``'s cache dir."""
    from lore.agent.client import _key

    try:
        status = json.loads((Path(env["LORE_CACHE_DIR"]) / "server" / f"{_key(Path(env['LORE_INDEX_DIR']))}.json").read_text())
    except (OSError, ValueError):
        return 0
    return int(status.get("writes", 0)) if isinstance(status, dict) else 0
