"""Rich tables for the benchmark figures (the JSON file holds the same numbers and more)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from lore.bench.quality import ANCHORS, LABELS


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


def quality_tables(result: dict[str, Any]) -> list[Table]:
    title = f"BEIR SciFact test: {result['queries']} queries, {result['docs']} abstracts (retrieval_limit=100, limit=100)"
    table = Table(title=title)
    for column in ("system", "nDCG@10", "Recall@100", "mean results"):
        table.add_column(column, justify="left" if column == "system" else "right")
    for name, figures in result["systems"].items():
        table.add_row(LABELS.get(name, name), _f(figures.get("nDCG@10")), _f(figures.get("R@100")),
                      _f(figures.get("mean_results"), 1))  # fmt: skip
    for label, value in result.get("anchors_ndcg10", ANCHORS).items():
        table.add_row(f"[dim]published: {label}[/dim]", f"[dim]{value:.3f}[/dim]", "", "")
    if result.get("quick"):
        table.caption = "quick: a 1,000-abstract sample and 50 queries; the published full-corpus figures do not apply"
    tables = [table]
    sweep = result.get("sweep")
    if sweep:
        s = Table(title=f"Fusion-weight sweep: tuned on {sweep['train_queries']} SciFact train queries, reported on test")
        for column in ("vector", "hyde", "bm25", "train nDCG@10", "train R@100", "test nDCG@10", "test R@100", ""):
            s.add_column(column, justify="right")
        best = sweep["best_on_train"]
        gate = sweep.get("gate")
        if gate:
            s.caption = (f"best: best train nDCG@10. default: weights gated per query, the first figure when BM25's "
                         f"best record holds at least {gate['coverage']} of the query's idf mass, the second otherwise")  # fmt: skip
        for row in sweep["rows"]:
            mark = "best" if row is best or row == best else ""
            if row == sweep["default"]:
                mark = f"default ({mark})" if mark else "default"
            if row.get("gated") and gate:
                lexical, otherwise = gate["lexical"], gate["otherwise"]
                weights = [f"{lexical[c]:g}/{otherwise[c]:g}" if lexical[c] != otherwise[c] else f"{lexical[c]:g}"
                           for c in ("vector", "hyde", "bm25")]  # fmt: skip
            else:
                weights = [f"{row[c]:g}" for c in ("vector", "hyde", "bm25")]
            s.add_row(*weights, _f(row["train_ndcg10"]), _f(row["train_r100"]), _f(row["test_ndcg10"]),
                      _f(row["test_r100"]), mark)  # fmt: skip
        tables.append(s)
    return tables


def known_item_table(result: dict[str, Any]) -> Table:
    title = (f"Known-item search: {result['commits']} git commits, {result['answerable']} answerable + "
             f"{result['unanswerable']} unanswerable questions")  # fmt: skip
    table = Table(title=title)
    for column in ("system", "recall@5", "recall@10", "MRR@10"):
        table.add_column(column, justify="left" if column == "system" else "right")
    for name, figures in result["systems"].items():
        table.add_row(LABELS.get(name, name), _f(figures.get("R@5")), _f(figures.get("R@10")), _f(figures.get("RR@10")))
    lines = []
    for name, label in (("pipeline", "full pipeline"), ("pipeline_lexical", "lexical only")):
        figures = result["systems"].get(name, {})
        if "gap_unanswerable_flagged" in figures:
            lines.append(f"evidence gap ({label}): {figures['gap_unanswerable_flagged']:.1%} of unanswerable questions "
                         f"flagged, {figures['gap_answerable_flagged']:.1%} of answerable ones wrongly flagged")  # fmt: skip
    if lines:
        table.caption = "\n".join(lines)
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


def render(results: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    console.print(machine_table(results["machine"]))
    if "quality" in results:
        for table in quality_tables(results["quality"]):
            console.print(table)
    if "knownitem" in results:
        console.print(known_item_table(results["knownitem"]))
    sizes = results.get("sizes") or {}
    for n, entry in sizes.items():
        if entry.get("latency"):
            console.print(latency_table(n, entry["latency"]))
    for extra in (stages_table(sizes), indexing_table(sizes), scale_table(results.get("scale") or {})):
        if extra is not None:
            console.print(extra)
    for message in results.get("errors") or []:
        console.print(f"[red]failed:[/red] {message}")
    timings = results.get("harness_seconds", {})
    per_size = {n: e.get("harness_seconds") for n, e in sizes.items()}
    console.print(f"harness time: {timings}  per size: {per_size}")
