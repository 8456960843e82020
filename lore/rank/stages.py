"""Scoring stages: pure functions over fused candidates, each switchable and explainable.

A candidate's score is its relevance (the normalised fused score, sharpened:
``lore.rank.fusion.relevance``) times the product of the factors the stages set.
Factors are multiplicative, so a boost never reorders two candidates of equal
evidence against the record it favours.

Every stage here earned its place on the dev splits of the benchmark sets or
acts only on a request or on data the sets cannot hold (docs/search.md,
"Scoring stages"). The seeds' confidence and importance boosts did not: at any
strength that moved a result they cost the demo set's dev split MRR@10 (0.841 ->
0.798 for confidence, -> 0.828 for importance, at sharpness 8) and gained nothing
elsewhere, so they are gone; importance still slows a decision's decay.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from lore.rank.fusion import RELEVANCE_SHARPNESS

if TYPE_CHECKING:
    from lore.index.manager import IndexReader

DAY = 86400.0


class Candidate:
    """One record on its way through the pipeline: its metadata, each channel's evidence, and every factor applied.

    The hits of a ``SearchResponse`` are these, with their record's text: the
    library exports this class as ``lore.SearchHit`` (docs/api.md). Immutable:
    ``evolve`` makes a changed copy. A plain class, not a dataclass: importing
    ``dataclasses`` (and ``inspect`` with it) cost the cold prompt hook a tenth of its time.
    """

    id: str
    row: int
    kind: str
    project: str | None
    status: str
    time: float | None  # epoch seconds
    confidence: float
    importance: int
    pinned: bool
    tags: tuple[str, ...]
    intent_chain: tuple[str, ...]
    ranks: Mapping[str, int]
    channel_scores: Mapping[str, float]
    # Each channel's weighted share of ``fused``: weight * score / the channel's best score
    # (score fusion) or weight / (k + rank) (RRF).
    contributions: Mapping[str, float]
    fused: float
    relevance: float  # (fused / best possible fused score) ** sharpness, in [0, 1]
    factors: Mapping[str, float]
    path: tuple[str, ...]  # graph path rendering, when reached through edges
    notes: tuple[str, ...]
    represents: int  # near-identical records collapsed into this one
    # Set by MMR: the 1-based position by score before diversity re-ordered the head, and the
    # cosine to the most similar hit placed above (None for the first pick).
    score_rank: int | None
    max_similarity: float | None
    # Share of the query's idf mass the record contains (None: no lexical channel or no terms).
    coverage: float | None
    # The best cosine between the query's own vector and the record's title or one of its
    # sentences (``analysis.passages``), for the hits the injection decision reads
    # (``pipeline.PASSAGE_HITS``); None without vectors. A paraphrase is close to one passage.
    passage_cosine: float | None
    # The record's text, filled in for the hits a search returns (``lore.search.search``):
    # renderers read these, never the index.
    title: str
    content: str
    summary: str

    def __init__(self, id: str, row: int, kind: str, project: str | None = None, status: str = "active",
                 time: float | None = None, confidence: float = 0.8, importance: int = 3, pinned: bool = False,
                 tags: tuple[str, ...] = (), intent_chain: tuple[str, ...] = (), ranks: Mapping[str, int] | None = None,
                 channel_scores: Mapping[str, float] | None = None, contributions: Mapping[str, float] | None = None,
                 fused: float = 0.0, relevance: float = 0.0, factors: Mapping[str, float] | None = None,
                 path: tuple[str, ...] = (), notes: tuple[str, ...] = (), represents: int = 1,
                 score_rank: int | None = None, max_similarity: float | None = None, coverage: float | None = None,
                 passage_cosine: float | None = None, title: str = "", content: str = "", summary: str = "") -> None:  # fmt: skip
        self.__dict__.update(
            id=id, row=row, kind=kind, project=project, status=status, time=time, confidence=confidence,
            importance=importance, pinned=pinned, tags=tags, intent_chain=intent_chain,
            ranks={} if ranks is None else ranks, channel_scores={} if channel_scores is None else channel_scores,
            contributions={} if contributions is None else contributions, fused=fused, relevance=relevance,
            factors={} if factors is None else factors, path=path, notes=notes, represents=represents,
            score_rank=score_rank, max_similarity=max_similarity, coverage=coverage, passage_cosine=passage_cosine,
            title=title, content=content, summary=summary,
        )  # fmt: skip

    def __setattr__(self, name: str, value: Any) -> None:
        # What the library raised when this was a frozen dataclass (imported only here: the cold hook avoids it).
        from dataclasses import FrozenInstanceError

        raise FrozenInstanceError(f"Candidate is immutable: use evolve({name}=...)")

    def __delattr__(self, name: str) -> None:
        from dataclasses import FrozenInstanceError

        raise FrozenInstanceError("Candidate is immutable")

    def __eq__(self, other: object) -> bool:
        return self.__dict__ == other.__dict__ if isinstance(other, Candidate) else NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal by value, and its mappings are not hashable

    def __repr__(self) -> str:
        return "Candidate(" + ", ".join(f"{name}={value!r}" for name, value in self.__dict__.items()) + ")"

    @property
    def score(self) -> float:
        return self.relevance * math.prod(self.factors.values())

    @property
    def timestamp(self) -> str | None:
        """``time`` in ISO 8601, UTC (``2025-03-01T10:00:00Z``), as `lore search --json` gives it."""
        return iso(self.time)

    def with_factor(self, name: str, value: float) -> Candidate:
        return self.evolve(factors={**self.factors, name: value})

    def evolve(self, **changes: Any) -> Candidate:
        """A copy with ``changes``: ``dataclasses.replace`` without its per-field checks.

        Every stage copies every candidate; ``replace`` re-runs ``__init__`` over all
        fields and was half the pipeline's time (about 5 us a copy, 400 copies a query).
        """
        if not changes.keys() <= self.__dict__.keys():
            raise TypeError(f"Candidate has no field {sorted(changes.keys() - self.__dict__.keys())[0]!r}")
        copy = object.__new__(Candidate)
        copy.__dict__.update(self.__dict__)
        copy.__dict__.update(changes)
        return copy


def iso(epoch: float | None) -> str | None:
    """Epoch seconds as ISO 8601 in UTC, to the second (``2025-03-01T10:00:00Z``); None stays None."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch)) if epoch is not None else None


def candidate_at(reader: IndexReader, row: int) -> Candidate:
    """A candidate for table row ``row``, with the metadata every stage reads (no channel evidence yet)."""
    t = reader.table
    return Candidate(
        id=t.ids[row], row=row, kind=t.kinds[row], project=t.projects[row], status=t.statuses[row],
        time=t.times[row], confidence=t.confidence[row], importance=t.importance[row], pinned=t.pinned[row],
        tags=tuple(t.tags_of(row)),
    )  # fmt: skip


# The settings and the query context are NamedTuples, not dataclasses: creating a frozen
# dataclass at import is slow, and the prompt hook's cold path imports these modules on every prompt.
_NOTHING: Mapping[str, Any] = MappingProxyType({})


class StageSettings(NamedTuple):
    decay_half_life_days: float = 30.0
    # How much of the score decay may take away: relevant old decisions must still surface.
    decay_weight: float = 0.3
    slow_decay_factor: float = 10.0  # pinned and importance >= 4
    fast_decay_factor: float = 3.0  # scratch observations
    frequency_max_boost: float = 0.15
    recency_max_boost: float = 0.10
    recency_half_life_days: float = 7.0
    project_boost: float = 1.5
    intent_weight: float = 0.25
    # The noise floor, on the scale of the unsharpened relevance: a candidate goes when
    # score ** (1 / relevance_sharpness) is below it.
    min_score: float = 0.05
    status_penalty: float = 0.5  # superseded/retracted shown with --all
    candidate_penalty: float = 0.8  # a captured candidate, not yet reviewed
    # Rank fusion sees only ranks: a record holding every query word and one holding a
    # single common word can sit one rank apart. Coverage is evidence, not a tie-breaker:
    # its factor (1 - w + w * coverage) applies to the fused score itself, at half its
    # sharpness (``coverage_scale``). w = 0.2 at scale 0.5 is the best pair on the dev
    # splits of the four sets together (docs/search.md, "Scoring stages"); stronger
    # settings helped the git sets and cost the demo set.
    coverage_weight: float = 0.2
    coverage_scale: float = 0.5
    relevance_sharpness: float = RELEVANCE_SHARPNESS


class QueryContext(NamedTuple):
    now: float
    project: str | None = None
    intents: tuple[str, ...] = ()
    include_all: bool = False
    include_candidates: bool = False
    access: Mapping[str, tuple[int, float]] = _NOTHING  # id -> (count, last epoch)
    type_preferences: Mapping[str, float] = _NOTHING
    settings: StageSettings = StageSettings()
    disabled: frozenset[str] = frozenset()


Stage = Callable[[Sequence[Candidate], QueryContext], list[Candidate]]


def status_stage(candidates: Sequence[Candidate], ctx: QueryContext) -> list[Candidate]:
    """Hide superseded and retracted records; with --all keep them, marked and ranked lower.

    Candidates (awaiting review) pass only when the search includes them, ranked a little lower.
    """
    if not ctx.include_all:
        return [c if c.status == "active" else c.with_factor("status", ctx.settings.candidate_penalty)
                for c in candidates
                if c.status == "active" or (ctx.include_candidates and c.status == "candidate")]  # fmt: skip
    return [c if c.status == "active" else c.with_factor("status", ctx.settings.status_penalty) for c in candidates]


def half_life_days(candidate: Candidate, settings: StageSettings) -> float:
    base = settings.decay_half_life_days
    if candidate.pinned or (candidate.kind == "decision" and candidate.importance >= 4):
        return base * settings.slow_decay_factor
    if candidate.kind == "observation":
        return base / settings.fast_decay_factor
    return base


def decay(age_days: float, half_life: float) -> float:
    """The seeds' temporal decay: 0.5 ** (age / half-life); never above 1 for future times."""
    return 0.5 ** (max(0.0, age_days) / half_life)


def decay_stage(candidates: Sequence[Candidate], ctx: QueryContext) -> list[Candidate]:
    weight = ctx.settings.decay_weight
    result = []
    for c in candidates:
        if c.time is None:
            result.append(c.with_factor("decay", 1.0 - weight / 2))
            continue
        value = decay((ctx.now - c.time) / DAY, half_life_days(c, ctx.settings))
        result.append(c.with_factor("decay", 1.0 - weight + weight * value))
    return result


def reinforcement_stage(candidates: Sequence[Candidate], ctx: QueryContext) -> list[Candidate]:
    """Records that searches keep returning get up to +15% (frequency) and +10% (recency)."""
    s = ctx.settings
    result = []
    for c in candidates:
        count, last = ctx.access.get(c.id, (0, 0.0))
        if count <= 0:
            result.append(c.with_factor("reinforcement", 1.0))
            continue
        frequency = s.frequency_max_boost * min(1.0, math.log1p(count) / math.log1p(50))
        recency = s.recency_max_boost * decay((ctx.now - last) / DAY, s.recency_half_life_days)
        result.append(c.with_factor("reinforcement", 1.0 + frequency + recency))
    return result


def project_stage(candidates: Sequence[Candidate], ctx: QueryContext) -> list[Candidate]:
    """Soft boost: the current project's records rank higher, others still surface."""
    if not ctx.project:
        return list(candidates)
    return [c.with_factor("project", ctx.settings.project_boost if c.project == ctx.project else 1.0) for c in candidates]


def intent_stage(candidates: Sequence[Candidate], ctx: QueryContext) -> list[Candidate]:
    """Heritage bonus for overlap between --intent and a record's tags and intent chain."""
    if not ctx.intents:
        return list(candidates)  # renormalised away: no factor at all
    wanted = {i.lower() for i in ctx.intents}
    result = []
    for c in candidates:
        have = {t.lower() for t in (*c.tags, *c.intent_chain)}
        overlap = len(wanted & have) / len(wanted)
        result.append(c.with_factor("intent", 1.0 + ctx.settings.intent_weight * overlap))
    return result


def coverage_stage(candidates: Sequence[Candidate], ctx: QueryContext) -> list[Candidate]:
    """Records holding more of the query's (idf-weighted) words keep more of their score.

    The factor is raised to ``sharpness * coverage_scale``: on the scale of the fused
    score it is ``(1 - w + w * coverage) ** coverage_scale``, whatever the sharpness.
    """
    s = ctx.settings
    w, power = s.coverage_weight, s.relevance_sharpness * s.coverage_scale
    return [c if c.coverage is None else c.with_factor("coverage", (1.0 - w + w * c.coverage) ** power)
            for c in candidates]  # fmt: skip


def type_preference_stage(candidates: Sequence[Candidate], ctx: QueryContext) -> list[Candidate]:
    """The classified query intent's preference for record types (fix_bug favours failures...)."""
    if not ctx.type_preferences:
        return list(candidates)
    return [c.with_factor("type", ctx.type_preferences.get(c.kind, 1.0)) for c in candidates]


STAGES: tuple[tuple[str, Stage], ...] = (
    ("status", status_stage),
    ("decay", decay_stage),
    ("reinforcement", reinforcement_stage),
    ("project", project_stage),
    ("intent", intent_stage),
    ("type", type_preference_stage),
    ("coverage", coverage_stage),
)


# Every name --disable accepts: the factor stages, and the noise floor applied after them.
SWITCHABLE: tuple[str, ...] = (*(name for name, _ in STAGES), "threshold")


def apply_stages(candidates: Sequence[Candidate], ctx: QueryContext) -> list[Candidate]:
    current = list(candidates)
    for name, stage in STAGES:
        if name in ctx.disabled:
            continue
        current = stage(current, ctx)
    return current


def rank(candidates: Sequence[Candidate], ctx: QueryContext) -> list[Candidate]:
    """Apply the stages, sort by score (ties: fused relevance, then id) and drop the noise floor."""
    scored = apply_stages(candidates, ctx)
    scored.sort(key=lambda c: (-c.score, -c.relevance, c.id))
    if "threshold" in ctx.disabled:
        return scored
    floor = ctx.settings.min_score ** ctx.settings.relevance_sharpness
    return [c for c in scored if c.score >= floor]
