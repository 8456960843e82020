"""`lore search`: hybrid retrieval over the index, rendered for a terminal or as JSON."""

from __future__ import annotations

import os
import time

import orjson
import typer

from lore.cli.app import app, state
from lore.errors import UsageError
from lore.paths import require_data_dir


def build_options(ctx: typer.Context, *, limit: int, kinds: list[str] | None, project: str | None, tags: list[str] | None,
                  since: str | None, until: str | None, include_all: bool, intent: str | None, graph_depth: int,
                  channels: str | None, diversity: bool, disable: list[str] | None, weights: str | None,
                  adaptive: bool = False, fusion: str = "score") -> object:  # fmt: skip
    from datetime import UTC, datetime

    from lore.rank.pipeline import CHANNELS, SearchOptions
    from lore.rank.stages import SWITCHABLE
    from lore.store.records import normalise_kind
    from lore.timeparse import parse_when

    now = datetime.now(UTC)
    chosen = tuple(c.strip() for c in channels.split(",")) if channels else CHANNELS
    unknown = [c for c in chosen if c not in CHANNELS]
    if unknown:
        raise UsageError(f"unknown channel {unknown[0]!r}", hint="channels: " + ", ".join(CHANNELS))
    weight_map = None
    if weights:
        from lore.rank.fusion import DEFAULT_WEIGHTS

        weight_map = dict(DEFAULT_WEIGHTS)
        for part in weights.split(","):
            name, _, value = (p.strip() for p in part.partition("="))
            if name not in CHANNELS:
                raise UsageError(f"unknown channel {name!r} in --weights", hint="channels: " + ", ".join(CHANNELS))
            try:
                weight = float(value)
            except ValueError as exc:
                raise UsageError(f"cannot read weight {part!r}", hint="use --weights vector=1,hyde=0.8,bm25=0.6") from exc
            if not weight >= 0 or weight == float("inf"):
                raise UsageError(f"weight {part!r} must be a finite number >= 0", hint="0 switches a channel off")
            weight_map[name] = weight
    if fusion not in FUSIONS:
        raise UsageError(f"unknown fusion {fusion!r}", hint="fusions: " + ", ".join(FUSIONS))
    unknown_stages = sorted(set(disable or ()) - set(SWITCHABLE))
    if unknown_stages:
        raise UsageError(f"unknown stage {unknown_stages[0]!r} for --disable", hint="stages: " + ", ".join(SWITCHABLE))
    since_at = parse_when(since, now).timestamp() if since else None
    until_at = parse_when(until, now).timestamp() if until else None
    if since_at is not None and until_at is not None and since_at >= until_at:
        raise UsageError(f"--since {since} is not before --until {until}", hint="nothing can match an empty time range")
    return SearchOptions(
        limit=limit,
        types=frozenset(normalise_kind(k) for k in kinds) if kinds else None,
        project_filter=project,
        tags=tuple(tags or ()),
        since=since_at,
        until=until_at,
        include_all=include_all,
        intents=tuple(i.strip() for i in intent.split(",") if i.strip()) if intent else (),
        current_project=state(ctx).current_project(),
        graph_depth=graph_depth,
        channels=chosen,
        weights=weight_map,
        diversity=diversity,
        adaptive=adaptive,
        fusion=fusion,
        disabled_stages=frozenset(disable or ()),
        now=time.time(),
    )


REFRESH_POLICIES = ("refresh", "warn", "ignore")
FUSIONS = ("score", "rrf")


def refresh_policy() -> str:
    """``LORE_INDEX_REFRESH``: what a search does with a stale index (refresh it, warn, or ignore)."""
    policy = os.environ.get("LORE_INDEX_REFRESH", "refresh").strip().lower() or "refresh"
    if policy not in REFRESH_POLICIES:
        raise UsageError(f"LORE_INDEX_REFRESH={policy!r} is not a policy", hint="use " + ", ".join(REFRESH_POLICIES))
    return policy


@app.command()
def search(
    ctx: typer.Context,
    query: str = typer.Argument(..., help="What you are looking for, in your own words."),
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
    from lore.search import SearchSession
    from lore.search import search as run_search

    if not query.strip():
        raise UsageError("the query is empty", hint="say what you are looking for, or list records with `lore list`")
    st = state(ctx)
    require_data_dir(st.locations.data_dir)
    options = build_options(ctx, limit=limit, kinds=kind, project=project, tags=tag, since=since, until=until,
                            include_all=include_all, intent=intent, graph_depth=graph_depth, channels=channels,
                            diversity=diversity, disable=disable, weights=weights, adaptive=adaptive,
                            fusion=fusion)  # fmt: skip
    progress, stop = terminal_progress()
    try:
        response, reader = run_search(SearchSession(st.locations), query, options,  # type: ignore[arg-type]
                                      policy=refresh_policy(), progress=progress)  # fmt: skip
    finally:
        stop()
    if as_json:
        from lore.render.results import response_json

        typer.echo(orjson.dumps(response_json(response, reader)).decode())
        return
    from lore.render.terminal import render_search

    render_search(response, reader, explain=explain)


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
    from lore.context import FORMATS, assemble, block_json
    from lore.context import synthesize as run_synthesis
    from lore.search import SearchSession
    from lore.search import search as run_search

    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}", hint="formats: " + ", ".join(FORMATS))
    st = state(ctx)
    require_data_dir(st.locations.data_dir)
    options = build_options(ctx, limit=max_items, kinds=None, project=None, tags=None, since=None, until=None,
                            include_all=include_all, intent=None, graph_depth=graph_depth, channels=None,
                            diversity=False, disable=None, weights=None)  # fmt: skip
    response, reader = run_search(SearchSession(st.locations), query, options,  # type: ignore[arg-type]
                                  policy=refresh_policy())  # fmt: skip
    block = assemble(response, reader, budget_chars=budget_tokens * 4, max_items=max_items, fmt=fmt, gap_line=gap_line)
    if synthesize:
        block = run_synthesis(block)
    for notice in block.notices:
        typer.echo(notice, err=True)
    if fmt == "json":
        typer.echo(orjson.dumps(block_json(block)).decode())
        return
    if block.text:
        typer.echo(block.text)
