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
    "memory-fresh": "memory regime, 200 fresh questions written after the defaults were frozen (test only)",
    "demo": "the bundled demo data, coding-agent prompts",
    "locomo": "LoCoMo-10 conversations, one store each, a record per turn (unanswerable = category 5, adversarial)",
}
SHORT = {"R@5": "R@5", "R@10": "R@10", "RR@10": "MRR@10", "nDCG@10": "nDCG@10", "Success@5": "R@5 any",
         "Success@10": "R@10 any"}  # fmt: skip


def matrix_table(name: str, result: dict[str, Any]) -> Table:
    """One set: every system's dev and test figures side by side."""
    from benchmarks.matrix import LABELS

    splits = result["splits"]
    measures = result.get("measures") or ["R@5", "R@10", "RR@10"] + (["nDCG@10"] if result.get("primary") == "nDCG@10" else [])
    short = SHORT
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
    if any(m.startswith("Success@") for m in measures):
        caption += "\nR@k any: the share of questions with any of their evidence records in the top k (ir-measures Success@k)"
    quoted = splits.get("test", {}).get("quoted")
    if quoted and quoted["questions"]:
        caption += f"\ntest questions holding a double quote: {quoted['questions']}, of which the defaults returned nothing for {quoted['zero_hits']}"
    table.caption = caption
    return table


def groups_table(name: str, result: dict[str, Any]) -> Table | None:
    """A set's figures per group of questions (LoCoMo's categories): every system, dev and test."""
    from benchmarks.matrix import LABELS

    splits = result["splits"]
    if not any("groups" in f for f in splits.values()):
        return None
    measures = result.get("measures") or ["R@5", "R@10", "RR@10"]
    table = Table(title=f"{name} by question category (answerable questions dev/test in brackets)")
    table.add_column("category")
    table.add_column("system")
    for split in splits:
        for m in measures:
            table.add_column(f"{split} {SHORT.get(m, m)}", justify="right")
    groups: list[str] = []
    for figures in splits.values():
        groups.extend(g for g in figures.get("groups", {}) if g not in groups)
    for group in groups:
        entries = [f.get("groups", {}).get(group, {}) for f in splits.values()]
        if not any(e.get("answerable") for e in entries):
            continue  # unanswerable only: the abstention table
        systems: list[str] = []
        for entry in entries:
            systems.extend(s for s in entry.get("systems", {}) if s not in systems)
        counts = "/".join(str(e.get("answerable", 0)) for e in entries)
        for n, system in enumerate(systems):
            row = [f"{group} ({counts})" if n == 0 else "", LABELS.get(system, system)]
            for entry in entries:
                f = entry.get("systems", {}).get(system, {})
                row.extend(_f(f.get(m)) for m in measures)
            table.add_row(*row, end_section=n == len(systems) - 1)
    return table


def abstention_table(name: str, result: dict[str, Any]) -> Table | None:
    """The share of questions each system flags as an evidence gap, per split and group: on the
    unanswerable ones a right abstention, on the answerable ones a false one."""
    from benchmarks.matrix import LABELS

    splits = result["splits"]
    systems: list[str] = []
    for figures in splits.values():
        systems.extend(s for s, f in figures["systems"].items() if "gap_unanswerable" in f and s not in systems)
    if not systems:
        return None
    table = Table(title=f"{name}: evidence gap flagged (SearchResponse.gap), share of questions")
    table.add_column("system")
    for split, figures in splits.items():
        table.add_column(f"{split} unanswerable ({figures['unanswerable']})", justify="right")
        table.add_column(f"{split} answerable ({figures['answerable']})", justify="right")
    for system in systems:
        cells: list[str] = []
        for figures in splits.values():
            f = figures["systems"].get(system, {})
            cells.extend(f"{f[k]:.1%}" if k in f else "-" for k in ("gap_unanswerable", "gap_answerable"))
        table.add_row(LABELS.get(system, system), *cells)
    table.caption = ("unanswerable: flagged is the right answer (an abstention); answerable: flagged is a false abstention. "
                     "No hook-level abstention is measured yet: this is the search's evidence-gap verdict")
    return table


def data_caption(result: dict[str, Any]) -> str | None:
    data = result.get("data")
    if not data:
        return None
    return (f"{data.get('conversations')} conversations, {data.get('turns'):,} turns, {data.get('questions'):,} questions "
            f"({data.get('quoted_questions')} with a double quote); evidence strings {data.get('evidence_strings')}: "
            f"{data.get('evidence_malformed', 0)} malformed (split or normalised), {data.get('evidence_unknown_turn', 0)} "
            f"naming no turn (dropped); {data.get('questions_without_evidence', 0)} answerable questions left with no "
            f"evidence (not scored). Split: {data.get('split')}. Source: {data.get('source')}"
            + _conversations_run(data))


def _conversations_run(data: dict[str, Any]) -> str:
    ran, held = data.get("conversations_run"), data.get("conversations")
    return f". Turn-level figures over the first {ran} conversations only (--quick)" if ran and ran != held else ""


SHORT_LABELS = {"textbook": "textbook", "default": "lore"}


def session_table(result: dict[str, Any]) -> Table | None:
    """LoCoMo with the session as the unit (benchmarks.locomo.run_sessions): every scope, unit and system."""
    from benchmarks.locomo import ANSWERABLE, EVERY, SESSION_MEASURES, SESSION_SCOPES, SESSION_UNITS

    sessions = result.get("session_level")
    if not sessions:
        return None
    counts = sessions["questions"]
    table = Table(title=f"LoCoMo-10 with the session as the unit: {counts[EVERY]:,} questions with evidence "
                        f"({counts[ANSWERABLE]:,} of them in categories 1-4), {sessions['sessions']} sessions")  # fmt: skip
    for column in ("store", "ranked by", "system", *SESSION_MEASURES, "1-4 any@5", "1-4 share@5"):
        table.add_column(column, justify="left" if column in ("store", "ranked by", "system") else "right")
    margins, short = [], []
    for scope, units in sessions["scopes"].items():
        for unit, entry in units.items():
            for n, (system, row) in enumerate(entry["systems"].items()):
                table.add_row(scope if n == 0 else "", unit if n == 0 else "", SHORT_LABELS.get(system, system),
                              *(_f(row[EVERY][m]) for m in SESSION_MEASURES),
                              _f(row[ANSWERABLE]["any@5"]), _f(row[ANSWERABLE]["share@5"]),
                              end_section=n == len(entry["systems"]) - 1)  # fmt: skip
                if row.get("short"):
                    short.append(f"{scope}/{unit} {SHORT_LABELS.get(system, system)} {row['short']}")
            shown = ", ".join(f"{m} {v['diff']:+.3f} [{v['lo']:+.3f}, {v['hi']:+.3f}]" for m, v in entry["margins"].items())
            margins.append(f"{scope}/{unit}: {shown}")
    table.caption = (", ".join(f"{k}: {v}" for k, v in {**SESSION_SCOPES, **SESSION_UNITS}.items()) + "\n"
                     "any@k: an evidence session in the top k sessions (recall_any@k); share@k: the share of the question's "
                     "evidence sessions in the top k (MemPalace's recall); all@k: every one (recall_all@k). "
                     "Every question with evidence, adversarial ones included; 1-4: categories 1-4 only\n"
                     "lore defaults - textbook BM25 (95% paired bootstrap): " + "; ".join(margins) +
                     (f"\nrankings holding fewer than 10 sessions (the textbook ranks only records sharing a word with the question; "
                      f"best-turn rankings read {sessions['turn_depth']} turns): " + ", ".join(short)
                      if short else ""))  # fmt: skip
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


def store_label(store: str) -> str:
    """How a table's title names the store its figures come from (benchmarks.runner.STORES)."""
    return " of real text (commits as `lore remember` stores them)" if store == "real" else ""


def latency_table(size: str, result: dict[str, Any], store: str = "synthetic") -> Table:
    table = Table(title=f"Whole-process latency at {int(size):,} decisions{store_label(store)} ({result['runs']} runs after a warm-up; lore's bytecode compiled first, as pip does)")
    # Ratios to the original bash Lore's search (benchmarks/bash_original.py), when it was measured.
    baselines = [(key, label) for key, label in (("ratio_to_sqlite3_fts5", "x sqlite3 FTS5"), ("ratio_to_bash_original", "x bash original"))
                 if any(key in f for f in result["commands"].values())]  # fmt: skip
    for column in ("command", "p50 ms", "p95 ms", "x python floor", "x grep -ril", *(label for _, label in baselines),
                   "peak RSS MiB", "injected/hits"):  # fmt: skip
        table.add_column(column, justify="left" if column == "command" else "right")
    for name, f in result["commands"].items():
        shown = f.get("injected_share", f.get("with_results_share"))
        table.add_row(name, _f(f["p50"], 1), _f(f["p95"], 1), _f(f["ratio_to_python_floor"], 2),
                      _f(f["ratio_to_grep"], 2), *(_f(f.get(key), 2) for key, _ in baselines),
                      _f(f["peak_rss_mib"], 1), _f(shown, 2))  # fmt: skip
    if result.get("notes"):
        table.caption = "; ".join(result["notes"])
    return table


def writes_table(size: str, result: dict[str, Any], store: str = "synthetic") -> Table:
    """Each write command without and with the warm helper, each beside its own `python -c pass`; MCP remember."""
    table = Table(title=f"Write latency at {int(size):,} decisions{store_label(store)}, whole process ({result['runs']} runs after a warm-up, "
                        "alternating with python -c pass)")  # fmt: skip
    for column in ("command", "p50 ms", "p95 ms", "python -c pass p50 ms", "x python floor", "CPU p50 ms", "peak RSS MiB",
                   "exit codes"):  # fmt: skip
        table.add_column(column, justify="left" if column == "command" else "right")
    for name, f in result["commands"].items():
        codes = f.get("exit_codes")
        shown = ", ".join(f"{code}: {count}" for code, count in codes.items()) if codes else f"errors: {f.get('errors', 0)}"
        table.add_row(name, _f(f.get("p50"), 1), _f(f.get("p95"), 1), _f(f.get("python -c pass p50"), 1),
                      _f(f.get("ratio_to_python_floor"), 2), _f(f.get("cpu_ms_p50"), 1), _f(f.get("peak_rss_mib"), 1),
                      shown)  # fmt: skip
    notes = list(result.get("notes") or [])
    if result.get("load_average"):
        notes.append("load average at the end " + " / ".join(f"{x:.2f}" for x in result["load_average"]))
    mcp = result["commands"].get("MCP remember (lore mcp, one server)")
    if mcp and mcp.get("first call ms") is not None:
        notes.append(f"MCP: the server's first remember {mcp['first call ms']:.0f} ms (it loads what the check needs)")
    if notes:
        table.caption = "; ".join(notes)
    return table


def stages_table(sizes: dict[str, Any], store: str = "synthetic") -> Table | None:
    with_stages = {n: s["stages"] for n, s in sizes.items() if s.get("stages")}
    if not with_stages:
        return None
    table = Table(title=f"In-process pipeline time per stage{store_label(store)}, ms (p50 / p95 over the questions, warm session)")
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


def indexing_table(sizes: dict[str, Any], store: str = "synthetic") -> Table | None:
    rows = {n: s["indexing"] for n, s in sizes.items() if s.get("indexing")}
    if not rows:
        return None
    table = Table(title=f"Indexing{store_label(store)} (model loaded beforehand; bare = single-process Whoosh, same schema and text; "
                        "process = `lore index` as a process, medians of pairs; rebuild = `lore index --rebuild` as a process)")  # fmt: skip
    for column in ("decisions", "full build s", "bare Whoosh s", "full/bare", "incremental s", "beyond no-op s", "rebuild/incremental",
                   "index MiB", "bare MiB", "bm25 / embed / table s", "process: no-op s", "process: beyond no-op s",
                   "process: rebuild s", "rebuild peak RSS MiB"):  # fmt: skip
        table.add_column(column, justify="right")
    for n, ix in rows.items():
        full, bare, inc = ix.get("full", {}), ix.get("bare_whoosh", {}), ix.get("incremental", {})
        rebuild = ix.get("rebuild_process", {})
        phases = full.get("phases_last", {})
        table.add_row(f"{int(n):,}", _f(full.get("seconds_p50"), 2), _f(bare.get("seconds_p50"), 2), _f(ix.get("ratio_full_to_bare"), 2),
                      _f(inc.get("seconds_p50"), 2), _f(inc.get("beyond_noop_seconds_p50"), 3),
                      _f(ix.get("ratio_rebuild_to_incremental"), 1),
                      _mib(full.get("index_bytes")), _mib(bare.get("index_bytes")),
                      " / ".join(_f(phases.get(k), 1) for k in ("bm25", "embeddings", "table_graph")),
                      _f(ix.get("process", {}).get("noop_seconds_p50"), 3),
                      _f(ix.get("process", {}).get("beyond_noop_seconds_p50"), 3),
                      _f(rebuild.get("seconds_p50"), 2), _f(rebuild.get("peak_rss_mib"), 0))  # fmt: skip
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


def team_table(result: dict[str, Any]) -> Table:
    s = result["settings"]
    table = Table(title=(f"Team sync: {s['clones']} clones over one bare remote, {s['records']:,} real decisions, "
                         f"{s['rounds']} rounds of all syncing at once then one round one at a time, "
                         f"{s['per_round']} new decisions per clone per round, "
                         f"{'month shards' if s.get('sharded') else 'one decisions.jsonl'}"))  # fmt: skip
    table.add_column("figure")
    table.add_column("value", justify="right")

    def spread(entry: dict[str, Any]) -> str:
        return f"{entry['p50']} / {entry['p95']} / {entry['max']} s (n={entry['n']})"

    search = result.get("search") or {}
    rows = [
        ("sync racing p50 / p95 / max", spread(result["racing"])),
        ("sync alone p50 / p95 / max", spread(result["alone"])),
        ("joining (lore sync --setup) p50 / max", f"{result['join']['p50']} / {result['join']['max']} s"),
        ("syncs / gave up", f"{result['syncs']} / {result['gave_up']}"),
        ("push retries / most attempts / slept", f"{result['push_retries']} / {result['max_push_attempts']} / {result['backoff_seconds']} s"),
        ("rebased / merged", f"{result['rebased']} / {result['merged']}"),
        ("bytes added to the remote per synced record", f"{result['remote_bytes_per_record']:,}"),
        ("... once lost pushes' objects are pruned", f"{result.get('remote_bytes_per_record_pruned', 0):,}"),
        ("bytes added to clone 0 per synced record", f"{result['clone_bytes_per_record']:,}"),
        ("remote objects: loose / packs / MB", f"{result['remote_objects']['loose']} / {result['remote_objects']['packs']} / {result['remote_objects']['bytes'] / 1e6:.1f}"),
        ("clone 0 objects: loose / packs / MB", f"{result['clone0_objects']['loose']} / {result['clone0_objects']['packs']} / {result['clone0_objects']['bytes'] / 1e6:.1f}"),
        ("largest clone .git / its record files", f"{result['clone_git_to_records']}x ({result['records_bytes'] / 1e6:.1f} MB of records)"),
        ("shards / largest / lore migrate --shard", f"{result.get('shards', 0)} / {result.get('largest_shard_bytes', 0) / 1e6:.2f} MB / "
         f"{result.get('migrate_seconds')} s"),
        ("first search after a pull / no-op lore index", f"{search.get('first_search_seconds')} / {search.get('noop_index_seconds')} s "
         f"(pulled {search.get('pulled')}; refresh: {'delta' if (search.get('after_pull') or {}).get('delta') else 'full'})"),
        ("next search", f"{search.get('next_search_seconds')} s"),
        ("identical / lost / duplicated", f"{'yes' if result['identical'] else 'NO'} / {result['lost']} / {result['duplicated']}"),
    ]  # fmt: skip
    for name, value in rows:
        table.add_row(name, value)
    table.caption = f"total {result['seconds']} s" + (f"; gave up: {result['gave_up_messages']}" if result["gave_up_messages"] else "")
    return table


def first_prompt_table(size: str, result: dict[str, Any]) -> Table:
    ready = result.get("helper_ready_after_session_start_ms") or {}
    spawn = result.get("spawn_in_process_ms") or {}
    table = Table(title=f"First prompt after a session starts, {int(size):,} decisions ({result['rounds']} sessions; "
                        f"hook deadline {result['deadline_ms']} ms)")  # fmt: skip
    for column in ("command", "p50 ms", "p95 ms", "x python floor", "injected"):
        table.add_column(column, justify="left" if column == "command" else "right")
    for name, f in result["commands"].items():
        table.add_row(name, _f(f["p50"], 1), _f(f["p95"], 1), _f(f["ratio_to_python_floor"], 2),
                      _f(f.get("injected_share"), 2))  # fmt: skip
    table.caption = (f"helper ready {_f(ready.get('p50'), 0)} ms (p95 {_f(ready.get('p95'), 0)}) after the session-start "
                     f"hook returned; the spawn itself {_f(spawn.get('p50'), 2)} ms in process (p95 {_f(spawn.get('p95'), 2)})")  # fmt: skip
    return table


def surfaces_table(result: dict[str, Any]) -> Table:
    table = Table(title=f"Characters each surface hands the model, at its defaults: demo data ({result['records']} records, "
                        f"{result['prompts']} prompts)")  # fmt: skip
    for column in ("surface", "to the model p50", "p95", "max", "text p50", "structured p50", "calls"):
        table.add_column(column, justify="left" if column == "surface" else "right")
    for name in ("hook block", "session-start block"):
        f = result.get(name) or {}
        table.add_row(name, _f(f.get("p50")), _f(f.get("p95")), _f(f.get("max")), _f(f.get("p50")), "-", _f(f.get("n")))
    for name, kinds in (result.get("mcp") or {}).items():
        if not isinstance(kinds, dict):
            continue
        model, text, structured = kinds.get("to model", {}), kinds.get("text", {}), kinds.get("structured", {})
        table.add_row(f"MCP {name}", _f(model.get("p50")), _f(model.get("p95")), _f(model.get("max")),
                      _f(text.get("p50")), _f(structured.get("p50")), _f(model.get("n")))  # fmt: skip
    table.caption = ("to the model: the structured content as JSON when a result has one (Claude Code sends that "
                     "instead of the text), else the text; hook block: the additionalContext")
    return table


def mcp_start_table(result: dict[str, Any]) -> Table:
    floor = result.get("python -c pass") or {}
    table = Table(title=f"lore mcp: milliseconds from spawn to each reply, whole process ({result.get('runs')} "
                        f"rounds; python -c pass p50 {_f(floor.get('p50'), 1)} ms)")  # fmt: skip
    for column in ("command", "reply", "p50", "p95", "ratio to python -c pass"):
        table.add_column(column, justify="left" if column in ("command", "reply") else "right")
    for name, replies in (result.get("commands") or {}).items():
        for reply, f in replies.items():
            table.add_row(name, reply, _f(f.get("p50"), 1), _f(f.get("p95"), 1), _f(f.get("ratio_to_python_floor"), 2))
    table.caption = ("ping: answered only by the loaded MCP SDK, as every tool call is; first start: the cache dir "
                     "holds no handshake answers yet (after an install or upgrade)")
    return table


def soak_table(result: dict[str, Any]) -> Table:
    table = Table(title=f"Helper soak: {result['prompts']:,} prompts and {result['writes']} writes at "
                        f"{result['records']:,} decisions", show_header=False)  # fmt: skip
    rss, fds = result["rss_mib"], result["fds"]
    rows = [
        ("answers", f"{result['outcomes'].get('ok', 0):,} ok, {result['lost_answers']} lost, "
                    f"{result['empty_answers']} empty (evidence gap)"),
        ("same helper throughout", str(result["same_helper_throughout"])),
        ("background refreshes", _f(result.get("refreshes"))),
        ("request ms p50 / p95", f"{_f(result['request_ms'].get('p50'), 1)} / {_f(result['request_ms'].get('p95'), 1)}"),
        ("RSS MiB start / after 10% / end / peak", f"{_f(rss['start'], 1)} / {_f(rss['after_10pct'], 1)} / "
                                                  f"{_f(rss['end'], 1)} / {_f(rss['peak'], 1)}"),
        ("RSS growth after 10% / from start", f"{_f(result['rss_growth_pct_after_warmup'], 1)}% / "
                                              f"{_f(result['rss_growth_pct_from_start'], 1)}%"),
        ("open fds start / end / max", f"{fds['start']} / {fds['end']} / {fds['max']}"),
        ("threads start / end", f"{result['threads']['start']} / {result['threads']['end']}"),
    ]  # fmt: skip
    for name, value in rows:
        table.add_row(name, value)
    return table


def capture_table(result: dict[str, Any]) -> Table:
    hook = result.get("hook") or {}
    table = Table(title=f"Session capture: the Stop hook on a {hook.get('transcript_lines', 0):,}-line transcript, "
                        "and heuristic capture on the labelled transcripts", show_header=False)  # fmt: skip
    on, off, bg = hook.get("hook_ms_capture_on") or {}, hook.get("hook_ms_capture_off") or {}, hook.get("background_capture_ms") or {}
    table.add_row("hook stop, whole process, ms p50 (max)", f"capture on {_f(on.get('p50'), 0)} ({_f(on.get('max'), 0)}), "
                  f"off {_f(off.get('p50'), 0)} ({_f(off.get('max'), 0)}); ratio {_f(hook.get('ratio_on_to_off'), 2)}")
    table.add_row("background capture done after, ms p50", _f(bg.get("p50"), 0))
    quality = result.get("quality")
    if not quality:
        table.add_row("labelled transcripts", "none found (tests/data/transcripts/labels.jsonl)")
        return table
    table.add_row("transcripts / expected / captured", f"{quality['transcripts']} / {quality['expected']} / {quality['captured']}")
    table.add_row("precision / recall", f"{_f(quality['precision'], 3)} / {_f(quality['recall'], 3)}")
    for kind, n in quality["per_kind"].items():
        table.add_row(f"  {kind}", f"captured {n['captured']}, expected {n['expected']}, matched {n['matched']}")
    table.add_row("secrets stored / added by a second run", f"{quality['secrets_stored']} / {quality['second_run_added']}")
    for backfill in (result.get("backfill_small"), result.get("backfill")):
        if backfill:
            table.add_row(f"lore import claude-code, {backfill['transcripts']:,} transcripts",
                          f"{_f(backfill['seconds'], 1)} s ({_f(backfill.get('ms_per_transcript'), 1)} ms each), {backfill['records']:,} records; "
                          f"again: {_f(backfill['rerun_seconds'], 2)} s, {backfill['rerun_added']} added")
    if result.get("backfill_growth") is not None:
        table.add_row("  ms per transcript, large / small import", _f(result["backfill_growth"], 2))
    return table  # fmt: skip


def import_table(result: dict[str, Any]) -> Table:
    table = Table(title=f"lore import lore-export (generated export, chunks of {result['chunk']})")
    for column in ("records", "lines", "batched s", "records/s", "one write per item s", "records/s ", "speedup",
                   "re-import s", "re-import adds"):  # fmt: skip
        table.add_column(column, justify="right")
    for n, entry in result["sizes"].items():
        single = entry.get("per_item") or {}
        table.add_row(f"{int(n):,}", f"{entry['lines']:,}", _f(entry["batched"]["seconds"], 2),
                      _f(entry["batched"]["records_per_s"], 0), _f(single.get("seconds"), 2),
                      _f(single.get("records_per_s"), 0), _f(entry.get("speedup"), 1),
                      _f(entry["reimport"]["seconds"], 2), str(entry["reimport"]["added"]))  # fmt: skip
    return table


def _margin(m: dict[str, float]) -> str:
    return f"{m['diff']:+.3f} [{m['lo']:+.3f}, {m['hi']:+.3f}]"


def stream_tables(result: dict[str, Any]) -> list[Table]:
    """The prompt stream, each author group left out: what reaches the agent, against injecting always and each input alone."""
    tables = []
    scope = "the demo store (--quick)" if result.get("quick") else ", ".join(result.get("stores", []))
    table = Table(title=f"Prompt stream, each author group left out ({result['prompts']} prompts, {scope}): what the hook "
                        "hands the agent, fitted and thresholded on the other groups")  # fmt: skip
    for column in ("left out", "path", "always", "reach", "reach - always [95%]", "full", "full - always [95%]",
                   "strict", "left empty", "no full item", "precision (full)", "chars/prompt", "thresholds"):  # fmt: skip
        table.add_column(column, justify="left" if column in ("left out", "path", "thresholds") else "right")
    rows = [(name, g) for name, g in result["groups"].items()] + [("pooled", result["pooled"])]
    for name, entry in rows:
        for path in ("warm", "cold"):
            f, a = entry[path]["lore"], entry[path]["always"]
            th = entry.get("thresholds")
            shown = f"full {th['full']:.2f} item {th['item']:.2f} pointer {th['pointer']:.2f}" if th and path == "warm" else ""
            table.add_row(name, path, _f(a["hit"]), _f(f["hit"]), _margin(entry[path]["reach_margin"]), _f(f["hit_full"]),
                          _margin(entry[path]["full_margin"]), _f(f["hit_strict"]), _f(f["left_empty"]),
                          _f(f["left_without_full"]), _f(f["precision_full"]), _f(f["chars_per_prompt"], 0), shown)  # fmt: skip
    table.caption = ("reach: answerable prompts whose memory reached the agent, in full or as a pointer, in this block or "
                     "earlier in the session; full: in full; strict: in this prompt's block; always: the first five hits "
                     "in full on every non-trivial prompt; left empty / no full item: of prompts no memory answers")
    tables.append(table)
    single = Table(title="Prompt stream, each author group left out: each gate input alone, its threshold the lowest that "
                         "leaves as many unanswerable prompts empty on the other groups as the rule asks (warm)")  # fmt: skip
    inputs = list(next(iter(result["groups"].values()))["single"])
    single.add_column("left out")
    for name in ["fitted", *inputs]:
        single.add_column({"log_terms": "prompt length"}.get(name, name.removeprefix("top_")) + " reach / empty", justify="right")
    for name, g in result["groups"].items():
        cells = [f"{_f(g['warm']['lore']['hit'])} / {_f(g['warm']['lore']['left_empty'])}"]
        cells += [f"{_f(g['single'][i]['hit'])} / {_f(g['single'][i]['left_empty'])}" for i in inputs]
        single.add_row(name, *cells)
    tables.append(single)
    length = Table(title="Prompt stream: median words of answerable and unanswerable prompts per author group, and how well "
                         "length alone separates them (ROC area; 0.5: not at all)")  # fmt: skip
    for column in ("group", "answerable", "unanswerable (no chit-chat)", "length ROC area"):
        length.add_column(column, justify="left" if column == "group" else "right")
    for name, entry in result["length"].items():
        length.add_row(name, str(entry["answerable_median_words"]), str(entry["unanswerable_median_words"]),
                       _f(entry["length_auc"]))  # fmt: skip
    tables.append(length)
    curve = Table(title="Prompt stream, each group left out (warm): reach and left empty as the pointer threshold moves")
    curve.add_column("pointer", justify="right")
    for name in result["groups"]:
        curve.add_column(f"{name} reach / empty", justify="right")
    first = next(iter(result["groups"].values()))["curve"]
    for position, point in enumerate(first):
        curve.add_row(_f(point["pointer"], 2), *(f"{_f(g['curve'][position]['hit'])} / {_f(g['curve'][position]['left_empty'])}"
                                                 for g in result["groups"].values()))  # fmt: skip
    tables.append(curve)
    return tables


def render(results: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    console.print(machine_table(results["machine"]))
    for name, result in (results.get("quality") or {}).items():
        if "skipped" in result:
            console.print(f"[yellow]skipped:[/yellow] the {name} set: {result['skipped']}")
            continue
        console.print(matrix_table(name, result))
        for extra_table in (groups_table(name, result), abstention_table(name, result) if "groups" in
                            result["splits"].get("test", {}) else None):  # fmt: skip
            if extra_table is not None:
                console.print(extra_table)
        caption = data_caption(result)
        if caption:
            console.print(caption)
        sessions = session_table(result)
        if sessions is not None:
            console.print(sessions)
    if results.get("stream"):
        for table in stream_tables(results["stream"]):
            console.print(table)
    if "duplicates" in results:
        console.print(duplicates_table(results["duplicates"]))
    sizes = results.get("sizes") or {}
    stores = [("synthetic", sizes), ("real", results.get("real_sizes") or {})]
    for store, per_size in stores:
        for n, entry in per_size.items():
            if entry.get("latency"):
                console.print(latency_table(n, entry["latency"], store))
        for n, entry in per_size.items():
            if entry.get("writes"):
                console.print(writes_table(n, entry["writes"], store))
    for n, entry in sizes.items():
        if entry.get("first_prompt"):
            console.print(first_prompt_table(n, entry["first_prompt"]))
    if results.get("surfaces"):
        console.print(surfaces_table(results["surfaces"]))
        if isinstance(results["surfaces"].get("mcp start"), dict):
            console.print(mcp_start_table(results["surfaces"]["mcp start"]))
    if results.get("soak"):
        console.print(soak_table(results["soak"]))
    if results.get("capture"):
        console.print(capture_table(results["capture"]))
    if results.get("import"):
        console.print(import_table(results["import"]))
    extras = [stages_table(sizes), indexing_table(sizes), scale_table(results.get("scale") or {})]
    real_sizes = results.get("real_sizes") or {}
    extras += [stages_table(real_sizes, "real"), indexing_table(real_sizes, "real")]
    for extra in extras:
        if extra is not None:
            console.print(extra)
    if results.get("sync"):
        console.print(sync_table(results["sync"]))
    if results.get("team"):
        console.print(team_table(results["team"]))
    for message in results.get("errors") or []:
        console.print(f"[red]failed:[/red] {message}")
    timings = results.get("harness_seconds", {})
    per_size = {n: e.get("harness_seconds") for n, e in sizes.items()}
    per_size.update({f"{n} real": e.get("harness_seconds") for n, e in real_sizes.items()})
    console.print(f"harness time: {timings}  per size: {per_size}")
