"""Agent-ready context: the most relevant memories within a hard budget.

One assembly serves ``lore context``, the prompt hook (1,500 characters) and the
MCP ``context`` tool. Budgets are never exceeded; items are shortened at word
boundaries with a marker, never cut mid-word; every item carries its id so an
agent can fetch the full record with ``lore show``.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Any, NamedTuple

from lore import analysis
from lore.rank import inject
from lore.rank.fusion import RELEVANCE_SHARPNESS
from lore.rank.pipeline import SearchResponse
from lore.rank.stages import Candidate
from lore.render.fence import FENCE_CLOSE, FENCE_NOTE, FENCE_OPEN
from lore.render.text import age, one_line, shorten, strip_control

HEADER = "## Relevant Memories"
# Pointers: titles only, for evidence too weak to hand a memory over but strong enough for the
# agent to judge (docs/search.md, "Tiers"); the heading tells a reader they are not full items.
POINTER_HEADER = "## Possibly relevant (titles only; open with lore show ID or the MCP show tool)"
POINTER_LINE_CHARS = 120
GAP_LINE = "[EVIDENCE GAP: no reliable memory for this query]"
FORMATS = ("markdown", "compact", "json")
MIN_ITEM_TEXT = 24
CHARS_PER_TOKEN = 4
# An item whose evidence is under this share of the best one's is filler, not memory:
# in a young store the last slots would otherwise go to whatever is left (unrelated
# notes). Measured on the unsharpened scale ((score / best) ** (1 / sharpness)), so
# that it does not depend on the sharpness. With score fusion every answer in the top
# 5 of the memory, demo and known-item dev splits is above 0.55 on it, and unrelated
# notes that only the vectors find sit near 0.2; 0.35 keeps a margin on both sides.
# (A share of 0.1 of the sharpened score would have dropped 7 of those 107 answers.)
MIN_SHARE_OF_TOP = 0.35
SUMMARY_PREFIX = "Summary: "
# An item's text at most: its title plus the sentences of its body that match the query.
# Five items of this size fill the hook's 1,500 characters; a 600-character rationale
# used to fill the budget after a median of two items (issue: ranks 3-5 never arrived).
ITEM_TEXT_CHARS = 230
# Two items whose titles share this share of their terms say the same thing: the second goes.
NEAR_IDENTICAL_TITLES = 0.8


class ContextItem(NamedTuple):
    """One memory as a context block renders it (a NamedTuple: the hook's cold path creates this class on every prompt)."""

    id: str
    kind: str
    text: str
    confidence: float
    age: str
    score: float
    shortened: bool = False
    path: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    represents: int = 1
    tier: str = "full"  # or "pointer": the title only


class ContextBlock:
    """The agent-ready block of memories for one query, within its budget (a plain class: the cold hook imports no dataclasses)."""

    def __init__(self, query: str, items: list[ContextItem], evidence_gap: bool, text: str, budget_chars: int,
                 gap_figures: dict[str, Any] | None = None, synthesis: str | None = None, notices: list[str] | None = None,
                 candidates: list[ContextItem] | None = None, fmt: str = "markdown", fenced: bool = False) -> None:  # fmt: skip
        self.query = query
        self.items = items
        self.evidence_gap = evidence_gap
        self.text = text
        self.budget_chars = budget_chars
        self.gap_figures: dict[str, Any] = {} if gap_figures is None else gap_figures
        self.synthesis = synthesis
        self.notices: list[str] = [] if notices is None else notices
        # What a re-render (after synthesis) needs: every item before the budget, and the layout.
        self.candidates: list[ContextItem] = [] if candidates is None else candidates
        self.fmt = fmt
        self.fenced = fenced

    def __eq__(self, other: object) -> bool:
        return self.__dict__ == other.__dict__ if isinstance(other, ContextBlock) else NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "ContextBlock(" + ", ".join(f"{name}={value!r}" for name, value in self.__dict__.items()) + ")"


_FENCE_TAG = re.compile(r"<(?=\s*/?\s*lore-memory)", re.IGNORECASE)


def defang(text: str) -> str:
    """Stored text must not open or close the fence that marks it as data (prompt injection)."""
    return _FENCE_TAG.sub("‹", text)


def _item_text(hit: Candidate) -> str:
    return defang(one_line(strip_control(hit.summary or hit.title)))


def snippet(hit: Candidate, query_terms: set[str], term_idf: dict[str, float], limit: int = ITEM_TEXT_CHARS) -> str:
    """The title, then the body's sentences that hold the query's rarest words, within ``limit``.

    A rationale's first sentences are rarely the ones a prompt needs; the sentence that
    shares the prompt's words is. Sentences keep their order in the body; with none
    that matches, the body's beginning follows the title (as the record's summary would).
    """
    title = one_line(strip_control(hit.title)) or one_line(strip_control(hit.summary))
    body = hit.content
    if body.startswith(hit.title):
        body = body[len(hit.title):]
    body = body.strip()
    if len(title) >= limit - MIN_ITEM_TEXT or not body:
        return defang(shorten(title, limit) or title[:limit])
    title_terms = set(analysis.terms(title))
    scored = []
    for position, sentence in enumerate(s for s in analysis.SENTENCE.split(body) if s.strip()):
        terms = set(analysis.terms(sentence)) & query_terms
        gain = sum(term_idf.get(t, 0.0) for t in terms - title_terms)
        if gain > 0:
            scored.append((gain, position, one_line(strip_control(sentence))))
    room = limit - len(title) - 3
    picked = []
    for _gain, position, sentence in sorted(scored, key=lambda g: (-g[0], g[1])):
        if room < MIN_ITEM_TEXT:
            break
        piece = sentence if len(sentence) <= room else shorten(sentence, room)
        if len(piece) < MIN_ITEM_TEXT:
            continue
        picked.append((position, piece))
        room -= len(piece) + 1
    if picked:
        return defang(title + " — " + " ".join(piece for _, piece in sorted(picked)))
    return defang(shorten(f"{title}: {one_line(strip_control(body))}", limit) or title)


def _near_identical(a: str, b: str) -> bool:
    x, y = set(analysis.terms(a)), set(analysis.terms(b))
    return bool(x and y) and len(x & y) / len(x | y) >= NEAR_IDENTICAL_TITLES


def decide(response: SearchResponse, *, project: str | None = None, seen: tuple[str, ...] = (),
           pointed: tuple[str, ...] = (), null: inject.NullEvidence = inject.DEFAULT_NULL, max_items: int = 5,
           settings: inject.InjectSettings | None = None, asked: bool = False) -> inject.Decision:  # fmt: skip
    """The injection decision over the response's first ``max_items`` hits (``lore.rank.inject``).

    Where someone asked, a young store's search (``inject.YOUNG_STORE_RECORDS``) is
    answered unless its evidence-gap verdict says it holds nothing: over a few records
    the gate's idf evidence is noise (a one-record store's decision "Use Postgres for
    sessions" scored a gate of 0.005 for "where do sessions live?"). The hook, which
    nobody asked, keeps the gate.
    """
    vectors = "vector" in response.channels_used
    hits = [inject.Hit(h.id, h.project, h.title, h.content, h.channel_scores.get("vector", 0.0) if vectors else None,
                       h.passage_cosine)
            for h in response.hits[:max_items]]  # fmt: skip
    project = project if response.project_known else None
    decision = inject.decide(hits, response.query, response.term_idf, project=project, seen=seen, pointed=pointed,
                             null=null, settings=settings, asked=asked)  # fmt: skip
    young = 0 < response.records < inject.YOUNG_STORE_RECORDS
    if asked and young and decision.judged:
        unseen = tuple(j.id for j in decision.judged if j.id not in seen)
        limits = settings or inject.DEFAULT_SETTINGS
        if response.evidence_gap and decision.inject:
            return decision._replace(inject=False, chosen=(), pointers=unseen[: limits.max_pointers],
                                     reason=f"a young store ({response.records} records): an evidence gap")  # fmt: skip
        if not response.evidence_gap and not decision.inject and unseen:
            return decision._replace(inject=True, chosen=unseen[: limits.max_full], pointers=unseen[limits.max_full:][: limits.max_pointers],
                                     reason=f"a young store ({response.records} records): no evidence gap")  # fmt: skip
    return decision


def _meta(item: ContextItem, fmt: str) -> str:
    if fmt == "compact":
        return f" ({item.kind} {item.id}, conf {item.confidence:.1f}, {item.age})"
    return f" (confidence: {item.confidence:.1f}, age: {item.age}, id: {item.id})"


def _line(item: ContextItem, text: str, fmt: str) -> str:
    extras = ""
    if item.notes:
        extras += " ! " + "; ".join(one_line(n) for n in item.notes)
    if item.represents > 1:
        extras += f" (+{item.represents - 1} similar)"
    if fmt == "compact":
        return f"- {text}{extras}{_meta(item, fmt)}"
    return f"- [{item.kind.replace('_', '-')}] {text}{extras}{_meta(item, fmt)}"


def pointer_line(item: ContextItem) -> str:
    """A pointer: the memory's title and id, within ``POINTER_LINE_CHARS``."""
    tail = f" ({item.id})"
    room = POINTER_LINE_CHARS - len(tail) - 2
    title = item.text if len(item.text) <= room else (shorten(item.text, room) or item.text[:room])
    return f"- {title}{tail}"


def render_items(items: list[ContextItem], budget: int, fmt: str, *, fenced: bool, prefix: str = "") -> tuple[str, list[ContextItem]]:
    """Fit as many items as the budget allows; shorten the last full one rather than cut a word.

    Full items come first under ``HEADER``, then pointers under ``POINTER_HEADER``.
    """
    full = [i for i in items if i.tier != "pointer"]
    pointers = [i for i in items if i.tier == "pointer"]
    head = [FENCE_OPEN, FENCE_NOTE] if fenced else []
    if full:
        head.append(HEADER)
    if prefix:
        head.append(prefix)
    tail = [FENCE_CLOSE] if fenced else []
    used = len("\n".join(head + tail)) + (1 if head or tail else 0)
    lines: list[str] = []
    kept: list[ContextItem] = []
    for item in full:
        line = _line(item, item.text, fmt)
        room = budget - used - 1  # newline separator
        if len(line) > room:
            text_room = room - len(_line(item, "", fmt))
            short = shorten(item.text, text_room) if text_room >= MIN_ITEM_TEXT else ""
            if len(short) >= MIN_ITEM_TEXT:
                line = _line(item, short, fmt)
                lines.append(line)
                kept.append(item._replace(text=short, shortened=True))
                used += len(line) + 1
            break
        lines.append(line)
        kept.append(item)
        used += len(line) + 1
    pointer_lines = [pointer_line(item) for item in pointers]
    for position, (item, line) in enumerate(zip(pointers, pointer_lines, strict=True)):
        extra = len(line) + 1 + (len(POINTER_HEADER) + 1 if position == 0 else 0)
        if used + extra > budget:
            break
        if position == 0:
            lines.append(POINTER_HEADER)
        lines.append(line)
        kept.append(item)
        used += extra
    if not kept:
        return "", []
    return "\n".join(head + lines + tail), kept


def assemble(
    response: SearchResponse,
    *,
    budget_chars: int,
    max_items: int = 5,
    fmt: str = "markdown",
    fenced: bool = False,
    gap_line: bool = False,
    now: float | None = None,
    decision: inject.Decision | None = None,
    legacy_text: bool = False,
    asked: bool = False,
) -> ContextBlock:
    """Assemble the context block from a search response within ``budget_chars``.

    With a ``decision`` (``decide``), it alone says whether and what to inject: the
    block holds the hits it chose, in rank order, and is empty (an evidence gap) when
    it chose none. Without one, the evidence-gap verdict and the share-of-top floor do.
    ``legacy_text``: each item's whole summary, no collapsing of near-identical titles
    (the block as it was before the injection decision; the bench's baseline).
    ``asked``: someone asked for the block: one of pointers only carries the gap line.
    """
    figures: dict[str, Any] = dict(response.gap.figures())
    if decision is not None:
        figures["injection"] = {"inject": decision.inject, "tier": decision.tier, "gate": round(decision.gate, 4),
                                "reason": decision.reason}  # fmt: skip
    refused = decision.tier == "none" if decision is not None else response.gap.gap
    if refused or not response.hits:
        text = GAP_LINE if gap_line and len(GAP_LINE) <= budget_chars else ""
        return ContextBlock(response.query, [], True, text, budget_chars, figures)
    now_dt = datetime.fromtimestamp(now if now is not None else time.time(), UTC)
    items: list[ContextItem] = []
    floor = MIN_SHARE_OF_TOP ** RELEVANCE_SHARPNESS * max(h.score for h in response.hits)
    hits = [h for h in response.hits if h.score >= floor]
    pointer_ids: tuple[str, ...] = ()
    if decision is not None:
        chosen = set(decision.chosen)
        hits = [h for h in hits if h.id in chosen]
        pointer_ids = decision.pointers
    query_terms = set(response.term_idf)
    titles: list[str] = []
    for hit in hits:
        if len(items) >= max_items:
            break
        if not legacy_text and any(_near_identical(hit.title, seen_title) for seen_title in titles):
            continue
        titles.append(hit.title)
        moment = datetime.fromtimestamp(hit.time, UTC) if hit.time is not None else None
        text = snippet(hit, query_terms, response.term_idf) if query_terms and not legacy_text else _item_text(hit)
        if hit.path:
            text = f"{text} (via {defang(one_line(hit.path[0]))})"
        items.append(ContextItem(hit.id, hit.kind, text, round(hit.confidence, 2), age(moment, now_dt), round(hit.score, 4),
                                 path=hit.path, notes=tuple(defang(n) for n in hit.notes),
                                 represents=hit.represents))  # fmt: skip
    by_id = {h.id: h for h in response.hits}
    for rid in pointer_ids:
        hit = by_id[rid]
        if hit.score < floor:  # filler far below the best hit is no lead either
            continue
        moment = datetime.fromtimestamp(hit.time, UTC) if hit.time is not None else None
        title = defang(one_line(strip_control(hit.title or hit.summary)))
        items.append(ContextItem(hit.id, hit.kind, title, round(hit.confidence, 2), age(moment, now_dt),
                                 round(hit.score, 4), tier="pointer"))  # fmt: skip
    # JSON lists what the markdown block would show: the budget binds every format.
    # A block of pointers only holds no memory the search vouches for: where the surface
    # marks a gap, it says so above the titles.
    pointers_only = not any(i.tier == "full" for i in items)
    text, kept = render_items(items, budget_chars, _layout(fmt), fenced=fenced,
                              prefix=GAP_LINE if pointers_only and (gap_line or asked) else "")  # fmt: skip
    gap = not any(i.tier == "full" for i in kept)
    return ContextBlock(response.query, kept, gap, "" if fmt == "json" else text, budget_chars, figures,
                        candidates=items, fmt=fmt, fenced=fenced)  # fmt: skip


class Profile(NamedTuple):
    """How a surface wants its block: budget, item cap, format, fence, and the gap line on a refusal."""

    budget_chars: int
    max_items: int = 5
    fmt: str = "markdown"
    fenced: bool = False
    gap_line: bool = False
    # Someone asked for this block (a command, a tool call), rather than the hook handing it unasked.
    asked: bool = True


# The surfaces' profiles (callers adjust them with ``_replace``: the hook's budget is a setting).
HOOK = Profile(1500, 5, "compact", fenced=True, asked=False)
MCP = Profile(500 * CHARS_PER_TOKEN, 5, "markdown", fenced=True, gap_line=True)
TERMINAL = Profile(500 * CHARS_PER_TOKEN, 5, "markdown")


def block_for(response: SearchResponse, profile: Profile, *, project: str | None = None, seen: tuple[str, ...] = (),
              pointed: tuple[str, ...] = (), null: inject.NullEvidence = inject.DEFAULT_NULL,
              settings: inject.InjectSettings | None = None) -> ContextBlock:  # fmt: skip
    """The one context recipe: the injection decision over the response, then the block in the profile's shape.

    Every surface that hands memories to an agent (the prompt hook's warm and cold
    paths, MCP ``context``, ``lore context``, ``Lore.context``) ends here.
    """
    decision = decide(response, project=project, seen=seen, pointed=pointed, null=null, max_items=profile.max_items,
                      settings=settings, asked=profile.asked)  # fmt: skip
    return assemble(response, budget_chars=profile.budget_chars, max_items=profile.max_items, fmt=profile.fmt,
                    fenced=profile.fenced, gap_line=profile.gap_line, decision=decision, asked=profile.asked)  # fmt: skip


def asked(profile: Profile, budget_tokens: int, max_items: int, **changes: Any) -> Profile:
    """A surface's profile for a block someone asked for, its budget in tokens (``CHARS_PER_TOKEN``)."""
    return profile._replace(budget_chars=budget_tokens * CHARS_PER_TOKEN, max_items=max_items, **changes)


def context_for(session: Any, query: str, options: Any, profile: Profile, *, project: str | None = None,
                seen: tuple[str, ...] = (), pointed: tuple[str, ...] = (), policy: str = "ignore",
                use_llm: bool = True, log_access: bool = True,
                settings: inject.InjectSettings | None = None) -> ContextBlock:  # fmt: skip
    """The context recipe every surface runs (``lore context``, MCP ``context``, ``Lore.context``, the warm helper and
    the prompt hook's in-process path): the search, the store's own null evidence, then ``block_for``.

    ``session`` is a ``lore.search.SearchSession``; the cold hook, which searches without one, calls ``block_for``.
    """
    from lore.rank import null
    from lore.search import search

    response = search(session, query, options, policy=policy, use_llm=use_llm, log_access=log_access)
    reader = session.reader
    return block_for(response, profile, project=project, seen=seen, pointed=pointed,
                     null=null.load(reader.directory if reader else None), settings=settings)  # fmt: skip


def _layout(fmt: str) -> str:
    return "markdown" if fmt == "json" else fmt


def synthesize(block: ContextBlock, command: str | None, timeout: float = 20.0) -> ContextBlock:
    """Ask ``command`` (``LORE_LLM_CMD``) for a short summary of the excerpts; a notice, never an error, without it.

    The summary goes above the excerpts and counts against the same budget: it
    takes at most half, and the excerpts are fitted again into what is left.
    """
    from lore import llm

    if not command:
        block.notices.append("synthesis skipped: set LORE_LLM_CMD to a local command that reads a prompt on stdin")
        return block
    if not block.items:
        return block
    excerpts = "\n".join(f"- [{i.kind}] {i.text} (id: {i.id})" for i in block.items)
    prompt = (f"Question: {block.query}\n\nExcerpts from the team's memory:\n{excerpts}\n\n"
              "Summarise in at most three sentences what these excerpts say about the question, citing ids.")  # fmt: skip
    reply = llm.ask(prompt, timeout, command)
    summary = " ".join(strip_control(reply.text or "").split())
    if reply.failure is not None or not summary:
        block.notices.append(f"synthesis failed: {reply.failure or 'LORE_LLM_CMD printed nothing'}")
        return block
    line = shorten(SUMMARY_PREFIX + summary, block.budget_chars // 2)
    if not line:
        block.notices.append("synthesis dropped: the summary does not fit the budget")
        return block
    text, kept = render_items(block.candidates, block.budget_chars - len(line) - 2, _layout(block.fmt), fenced=block.fenced)
    block.synthesis = line.removeprefix(SUMMARY_PREFIX)
    block.items = kept
    if block.fmt != "json":
        block.text = f"{line}\n\n{text}" if text else line
    return block


def block_json(block: ContextBlock) -> dict[str, Any]:
    return {
        "query": block.query,
        "evidence_gap": block.evidence_gap,
        "gap": block.gap_figures,
        "budget_chars": block.budget_chars,
        "items": [
            {"id": i.id, "type": i.kind, "tier": i.tier, "text": i.text, "confidence": i.confidence, "age": i.age,
             "score": i.score,
             **({"path": list(i.path)} if i.path else {}), **({"notes": list(i.notes)} if i.notes else {}),
             **({"represents": i.represents} if i.represents > 1 else {})}
            for i in block.items
        ],
        "synthesis": block.synthesis,
        "notices": block.notices,
    }
