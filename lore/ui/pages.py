"""The pages of `lore ui`, rendered on the server from lore's core (no templates, no client framework).

Each function takes the ``Memory`` and the request's ``Urls`` (which carry the
access token into every link) and returns a whole HTML document.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

import orjson

from lore.render.text import age, one_line, shorten
from lore.store.records import KINDS, RELATIONS, Record, kind_from_id
from lore.ui.html import Child, Markup, join, tag
from lore.ui.svg import KIND_LABEL, graph_svg, relation_class, timeline_svg

if TYPE_CHECKING:
    from lore.rank.pipeline import SearchResponse
    from lore.rank.stages import Candidate
    from lore.ui.memory import Memory

GRAPH_DEPTHS = (1, 2, 3)
TIMELINE_LIST_LIMIT = 300
GAP_LINE = "EVIDENCE GAP: no reliable memory for this query"


class Urls:
    """Links within the UI, each carrying the access token."""

    def __init__(self, token: str) -> None:
        self.token = token

    def _url(self, path: str, **query: object) -> str:
        params = {k: v for k, v in query.items() if v not in (None, "", False)}
        params["token"] = self.token
        return f"{path}?{urlencode(params)}"

    def home(self) -> str:
        return self._url("/")

    def search(self, q: str | None = None, **filters: object) -> str:
        return self._url("/search", q=q, **filters)

    def record(self, record_id: str) -> str:
        return self._url(f"/record/{quote(record_id, safe='')}")

    def graph(self, record_id: str, depth: int = 1) -> str:
        return self._url(f"/graph/{quote(record_id, safe='')}", depth=depth if depth != 1 else None)

    def timeline(self, **filters: object) -> str:
        return self._url("/timeline", **filters)

    def stats(self) -> str:
        return self._url("/stats")

    def static(self, name: str) -> str:
        return self._url(f"/static/{name}")


# -- the frame -------------------------------------------------------------------------------


def document(urls: Urls, title: str, body: Child, *, active: str = "", data_dir: str = "") -> str:
    nav = [
        tag("a", label, href=href, class_="active" if key == active else None)
        for key, label, href in (("search", "Search", urls.search()), ("timeline", "Timeline", urls.timeline()),
                                 ("stats", "Stats & health", urls.stats()))
    ]  # fmt: skip
    header = tag(
        "header",
        tag("a", tag("span", "lore", class_="logo-word"), href=urls.home(), class_="logo"),
        tag("nav", nav),
        tag("form", tag("input", type="search", name="q", placeholder="Search memory…  ( / )", aria_label="Search",
                        id="quick-search"),
            tag("input", type="hidden", name="token", value=urls.token),
            action="/search", method="get", class_="quick", role="search"),
        class_="top",
    )  # fmt: skip
    footer = tag("footer", "read-only view of ", tag("code", data_dir), " · lore ui")
    page = tag(
        "html",
        tag("head",
            tag("meta", charset="utf-8"),
            tag("meta", name="viewport", content="width=device-width, initial-scale=1"),
            tag("meta", name="color-scheme", content="light dark"),
            tag("title", f"{title} · lore"),
            # An empty icon: without one the browser asks for /favicon.ico, without the token.
            tag("link", rel="icon", href="data:,"),
            tag("link", rel="stylesheet", href=urls.static("lore.css")),
            tag("script", src=urls.static("lore.js"), defer=True)),
        tag("body", header, tag("main", body), footer),
        lang="en",
    )  # fmt: skip
    return "<!doctype html>\n" + page


def kind_chip(kind: str) -> Markup:
    return tag("span", KIND_LABEL.get(kind, kind), class_=f"chip k-{kind}")


def status_chip(status: str) -> Markup | None:
    return None if status == "active" else tag("span", status, class_=f"chip status s-{status}")


def when(moment: datetime | None, now: datetime) -> Markup:
    if moment is None:
        return tag("span", "no date", class_="muted")
    return tag("time", f"{moment:%Y-%m-%d}", tag("span", f" · {age(moment, now)} ago", class_="muted"),
               datetime=moment.strftime("%Y-%m-%dT%H:%M:%SZ"), title=moment.strftime("%Y-%m-%d %H:%M UTC"))  # fmt: skip


def record_row(record: Record, urls: Urls, now: datetime) -> Markup:
    """One line of a listing: type, title, project, date."""
    return tag(
        "li",
        kind_chip(record.kind),
        tag("a", one_line(record.title), href=urls.record(record.id), class_="title"),
        status_chip(record.status),
        tag("span", tag("code", record.id), " · ", record.project or "no project", " · ", when(record.timestamp, now),
            class_="meta"),
        class_="row", data_id=record.id,
    )  # fmt: skip


def _now() -> datetime:
    return datetime.now(UTC)


# -- home --------------------------------------------------------------------------------------


def home_page(memory: Memory, urls: Urls) -> str:
    snapshot = memory.snapshot
    summary = memory.summary()
    diagnosis = memory.diagnosis()
    now = _now()
    epoch = datetime.min.replace(tzinfo=UTC)
    recent = sorted(snapshot.records.values(), key=lambda r: (r.timestamp or epoch, r.id), reverse=True)[:12]
    cards = [
        _card(str(summary["records"]), "records", urls.timeline()),
        _card(str(memory.loaded().adjacency.edge_count), "links", urls.stats()),
        _card(str(len([p for p in summary["by_project"] if p != "-"])), "projects", urls.timeline()),
        _card("healthy" if diagnosis.ok else f"{len(diagnosis.problems)} problems", "lore doctor", urls.stats(),
              tone="ok" if diagnosis.ok else "bad"),
    ]  # fmt: skip
    by_type = [
        tag("a", kind_chip(kind), tag("span", str(count), class_="count"), href=urls.timeline(type=kind), class_="type-count")
        for kind, count in summary["by_type"].items()
    ]  # fmt: skip
    projects = [
        tag("a", name, tag("span", str(count), class_="count"), href=urls.timeline(project=name), class_="project-pill")
        for name, count in summary["by_project"].items()
    ]  # fmt: skip
    body = [
        tag("section",
            tag("h1", "What does the team know?"),
            _search_form(urls, "", {}, autofocus=True),
            tag("p", "Hybrid search over every decision, pattern, lesson, handoff, failure and observation, "
                     "ranked exactly as ", tag("code", "lore search"), " ranks them, with the reasons.", class_="lede"),
            class_="hero"),
        tag("section", cards, class_="cards"),
        tag("section", tag("h2", "By type"), tag("div", by_type, class_="type-counts"),
            tag("h2", "By project"), tag("div", projects, class_="pills"), class_="overview"),
        tag("section", tag("h2", "Latest"), tag("ul", [record_row(r, urls, now) for r in recent], class_="rows")),
    ]  # fmt: skip
    return document(urls, "Home", body, data_dir=str(memory.locations.data_dir))


def _card(figure: str, label: str, href: str, tone: str = "") -> Markup:
    return tag("a", tag("span", figure, class_="figure"), tag("span", label, class_="label"), href=href,
               class_=f"card {tone}".strip())  # fmt: skip


# -- search ------------------------------------------------------------------------------------


def _search_form(urls: Urls, query: str, chosen: dict[str, str], *, autofocus: bool = False,
                 projects: Iterable[str] = ()) -> Markup:  # fmt: skip
    fields: list[Child] = [
        tag("input", type="search", name="q", value=query, placeholder="e.g. why did we move off celery",
            aria_label="Query", autofocus=autofocus, id="q", autocomplete="off"),
        tag("input", type="hidden", name="token", value=urls.token),
    ]  # fmt: skip
    if projects:
        fields.append(tag("select",
            tag("option", "any type", value=""),
            [tag("option", KIND_LABEL[k], value=k, selected=chosen.get("type") == k) for k in KINDS],
            name="type", aria_label="Type"))  # fmt: skip
        fields.append(tag("select",
            tag("option", "any project", value=""),
            [tag("option", p, value=p, selected=chosen.get("project") == p) for p in projects],
            name="project", aria_label="Project"))  # fmt: skip
        fields.append(tag("label", tag("input", type="checkbox", name="all", value="1", checked=bool(chosen.get("all"))),
                          " superseded & retracted", class_="check"))  # fmt: skip
    fields.append(tag("button", "Search", type="submit"))
    return tag("form", fields, action="/search", method="get", class_="search", role="search", id="search-form")


def search_page(memory: Memory, urls: Urls, params: dict[str, str]) -> str:
    query = params.get("q", "").strip()
    chosen = {k: params[k] for k in ("type", "project", "all") if params.get(k)}
    projects = [p for p in memory.summary()["by_project"] if p != "-"]
    body: list[Child] = [_search_form(urls, query, chosen, autofocus=not query, projects=projects)]
    if not query:
        body.append(tag("p", "Type what you are looking for, in your own words. Quoted words must appear as a phrase.",
                        class_="muted"))  # fmt: skip
        return document(urls, "Search", body, active="search", data_dir=str(memory.locations.data_dir))
    options = memory.options(kinds=[chosen["type"]] if "type" in chosen else None, project=chosen.get("project"),
                             include_all=bool(chosen.get("all")))  # fmt: skip
    response = memory.search(query, options)
    body.append(search_results(response, urls))
    return document(urls, f"Search: {shorten(one_line(query), 60) or 'query'}", body, active="search",
                    data_dir=str(memory.locations.data_dir))  # fmt: skip


def _terms(query: str) -> list[str]:
    from lore.analysis import terms as query_terms
    from lore.rank.query import content_words

    found = {t for t in [*content_words(query), *query_terms(query)] if len(t) >= 3}
    return sorted(found, key=len, reverse=True)


def highlight(text: str, terms: list[str]) -> Markup:
    """``text`` with the query's words marked, every piece escaped."""
    if not terms:
        return tag("span", text)
    pattern = re.compile(r"(?i)\b(?:" + "|".join(re.escape(t) for t in terms) + r")\w*")
    pieces: list[Child] = []
    at = 0
    for match in pattern.finditer(text):
        pieces.append(text[at:match.start()])
        pieces.append(tag("mark", match.group(0)))
        at = match.end()
    pieces.append(text[at:])
    return tag("span", pieces)


def _snippet(content: str, title: str, width: int = 300) -> str:
    body = content[len(title):].strip() if content.startswith(title) else content
    text = " · ".join(one_line(line) for line in body.splitlines() if line.strip())
    return shorten(text, width) or text[:width]


def search_results(response: SearchResponse, urls: Urls) -> Markup:
    now = _now()
    terms = _terms(response.query)
    parts: list[Child] = [tag("p", f"Warning: {w}", class_="warning") for w in response.warnings]
    gap = response.gap.figures()
    if response.gap.gap:
        parts.append(tag("div", tag("strong", GAP_LINE), tag("span", f" ({gap.get('reason')})", class_="muted"),
                         class_="gap", role="status"))  # fmt: skip
    if not response.hits:
        parts.append(tag("p", "No results.", class_="muted"))
    items = [_hit(number, hit, response.weights, urls, terms, now) for number, hit in enumerate(response.hits, 1)]
    parts.append(tag("ol", items, class_="hits", id="results", data_query=response.query))
    weights = ", ".join(f"{k} {v:.2f}" for k, v in response.weights.items())
    parts.append(tag(
        "details",
        tag("summary", "How this ranking was made"),
        tag("dl",
            tag("dt", "intent"), tag("dd", f"{response.intent.intent} (similarity {response.intent.similarity:.2f}"
                                           f"{', fallback' if response.intent.fallback else ''})"),
            tag("dt", "fusion"), tag("dd", f"{response.fusion} fusion, channel weights {weights}"),
            tag("dt", "evidence gap"), tag("dd", f"{'yes' if response.gap.gap else 'no'} · z {gap.get('z_score')} · "
                                                 f"top cosine {gap.get('top_cosine')} · coverage {gap.get('term_coverage')} · "
                                                 f"channels agreeing {gap.get('channels_agreeing')} ({gap.get('reason')})"),
            tag("dt", "timings, ms"), tag("dd", ", ".join(f"{k} {v:.1f}" for k, v in response.timings_ms.items())),
            class_="facts"),
        class_="ranking-notes",
    ))  # fmt: skip
    return tag("section", parts, class_="results")


def _hit(number: int, hit: Candidate, weights: dict[str, float], urls: Urls, terms: list[str],
         now: datetime) -> Markup:  # fmt: skip
    from lore.render.results import components

    moment = datetime.fromtimestamp(hit.time, UTC) if hit.time is not None else None
    title = one_line(hit.title)
    snippet = _snippet(hit.content, hit.title)
    parts = components(hit, weights)
    channel_cells = []
    for channel in ("bm25", "vector", "hyde", "graph"):
        if channel in hit.ranks:
            score = hit.channel_scores.get(channel)
            channel_cells.append(tag("tr",
                tag("th", channel), tag("td", f"#{hit.ranks[channel]}"),
                tag("td", "" if score is None else f"{score:.3f}"),
                tag("td", f"+{parts['contributions'].get(channel, 0.0):.4f}")))  # fmt: skip
        else:
            channel_cells.append(tag("tr", tag("th", channel), tag("td", "–", colspan="3", class_="muted")))
    factors = [tag("tr", tag("th", name), tag("td", f"× {value:.3f}")) for name, value in hit.factors.items()]
    summary_bits = [f"{c} #{hit.ranks[c]}" for c in ("bm25", "vector", "hyde", "graph") if c in hit.ranks]
    explain = tag(
        "details",
        tag("summary", tag("span", " · ".join(summary_bits) or "graph expansion", class_="muted"),
            tag("span", f"score {_score(hit.score)}", class_="score")),
        tag("div",
            tag("table", tag("thead", tag("tr", tag("th", "channel"), tag("th", "rank"), tag("th", "score"),
                                                tag("th", "share"))),
                tag("tbody", channel_cells), class_="explain"),
            tag("table", tag("tbody",
                tag("tr", tag("th", "relevance"), tag("td", f"{hit.relevance:.3f} (fused {hit.fused:.4f})")),
                factors,
                tag("tr", tag("th", "score"), tag("td", tag("strong", f"= {hit.score:.3f}")), class_="total")),
                class_="explain"),
            tag("p", f"diversity: #{hit.score_rank} by score" + (
                "" if hit.max_similarity is None else f", cosine {hit.max_similarity:.2f} to the closest hit above"),
                class_="muted") if hit.score_rank is not None else None,
            class_="explain-body"),
        class_="why",
    )  # fmt: skip
    return tag(
        "li",
        tag("div",
            tag("span", str(number), class_="rank"), kind_chip(hit.kind),
            tag("a", highlight(title, terms), href=urls.record(hit.id), class_="title"),
            status_chip(hit.status),
            tag("span", f"(+{hit.represents - 1} near-identical)", class_="muted") if hit.represents > 1 else None,
            class_="hit-head"),
        tag("p", highlight(snippet, terms), class_="snippet") if snippet else None,
        [tag("p", "via ", path, class_="via") for path in hit.path],
        [tag("p", "⚠ ", note, class_="note") for note in hit.notes],
        tag("p", tag("code", hit.id), " · ", hit.project or "no project", " · ", when(moment, now), " · ",
            tag("a", "graph", href=urls.graph(hit.id)), class_="meta"),
        explain,
        class_="hit", data_id=hit.id, data_score=f"{hit.score:.6f}",
    )  # fmt: skip


def _score(score: float) -> str:
    return f"{score:.3f}" if score >= 0.0005 else "<0.001"


# -- record ------------------------------------------------------------------------------------

PROVENANCE_KEYS = ("created_by", "author", "actor", "agent", "source", "session_id", "origin", "source_id",
                   "learned_from", "schema_version", "created_at", "updated_at", "timestamp")  # fmt: skip
# Shown in the page's head or in its provenance, as lore reads them (with defaults applied).
SHOWN_ELSEWHERE = ("id", "status", "confidence", "importance", "superseded_by", "retracted_reason")


def _value(value: Any, urls: Urls, known: dict[str, Record]) -> Child:
    """A stored value as HTML: text keeps its line breaks, record ids become links."""
    if isinstance(value, str):
        if value in known and kind_from_id(value):
            return tag("a", tag("code", value), href=urls.record(value))
        return tag("span", value, class_="text")
    if isinstance(value, bool) or value is None:
        return tag("code", orjson.dumps(value).decode())
    if isinstance(value, int | float):
        return tag("span", str(value))
    if isinstance(value, list):
        if not value:
            return tag("span", "none", class_="muted")
        if all(isinstance(v, str) and len(v) <= 32 and "\n" not in v for v in value):
            # Tags, entities, ids: short words read better side by side than as a bullet list.
            return tag("span", [tag("span", _value(v, urls, known), class_="word") for v in value], class_="words")
        return tag("ul", [tag("li", _value(v, urls, known)) for v in value], class_="values")
    if isinstance(value, dict):
        return tag("dl", [[tag("dt", k.replace("_", " ")), tag("dd", _value(v, urls, known))] for k, v in value.items()],
                   class_="nested")  # fmt: skip
    return tag("span", str(value))


def record_page(memory: Memory, urls: Urls, record_id: str) -> str:
    loaded = memory.loaded()
    snapshot = loaded.snapshot
    record = snapshot.get(record_id)  # NotFoundError for an unknown id: a 404 page
    now = _now()
    raw = record.raw
    fields = [
        [tag("dt", key.replace("_", " ")), tag("dd", _value(value, urls, snapshot.records))]
        for key, value in raw.items()
        if key not in SHOWN_ELSEWHERE and key not in PROVENANCE_KEYS and value not in (None, "", [], {})
    ]  # fmt: skip
    data_dir = memory.locations.data_dir
    try:
        source = str(record.source.relative_to(data_dir)) if record.source else "?"
    except ValueError:
        source = str(record.source)
    entries = memory.audit_entries(record.id)
    writer = next((e.get("actor") for e in entries if e.get("id") == record.id and e.get("op") in ("retain", "lesson", "migrate")), None)
    provenance: list[Child] = [
        tag("dt", "stored in"), tag("dd", tag("code", source + (f":{record.line}" if record.line else ""))),
        tag("dt", "written"), tag("dd", when(record.timestamp, now)),
    ]  # fmt: skip
    if writer:
        provenance += [tag("dt", "written by"), tag("dd", str(writer), tag("span", " (audit log)", class_="muted"))]
    for key in PROVENANCE_KEYS:
        if key in raw and key != "timestamp":
            provenance += [tag("dt", key.replace("_", " ")), tag("dd", _value(raw[key], urls, snapshot.records))]
    provenance += [
        tag("dt", "status"), tag("dd", record.status),
        tag("dt", "confidence"), tag("dd", f"{record.confidence:.2f}"),
        tag("dt", "importance"), tag("dd", str(record.importance)),
    ]  # fmt: skip
    hood = memory.neighbourhood(record.id, 1)
    links = _links_table(record, memory, urls)
    audit_rows = [
        tag("tr",
            tag("td", str(e.get("seq", ""))), tag("td", str(e.get("timestamp", ""))), tag("td", tag("code", str(e.get("op", "")))),
            tag("td", str(e.get("actor", ""))),
            tag("td", tag("code", orjson.dumps(e["detail"]).decode()) if e.get("detail") else "", class_="detail"),
            tag("td", tag("code", str(e.get("hash", ""))[:12]), class_="hash"))
        for e in entries
    ]  # fmt: skip
    header = tag(
        "section",
        tag("div", kind_chip(record.kind), status_chip(record.status), tag("code", record.id, class_="rid"),
            tag("span", record.project or "no project", class_="muted"), class_="record-meta"),
        tag("h1", one_line(record.title)),
        _lifecycle(record, snapshot.records, urls),
        class_="record-head",
    )  # fmt: skip
    body = [
        header,
        tag("div",
            tag("section", tag("h2", "Fields"), tag("dl", fields, class_="fields"), class_="panel"),
            tag("section", tag("h2", "Provenance"), tag("dl", provenance, class_="fields compact"), class_="panel"),
            class_="two-col"),
        tag("section",
            tag("h2", "Graph ", tag("a", "open full graph →", href=urls.graph(record.id), class_="aside")),
            _graph_figure(hood, snapshot.records, urls, lambda rid: urls.record(rid), record.id),
            class_="panel"),
        tag("section", tag("h2", f"Links ({len(links)})"), _table_or_none(links, ("", "relation", "record", ""), "No links."),
            class_="panel"),
        tag("section", tag("h2", f"Audit log ({len(entries)})"),
            _table_or_none(audit_rows, ("seq", "time", "op", "actor", "detail", "hash"),
                           "No audit entries: this record was written before lore's audit log, or by another tool."),
            class_="panel"),
        tag("details", tag("summary", "Stored JSON"),
            tag("pre", orjson.dumps(raw, option=orjson.OPT_INDENT_2, default=str).decode(), class_="raw")),
    ]  # fmt: skip
    return document(urls, one_line(record.title)[:80], body, data_dir=str(data_dir))


def _lifecycle(record: Record, records: dict[str, Record], urls: Urls) -> Markup | None:
    notes: list[Child] = []
    successor = record.raw.get("superseded_by")
    if isinstance(successor, str) and successor:
        target = tag("a", successor, href=urls.record(successor)) if successor in records else tag("code", successor)
        notes.append(tag("p", "Superseded by ", target, class_="lifecycle superseded"))
    if record.raw.get("retracted_reason"):
        notes.append(tag("p", "Retracted: ", str(record.raw["retracted_reason"]), class_="lifecycle retracted"))
    return tag("div", notes) if notes else None


def _links_table(record: Record, memory: Memory, urls: Urls) -> list[Markup]:
    """Every edge touching the record: graph.json's (dangling ones too) and those its fields imply."""
    loaded = memory.loaded()
    records = loaded.snapshot.records
    rows: list[Markup] = []
    seen: set[tuple[str, str, str]] = set()
    adjacency = loaded.adjacency
    for edge, other, direction in adjacency.neighbours(record.id):
        seen.add((edge.source, edge.target, edge.relation))
        rows.append(_link_row(direction, edge.relation, other, records.get(other), urls, implicit=edge.implicit))
    for link in loaded.snapshot.links(record.id):
        key = (link.edge.source, link.edge.target, link.relation)
        if key not in seen:  # an edge the graph dropped: to a missing record, or a self-loop
            seen.add(key)
            rows.append(_link_row(link.direction, link.relation, link.other_id, link.other, urls, implicit=False))
    return rows


def _link_row(direction: str, relation: str, other_id: str, other: Record | None, urls: Urls, *, implicit: bool) -> Markup:
    arrow = "→" if direction == "out" else "←"
    target: Child = (
        [kind_chip(other.kind), " ", tag("a", one_line(other.title), href=urls.record(other_id)), " ", tag("code", other_id, class_="muted")]
        if other is not None else [tag("code", other_id), tag("span", " (missing record)", class_="bad")]
    )  # fmt: skip
    return tag(
        "tr",
        tag("td", arrow, class_="arrow", title="this record → other" if direction == "out" else "other → this record"),
        tag("td", tag("span", relation.replace("_", " "), class_=f"rel {relation_class(relation)}")),
        tag("td", target),
        tag("td", "from the record's fields" if implicit else "graph.json", class_="muted"),
        class_="link", data_relation=relation, data_other=other_id, data_direction=direction,
    )  # fmt: skip


def _table_or_none(rows: list[Markup], heads: tuple[str, ...], empty: str) -> Markup:
    if not rows:
        return tag("p", empty, class_="muted")
    return tag("table", tag("thead", tag("tr", [tag("th", h) for h in heads])), tag("tbody", rows), class_="grid")


# -- graph -------------------------------------------------------------------------------------


def _graph_figure(hood: Any, records: dict[str, Record], urls: Urls, href: Any, centre: str) -> Markup:
    caption = f"Records linked to {centre} within {max(hood.hops.values(), default=0)} hop(s)"
    if len(hood.hops) == 1:
        return tag("p", "No records are linked to this one.", class_="muted")
    relations = sorted({e.relation for e in hood.edges}, key=lambda r: RELATIONS.index(r) if r in RELATIONS else 99)
    kinds = [k for k in KINDS if any(records.get(rid) is not None and records[rid].kind == k for rid in hood.hops)]
    legend = tag(
        "div",
        [tag("span", tag("i", class_=f"swatch-line {relation_class(r)}"), r.replace("_", " "), class_="legend-item") for r in relations],
        tag("span", class_="legend-gap"),
        [tag("span", tag("i", class_=f"swatch k-{k}"), KIND_LABEL[k], class_="legend-item") for k in kinds],
        tag("span", tag("i", class_="swatch-line implicit"), "implied by a record's fields", class_="legend-item")
        if any(e.implicit for e in hood.edges) else None,
        class_="legend",
    )  # fmt: skip
    note = None
    if hood.left_out:
        note = tag("p", f"{hood.left_out} more linked record(s) not drawn; open a neighbour's graph to see them.", class_="muted")
    return tag("figure", tag("div", graph_svg(hood, records, href, caption=caption), class_="graph-scroll"), legend, note,
               class_="graph-figure")  # fmt: skip


def graph_page(memory: Memory, urls: Urls, record_id: str, depth: int) -> str:
    snapshot = memory.snapshot
    record = snapshot.get(record_id)
    hood = memory.neighbourhood(record.id, depth, limit=60)
    depth_links = [
        tag("a", f"{d} hop{'s' if d > 1 else ''}", href=urls.graph(record.id, d), class_="active" if d == depth else None)
        for d in GRAPH_DEPTHS
    ]  # fmt: skip
    rows = []
    for other, hops in hood.hops.items():
        neighbour = snapshot.records.get(other)
        rows.append(tag("tr",
            tag("td", str(hops)),
            tag("td", kind_chip(neighbour.kind) if neighbour else ""),
            tag("td", tag("a", one_line(neighbour.title) if neighbour else other, href=urls.record(other)), " ",
                status_chip(neighbour.status) if neighbour else None),
            tag("td", tag("code", other)),
            class_="graph-node", data_id=other))  # fmt: skip
    body = [
        tag("section",
            tag("div", kind_chip(record.kind), tag("code", record.id, class_="rid"), class_="record-meta"),
            tag("h1", tag("a", one_line(record.title), href=urls.record(record.id))),
            tag("p", "Depth: ", join(depth_links, " · "), " · supersession chains are followed to their ends. "
                     "Click a record to centre the graph on it.", class_="muted"),
            class_="record-head"),
        tag("section", _graph_figure(hood, snapshot.records, urls, lambda rid: urls.graph(rid, depth), record.id),
            class_="panel wide"),
        tag("section", tag("h2", f"Records in this picture ({len(hood.hops)})"),
            _table_or_none(rows, ("hops", "type", "title", "id"), ""), class_="panel"),
    ]  # fmt: skip
    return document(urls, f"Graph of {record.id}", body, data_dir=str(memory.locations.data_dir))


# -- timeline ----------------------------------------------------------------------------------


def timeline_page(memory: Memory, urls: Urls, params: dict[str, str]) -> str:
    snapshot = memory.snapshot
    now = _now()
    project = params.get("project") or None
    kind = params.get("type") or None
    include_all = params.get("all") != "0"
    summary = memory.summary()
    lanes_all = list(summary["by_project"])
    chosen = [
        r for r in snapshot.records.values()
        if (project is None or (r.project or "-") == project) and (kind is None or r.kind == kind)
        and (include_all or r.active)
    ]  # fmt: skip
    lanes = [project] if project else lanes_all
    epoch = datetime.min.replace(tzinfo=UTC)
    newest_first = sorted(chosen, key=lambda r: (r.timestamp or epoch, r.id), reverse=True)
    months: dict[str, list[Record]] = {}
    for record in newest_first[:TIMELINE_LIST_LIMIT]:
        label = record.timestamp.strftime("%B %Y") if record.timestamp else "No date"
        months.setdefault(label, []).append(record)
    project_filters = [tag("a", "all projects", href=urls.timeline(type=kind), class_="pill" + (" active" if project is None else ""))]
    project_filters += [
        tag("a", name, href=urls.timeline(project=name, type=kind), class_="pill" + (" active" if project == name else ""))
        for name in lanes_all
    ]  # fmt: skip
    type_filters = [tag("a", "all types", href=urls.timeline(project=project), class_="pill" + (" active" if kind is None else ""))]
    type_filters += [
        tag("a", tag("i", class_=f"swatch k-{k}"), KIND_LABEL[k], href=urls.timeline(project=project, type=k),
            class_="pill" + (" active" if kind == k else ""))
        for k in KINDS if k in summary["by_type"]
    ]  # fmt: skip
    listing = [
        tag("section", tag("h3", label, tag("span", f" {len(items)}", class_="count")),
            tag("ul", [record_row(r, urls, now) for r in items], class_="rows"), class_="month")
        for label, items in months.items()
    ]  # fmt: skip
    more = None
    if len(newest_first) > TIMELINE_LIST_LIMIT:
        more = tag("p", f"The list shows the newest {TIMELINE_LIST_LIMIT} of {len(newest_first)}; narrow it by project or type.",
                   class_="muted")  # fmt: skip
    picture = timeline_svg(chosen, lanes, urls.record, lambda lane: urls.timeline(project=lane, type=kind),
                           lambda lane, of_kind: urls.timeline(project=lane, type=of_kind))  # fmt: skip
    body = [
        tag("h1", "Timeline"),
        tag("div", project_filters, class_="pills"),
        tag("div", type_filters, class_="pills"),
        tag("section", tag("div", picture, class_="timeline-scroll"),
            tag("p", f"{len(chosen)} records. Hollow dots are superseded or retracted. Rows within a lane, top to bottom: "
                     + ", ".join(KIND_LABEL[k] for k in ("decision", "pattern", "lesson", "anti_pattern", "handoff",
                                                          "failure", "observation")) + ".", class_="muted"),
            class_="panel wide"),
        listing, more,
    ]  # fmt: skip
    return document(urls, "Timeline", body, active="timeline", data_dir=str(memory.locations.data_dir))


# -- stats and health ---------------------------------------------------------------------------


def _bars(counts: dict[str, int], label: Any, href: Any = None, css: Any = None) -> Markup:
    top = max(counts.values(), default=1) or 1
    rows = []
    for name, count in counts.items():
        name_cell: Child = tag("a", label(name), href=href(name)) if href else label(name)
        rows.append(tag("div",
            tag("span", name_cell, class_="bar-label"),
            tag("span", tag("svg", tag("rect", width=f"{100 * count / top:.1f}", height="10", class_=css(name) if css else None),
                            attributes={"viewBox": "0 0 100 10", "preserveAspectRatio": "none", "aria-hidden": "true"}),
                class_="bar-track"),
            tag("span", str(count), class_="bar-count"),
            class_="bar-row"))  # fmt: skip
    return tag("div", rows, class_="bars")


def stats_page(memory: Memory, urls: Urls) -> str:
    summary = memory.summary()
    diagnosis = memory.diagnosis()
    loaded = memory.loaded()
    relations: dict[str, int] = {}
    implicit = 0
    for edges in loaded.adjacency.out.values():
        for edge in edges:
            relations[edge.relation] = relations.get(edge.relation, 0) + 1
            implicit += edge.implicit
    relations = dict(sorted(relations.items(), key=lambda kv: (-kv[1], kv[0])))
    status = memory.index_status()
    index_facts = [tag("dt", "state"), tag("dd", status.reason if status.stale or not status.exists else "up to date")]
    if status.meta:
        index_facts += [tag("dt", "records indexed"), tag("dd", str(status.meta.records)),
                        tag("dt", "embeddings"), tag("dd", "yes" if status.meta.embeddings else "no (lexical only)"),
                        tag("dt", "built"), tag("dd", str(status.meta.built_at))]  # fmt: skip
    index_facts += [tag("dt", "size"), tag("dd", f"{status.size_bytes / 1e6:.1f} MB"),
                    tag("dt", "where"), tag("dd", tag("code", str(status.index_dir)))]  # fmt: skip
    problems = [
        tag("tr", tag("td", tag("span", p.kind, class_="chip bad")), tag("td", tag("code", p.where)), tag("td", p.message),
            class_="problem")
        for p in diagnosis.problems
    ]  # fmt: skip
    doctor = (
        tag("p", tag("strong", "No problems found"), f" ({diagnosis.records} records, {diagnosis.audit_entries} audit entries, "
                 "audit chain intact).", class_="ok-line")
        if diagnosis.ok else
        tag("div", tag("p", tag("strong", f"{len(diagnosis.problems)} problem(s)"), " found by ", tag("code", "lore doctor"), ":"),
            _table_or_none(problems, ("kind", "where", "problem"), ""))
    )  # fmt: skip
    body = [
        tag("h1", "Stats & health"),
        tag("section", tag("h2", "lore doctor"), doctor, class_="panel doctor", data_ok="yes" if diagnosis.ok else "no"),
        tag("div",
            tag("section", tag("h2", f"Records by type ({summary['records']})"),
                _bars(summary["by_type"], lambda k: KIND_LABEL[k], lambda k: urls.timeline(type=k), lambda k: f"k-{k}"),
                class_="panel"),
            tag("section", tag("h2", "By project"),
                _bars(summary["by_project"], str, lambda p: urls.timeline(project=p)), class_="panel"),
            tag("section", tag("h2", "By status"), _bars(summary["by_status"], str, None, lambda s: f"s-{s}"), class_="panel"),
            tag("section", tag("h2", f"Links by relation ({sum(relations.values())}; {implicit} implied by fields)"),
                _bars(relations, lambda r: r.replace("_", " "), None, relation_class), class_="panel"),
            class_="grid-2"),
        tag("section", tag("h2", "Index"), tag("dl", index_facts, class_="fields compact"), class_="panel"),
    ]  # fmt: skip
    return document(urls, "Stats & health", body, active="stats", data_dir=str(memory.locations.data_dir))


def error_page(urls: Urls | None, status: int, message: str, hint: str | None = None) -> str:
    body = [tag("h1", f"{status}"), tag("p", message), tag("p", hint, class_="muted") if hint else None]
    if urls is None:
        # No valid token: no links that would carry one, and nothing from the store.
        return "<!doctype html>\n" + tag("html", tag("head", tag("meta", charset="utf-8"), tag("title", f"{status} · lore")),
                                         tag("body", body), lang="en")  # fmt: skip
    return document(urls, str(status), [*body, tag("p", tag("a", "Back to the start", href=urls.home()))])
