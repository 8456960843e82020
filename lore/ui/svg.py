"""Pictures drawn on the server as inline SVG: a record's graph neighbourhood and the timeline.

Colours come from CSS classes (``k-<kind>``, ``r-<relation>``), so the page's
light and dark themes apply to the pictures too. Every stored text goes
through the escaping builder in ``lore.ui.html``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from lore.index.graph import GraphEdge, Neighbourhood
from lore.render.text import one_line
from lore.store.records import RELATIONS, Record
from lore.ui.html import Markup, tag

KIND_LABEL = {
    "decision": "decision", "pattern": "pattern", "anti_pattern": "anti-pattern", "lesson": "lesson",
    "handoff": "handoff", "failure": "failure", "observation": "observation",
}  # fmt: skip

NODE_W, NODE_H = 252, 60
COLUMN_STEP, ROW_STEP = NODE_W + 136, NODE_H + 22
MARGIN = 28
TITLE_CHARS = 32


def relation_class(relation: str) -> str:
    return f"r-{relation}" if relation in RELATIONS else "r-other"


@dataclass
class Placed:
    record_id: str
    column: int
    x: float = 0.0
    y: float = 0.0


def layout(hood: Neighbourhood) -> dict[str, Placed]:
    """Columns by direction, history reading left to right.

    A record an edge points to (what was superseded, what a pattern was derived
    from) sits one column left of the record pointing to it; each column is
    ordered by where its records' parents sit, to keep edges from crossing.
    """
    placed: dict[str, Placed] = {hood.centre: Placed(hood.centre, 0)}
    columns: dict[int, list[str]] = {0: [hood.centre]}
    levels: dict[int, list[str]] = {}
    for record_id, hops in hood.hops.items():
        if record_id != hood.centre:
            levels.setdefault(hops, []).append(record_id)
    orphans: list[str] = []
    for hops in sorted(levels):
        arrivals: dict[int, list[tuple[float, str]]] = {}
        for record_id in levels[hops]:
            reached = hood.parent.get(record_id)
            if reached is None or reached[0] not in placed:
                orphans.append(record_id)
                continue
            origin, direction = reached
            column = placed[origin].column + (-1 if direction == "out" else 1)
            siblings = columns[placed[origin].column]
            position = siblings.index(origin) - (len(siblings) - 1) / 2
            arrivals.setdefault(column, []).append((position, record_id))
        for column, arrived in arrivals.items():
            for _, record_id in sorted(arrived):
                columns.setdefault(column, []).append(record_id)
                placed[record_id] = Placed(record_id, column)
    for record_id in orphans:  # reached through a record that was left out: beside the centre
        columns.setdefault(0, []).append(record_id)
        placed[record_id] = Placed(record_id, 0)
    lowest = min(columns)
    tallest = max(len(members) for members in columns.values())
    for column, stack in columns.items():
        top = (tallest - len(stack)) * ROW_STEP / 2
        for row, record_id in enumerate(stack):
            spot = placed[record_id]
            spot.x = MARGIN + (column - lowest) * COLUMN_STEP
            spot.y = MARGIN + top + row * ROW_STEP
    return placed


def _title_lines(record: Record | None, record_id: str) -> list[str]:
    title = one_line(record.title) if record is not None else "(missing record)"
    lines = textwrap.wrap(title, TITLE_CHARS, break_on_hyphens=False) or [record_id]
    if len(lines) > 2:
        lines = [lines[0], textwrap.shorten(" ".join(lines[1:]), TITLE_CHARS, placeholder="…")]
    return lines


Point = tuple[float, float]


@dataclass
class Route:
    """A cubic curve between two boxes: its path and where its label goes."""

    start: Point
    c1: Point
    c2: Point
    end: Point
    label_at: float  # the curve parameter of the label, near the end away from the centre

    def point(self, t: float) -> Point:
        u = 1 - t
        xs = (self.start[0], self.c1[0], self.c2[0], self.end[0])
        ys = (self.start[1], self.c1[1], self.c2[1], self.end[1])
        weights = (u**3, 3 * u * u * t, 3 * u * t * t, t**3)
        return sum(w * x for w, x in zip(weights, xs, strict=True)), sum(w * y for w, y in zip(weights, ys, strict=True))

    @property
    def d(self) -> str:
        (sx, sy), (ax, ay), (bx, by), (ex, ey) = self.start, self.c1, self.c2, self.end
        return f"M{sx:.1f},{sy:.1f} C{ax:.1f},{ay:.1f} {bx:.1f},{by:.1f} {ex:.1f},{ey:.1f}"


def route(a: Placed, b: Placed, bend: float, centre: str, top: float, bottom: float) -> Route:
    """From box ``a`` to box ``b``: across neighbouring columns as an S-curve; past a column
    (which would cross its boxes) as an arc over the top or under the bottom; within a column
    as a bulge to its right."""
    ay, by = a.y + NODE_H / 2, b.y + NODE_H / 2
    # Labels sit near the end that is not the centre, where rows are far apart.
    label_at = 0.72 if a.record_id == centre else 0.28 if b.record_id == centre else 0.5
    if a.column == b.column:
        ax, bx = a.x + NODE_W, b.x + NODE_W
        reach = 40 + abs(by - ay) * 0.22 + bend
        return Route((ax, ay), (ax + reach, ay), (bx + reach, by), (bx, by), 0.5)
    left_to_right = a.column < b.column
    ax = a.x + NODE_W if left_to_right else a.x
    bx = b.x if left_to_right else b.x + NODE_W
    if abs(a.column - b.column) == 1:
        span = (bx - ax) * 0.5
        return Route((ax, ay + bend * 0.3), (ax + span, ay + bend), (bx - span, by + bend), (bx, by + bend * 0.3), label_at)
    # Two columns or more apart: leave and arrive vertically, around the boxes between.
    over = (ay + by) / 2 < (top + bottom) / 2
    ax, bx = a.x + NODE_W / 2 + bend, b.x + NODE_W / 2 + bend
    ay, by = (a.y, b.y) if over else (a.y + NODE_H, b.y + NODE_H)
    level = (top - 26 - bend) if over else (bottom + 26 + bend)
    return Route((ax, ay), (ax, level), (bx, level), (bx, by), 0.5)


class Labels:
    """Edge labels placed where they overlap neither another label nor a box, if a nearby spot allows."""

    def __init__(self, boxes: list[tuple[float, float, float, float]]) -> None:
        self.taken = list(boxes)

    def place(self, x: float, y: float, text: str) -> Point:
        width, height = 6.4 * len(text) + 6, 13.0
        for shift in (0, -13, 13, -26, 26, -39, 39):
            box = (x - width / 2, y + shift - height + 3, x + width / 2, y + shift + 3)
            if not any(box[0] < t[2] and t[0] < box[2] and box[1] < t[3] and t[1] < box[3] for t in self.taken):
                self.taken.append(box)
                return x, y + shift
        self.taken.append((x - width / 2, y - height + 3, x + width / 2, y + 3))
        return x, y


def graph_svg(hood: Neighbourhood, records: dict[str, Record], href: Callable[[str], str], *,
              caption: str) -> Markup:  # fmt: skip
    """The neighbourhood as a picture: boxes coloured by type, curves coloured by relation."""
    placed = layout(hood)
    top = min(p.y for p in placed.values())
    bottom = max(p.y for p in placed.values()) + NODE_H
    columns = {p.column for p in placed.values()}
    arcs_over = arcs_under = False
    routes = []
    pairs: dict[frozenset[str], int] = {}
    drawn: set[tuple[str, str, str]] = set()
    keys = {(e.source, e.target, e.relation) for e in hood.edges}
    for edge in sorted(hood.edges, key=lambda e: (e.relation != "contradicts", e.relation != "supersedes", e.implicit)):
        if (edge.source, edge.target, edge.relation) in drawn:
            continue
        both_ways = (edge.target, edge.source, edge.relation) in keys
        drawn.update({(edge.source, edge.target, edge.relation), (edge.target, edge.source, edge.relation)})
        pair = frozenset((edge.source, edge.target))
        nth = pairs.get(pair, 0)
        pairs[pair] = nth + 1
        a, b = placed[edge.source], placed[edge.target]
        path = route(a, b, nth * 14.0, hood.centre, top, bottom)
        if abs(a.column - b.column) > 1:
            arcs_over |= path.c1[1] < top
            arcs_under |= path.c1[1] > bottom
        routes.append((edge, path, both_ways))
    # Room for arcs above and below the boxes, then shift everything into view.
    pad_top = 34 + 14 * max(pairs.values(), default=1) if arcs_over else 0
    pad_bottom = 34 + 14 * max(pairs.values(), default=1) if arcs_under else 0
    width = max(p.x for p in placed.values()) + NODE_W + MARGIN + (90 if any(len([p for p in placed.values() if p.column == c]) > 1 for c in columns) else 0)
    height = bottom + MARGIN + pad_top + pad_bottom
    boxes = [(p.x, p.y + pad_top, p.x + NODE_W, p.y + pad_top + NODE_H) for p in placed.values()]
    labels = Labels(boxes)
    contradicted = {end for e in hood.edges if e.relation == "contradicts" for end in (e.source, e.target)}
    relations = sorted({relation_class(e.relation) for e in hood.edges})
    markers = [
        tag("marker", tag("path", d="M0,0 L10,5 L0,10 z", class_=f"arrowhead {name}"), id=f"arrow-{name}",
            attributes={"viewBox": "0 0 10 10", "refX": "9", "refY": "5", "markerWidth": "7", "markerHeight": "7",
                        "orient": "auto-start-reverse"})
        for name in relations
    ]  # fmt: skip
    # The edges that explain the picture carry labels: those of the centre, those that reached a
    # record, supersessions and contradictions. Links among the neighbours are drawn faintly.
    tree = {frozenset((child, origin)) for child, (origin, _) in hood.parent.items()}
    edges = [
        _edge(edge, path, both_ways, labels, pad_top,
              primary=hood.centre in (edge.source, edge.target) or frozenset((edge.source, edge.target)) in tree
              or edge.relation in ("contradicts", "supersedes"))
        for edge, path, both_ways in routes
    ]  # fmt: skip
    nodes = [
        _node(record_id, records.get(record_id), placed[record_id], href(record_id),
              centre=record_id == hood.centre, contradicted=record_id in contradicted)
        for record_id in hood.hops
    ]  # fmt: skip
    return tag(
        "svg", tag("title", caption), tag("defs", markers),
        tag("g", tag("g", edges, class_="edges"), tag("g", nodes, class_="nodes"), transform=f"translate(0 {pad_top:.0f})"),
        class_=f"graph cols-{min(len(columns), 7)}", role="img", data_centre=hood.centre, width=f"{width:.0f}",
        height=f"{height:.0f}",
        attributes={"viewBox": f"0 0 {width:.0f} {height:.0f}", "xmlns": "http://www.w3.org/2000/svg",
                    "aria-label": caption},
    )  # fmt: skip


def _edge(edge: GraphEdge, path: Route, both_ways: bool, labels: Labels, offset: float, *, primary: bool) -> Markup:
    name = relation_class(edge.relation)
    classes = ["edge", name]
    if edge.implicit:
        classes.append("implicit")
    if not primary:
        classes.append("secondary")
    label = edge.relation.replace("_", " ")
    if edge.relation == "contradicts":
        label = "⚠ contradicts"
    text = None
    if primary:
        x, y = path.point(path.label_at)
        x, y = labels.place(x, y + offset, label)
        text = tag("text", label, x=f"{x:.1f}", y=f"{y - offset:.1f}", class_="edge-label", text_anchor="middle")
    return tag(
        "g",
        tag("title", f"{edge.source} {edge.relation} {edge.target}" + (" (both ways)" if both_ways else "")
            + (" (implied by the record's own fields)" if edge.implicit else "")),
        tag("path", d=path.d, class_="wire", marker_end=f"url(#arrow-{name})",
            marker_start=f"url(#arrow-{name})" if both_ways else None),
        text,
        class_=" ".join(classes), data_from=edge.source, data_to=edge.target, data_relation=edge.relation,
    )  # fmt: skip


def _node(record_id: str, record: Record | None, spot: Placed, href: str, *, centre: bool, contradicted: bool) -> Markup:
    kind = record.kind if record is not None else "missing"
    status = record.status if record is not None else "missing"
    classes = ["node", f"k-{kind}", f"s-{status}"]
    if centre:
        classes.append("centre")
    if contradicted:
        classes.append("contradicted")
    marks = []
    if status != "active":
        marks.append(status)
    if contradicted:
        marks.append("⚠")
    badge_text = " ".join(marks)
    # The id is cut to what fits beside the type and the badge (monospace: ~6.3 px a character).
    room = int((NODE_W - 30 - 7.4 * len(badge_text)) / 6.3) - len(KIND_LABEL.get(kind, kind)) - 3
    shown_id = record_id if len(record_id) <= room else record_id[: max(4, room - 1)] + "…"
    head = f"{KIND_LABEL.get(kind, kind)} · {shown_id}"
    lines = _title_lines(record, record_id)
    texts = [tag("text", head, x=f"{spot.x + 14:.1f}", y=f"{spot.y + 17:.1f}", class_="node-head")]
    texts += [
        tag("text", line, x=f"{spot.x + 14:.1f}", y=f"{spot.y + 35 + 15 * n:.1f}", class_="node-title")
        for n, line in enumerate(lines)
    ]  # fmt: skip
    badge = None
    if badge_text:
        badge = tag("text", badge_text, x=f"{spot.x + NODE_W - 9:.1f}", y=f"{spot.y + 17:.1f}",
                    class_="node-badge", text_anchor="end")  # fmt: skip
    full_title = one_line(record.title) if record is not None else "(missing record)"
    return tag(
        "a",
        tag("title", f"{record_id} [{KIND_LABEL.get(kind, kind)}, {status}] {full_title}"),
        tag("rect", x=f"{spot.x:.1f}", y=f"{spot.y:.1f}", width=str(NODE_W), height=str(NODE_H), rx="9", class_="box"),
        tag("rect", x=f"{spot.x:.1f}", y=f"{spot.y:.1f}", width="6", height=str(NODE_H), rx="3", class_="bar"),
        texts, badge,
        href=href, class_=" ".join(classes), data_id=record_id, data_kind=kind, data_status=status,
    )  # fmt: skip


# -- timeline ----------------------------------------------------------------------------------

TIMELINE_KINDS = ("decision", "pattern", "lesson", "anti_pattern", "handoff", "failure", "observation")
LANE_ROW = 9
LABEL_W = 128
PLOT_W = 860
DOTS_LIMIT = 3000


def _month_index(moment: datetime) -> int:
    return moment.year * 12 + moment.month - 1


def _month_ticks(start_month: int, end_month: int, x_of: Callable[[float], float], axis_h: int,
                 height: int) -> list[Markup]:  # fmt: skip
    """The timeline's month lines (a year's first stronger) and their labels (fewer over a long span)."""
    ticks = []
    months = end_month - start_month
    step = 1 if months <= 12 else 2 if months <= 24 else 3 if months <= 48 else 12
    for index in range(start_month, end_month + 1):
        month_start = datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)
        x = x_of(month_start.timestamp())
        year_start = month_start.month == 1
        ticks.append(tag("line", x1=f"{x:.1f}", x2=f"{x:.1f}", y1=str(axis_h - 4), y2=str(height),
                         class_="tick year" if year_start else "tick"))  # fmt: skip
        if (index - start_month) % step == 0 and index < end_month:
            label = month_start.strftime("%b %Y" if year_start or index == start_month else "%b")
            ticks.append(tag("text", label, x=f"{x + 3:.1f}", y=str(axis_h - 10), class_="tick-label"))
    return ticks


def timeline_svg(records: list[Record], lanes: list[str], href: Callable[[str], str],
                 lane_href: Callable[[str], str], bucket_href: Callable[[str, str], str]) -> Markup:  # fmt: skip
    """One lane per project, one row per type inside it; a dot per record, placed by its time
    (past ``DOTS_LIMIT`` records, a dot per month, sized by its count)."""
    dated = [r for r in records if r.timestamp is not None]
    if not dated:
        return Markup("")
    first = min(r.timestamp for r in dated if r.timestamp)
    last = max(r.timestamp for r in dated if r.timestamp)
    start_month, end_month = _month_index(first), _month_index(last) + 1
    start = datetime(start_month // 12, start_month % 12 + 1, 1, tzinfo=UTC).timestamp()
    end = datetime(end_month // 12, end_month % 12 + 1, 1, tzinfo=UTC).timestamp()
    lane_h = LANE_ROW * len(TIMELINE_KINDS) + 14
    axis_h = 26
    height = axis_h + lane_h * len(lanes) + 6
    width = LABEL_W + PLOT_W + 16

    def x_of(moment: float) -> float:
        return LABEL_W + (moment - start) / max(1.0, end - start) * PLOT_W

    ticks = _month_ticks(start_month, end_month, x_of, axis_h, height)
    lane_marks = []
    for number, lane in enumerate(lanes):
        top = axis_h + number * lane_h
        lane_marks.append(tag("rect", x="0", y=str(top), width=str(width), height=str(lane_h),
                              class_="lane odd" if number % 2 else "lane"))  # fmt: skip
        lane_marks.append(tag("a", tag("text", lane, x="8", y=f"{top + lane_h / 2 + 4:.1f}", class_="lane-label"),
                              href=lane_href(lane)))  # fmt: skip
    dots = []
    lane_of = {lane: n for n, lane in enumerate(lanes)}
    shown = [r for r in dated if (r.project or "-") in lane_of and r.kind in TIMELINE_KINDS]

    def row_y(lane: str, kind: str) -> float:
        return axis_h + lane_of[lane] * lane_h + 8 + TIMELINE_KINDS.index(kind) * LANE_ROW + LANE_ROW / 2

    if len(shown) <= DOTS_LIMIT:
        for record in sorted(shown, key=lambda r: (r.timestamp or first, r.id)):
            moment = record.timestamp
            assert moment is not None
            dots.append(tag(
                "a",
                tag("circle", cx=f"{x_of(moment.timestamp()):.1f}", cy=f"{row_y(record.project or '-', record.kind):.1f}",
                    r="3.6"),
                tag("title", f"{moment:%Y-%m-%d} {KIND_LABEL[record.kind]} {record.id}: {one_line(record.title)}"),
                href=href(record.id), class_=f"dot k-{record.kind} s-{record.status}", data_id=record.id,
            ))  # fmt: skip
    else:
        # Too many for a dot each (the page would weigh megabytes): one dot per lane, type and
        # month, its area growing with the count, linking to that lane and type.
        buckets: dict[tuple[str, str, int], int] = {}
        for record in shown:
            assert record.timestamp is not None
            key = (record.project or "-", record.kind, _month_index(record.timestamp))
            buckets[key] = buckets.get(key, 0) + 1
        for (lane, kind, month), count in sorted(buckets.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
            middle = datetime(month // 12, month % 12 + 1, 15, tzinfo=UTC).timestamp()
            first_day = datetime(month // 12, month % 12 + 1, 1, tzinfo=UTC)
            dots.append(tag(
                "a",
                tag("circle", cx=f"{x_of(middle):.1f}", cy=f"{row_y(lane, kind):.1f}",
                    r=f"{min(LANE_ROW * 0.9, 2.2 + 0.9 * count ** 0.5):.1f}"),
                tag("title", f"{first_day:%B %Y} {lane}: {count} {KIND_LABEL[kind]} record(s)"),
                href=bucket_href(lane, kind), class_=f"dot bucket k-{kind}", data_count=str(count),
            ))  # fmt: skip
    return tag(
        "svg", tag("title", "Records over time, by project and type"), tag("g", lane_marks), tag("g", ticks), tag("g", dots),
        class_="timeline", role="img", width=str(width), height=str(height),
        attributes={"viewBox": f"0 0 {width} {height}", "xmlns": "http://www.w3.org/2000/svg",
                    "aria-label": "Records over time, by project and type"},
    )  # fmt: skip
