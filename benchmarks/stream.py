"""The prompt stream: 800 prompts replayed as 80 coding sessions, measured as the agent sees them.

The agent never sees a ranking: it sees the prompt hook's block, on every prompt.
This section replays ``data/prompt_stream.jsonl`` (40 sessions over the demo store,
40 over the 8,000-memory git store; tasks, follow-ups, chit-chat, other stacks,
near misses and about a third of prompts that a stored memory helps) through the
hook's own steps, session by session with the session's project, and measures
what reaches the agent:

* **hit rate**: answerable prompts whose block holds a relevant record, or whose
  relevant record an earlier block of the same session already injected (the
  agent has it in its context); *strict*: in this prompt's block;
* **left empty**: the share of prompts no memory answers that get no block;
* **precision**: the share of injected items that are relevant;
* **characters per prompt**, over every prompt of the stream, and items per block.

Policies, each on the warm path (the whole pipeline) and the cold path (BM25, then its
candidates' cosines as the vector channel, as the hook answers before the helper runs;
a prompt the cold path declines goes to the whole pipeline, as in the hook), and in the
tables on ``cold_lexical`` too (BM25 alone: the cold hook over an index without readable
vectors): ``lore`` (the injection decision), ``always``
(every non-trivial prompt gets its first five hits, no decision, no repeat rule)
and ``before`` (the block as it was built before the injection decision: the
evidence-gap verdict, the share-of-top floor and whole summaries). The searches run
once; the policies replay over the same responses.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import corpora, sets

Progress = Callable[[str], None]
STREAM_FILE = "prompt_stream.jsonl"
PATHS = ("warm", "cold")


def _quiet(message: str) -> None:
    return None


@dataclass
class Turn:
    store: str
    session: str
    turn: int
    project: str
    prompt: str
    kind: str
    relevant: tuple[str, ...]
    split: str
    # Who wrote it: ``original`` (the stream the first decisions were fitted on, data/prompt_stream.jsonl)
    # or one of the independent author groups of data/streams/ (docs/evaluation.md, "The prompt stream").
    author: str = "original"
    style: str = ""


@dataclass
class Observed:
    """One prompt's searches, as the hook would run them (None: a trivial prompt, never searched)."""

    turn: Turn
    warm: Any = None
    cold: Any = None
    null: Any = None
    # The cold path without its vector channel (BM25 alone, ``lore.rank.cold.BM25_ONLY``): what the
    # hook answers when the index has no vectors it can read; its decision has its own weights.
    cold_lexical: Any = None


@dataclass
class Outcome:
    turn: Turn
    injected: tuple[str, ...]  # full items and pointers
    chars: int
    in_context: bool = False  # a relevant record was handed earlier in the session (full or pointer)
    pointers: tuple[str, ...] = ()  # the part of ``injected`` handed as titles only
    in_context_full: bool = False  # a relevant record was handed in full earlier in the session

    @property
    def full(self) -> tuple[str, ...]:
        return tuple(i for i in self.injected if i not in self.pointers)


@dataclass
class StreamStores:
    observed: dict[str, list[Observed]] = field(default_factory=dict)


STREAMS_DIR = "streams"  # the independent author groups, one file each (data/streams/GROUP.jsonl)


def load_turns(path: Path | None = None) -> list[Turn]:
    """The original stream's turns (or ``path``'s): the group every earlier decision was fitted on."""
    rows = sets.read_jsonl(path or sets.data_file(STREAM_FILE))
    return [Turn(r["store"], r["session"], int(r["turn"]), r["project"], r["prompt"], r["kind"], tuple(r["relevant"]),
                 r.get("split", "test"), r.get("author", "original"), r.get("style", ""))
            for r in rows]  # fmt: skip


def load_groups() -> list[Turn]:
    """Every author group's turns: the original stream, then data/streams/*.jsonl in name order."""
    turns = load_turns()
    for path in sorted((sets.DATA / STREAMS_DIR).glob("*.jsonl")):
        turns.extend(load_turns(path))
    return turns


def authors(turns: Sequence[Turn]) -> list[str]:
    return list(dict.fromkeys(t.author for t in turns))


def _git_store(shared: Path, data_dir: Path) -> float:
    memory = sets.memory(shared)
    corpora.write_decisions(data_dir, memory.raws)
    return memory.now


def observe(shared: Path, work: Path, progress: Progress = _quiet, turns: Sequence[Turn] | None = None) -> StreamStores:
    """Build both stores, measure their null evidence, and run every prompt's searches once."""
    from benchmarks import demo_dir
    from benchmarks import locations as bench_locations
    from lore.agent.hook import is_trivial
    from lore.index.manager import IndexManager
    from lore.rank import null
    from lore.rank.cold import RERANKED, Declined, hook_options, open_reader, run_cold
    from lore.rank.pipeline import CHANNELS
    from lore.rank.query import scrub_query
    from lore.search import SearchSession, search

    turns = list(turns) if turns is not None else load_turns()
    result = StreamStores()
    for store in sorted({t.store for t in turns}):
        data_dir, index_dir = work / f"stream-{store}-data", work / f"stream-{store}-index"
        if store == "demo":
            shutil.copytree(demo_dir(), data_dir, dirs_exist_ok=True)
            now = corpora.epoch(sets.DEMO_NOW)
        elif store == "cpython":
            raws = corpora.python_news()
            corpora.write_decisions(data_dir, raws)
            now = max(corpora.epoch(r["timestamp"]) for r in raws)
        else:
            now = _git_store(shared, data_dir)
        locations = bench_locations(data_dir, index_dir)
        progress(f"stream: indexing the {store} store")
        IndexManager(locations).build()
        session = SearchSession(locations)
        null.ensure(session, now)
        evidence = null.load(session.open("ignore").directory)
        cold_reader = open_reader(locations)
        progress(f"stream: searching the {store} store's prompts")
        observed = []
        try:
            for turn in (t for t in turns if t.store == store):
                seen = Observed(turn, null=evidence)
                if not is_trivial(turn.prompt):
                    seen.warm = search(session, turn.prompt, hook_options(turn.project, now, channels=CHANNELS),
                                       policy="ignore", log_access=False, use_llm=False)  # fmt: skip
                    query = scrub_query(turn.prompt).text
                    try:
                        seen.cold = run_cold(cold_reader, query, hook_options(turn.project, now, channels=RERANKED))
                        seen.cold_lexical = run_cold(cold_reader, query, hook_options(turn.project, now))
                    except Declined:
                        # as the hook: the whole pipeline answers what the cold path declines
                        seen.cold = seen.cold_lexical = seen.warm
                observed.append(seen)
        finally:
            cold_reader.close()
            if session.reader is not None:
                session.reader.close()
        result.observed[store] = observed
    return result


def replay(observed: Sequence[Observed], path: str, policy: str, settings: Any = None) -> list[Outcome]:
    """Each prompt's block under ``policy`` (``lore``, ``always``, ``before``), session by session.

    As in the hook, a session's earlier full items and pointers go to the decision
    (``seen``, ``pointed``), and a relevant record handed earlier counts as in context.
    """
    from lore.context import HOOK, assemble, block_for

    outcomes = []
    handed: dict[str, tuple[list[str], list[str]]] = {}
    for seen in observed:
        turn = seen.turn
        full_before, pointed_before = handed.setdefault(turn.session, ([], []))
        response = getattr(seen, path)
        ids: tuple[str, ...] = ()
        pointers: tuple[str, ...] = ()
        chars = 0
        if response is not None:
            if policy == "lore":
                block = block_for(response, HOOK, project=turn.project, seen=tuple(full_before),
                                  pointed=tuple(pointed_before), null=seen.null, settings=settings)  # fmt: skip
            elif policy == "always":
                from lore.rank import inject

                block = block_for(response, HOOK, project=turn.project, null=seen.null,
                                  settings=(settings or inject.DEFAULT_SETTINGS)._replace(enabled=False))  # fmt: skip
            else:
                block = assemble(response, budget_chars=HOOK.budget_chars, max_items=HOOK.max_items, fmt=HOOK.fmt,
                                 fenced=HOOK.fenced, legacy_text=True)  # fmt: skip
            ids = tuple(item.id for item in block.items)
            pointers = tuple(item.id for item in block.items if item.tier == "pointer")
            chars = len(block.text)
        in_context = any(r in full_before or r in pointed_before for r in turn.relevant)
        in_context_full = any(r in full_before for r in turn.relevant)
        outcomes.append(Outcome(turn, ids, chars, in_context, pointers, in_context_full))
        full_before.extend(i for i in ids if i not in pointers and i not in full_before)
        pointed_before.extend(i for i in pointers if i not in pointed_before)
    return outcomes


def measures(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """What reached the agent: ``hit`` counts full items and pointers, this prompt's or the session's earlier
    ones; ``hit_full`` full items only (session-aware); ``hit_strict`` this prompt's block alone."""
    answerable = [o for o in outcomes if o.turn.relevant]
    unanswerable = [o for o in outcomes if not o.turn.relevant]
    strict = sum(1 for o in answerable if set(o.injected) & set(o.turn.relevant))
    hit = sum(1 for o in answerable if set(o.injected) & set(o.turn.relevant) or o.in_context)
    hit_full = sum(1 for o in answerable if set(o.full) & set(o.turn.relevant) or o.in_context_full)
    items = [i for o in outcomes for i in o.injected]
    full_items = [i for o in outcomes for i in o.full]
    relevant_items = sum(1 for o in outcomes for i in o.injected if i in o.turn.relevant)
    relevant_full = sum(1 for o in outcomes for i in o.full if i in o.turn.relevant)
    blocks = [o for o in outcomes if o.injected]
    return {
        "prompts": len(outcomes), "answerable": len(answerable), "unanswerable": len(unanswerable),
        "hit": round(hit / max(len(answerable), 1), 3),
        "hit_full": round(hit_full / max(len(answerable), 1), 3),
        "hit_strict": round(strict / max(len(answerable), 1), 3),
        "left_empty": round(sum(1 for o in unanswerable if not o.injected) / max(len(unanswerable), 1), 3),
        "left_without_full": round(sum(1 for o in unanswerable if not o.full) / max(len(unanswerable), 1), 3),
        "precision": round(relevant_items / max(len(items), 1), 3),
        "precision_full": round(relevant_full / max(len(full_items), 1), 3),
        "chars_per_prompt": round(sum(o.chars for o in outcomes) / max(len(outcomes), 1), 1),
        "chars_per_block": round(sum(o.chars for o in blocks) / max(len(blocks), 1), 1),
        "items_per_block": round(len(items) / max(len(blocks), 1), 2),
        "blocks": len(blocks),
        "full_blocks": sum(1 for o in outcomes if o.full),
        "pointer_blocks": sum(1 for o in outcomes if o.injected and not o.full),
    }  # fmt: skip


def hits_of(outcomes: Sequence[Outcome], full: bool = False) -> list[float]:
    """1.0 for each answerable prompt whose relevant record reached the agent (``measures``' hit; ``full``: its
    hit_full), else 0.0."""
    def reached(o: Outcome) -> bool:
        if full:
            return bool(set(o.full) & set(o.turn.relevant)) or o.in_context_full
        return bool(set(o.injected) & set(o.turn.relevant)) or o.in_context

    return [1.0 if reached(o) else 0.0 for o in outcomes if o.turn.relevant]
