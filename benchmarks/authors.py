"""Leave-one-author-out: the injection decision fitted on some author groups, read on the one left out.

One author's prompts split by session share a style, so a test split of them cannot
show what the style taught the decision (the first gate learned that answerable
prompts are long). Here every weight and threshold is chosen on the other groups
(``data/prompt_stream.jsonl`` is the ``original`` group; ``data/streams/*.jsonl`` the
independent ones) and read on the group left out, per group and pooled.

The tiers (``lore.rank.inject.decide``): the gate at or above the full threshold hands
over full items; between the pointer and the full threshold, pointers (titles); below,
nothing. The rule that picks the thresholds on the training groups, scored out of
fold by group (each group by weights fitted without it), written down before any
left-out group was read: the highest full threshold whose full-item hit rate stays
within ``MAX_FULL_DROP`` of injecting always, then the highest pointer threshold whose
reach (full or pointer) stays within ``MAX_REACH_DROP``; the item threshold the one of
``ITEM_THRESHOLDS`` with the best full-item precision at that point. Each bound is a
point inside the issue's goal (8 and 3 points).

A replay through ``context.block_for`` for every threshold pair would take hours; the
threshold search runs on ``Prepared`` prompts (each hit's evidence and the length of
its line as the block renders it), which replays the decision's own rules in a few
microseconds. The operating points found are then replayed through the real
``block_for`` (``benchmarks.stream.replay``), and those are the figures reported.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import stream

# The costs a block may have, on the training groups (the goals): characters per prompt,
# the precision of full items, the shares of unanswerable prompts that get no full item and nothing.
MAX_CHARS = 400
MIN_FULL_PRECISION = 0.45
MIN_LEFT_WITHOUT_FULL = 0.85
MIN_LEFT_EMPTY = 0.65
ITEM_THRESHOLDS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
FULL_STEPS = tuple(step / 100 for step in range(20, 91, 10))
POINTER_STEPS = tuple(step / 100 for step in range(2, 61, 2))
STEPS = tuple(step / 100 for step in range(0, 91))
L2 = 1.0  # ridge on every weight but the bias
# Features whose weight may take either sign; every evidence's must not be negative.
SIGNED = frozenset({"bias", "log_terms", "top_other", "rank", "other"})
# Held at 0 in every fit: each helped some author groups left out and hurt others by more than 0.01 of
# the gate's ROC area, or only hurt (docs/search.md, "The injection decision"; the prompt's length too).
WITHOUT = frozenset({"log_terms", "coverage", "title_share"})


@dataclass
class PreparedHit:
    id: str
    evidence: dict[str, float]
    full_chars: int | None  # None: the block would not show it in full (the share-of-top floor, a near-identical title)
    pointer_chars: int | None  # None: nor as a pointer (the share-of-top floor)


@dataclass
class Prepared:
    """One prompt as the threshold search reads it (None hits: a trivial prompt, never searched)."""

    turn: stream.Turn
    vectors: bool = True
    gate_inputs: dict[str, float] = field(default_factory=dict)
    hits: list[PreparedHit] = field(default_factory=list)
    searched: bool = False


def prepare(observed: Sequence[stream.Observed], path: str) -> list[Prepared]:
    from lore.context import HOOK, _line, assemble, decide, pointer_line
    from lore.rank import inject

    off = inject.DEFAULT_SETTINGS._replace(enabled=False)
    out = []
    for seen in observed:
        response = getattr(seen, path)
        prepared = Prepared(seen.turn)
        out.append(prepared)
        if response is None or not response.hits:
            prepared.searched = response is not None
            continue
        prepared.searched = True
        decision = decide(response, project=seen.turn.project, null=seen.null, settings=off, max_items=HOOK.max_items)
        prepared.vectors = decision.vectors
        prepared.gate_inputs = dict(decision.gate_inputs)
        everything = decision._replace(chosen=tuple(j.id for j in decision.judged), pointers=tuple(j.id for j in decision.judged))
        block = assemble(response, budget_chars=100_000, max_items=HOOK.max_items, fmt=HOOK.fmt, fenced=HOOK.fenced,
                         decision=everything)  # fmt: skip
        full = {i.id: len(_line(i, i.text, HOOK.fmt)) for i in block.items if i.tier == "full"}
        pointers = {i.id: len(pointer_line(i)) for i in block.items if i.tier == "pointer"}
        prepared.hits = [PreparedHit(j.id, dict(j.evidence), full.get(j.id), pointers.get(j.id)) for j in decision.judged]
    return out


def _overhead() -> tuple[int, int, int]:
    from lore.context import HEADER, POINTER_HEADER
    from lore.render.fence import FENCE_CLOSE, FENCE_NOTE, FENCE_OPEN

    fence = len(FENCE_OPEN) + len(FENCE_NOTE) + len(FENCE_CLOSE) + 2
    return fence, len(HEADER) + 1, len(POINTER_HEADER) + 1


def _logistic(values: dict[str, float], weights: Sequence[float], names: Sequence[str]) -> float:
    score = sum(w * values.get(n, 0.0) for w, n in zip(weights, names, strict=True))
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, score))))


@dataclass
class Scored:
    """A prepared prompt with the gate's and each hit's probability under one set of weights."""

    prompt: Prepared
    gate: float
    items: list[float]


def score(prepared: Sequence[Prepared], settings: Any) -> list[Scored]:
    from lore.rank import inject

    out = []
    for p in prepared:
        if not p.hits:
            out.append(Scored(p, 0.0, []))
            continue
        gate_w, item_w = (settings.warm_gate, settings.warm_item) if p.vectors else (settings.cold_gate, settings.cold_item)
        gate = _logistic(p.gate_inputs, gate_w, inject.gate_features(p.vectors))
        names = inject.item_features(p.vectors)
        out.append(Scored(p, gate, [_logistic(h.evidence, item_w, names) for h in p.hits]))
    return out


def simulate(scored: Sequence[Scored], full_t: float, pointer_t: float, item_t: float, *, always: bool = False,
             max_full: int = 3, max_pointers: int = 3, after_full: int = 3,
             repeat_t: float = 0.9) -> list[stream.Outcome]:  # fmt: skip
    """``inject.decide``'s tiers and session rules over scored prompts, with the block's length."""
    fence, header, pointer_header = _overhead()
    outcomes = []
    handed: dict[str, tuple[set[str], set[str]]] = {}
    for s in scored:
        turn = s.prompt.turn
        full_before, pointed_before = handed.setdefault(turn.session, (set(), set()))
        full: list[PreparedHit] = []
        pointers: list[PreparedHit] = []
        hits = s.prompt.hits
        if hits and always:
            full = [h for h in hits if h.full_chars is not None]
        elif hits and s.gate >= pointer_t:
            chosen: list[PreparedHit] = []  # as ``inject.decide`` chooses; the block then drops what it would not show
            for rank, (h, p) in enumerate(zip(hits, s.items, strict=True)):
                if len(chosen) >= max_full:
                    break
                if not ((rank == 0 and s.gate >= full_t) or p >= item_t):
                    continue
                if h.id in full_before and not (rank == 0 and s.gate >= repeat_t):
                    continue
                chosen.append(h)
            taken = {h.id for h in chosen}
            pointers = [h for h in hits if h.id not in taken and h.id not in full_before
                        and h.id not in pointed_before][:max_pointers]  # fmt: skip
            full = [h for h in chosen if h.full_chars is not None]
            pointers = [h for h in pointers if h.pointer_chars is not None]
        chars = 0
        if full or pointers:
            chars = fence + sum((h.full_chars or 0) + 1 for h in full) + (header if full else 0)
            chars += sum((h.pointer_chars or 0) + 1 for h in pointers) + (pointer_header if pointers else 0)
        ids = tuple(h.id for h in full) + tuple(h.id for h in pointers)
        relevant = turn.relevant
        outcomes.append(stream.Outcome(turn, ids, chars, any(r in full_before or r in pointed_before for r in relevant),
                                       tuple(h.id for h in pointers), any(r in full_before for r in relevant)))  # fmt: skip
        full_before.update(h.id for h in full)
        pointed_before.update(h.id for h in pointers)
    return outcomes


def logistic_fit(rows: list[list[float]], labels: list[float], monotone: Sequence[bool] = ()) -> tuple[float, ...]:
    """Ridge-penalised logistic regression by Newton's method (a dozen features: exact in a few steps).

    ``monotone``: the features whose weight may not be negative (more evidence never lowers a
    score). A fit that gives one a negative weight is redone without it (an active set), so
    correlated evidence cannot cancel out with opposite signs and extrapolate wildly outside
    what it was fitted on (a prompt matching nothing scored above one whose answer ranked first).
    """
    import numpy as np

    x, y = np.asarray(rows, dtype=float), np.asarray(labels, dtype=float)
    held = np.zeros(x.shape[1], dtype=bool)
    while True:
        w = np.zeros(x.shape[1])
        free = ~held
        xs = x[:, free]
        ridge = L2 * np.diag(np.r_[0.0, np.ones(xs.shape[1] - 1)])
        ws = np.zeros(xs.shape[1])
        for _ in range(50):
            p = 1.0 / (1.0 + np.exp(-xs @ ws))
            step = np.linalg.solve((xs.T * (p * (1 - p))) @ xs + ridge, xs.T @ (p - y) + ridge @ ws)
            ws -= step
            if float(np.abs(step).max()) < 1e-9:
                break
        w[free] = ws
        negative = [i for i, m in enumerate(monotone) if m and not held[i] and w[i] < 0]
        if not negative:
            return tuple(round(float(v), 4) for v in w)
        held[min(negative, key=lambda i: w[i])] = True


def fit(prepared_warm: Sequence[Prepared], prepared_lexical: Sequence[Prepared], without: frozenset[str] = frozenset()) -> Any:
    """Gate and item weights: warm from the whole pipeline's answers, cold (lexical) from BM25 alone.

    ``without``: features (``log_terms``, ``top_other``, or an evidence such as ``passage``) held at 0,
    so their weights are 0.
    """
    from lore.rank import inject

    def dropped(name: str) -> bool:
        return name in without or name.removeprefix("max_").removeprefix("top_") in without

    fitted: dict[str, tuple[float, ...]] = {}
    for prepared, vectors, prefix in ((prepared_warm, True, "warm"), (prepared_lexical, False, "cold")):
        gate_names, item_names = inject.gate_features(vectors), inject.item_features(vectors)
        gate_x, gate_y, item_x, item_y = [], [], [], []
        for p in prepared:
            if not p.hits or p.vectors != vectors:
                continue
            relevant = set(p.turn.relevant)
            found = any(h.id in relevant for h in p.hits)
            if not relevant or found:
                gate_x.append([0.0 if dropped(n) else p.gate_inputs.get(n, 0.0) for n in gate_names])
                gate_y.append(1.0 if relevant else 0.0)
            for h in p.hits:
                item_x.append([0.0 if dropped(n) else h.evidence.get(n, 0.0) for n in item_names])
                item_y.append(1.0 if h.id in relevant else 0.0)
        fitted[f"{prefix}_gate"] = logistic_fit(gate_x, gate_y, [n not in SIGNED for n in gate_names])
        fitted[f"{prefix}_item"] = logistic_fit(item_x, item_y, [n not in SIGNED for n in item_names])
    return inject.DEFAULT_SETTINGS._replace(**fitted)  # type: ignore[arg-type]


@dataclass
class Groups:
    """Each author group's prepared prompts, per path."""

    warm: dict[str, list[Prepared]]
    cold: dict[str, list[Prepared]]
    lexical: dict[str, list[Prepared]]

    @classmethod
    def of(cls, stores: stream.StreamStores) -> Groups:
        observed = [o for seen in stores.observed.values() for o in seen]
        names = stream.authors([o.turn for o in observed])

        def per_group(path: str) -> dict[str, list[Prepared]]:
            prepared = prepare(observed, path)
            return {g: [p for p in prepared if p.turn.author == g] for g in names}

        return cls(per_group("warm"), per_group("cold"), per_group("cold_lexical"))

    def names(self) -> list[str]:
        return list(self.warm)

    def fit_on(self, names: Sequence[str], without: frozenset[str] = frozenset()) -> Any:
        return fit([p for g in names for p in self.warm[g]], [p for g in names for p in self.lexical[g]], without)


def _within_costs(figures: dict[str, Any]) -> bool:
    return (figures["chars_per_prompt"] <= MAX_CHARS and figures["precision_full"] >= MIN_FULL_PRECISION
            and figures["left_without_full"] >= MIN_LEFT_WITHOUT_FULL and figures["left_empty"] >= MIN_LEFT_EMPTY)  # fmt: skip


def choose(scored: Sequence[Scored]) -> dict[str, float]:
    """The rule (module docstring) over out-of-fold scored prompts: the full, item and pointer thresholds.

    For each full and item threshold, the lowest pointer threshold whose blocks are within the
    characters and the left-empty share (both only fall as it rises, as reach does: found by
    bisection over ``POINTER_STEPS``); of those within every cost, the one that reaches the
    agent most, in full or as pointers, and then in full.
    """
    always = stream.measures(simulate(scored, 0, 0, 0, always=True))["hit"]
    best: tuple[tuple[float, float], dict[str, float]] | None = None
    for item_t in ITEM_THRESHOLDS:
        for full_t in FULL_STEPS:
            steps = [t for t in POINTER_STEPS if t <= full_t]

            def cheap(figures: dict[str, Any]) -> bool:
                return figures["chars_per_prompt"] <= MAX_CHARS and figures["left_empty"] >= MIN_LEFT_EMPTY

            if not cheap(stream.measures(simulate(scored, full_t, steps[-1], item_t))):
                continue
            low, high = 0, len(steps) - 1  # steps[high] is cheap enough; find the lowest that is
            while low < high:
                middle = (low + high) // 2
                if cheap(stream.measures(simulate(scored, full_t, steps[middle], item_t))):
                    high = middle
                else:
                    low = middle + 1
            figures = stream.measures(simulate(scored, full_t, steps[high], item_t))
            if not _within_costs(figures):
                continue
            key = (figures["hit"] + figures["hit_full"], figures["hit"])
            if best is None or key > best[0]:
                best = (key, {"full": full_t, "item": item_t, "pointer": steps[high]})
    if best is None:  # no point meets the costs: the strictest one tried
        best = ((0.0, 0.0), {"full": FULL_STEPS[-1], "item": ITEM_THRESHOLDS[-1], "pointer": POINTER_STEPS[-1]})
    return {**best[1], "always_hit": always}


def out_of_fold(groups: Groups, names: Sequence[str], without: frozenset[str] = frozenset(),
                path: str = "warm") -> list[Scored]:  # fmt: skip
    """Each of ``names`` scored by weights fitted on the others of ``names``."""
    table = getattr(groups, path)
    if len(names) < 2:  # nothing to leave out: in sample
        return [s for g in names for s in score(table[g], groups.fit_on(names, without))]
    return [s for g in names for s in score(table[g], groups.fit_on([n for n in names if n != g], without))]


def apply(settings: Any, thresholds: dict[str, float], lexical: dict[str, float] | None = None) -> Any:
    """``settings`` with the chosen thresholds (the hook's cold path reads the warm ones: its hits carry cosines);
    ``lexical``: those of BM25 alone (an index without readable vectors), the ``cold_*`` ones."""
    settings = settings._replace(warm_gate_threshold=thresholds["full"], warm_item_threshold=thresholds["item"],
                                 warm_pointer_threshold=thresholds["pointer"])  # fmt: skip
    if lexical is not None:
        settings = settings._replace(cold_gate_threshold=lexical["full"], cold_item_threshold=lexical["item"],
                                     cold_pointer_threshold=lexical["pointer"])  # fmt: skip
    return settings


def curve(scored: Sequence[Scored], thresholds: dict[str, float]) -> list[dict[str, float]]:
    """Reach against left empty as the pointer threshold moves (the full and item thresholds kept)."""
    points = []
    for pointer_t in STEPS[::5]:
        full_t = max(thresholds["full"], pointer_t)
        figures = stream.measures(simulate(scored, full_t, pointer_t, thresholds["item"]))
        points.append({"pointer": pointer_t, "hit": figures["hit"], "hit_full": figures["hit_full"],
                       "left_empty": figures["left_empty"], "chars_per_prompt": figures["chars_per_prompt"]})  # fmt: skip
    return points


def length_check(turns: Sequence[stream.Turn]) -> dict[str, Any]:
    """Median words of answerable and unanswerable (non-chit-chat) prompts per group, and how well length alone
    separates them: the area under its ROC curve, pooled and per group (0.5: not at all)."""
    out: dict[str, Any] = {}
    for group in [*stream.authors(turns), "pooled"]:
        rows = [t for t in turns if group in ("pooled", t.author)]
        answerable = [len(t.prompt.split()) for t in rows if t.relevant]
        other = [len(t.prompt.split()) for t in rows if not t.relevant and t.kind != "chitchat"]
        out[group] = {"answerable_median_words": statistics.median(answerable) if answerable else None,
                      "unanswerable_median_words": statistics.median(other) if other else None,
                      "length_auc": round(_auc(answerable, other), 3)}  # fmt: skip
    return out


def _auc(positive: Sequence[int], negative: Sequence[int]) -> float:
    if not positive or not negative:
        return 0.5
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in positive for n in negative)
    return wins / (len(positive) * len(negative))


def single_input(prepared: Sequence[Prepared], name: str) -> list[Scored]:
    """A gate that reads one input alone (``top_cosine``, ``top_coverage``...): its z-score, each hit full-able."""
    return [Scored(p, p.gate_inputs.get(name, -99.0) if p.hits else 0.0, [1.0] * len(p.hits)) for p in prepared]


SINGLE_INPUTS = ("top_coverage", "top_coverage_rest", "top_title_share", "top_title_coverage", "top_cosine",
                 "top_passage", "log_terms")  # fmt: skip
Z_STEPS = tuple(-2.0 + step / 4 for step in range(41))


def single_threshold(scored: Sequence[Scored]) -> float:
    """The lowest threshold that leaves ``MIN_LEFT_EMPTY`` of unanswerable prompts empty (the same emptiness as the rule's)."""
    for threshold in Z_STEPS:
        if stream.measures(simulate(scored, threshold, threshold, 2.0))["left_empty"] >= MIN_LEFT_EMPTY:
            return threshold
    return Z_STEPS[-1]


def run(shared: Path, work: Path, progress: stream.Progress | None = None, *, quick: bool = False) -> dict[str, Any]:
    """The stream section (``python -m benchmarks --only stream``): every author group's prompts searched once, then
    each group left out. ``quick``: the demo store's prompts only (the git store's 8,000 records take a minute to build).
    """
    turns = stream.load_groups()
    if quick:
        turns = [t for t in turns if t.store == "demo"]
    say = progress or (lambda message: None)
    stores = stream.observe(shared, work, say, turns)
    say("stream: leaving each author group out")
    return report(stores, turns, quick=quick)


def report(stores: stream.StreamStores, turns: Sequence[stream.Turn], *, quick: bool = False,
           without: frozenset[str] = WITHOUT) -> dict[str, Any]:  # fmt: skip
    """The stream section's figures: per left-out group and pooled, on the warm and cold paths, through
    ``stream.replay`` (``context.block_for`` itself), beside injecting always and each input alone."""
    from benchmarks.matrix import paired_margin

    groups = Groups.of(stores)
    names = groups.names()
    observed = [o for seen in stores.observed.values() for o in seen]
    by_group = {g: [o for o in observed if o.turn.author == g] for g in names}
    out: dict[str, Any] = {"prompts": len(observed), "quick": quick, "groups": {}, "length": length_check(turns),
                           "stores": sorted(stores.observed), "without": sorted(without)}  # fmt: skip
    pooled: dict[str, dict[str, list[stream.Outcome]]] = {p: {"lore": [], "always": []} for p in stream.PATHS}
    for held in names:
        train = [g for g in names if g != held]
        thresholds = choose(out_of_fold(groups, train, without))
        settings = apply(groups.fit_on(train, without), thresholds)
        row: dict[str, Any] = {"thresholds": thresholds, "sessions": len({o.turn.session for o in by_group[held]}),
                               "stores": sorted({o.turn.store for o in by_group[held]})}  # fmt: skip
        for path in stream.PATHS:
            lore = stream.replay(by_group[held], path, "lore", settings)
            always = stream.replay(by_group[held], path, "always", settings)
            pooled[path]["lore"].extend(lore)
            pooled[path]["always"].extend(always)
            row[path] = {"lore": stream.measures(lore), "always": stream.measures(always),
                         "reach_margin": paired_margin(stream.hits_of(lore), stream.hits_of(always)),
                         "full_margin": paired_margin(stream.hits_of(lore, full=True), stream.hits_of(always))}  # fmt: skip
        row["curve"] = curve(score(groups.warm[held], settings), thresholds)
        row["single"] = {}
        for name in SINGLE_INPUTS:
            threshold = single_threshold([s for g in train for s in single_input(groups.warm[g], name)])
            figures = stream.measures(simulate(single_input(groups.warm[held], name), threshold, threshold, 2.0))
            row["single"][name] = {"threshold": threshold, **{k: figures[k] for k in ("hit", "hit_full", "left_empty",
                                                                                     "chars_per_prompt")}}  # fmt: skip
        out["groups"][held] = row
    out["pooled"] = {path: {"lore": stream.measures(o["lore"]), "always": stream.measures(o["always"]),
                            "reach_margin": paired_margin(stream.hits_of(o["lore"]), stream.hits_of(o["always"])),
                            "full_margin": paired_margin(stream.hits_of(o["lore"], full=True), stream.hits_of(o["always"]))}
                     for path, o in pooled.items()}  # fmt: skip
    # The shipped settings (fitted on every group: in sample here), as the product runs them.
    out["shipped"] = {g: {path: stream.measures(stream.replay(by_group[g], path, "lore")) for path in stream.PATHS}
                      for g in names}  # fmt: skip
    return out
