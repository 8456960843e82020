"""`lore bench`: how fast lore is on your own store (lore.measure), read only."""

from __future__ import annotations

from typing import Any

import orjson
import typer

from lore.cli.base import app, state

# The table's rows, in the order a user meets them.
_ROWS = ("lore search (in process)", "python -c pass", "lore hook prompt (cold)", "lore hook prompt (warm helper)",
         "lore hook prompt (warm helper, a trivial prompt)",
         "lore index (first run on the copy)", "lore index (no-op)")  # fmt: skip


@app.command("bench")
def bench(
    ctx: typer.Context,
    runs: int = typer.Option(10, "--runs", min=1, max=1000, help="Rounds of each timed command (after a warm-up round)."),
    as_json: bool = typer.Option(False, "--json", help="Print every figure as JSON."),
    writes: bool = typer.Option(True, "--writes/--no-writes", help="Time the write commands too (on a copy of your data)."),
) -> None:
    """Time lore on your own store: `lore search` in process (p50/p95 over a few of your records' titles), the
    prompt hook's whole process cold and with a warm helper beside `python -c pass`, `lore index`, and
    `lore remember`, `learn`, `lesson` and `handoff` without and with the helper; with the record count and the
    index size. Read only: it runs on temporary copies of the index and of your data (the writes go there) and
    never writes to your data, index, state or cache dirs. The project's full evaluation harness (quality,
    scale, soaks) is `python -m benchmarks` in a checkout of lore."""
    from lore.agent.client import auto_start_enabled
    from lore.measure import measure_store
    from lore.paths import require_data_dir

    st = state(ctx)
    locations = st.locations
    require_data_dir(locations.data_dir)
    progress = _progress(quiet=as_json)
    result = measure_store(locations, st.settings, runs=runs, helper=auto_start_enabled(st.settings), writes=writes,
                           progress=progress)  # fmt: skip
    from lore.agent.log import prompt_summary
    from lore.paths import cache_dir

    result["prompts"] = prompt_summary(cache_dir(st.settings))  # what your hook handed lately, from its own log
    if as_json:
        typer.echo(orjson.dumps(result).decode())
        return
    render(result)


def _progress(quiet: bool) -> Any:
    import sys

    def progress(message: str) -> None:
        if not quiet and sys.stderr.isatty():
            typer.echo(f"  {message}...", err=True)

    return progress


def render(result: dict[str, Any]) -> None:
    from rich.table import Table

    from lore.render.terminal import console

    out = console()
    out.print(f"{result['records']:,} records in {result['data_dir']}; index {result['index_bytes'] / 1048576:.1f} MiB "
              f"({result['index']}), {result['runs']} runs over {len(result['queries'])} queries from your titles")  # fmt: skip
    table = Table(title="lore on your store (ms)")
    for column in ("measure", "p50", "p95", "x python", "n", "note"):
        table.add_column(column, justify="left" if column in ("measure", "note") else "right")
    timings = result["timings"]
    for name in _ROWS:
        figures = timings.get(name)
        if figures is None:
            continue
        ratio = figures.get("ratio_to_python")
        note = ""
        if "injected_share" in figures:
            note = f"context on {figures['injected_share']:.0%} of prompts"
        if "mode" in figures:
            note = f"mode: {figures['mode']}"
        table.add_row(name, f"{figures['p50']:.1f}", f"{figures['p95']:.1f}", f"{ratio:.2f}x" if ratio else "",
                      str(figures["n"]), note)  # fmt: skip
    writes = result.get("writes") or {}
    for name, figures in (writes.get("commands") or {}).items():
        ratio = figures.get("ratio_to_python_floor")
        failed = {code: count for code, count in figures.get("exit_codes", {}).items() if code != "0"}
        note = "on a copy of your data" + ("; exit codes " + ", ".join(f"{c}: {n}" for c, n in failed.items()) if failed else "")
        table.add_row(name, f"{figures['p50']:.1f}", f"{figures['p95']:.1f}", f"{ratio:.2f}x" if ratio else "",
                      str(figures["n"]), note)  # fmt: skip
    out.print(table)
    out.print(f"first search in process (opens the index, loads the model): {result['first_search_ms']:.1f} ms")
    helper = result["your_helper"]
    out.print(f"your warm helper: {'running, pid ' + str(helper['pid']) if helper['running'] else 'not running'}")
    if "prompts" in result:
        from lore.agent.log import summary_line

        out.print(summary_line(result["prompts"]))
    for note in [*result["notes"], *(result.get("writes") or {}).get("notes", [])]:
        out.print(f"note: {note}")
