"""Rich tables for the benchmark figures (the JSON file holds the same numbers and more)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def _f(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _mib(value: Any) -> str:
    return "-" if value is None else f"{value / 1048576:.1f}"


def machine_table(machine: dict[str, Any]) -> Table:
    table = Table(title="Machine", show_header=False)
    for key in ("cpu_model", "cpu_count", "ram_gib", "load_average_at_start", "load_average_at_end", "python", "lore_version", "git_commit",
                "git_dirty", "date", "embedding_model"):  # fmt: skip
        table.add_row(key, _f(machine.get(key)))
    return table


SET_TITLES = {
    "scifact": "BEIR SciFact abstracts (dev = train queries, test = test queries)",
    "knownitem": "known-item questions over git commits",
    "memory": "memory regime: short git memories, coding-agent prompts",
    "demo": "the bundled demo data, coding-agent prompts",
}


def matrix_table(name: str, result: dict[str, Any]) -> Table:
    """One set: every system's dev and test figures side by side."""
    from lore.bench.matrix import LABELS

    splits = result["splits"]
    measures = ["R@5", "R@10", "RR@10"] + (["nDCG@10"] if result.get("primary") == "nDCG@10" else [])
    short = {"R@5": "R@5", "R@10": "R@10", "RR@10": "MRR@10", "nDCG@10": "nDCG@10"}
    counts = ", ".join(f"{s} {f['answerable']}+{f['unanswerable']}" for s, f in splits.items())
    table = Table(title=f"{SET_TITLES.get(name, name)}: {result['records']:,} records; questions {counts} (answerable+unanswerable)")
    table.add_column("system")
    for split in splits:
        for m in measures:
            table.add_column(f"{split} {short[m]}", justify="right")
    table.add_column("test gap a/u", justify="right")
    systems: list[str] = []
    for figures in splits.values():
        systems.extend(n for n in figures["systems"] if n not in systems)
    for system in systems:
        row = [LABELS.get(system, system)]
        for figures in splits.values():
            f = figures["systems"].get(system, {})
            row.extend(_f(f.get(m)) for m in measures)
        test = splits.get("test", {}).get("systems", {}).get(system, {})
        gap = f"{test['gap_answerable']:.0%}/{test['gap_unanswerable']:.0%}" if "gap_unanswerable" in test else "-"
        table.add_row(*row, gap)
    caption = ("gap a/u: share of answerable / unanswerable test questions flagged as an evidence gap; "
               "only dev figures choose a default (docs/search.md)")
    margins = splits.get("test", {}).get("margins")
    if margins:
        shown = ", ".join(f"{short[m]} {v['diff']:+.3f} [{v['lo']:+.3f}, {v['hi']:+.3f}]" for m, v in margins.items())
        caption += f"\ndefaults - textbook BM25 on test (95% paired bootstrap): {shown}"
    table.caption = caption
    return table


def duplicates_table(result: dict[str, Any]) -> Table:
    table = Table(title=f"Duplicate detection: {result['pairs']} labelled pairs (dev {result['dev']}, test {result['test']})")
    for column in ("detector", "dev precision", "dev recall", "test precision", "test recall", "test paraphrase recall",
                   "test specifics called duplicate"):  # fmt: skip
        table.add_column(column, justify="left" if column == "detector" else "right")
    for name, f in result["detectors"].items():
        table.add_row(name, _f(f["dev"]["precision"]), _f(f["dev"]["recall"]), _f(f["test"]["precision"]),
                      _f(f["test"]["recall"]), _f(f["test"].get("paraphrase_recall")),
                      _f(f["test"].get("specifics_called_duplicate")))  # fmt: skip
    notices = result.get("contradiction_notices")
    if notices:
        table.caption = "lore's contradiction notices: " + "; ".join(
            f"{split} {n['reported']} of {n['contradictions']} contradictions reported, "
            f"{n['false_notices']} pairs with a notice that is not one" for split, n in notices.items()
        )
    return table


def latency_table(size: str, result: dict[str, Any]) -> Table:
    table = Table(title=f"Whole-process latency at {int(size):,} decisions ({result['runs']} runs after a warm-up; lore's bytecode compiled first, as pip does)")
    for column in ("command", "p50 ms", "p95 ms", "x python floor", "x grep -ril", "peak RSS MiB", "injected/hits"):
        table.add_column(column, justify="left" if column == "command" else "right")
    for name, f in result["commands"].items():
        shown = f.get("injected_share", f.get("with_results_share"))
        table.add_row(name, _f(f["p50"], 1), _f(f["p95"], 1), _f(f["ratio_to_python_floor"], 2),
                      _f(f["ratio_to_grep"], 2), _f(f["peak_rss_mib"], 1), _f(shown, 2))  # fmt: skip
    if result.get("notes"):
        table.caption = "; ".join(result["notes"])
    return table


def stages_table(sizes: dict[str, Any]) -> Table | None:
    with_stages = {n: s["stages"] for n, s in sizes.items() if s.get("stages")}
    if not with_stages:
        return None
    table = Table(title="In-process pipeline time per stage, ms (p50 / p95 over the questions, warm session)")
    table.add_column("stage")
    for n in with_stages:
        table.add_column(f"{int(n):,}", justify="right")
    names: list[str] = []
    for stages in with_stages.values():
        names.extend(k for k in stages if k not in names)
    for name in names:
        row = [name]
        for stages in with_stages.values():
            f = stages.get(name)
            row.append(f"{f['p50']:.1f} / {f['p95']:.1f}" if f else "-")
        table.add_row(*row)
    return table


def indexing_table(sizes: dict[str, Any]) -> Table | None:
    rows = {n: s["indexing"] for n, s in sizes.items() if s.get("indexing")}
    if not rows:
        return None
    table = Table(title="Indexing (model loaded beforehand; bare = single-process Whoosh, same schema and text)")
    for column in ("decisions", "full build s", "bare Whoosh s", "full/bare", "incremental s", "rebuild/incremental",
                   "index MiB", "bare MiB", "lexical / embed / table s"):  # fmt: skip
        table.add_column(column, justify="right")
    for n, ix in rows.items():
        full, bare, inc = ix.get("full", {}), ix.get("bare_whoosh", {}), ix.get("incremental", {})
        phases = full.get("phases_last", {})
        table.add_row(f"{int(n):,}", _f(full.get("seconds_p50"), 2), _f(bare.get("seconds_p50"), 2), _f(ix.get("ratio_full_to_bare"), 2),
                      _f(inc.get("seconds_p50"), 2), _f(ix.get("ratio_rebuild_to_incremental"), 1),
                      _mib(full.get("index_bytes")), _mib(bare.get("index_bytes")),
                      " / ".join(_f(phases.get(k), 1) for k in ("lexical", "embeddings", "table_graph")))  # fmt: skip
    return table


def scale_table(scale: dict[str, Any]) -> Table | None:
    if not scale:
        return None
    sizes: list[str] = []
    for figure in scale.values():
        sizes.extend(n for n in figure["per_record"] if n not in sizes)
    table = Table(title="Scale curve: per-record cost (figure / decisions) and growth exponent (1.0 = linear)")
    table.add_column("figure")
    table.add_column("unit / record")
    for n in sizes:
        table.add_column(f"{int(n):,}", justify="right")
    table.add_column("exponent", justify="right")
    for name, figure in scale.items():
        unit = figure["unit"]
        factor = 1000.0 if unit == "ms" else 1.0
        label = "µs" if unit == "ms" else unit
        cells = [f"{figure['per_record'][n] * factor:.3g}" if n in figure["per_record"] else "-" for n in sizes]
        table.add_row(name, label, *cells, _f(figure.get("growth_exponent"), 2))
    return table


def sync_table(result: dict[str, Any]) -> Table:
    s = result["settings"]
    table = Table(title=(f"Sync soak: {s['clones']} clones x {s['per_type']} records of each of 7 types, "
                         f"{s['shared_patterns']} shared patterns edited, {s['rounds']} rounds of syncs in random "
                         f"order (seed {s['seed']})"))  # fmt: skip
    for column in ("clone", "records", "lost", "duplicated", "duplicate ids", "renamed", "shared patterns wrong",
                   "collision edges wrong", "doctor"):  # fmt: skip
        table.add_column(column, justify="right")
    for c in result["per_clone"]:
        table.add_row(str(c["clone"]), f"{c['records']:,}", str(c["lost"]), str(c["duplicated"]), str(c["duplicate_ids"]),
                      str(c["renamed"]), str(c["shared_patterns_wrong"]), str(c["collision_edges_wrong"]),
                      "clean" if c["doctor_ok"] else f"{c['doctor_problems']} problem(s)")  # fmt: skip
    table.caption = (
        f"records written {result['records_written']:,}; identical files: {'yes' if result['identical'] else 'NO'}; "
        f"syncs {result['syncs']} ({result['concurrent_rounds']} rounds with two at once), merges {result['merges']}, "
        f"push retries {result['push_retries']}, fields settled by newest edit {result['conflicts_resolved']}, "
        f"ids renamed {result['renames']}; sync p50 {result['sync_seconds_p50']} s, max {result['sync_seconds_max']} s; "
        f"total {result['seconds']} s, of which writing records {result.get('write_seconds')} s and waiting for "
        f"syncs {result.get('sync_wall_seconds')} s"
    )
    return table


def render(results: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    console.print(machine_table(results["machine"]))
    for name, result in (results.get("quality") or {}).items():
        console.print(matrix_table(name, result))
    if "duplicates" in results:
        console.print(duplicates_table(results["duplicates"]))
    sizes = results.get("sizes") or {}
    for n, entry in sizes.items():
        if entry.get("latency"):
            console.print(latency_table(n, entry["latency"]))
    for extra in (stages_table(sizes), indexing_table(sizes), scale_table(results.get("scale") or {})):
        if extra is not None:
            console.print(extra)
    if results.get("sync"):
        console.print(sync_table(results["sync"]))
    for message in results.get("errors") or []:
        console.print(f"[red]failed:[/red] {message}")
    timings = results.get("harness_seconds", {})
    per_size = {n: e.get("harness_seconds") for n, e in sizes.items()}
    console.print(f"harness time: {timings}  per size: {per_size}")
