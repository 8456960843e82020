"""`lore search`: hybrid retrieval over the index, rendered for a terminal or as JSON."""

from __future__ import annotations

import orjson
import typer

from lore.cli.base import app, state
from lore.errors import UsageError
from lore.paths import require_data_dir


def build_options(ctx: typer.Context, *, limit: int, kinds: list[str] | None, project: str | None, tags: list[str] | None,
                  since: str | None, until: str | None, include_all: bool, intent: str | None, graph_depth: int,
                  channels: str | None, diversity: bool, disable: list[str] | None, weights: str | None,
                  adaptive: bool = False, fusion: str = "score", include_candidates: bool = True,
                  phrases: str = "hint", syntax: bool = False) -> object:  # fmt: skip
    return state(ctx).search_options(limit=limit, kinds=kinds, project=project, tags=tags, since=since, until=until,
                                     include_all=include_all, intent=intent, graph_depth=graph_depth,
                                     channels=channels, diversity=diversity, disable=disable, weights=weights,
                                     adaptive=adaptive, fusion=fusion, include_candidates=include_candidates,
                                     phrases=phrases, syntax=syntax)  # fmt: skip


@app.command()
def search(
    ctx: typer.Context,
    query: str = typer.Argument(..., help="What you are looking for, in your own words; or in the query language: "
                                "type:decision tag:postgres project:P title:word, -word, NOT, OR, word*, word~, \"a phrase\"."),
    limit: int = typer.Option(10, "--limit", "-n", min=1, max=200, help="Results to show."),
    kind: list[str] | None = typer.Option(None, "--type", help="Only this record type (repeatable)."),
    project: str | None = typer.Option(None, "--project", "--in-project", help="Only records of this project (the current project, -P, is boosted anyway)."),
    tag: list[str] | None = typer.Option(None, "--tag", help="Only records with this tag (repeatable)."),
    since: str | None = typer.Option(None, "--since", help="Only records at or after (2025-03-01, 30d, 6mo)."),
    until: str | None = typer.Option(None, "--until", help="Only records before."),
    include_all: bool = typer.Option(False, "--all", help="Include superseded and retracted records (marked)."),
    intent: str | None = typer.Option(None, "--intent", help="Comma-separated intents to favour (heritage bonus)."),
    graph_depth: int = typer.Option(0, "--graph-depth", min=0, max=3, help="Follow typed edges from the top hits."),
    channels: str | None = typer.Option(None, "--channels", help="Comma-separated subset of bm25,vector,hyde,graph."),
    weights: str | None = typer.Option(None, "--weights", help="Channel weights, e.g. vector=1,hyde=0.8,bm25=0.6 (default: bm25 1, vector 0.8, hyde 0.2, graph 0)."),
    fusion: str = typer.Option("score", "--fusion", help="How channels combine: score (each channel's scores over its best, weighted) or rrf (weighted reciprocal rank fusion)."),
    diversity: bool = typer.Option(False, "--diversity/--no-diversity", help="Re-order the top hits for novelty (MMR). Off by default: it cost recall on the known-item dev split."),
    adaptive: bool = typer.Option(False, "--adaptive", help="Let the query's classified intent adjust channel weights and favour record types. Off by default: it cost MRR on the demo and known-item dev splits."),
    disable: list[str] | None = typer.Option(None, "--disable", help="Switch off a scoring stage (repeatable): status, decay, reinforcement, project, intent, type, coverage, threshold."),
    explain: bool = typer.Option(False, "--explain", help="Show every channel's rank and every factor."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (stable; see docs/search.md)."),
) -> None:
    """Search decisions, patterns, lessons, handoffs, failures and observations."""
    from lore.cli.cmd_index import terminal_progress

    if not query.strip():
        raise UsageError("the query is empty", hint="say what you are looking for, or list records with `lore list`")
    st = state(ctx)
    require_data_dir(st.locations.data_dir)
    options = build_options(ctx, limit=limit, kinds=kind, project=project, tags=tag, since=since, until=until,
                            include_all=include_all, intent=intent, graph_depth=graph_depth, channels=channels,
                            diversity=diversity, disable=disable, weights=weights, adaptive=adaptive,
                            fusion=fusion, phrases="filter", syntax=True)  # fmt: skip
    progress, stop = terminal_progress()
    try:
        response = st.run_search(query, options, progress=progress)  # type: ignore[arg-type]
    finally:
        stop()
    if as_json:
        from lore.render.results import response_json

        typer.echo(orjson.dumps(response_json(response)).decode())
        return
    from lore.render.terminal import consoles, render_search

    out, err = consoles(st.terminal)
    render_search(response, explain=explain, out=out, err=err)


@app.command()
def context(
    ctx: typer.Context,
    query: str = typer.Argument(..., help="What the agent is about to work on."),
    budget_tokens: int = typer.Option(500, "--budget-tokens", min=10, max=100000, help="Token budget (1 token = 4 characters)."),
    max_items: int = typer.Option(5, "--max-items", min=1, max=50, help="At most this many memories."),
    fmt: str = typer.Option("markdown", "--format", help="markdown, compact or json."),
    graph_depth: int = typer.Option(1, "--graph-depth", min=0, max=3, help="Follow typed edges from the top hits."),
    gap_line: bool = typer.Option(False, "--gap-line", help="On an evidence gap print the gap line instead of nothing."),
    synthesize: bool = typer.Option(False, "--synthesize", help="Summarise the excerpts with LORE_LLM_CMD."),
    include_all: bool = typer.Option(False, "--all", help="Include superseded and retracted records."),
) -> None:
    """Print the agent-ready block of the most relevant memories, within a token budget."""
    from lore.context import FORMATS, TERMINAL, asked, block_json
    from lore.context import synthesize as run_synthesis

    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}", hint="formats: " + ", ".join(FORMATS))
    st = state(ctx)
    require_data_dir(st.locations.data_dir)
    options = build_options(ctx, limit=max_items, kinds=None, project=None, tags=None, since=None, until=None,
                            include_all=include_all, intent=None, graph_depth=graph_depth, channels=None,
                            diversity=False, disable=None, weights=None, include_candidates=False)  # fmt: skip
    block = st.run_context(query, options, asked(TERMINAL, budget_tokens, max_items, fmt=fmt, gap_line=gap_line))  # type: ignore[arg-type]
    if synthesize:
        block = run_synthesis(block, st.settings.llm_cmd)
    for notice in block.notices:
        typer.echo(notice, err=True)
    if fmt == "json":
        typer.echo(orjson.dumps(block_json(block)).decode())
        return
    if block.text:
        typer.echo(block.text)
