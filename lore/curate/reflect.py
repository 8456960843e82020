"""Reflection: a belief synthesized from recent memories, stored so it can be searched and audited.

The store has no reflection kind, so a reflection is an observation with
``type: reflection`` and the ``reflection`` tag; ``derived_from`` edges (reflection ->
source) name the records it was drawn from, and ``derived_from`` in the record lists
them too. With ``LORE_LLM_CMD`` set the text is the local model's summary of the
central records; without it (or when the command fails) it is extractive: the most
central records and what links them.

Centrality: among the records considered, two records are joined by each stored edge
between them (weight 1) and by the word overlap of their texts (Jaccard of stemmed
words, kept from ``MIN_OVERLAP``); a record's centrality is the sum of its joins'
weights. Ties go to the newer record, then to the id.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from lore.errors import UsageError
from lore.store import Record, Store

CENTRAL = 5
MIN_OVERLAP = 0.1
SHARED_TERMS = 5
LLM_TIMEOUT_S = 30.0
REFLECTION = "reflection"


def is_reflection(record: Record) -> bool:
    return record.raw.get("type") == REFLECTION


@dataclass(frozen=True)
class Centre:
    record: Record
    centrality: float


def recent(store: Store, lookback: int) -> list[Record]:
    """The ``lookback`` newest active records, reflections left out."""
    if lookback < 1:
        raise UsageError(f"lookback must be at least 1, got {lookback}")
    records = [r for r in store.load().records.values() if r.active and not is_reflection(r)]
    records.sort(key=lambda r: (r.timestamp.timestamp() if r.timestamp else 0.0, r.id), reverse=True)
    return records[:lookback]


def central(records: list[Record], edges: list[tuple[str, str, str]], limit: int = CENTRAL) -> list[Centre]:
    """The ``limit`` most central of ``records`` (see the module docstring)."""
    from lore.curate.similarity import jaccard, word_set

    ids = {r.id for r in records}
    score = dict.fromkeys(ids, 0.0)
    for source, target, _ in edges:
        if source in ids and target in ids and source != target:
            score[source] += 1.0
            score[target] += 1.0
    words = [word_set(r.content) for r in records]
    for i in range(len(records)):
        for j in range(i + 1, len(records)):
            overlap = jaccard(words[i], words[j])
            if overlap >= MIN_OVERLAP:
                score[records[i].id] += overlap
                score[records[j].id] += overlap
    ordered = sorted(records, key=lambda r: r.id)
    ordered.sort(key=lambda r: r.timestamp.timestamp() if r.timestamp else 0.0, reverse=True)
    ordered.sort(key=lambda r: score[r.id], reverse=True)
    return [Centre(r, round(score[r.id], 4)) for r in ordered[:limit]]


def links_between(centres: list[Centre], edges: list[tuple[str, str, str]]) -> list[str]:
    """Stored edges among the central records, as ``a -relation-> b``."""
    ids = {c.record.id for c in centres}
    return [f"{s} -{rel}-> {t}" for s, t, rel in edges if s in ids and t in ids]


def shared_terms(centres: list[Centre], limit: int = SHARED_TERMS) -> list[str]:
    """Words that at least two central records share, most widely shared first (as first written)."""
    from lore.analysis import STOPWORDS, stem, words

    counts: Counter[str] = Counter()
    surface: dict[str, str] = {}
    for centre in centres:
        stems = set()
        for word in words(centre.record.content):
            if len(word) > 2 and word[0].isalpha() and word not in STOPWORDS:
                stems.add(stem(word))
                surface.setdefault(stem(word), word)
        counts.update(stems)
    return [surface[w] for w, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if n >= 2][:limit]


def _line(record: Record) -> str:
    return f"[{record.kind.replace('_', '-')}] {' '.join(record.title.split())} ({record.id})"


def extractive(topic: str | None, considered: int, centres: list[Centre], links: list[str], terms: list[str]) -> str:
    head = f"Reflection on {topic}" if topic else "Reflection on recent memories"
    parts = [f"{head} ({considered} record(s) considered). Central: " + "; ".join(_line(c.record) for c in centres) + "."]
    if links:
        parts.append("Linked: " + "; ".join(links) + ".")
    if terms:
        parts.append("Shared: " + ", ".join(terms) + ".")
    return " ".join(parts)


def _prompt(topic: str | None, centres: list[Centre], links: list[str]) -> str:
    notes = "\n".join(f"- {c.record.summary} (id: {c.record.id})" for c in centres)
    about = f"about {topic}" if topic else "in these recent notes"
    linked = ("\nStored links between them:\n" + "\n".join(f"- {link}" for link in links)) if links else ""
    return (f"Notes from a team's engineering memory:\n{notes}{linked}\n\n"
            f"In at most three sentences, state the belief these notes support {about}, citing ids.")  # fmt: skip


@dataclass
class Reflection:
    record: Record
    sources: list[Record]
    method: str  # "llm" or "extractive"
    notice: str | None = None  # why the model was not used, when it was set but failed


def reflect(store: Store, *, project: str, topic: str | None = None, records: list[Record] | None = None,
            lookback: int = 50, llm_cmd: str | None = None) -> Reflection:  # fmt: skip
    """Synthesize and store a reflection over ``records`` (default: the ``lookback`` newest), through ``llm_cmd`` when given."""
    from lore import llm
    from lore.capture import Scrubber, WriteOptions, store_record
    from lore.store.validate import check_text

    store.require()
    topic = check_text("topic", topic, required=False, max_bytes=2000) or None
    pool = [r for r in (records if records is not None else recent(store, lookback)) if not is_reflection(r)][:lookback]
    if not pool:
        if topic:
            raise UsageError(f"no reliable memory about {topic!r} to reflect on", hint="try a broader topic, or none")
        raise UsageError("nothing to reflect on", hint="record some memories first")
    snapshot = store.load()
    edges = [(e.source, e.target, e.relation) for e in snapshot.edges]
    centres = central(pool, edges)
    links = links_between(centres, edges)
    text, method, notice = "", "extractive", None
    if llm_cmd:
        reply = llm.ask(_prompt(topic, centres, links), LLM_TIMEOUT_S, llm_cmd)
        if reply.text:
            text, method = reply.text, "llm"
        else:
            notice = f"LORE_LLM_CMD failed ({reply.failure}); the reflection is extractive"
    if not text:
        text = extractive(topic, len(pool), centres, links, shared_terms(centres))
    scrub = Scrubber()
    raw: dict[str, Any] = {
        "timestamp": store.now_iso(),
        "content": scrub(check_text("reflection", text)),
        "tags": [REFLECTION],
        "project": project,
        "type": REFLECTION,
        "topic": topic,
        "method": method,
        "derived_from": [c.record.id for c in centres],
    }
    written = store_record(store, "observation", raw, scrub, WriteOptions(check_duplicates=False), op="reflect")
    for centre in centres:
        store.link(written.record.id, centre.record.id, "derived_from")
    return Reflection(written.record, [c.record for c in centres], method, notice)
