"""Run the selected benchmark sections and gather every figure into one JSON-able dict."""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import DEFAULT_SECTIONS, DEFAULT_SIZES, SETS, corpora, indexing, latency

Progress = Callable[[str], None]

# The stores of the size-dependent sections, both from the git commits: "synthetic" as the bench
# writes them (subject, the message without its trailers, the changed files as tags, straight into
# the file), "real" as a user's `lore remember SUBJECT -r MESSAGE` stores them (the whole message,
# scrubbed, no tags): longer records, what the figures on a real store were taken on.
STORES = ("synthetic", "real")
# Where each store's figures go in the results: the synthetic ones where they always were.
STORE_KEYS = {"synthetic": ("sizes", "scale"), "real": ("real_sizes", "real_scale")}


@dataclass
class BenchSettings:
    quick: bool = False
    sizes: Sequence[int] = DEFAULT_SIZES
    only: Sequence[str] = DEFAULT_SECTIONS
    sets: Sequence[str] = SETS
    latency_runs: int = 15
    write_runs: int = 20  # `lore remember` per phase (the write goals ask for a median of at least 20)
    build_repeats_small: int = 3  # full builds at sizes <= 1,000 (one at larger sizes)
    incremental_repeats: int = 3
    process_repeats: int = 7  # whole-process `lore index` pairs (no-op, one new record) per size
    stage_queries: int = 60
    first_prompt_rounds: int = 10
    soak_size: int = 10000
    soak_prompts: int = 2000
    soak_writes: int = 200
    rebuild_repeats: int = 3  # whole-process `lore index --rebuild` at sizes <= 10,000 (one at larger sizes)
    # The stores the latency, indexing and first-prompt sections build at each size (STORES).
    stores: Sequence[str] = ("synthetic", "real")
    keep_workdir: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def for_quick(cls, only: Sequence[str] = DEFAULT_SECTIONS) -> BenchSettings:
        return cls(quick=True, sizes=(1000,), only=only, latency_runs=5, write_runs=5, build_repeats_small=1, incremental_repeats=1, process_repeats=3,
                   rebuild_repeats=1,
                   stage_queries=20, first_prompt_rounds=3, soak_size=1000, soak_prompts=200, soak_writes=20)  # fmt: skip


def _quiet(message: str) -> None:
    return None


def _slope(points: list[tuple[int, float]]) -> float | None:
    """Log-log growth exponent from the smallest to the largest size (1 = linear in records)."""
    points = [(n, v) for n, v in points if v and v > 0]
    if len(points) < 2 or points[0][0] == points[-1][0]:
        return None
    (n0, v0), (n1, v1) = points[0], points[-1]
    return round(math.log(v1 / v0) / math.log(n1 / n0), 3)


def scale_curve(per_size: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Per-record cost of each size-dependent figure, and its growth exponent."""
    extractors: dict[str, tuple[str, Callable[[dict[str, Any]], float | None]]] = {
        "full build": ("ms", lambda s: s.get("indexing", {}).get("full", {}).get("seconds_p50", 0) * 1000),
        "bare Whoosh writer": ("ms", lambda s: s.get("indexing", {}).get("bare_whoosh", {}).get("seconds_p50", 0) * 1000),
        "incremental refresh": ("ms", lambda s: s.get("indexing", {}).get("incremental", {}).get("seconds_p50", 0) * 1000),
        "refresh beyond no-op": ("ms", lambda s: s.get("indexing", {}).get("incremental", {}).get("beyond_noop_seconds_p50", 0) * 1000),
        "index size": ("bytes", lambda s: s.get("indexing", {}).get("full", {}).get("index_bytes")),
        "lore search p50": ("ms", lambda s: s.get("latency", {}).get("commands", {}).get("lore search --json", {}).get("p50")),
        "hook cold p50": ("ms", lambda s: s.get("latency", {}).get("commands", {}).get("lore hook prompt (cold)", {}).get("p50")),
        "hook cold full p50": ("ms", lambda s: s.get("latency", {}).get("commands", {}).get("lore hook prompt (cold, LORE_HOOK_COLD=full)", {}).get("p50")),
        "hook warm p50": ("ms", lambda s: s.get("latency", {}).get("commands", {}).get("lore hook prompt (warm helper)", {}).get("p50")),
        "search peak RSS": ("KiB", lambda s: (s.get("latency", {}).get("commands", {}).get("lore search --json", {}).get("peak_rss_mib") or 0) * 1024),
        "pipeline total p50": ("ms", lambda s: s.get("stages", {}).get("total", {}).get("p50")),
        "grep -ril p50": ("ms", lambda s: s.get("latency", {}).get("commands", {}).get("grep -ril", {}).get("p50")),
    }  # fmt: skip
    curve: dict[str, Any] = {}
    sizes = sorted(per_size)
    for name, (unit, get) in extractors.items():
        points = []
        for n in sizes:
            try:
                value = get(per_size[n])
            except (TypeError, AttributeError):
                value = None
            if value:
                points.append((n, float(value)))
        if not points:
            continue
        curve[name] = {
            "unit": unit, "totals": {str(n): round(v, 3) for n, v in points},
            "per_record": {str(n): round(v / n, 6) for n, v in points}, "growth_exponent": _slope(points),
        }  # fmt: skip
    return curve


def run(settings: BenchSettings, shared: Path, work: Path, progress: Progress = _quiet,
        checkpoint: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:  # fmt: skip
    """Run the sections; a failing section or size is recorded in ``errors`` and the rest still run.

    ``checkpoint`` receives the results so far after every section and size (the
    CLI writes them to ``--out``, so a long run that dies keeps what it measured).
    """
    started = time.perf_counter()
    results: dict[str, Any] = {
        "machine": corpora.machine_info(),
        "settings": {"quick": settings.quick, "sizes": list(settings.sizes), "only": list(settings.only),
                     "write_runs": settings.write_runs, "stores": list(settings.stores),
                     "sets": list(settings.sets), "latency_runs": settings.latency_runs,
                     "shared_dir": str(shared)},
        "harness_seconds": {},
        "errors": [],
    }

    def failed(where: str, error: BaseException) -> None:
        message = f"{where}: {type(error).__name__}: {error}"
        results["errors"].append(message)
        progress(f"FAILED {message}")

    def save() -> None:
        if checkpoint is not None:
            checkpoint(results)

    try:
        if "quality" in settings.only:
            from benchmarks import bench_cache_dir, locomo, matrix, sets

            loaders = {**sets.all_sets(shared, quick=settings.quick), "locomo": lambda: locomo.load(bench_cache_dir())}
            results["quality"] = {}
            for name in settings.sets:
                t = time.perf_counter()
                try:
                    loaded = loaders[name]()
                    if isinstance(loaded, locomo.Locomo):
                        results["quality"][name] = locomo.run(loaded, work, progress, quick=settings.quick)
                    else:
                        results["quality"][name] = matrix.run_set(loaded, work, progress=progress)
                except locomo.Unavailable as error:
                    # Not a failure of lore: the data could not be had here. Said in the JSON and printed.
                    results["quality"][name] = {"skipped": str(error)}
                    results.setdefault("skipped", []).append(f"quality {name}: {error}")
                    progress(f"SKIPPED quality {name}: {error}")
                except Exception as error:
                    failed(f"quality {name}", error)
                results["harness_seconds"][f"quality {name}"] = round(time.perf_counter() - t, 1)
                save()
        if "stream" in settings.only:
            from benchmarks import authors

            t = time.perf_counter()
            try:
                results["stream"] = authors.run(shared, work, progress, quick=settings.quick)
            except Exception as error:
                failed("stream", error)
            results["harness_seconds"]["stream"] = round(time.perf_counter() - t, 1)
            save()
        if "duplicates" in settings.only:
            from benchmarks import duplicates

            t = time.perf_counter()
            try:
                results["duplicates"] = duplicates.evaluate_pairs(progress=progress)
            except Exception as error:
                failed("duplicates", error)
            results["harness_seconds"]["duplicates"] = round(time.perf_counter() - t, 1)
            save()
        if "import" in settings.only:
            from benchmarks import importing

            t = time.perf_counter()
            try:
                import_sizes = (500,) if settings.quick else (500, 5000)
                results["import"] = importing.measure(work, sizes=import_sizes, progress=progress)
            except Exception as error:
                failed("import", error)
            results["harness_seconds"]["import"] = round(time.perf_counter() - t, 1)
            save()
        if "surfaces" in settings.only:
            from benchmarks import surfaces

            t = time.perf_counter()
            try:
                results["surfaces"] = surfaces.measure(work, progress=progress, start_runs=settings.latency_runs)
            except Exception as error:
                failed("surfaces", error)
            results["harness_seconds"]["surfaces"] = round(time.perf_counter() - t, 1)
            save()
        if "capture" in settings.only:
            from benchmarks import capture

            t = time.perf_counter()
            try:
                results["capture"] = capture.measure(work / "capture", progress=progress,
                                                     backfill_transcripts=60 if settings.quick else capture.BACKFILL_TRANSCRIPTS,
                                                     backfill_small=20 if settings.quick else capture.BACKFILL_SMALL)
            except Exception as error:
                failed("capture", error)
            results["harness_seconds"]["capture"] = round(time.perf_counter() - t, 1)
            save()
        if any(section in settings.only for section in ("latency", "indexing", "firstprompt")):
            loaded = corpora.load_questions()
            questions = [q["question"] for q in loaded]
            answerable = [q["question"] for q in loaded if q.get("answerable", True)]
            # The commits after the largest store's: the new decisions the write latency stores.
            commits_all = corpora.load_commits(shared, max(settings.sizes) + latency.WRITES_PER_RUN * (settings.write_runs + 1) + 10)
            for store in settings.stores:
                per_size: dict[int, dict[str, Any]] = {}
                sizes_key, scale_key = STORE_KEYS[store]
                for size in sorted(settings.sizes):
                    t = time.perf_counter()
                    entry: dict[str, Any] = {"store": store}
                    per_size[size] = entry
                    label = f"size {size}" if store == "synthetic" else f"size {size} ({store})"
                    try:
                        _measure_size(settings, size, commits_all, questions, answerable, work, entry, progress, store)
                    except Exception as error:
                        failed(label, error)
                    entry["harness_seconds"] = round(time.perf_counter() - t, 1)
                    shutil.rmtree(work / f"size-{size}-index", ignore_errors=True)
                    shutil.rmtree(work / f"size-{size}-data", ignore_errors=True)
                    results[scale_key] = scale_curve(per_size)
                    results[sizes_key] = {str(k): v for k, v in per_size.items()}
                    save()
        if "sync" in settings.only:
            from benchmarks import sync_soak

            t = time.perf_counter()
            soak = sync_soak.SoakSettings(**settings.extra.get("sync", {}))
            try:
                results["sync"] = sync_soak.run(work / "sync-soak", soak, progress=progress)
                if not (results["sync"]["identical"] and results["sync"]["lost"] == 0
                        and results["sync"]["duplicated"] == 0 and results["sync"]["doctor_clean"]):  # fmt: skip
                    failed("sync", RuntimeError("the clones did not converge cleanly (see the sync table)"))
            except Exception as error:
                failed("sync", error)
            results["harness_seconds"]["sync"] = round(time.perf_counter() - t, 1)
        if "team" in settings.only:
            from benchmarks import team_sync

            t = time.perf_counter()
            team = team_sync.TeamSettings(**settings.extra.get("team", {}))
            try:
                results["team"] = team_sync.run(shared, work / "team", team, progress=progress)
                if not (results["team"]["identical"] and results["team"]["lost"] == 0
                        and results["team"]["duplicated"] == 0 and results["team"]["gave_up"] == 0):  # fmt: skip
                    failed("team", RuntimeError("the clones did not converge cleanly or a sync gave up (see the team table)"))
            except Exception as error:
                failed("team", error)
            results["harness_seconds"]["team"] = round(time.perf_counter() - t, 1)
            save()
        if "soak" in settings.only:
            t = time.perf_counter()
            try:
                results["soak"] = _soak(settings, shared, work, progress)
            except Exception as error:
                failed("soak", error)
            results["harness_seconds"]["soak"] = round(time.perf_counter() - t, 1)
            save()
    finally:
        if not settings.keep_workdir:
            shutil.rmtree(work, ignore_errors=True)
    results["harness_seconds"]["total"] = round(time.perf_counter() - started, 1)
    with contextlib.suppress(OSError):
        results["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    save()
    return results


def store_raws(store: str, commits: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The decisions of ``store`` (``STORES``) for ``commits``, and the duplicate short ids skipped."""
    if store == "real":
        return corpora.remembered_commit_raws(commits)
    raws, _, duplicates = corpora.commit_raws(commits)
    return raws, duplicates


def _measure_size(settings: BenchSettings, size: int, commits_all: list[dict[str, Any]], questions: list[str],
                  answerable: list[str], work: Path, entry: dict[str, Any], progress: Progress,
                  store: str = "synthetic") -> None:  # fmt: skip
    raws, duplicates = store_raws(store, commits_all[:size])
    progress = _labelled(progress, store)
    data_dir, index_dir = work / f"size-{size}-data", work / f"size-{size}-index"
    corpora.write_decisions(data_dir, raws)
    entry["records"] = len(raws)
    entry["duplicate_short_ids_skipped"] = duplicates
    now = max(corpora.epoch(r["timestamp"]) for r in raws)
    repeats = settings.build_repeats_small if size <= 1000 else 1
    if "indexing" in settings.only:
        progress(f"indexing {size}: full build x{repeats}")
        full = indexing.full_build(data_dir, index_dir, repeats)
        entry["indexing"] = {"full": full}
        progress(f"indexing {size}: bare Whoosh writer x{repeats}")
        bare = indexing.bare_whoosh(data_dir, work, repeats)
        entry["indexing"]["bare_whoosh"] = bare
        entry["indexing"]["ratio_full_to_bare"] = round(full["seconds_p50"] / bare["seconds_p50"], 2) if bare["seconds_p50"] else None
    else:
        from benchmarks import locations as bench_locations
        from lore.index.manager import IndexManager

        progress(f"size {size}: building the index (untimed)")
        IndexManager(bench_locations(data_dir, index_dir)).build()
    if "latency" in settings.only:
        progress(f"latency {size}: {settings.latency_runs} runs per command")
        entry["latency"] = latency.measure(data_dir, index_dir, work / f"size-{size}-run", answerable,
                                           runs=settings.latency_runs, progress=progress)  # fmt: skip
        progress(f"latency {size}: in-process stage timings")
        entry["stages"] = latency.stage_timings(data_dir, index_dir, questions[: settings.stage_queries], now)
    if "firstprompt" in settings.only:
        from benchmarks import helper

        progress(f"first prompt {size}: {settings.first_prompt_rounds} sessions")
        entry["first_prompt"] = helper.first_prompt(data_dir, index_dir, work / f"size-{size}-first", answerable,
                                                    rounds=settings.first_prompt_rounds, progress=progress)  # fmt: skip
    if "indexing" in settings.only:
        progress(f"indexing {size}: incremental refresh x{settings.incremental_repeats}")
        inc = indexing.incremental(data_dir, index_dir, settings.incremental_repeats, raws[0]["timestamp"])
        entry["indexing"]["incremental"] = inc
        full_s, inc_s = entry["indexing"]["full"]["seconds_p50"], inc["seconds_p50"]
        entry["indexing"]["ratio_rebuild_to_incremental"] = round(full_s / inc_s, 2) if inc_s else None
        progress(f"indexing {size}: whole-process lore index, no-op vs one new decision x{settings.process_repeats}")
        entry["indexing"]["process"] = indexing.whole_process(data_dir, index_dir, work / f"size-{size}-process",
                                                              settings.process_repeats, raws[0]["timestamp"])  # fmt: skip
        rebuilds = settings.rebuild_repeats if size <= 10000 else 1
        progress(f"indexing {size}: whole-process lore index --rebuild x{rebuilds}")
        entry["indexing"]["rebuild_process"] = indexing.rebuild_process(data_dir, index_dir, work / f"size-{size}-process",
                                                                        rebuilds)  # fmt: skip
    if "latency" in settings.only:
        # Last: it adds decisions to the store. New ones, from the commits after the store's.
        runs = settings.write_runs
        fresh, _ = store_raws(store, commits_all[size : size + latency.WRITES_PER_RUN * (runs + 1) + 10])
        progress(f"writes {size}: {runs} runs per command")
        entry["writes"] = latency.measure_writes(data_dir, index_dir, work / f"size-{size}-writes",
                                                 [(r["decision"], r["rationale"]) for r in fresh], runs=runs,
                                                 progress=progress)  # fmt: skip


def _labelled(progress: Progress, store: str) -> Progress:
    """Progress lines that name the store when it is not the synthetic one."""
    if store == "synthetic":
        return progress
    return lambda message: progress(f"[{store}] {message}")


def _soak(settings: BenchSettings, shared: Path, work: Path, progress: Progress) -> dict[str, Any]:
    """The helper under 2,000 prompts and 200 writes, on a store built from the git commits like the latency one."""
    from benchmarks import helper
    from benchmarks import locations as bench_locations
    from lore.index.manager import IndexManager

    raws, _, _ = corpora.commit_raws(corpora.load_commits(shared, settings.soak_size))
    data_dir, index_dir = work / "soak-data", work / "soak-index"
    corpora.write_decisions(data_dir, raws)
    progress(f"soak: building the index of {len(raws):,} decisions (untimed)")
    IndexManager(bench_locations(data_dir, index_dir)).build()
    prompts = [q["question"] for q in corpora.load_questions() if q.get("answerable", True)]
    try:
        result = helper.soak(data_dir, index_dir, work / "soak-run", prompts, total_prompts=settings.soak_prompts,
                             total_writes=settings.soak_writes, progress=progress)  # fmt: skip
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
        shutil.rmtree(index_dir, ignore_errors=True)
    result["records"] = len(raws)
    return result
