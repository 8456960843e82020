"""The injection decision: which of a search's hits reach an agent's prompt, if any.

A ranking always has a first hit; a prompt hook must not always inject it. Every
surface that injects memories unasked (the prompt hook's warm and cold paths, MCP
``context``, ``lore context``) asks ``decide`` whether the evidence says a memory
applies to the prompt, and which of the hits do. Nothing here calls a model: the
evidence is what the search already computed (the query's idf per term, the vector
channel's cosine when it ran) plus the hit's own words.

Two logistic scores, both fitted on the dev splits of the prompt stream
(``scripts/fit_injection.py``; docs/search.md, "The injection decision"):

* the *gate*, one per prompt: does any memory apply? Its features are the best and
  the first hit's evidence, the prompt's length and whether the first hit is another
  project's;
* the *item* score, one per hit: does this one apply? The first hit of an open gate
  always goes in; the others must clear the item threshold.

The evidence is measured against what the same store gives prompts that nothing in
it answers (``NULL_PROMPTS``, run once per index: ``null_evidence``). A cosine of
0.45 is a strong match in a store of 200 team decisions and what any prompt reaches
in 8,000 git commits; as a z-score against the store's own null prompts both stores
speak one scale (on the dev streams: 66% -> 76% of unanswerable prompts left empty
at the same hit rate, warm path).

Pure Python: the hook's cold path imports it on every prompt.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from lore import analysis

# The per-hit evidence, each measured on the hit's title and content.
LEXICAL_EVIDENCE = ("coverage", "coverage_rest", "title_share", "title_coverage")
WARM_EVIDENCE = (*LEXICAL_EVIDENCE, "cosine", "passage")

# Prompts no store of an engineering team answers (general programming, trivia): the null
# against which a store's evidence is measured. Written for this purpose; none comes from
# an evaluation set.
NULL_PROMPTS = (
    "how do I center a div horizontally and vertically with flexbox",
    "write a python function that reverses a linked list",
    "what's the difference between a process and a thread",
    "explain big-O notation with an example",
    "how do I undo the last commit but keep the changes",
    "write a regex that matches an email address",
    "convert this callback code to async/await",
    "how do I read a CSV file into a list of dictionaries",
    "what does the static keyword mean in Java",
    "set up a React component with a controlled text input",
    "how do I sort a dictionary by value in python",
    "make a bash loop over all .txt files in a folder",
    "what is a closure in JavaScript",
    "how do I profile memory usage of a C program",
    "write a SQL query for the top three customers by revenue",
    "explain how TLS handshakes work",
    "rename a variable across the whole project",
    "add a dark mode toggle to the settings page",
    "why is my docker image so large",
    "how do I write a unit test for a function that calls time.now",
    "format the date as ISO 8601 in Go",
    "what's the idiomatic way to handle errors in Rust",
    "draw a bar chart with matplotlib",
    "implement binary search iteratively",
    "how do I debounce a search input",
    "explain the CAP theorem briefly",
    "write a Makefile target that runs the linter",
    "what is the difference between let and const",
    "parse command line arguments in a small script",
    "how do I make an HTTP request with curl and show headers",
    "generate a random password of 16 characters",
    "what are generics in TypeScript",
    "how should I structure a small Flask app",
    "compress a folder into a tar.gz archive",
    "write a haiku about code review",
    "summarize the plot of Hamlet",
    "what is the capital of Australia",
    "help me write a cover letter",
    "how many minutes are in a week",
    "recommend a good book about distributed systems",
)

Null = Mapping[str, tuple[float, float]]  # evidence name -> (mean, standard deviation) over the null prompts


class NullEvidence(NamedTuple):
    """What a store gives prompts it cannot answer: the first hit's evidence, mean and spread, per path."""

    warm: Null
    cold: Null

    def to_json(self) -> dict[str, dict[str, list[float]]]:
        return {"warm": {k: list(v) for k, v in self.warm.items()}, "cold": {k: list(v) for k, v in self.cold.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> NullEvidence:
        def part(name: str) -> dict[str, tuple[float, float]]:
            raw = data.get(name)
            if not isinstance(raw, Mapping):
                raise ValueError(f"null evidence has no {name!r} part")
            # An evidence the file does not hold keeps the default's scale, never (0, 1).
            return {**getattr(DEFAULT_NULL, name), **{str(k): (float(v[0]), float(v[1])) for k, v in raw.items()}}

        return cls(part("warm"), part("cold"))


# Below this many records a store is young: its idf says little (one record about sessions
# makes "sessions" its commonest word), it keeps the default null (``null.MIN_RECORDS``), and
# surfaces where someone asks follow the search's evidence-gap verdict (``context.decide``).
YOUNG_STORE_RECORDS = 100

# Used until a store's own null is measured (an index built by an older lore, or a store too
# young to have one): the mean of the demo store's and the 8,000-record git store's nulls.
DEFAULT_NULL = NullEvidence(
    warm={"coverage": (0.318, 0.144), "coverage_rest": (0.1, 0.118), "title_share": (0.116, 0.094),
          "title_coverage": (0.181, 0.15), "cosine": (0.393, 0.123), "passage": (0.352, 0.145)},
    cold={"coverage": (0.35, 0.129), "coverage_rest": (0.12, 0.12), "title_share": (0.119, 0.097),
          "title_coverage": (0.192, 0.151)},
)  # fmt: skip


class InjectSettings(NamedTuple):
    """The fitted weights (``scripts/fit_injection.py`` on every author group) and the operating points.

    Each weight vector is in the order of ``gate_features``/``item_features``; the
    prompt's length (``log_terms``), ``coverage`` and ``title_share`` are held at 0: each
    helped some author groups left out and hurt others, or only hurt (docs/search.md,
    "The injection decision").
    """

    warm_gate: tuple[float, ...] = (-1.8189, 0.0, -1.2622, 0.0, 0.0, 0.0, 0.0, 0.2443, 0.0, 0.0, 0.3514, 0.0, 0.0, 0.3919,
                                    0.3842)  # fmt: skip
    warm_item: tuple[float, ...] = (-2.2167, 0.0, -0.3118, -1.5079, 0.0, 0.4052, 0.0, 0.015, 0.3935, 0.5733)
    cold_gate: tuple[float, ...] = (-1.0997, 0.0, -1.2546, 0.0, 0.0, 0.0, 0.0, 0.0, 0.6878, 0.0, 0.1886)
    cold_item: tuple[float, ...] = (-1.4994, 0.0, -0.3372, -1.8936, 0.0, 0.6193, 0.0, 0.3259)
    # Chosen by ``benchmarks.authors.choose`` on every group out of fold (each scored by weights
    # fitted on the others): the most prompts whose memory reaches the agent, in full or as a
    # pointer, while a block costs at most 400 characters per prompt, its full items are right
    # at least 45% of the time and 85% of unanswerable prompts get no full item. The cold path
    # (BM25's candidates reranked with their cosines) reads the warm ones; ``cold_*`` are BM25
    # alone's (an index without readable vectors). Figures per group left out: docs/search.md.
    warm_gate_threshold: float = 0.4
    warm_item_threshold: float = 0.3
    warm_pointer_threshold: float = 0.22
    cold_gate_threshold: float = 0.4
    cold_item_threshold: float = 0.3
    cold_pointer_threshold: float = 0.26
    # Surfaces where someone asks for memory (`lore context`, MCP `context`, `Lore.context`): the
    # best candidates always come (``asked_pointer_threshold``), the first in full from this gate
    # on; a block without a full item carries the gap line. The highest threshold that leaves at
    # most 10% of the answerable dev questions of the demo, memory and known-item sets without a
    # full item (scripts/asked_threshold.py; docs/search.md, "Where someone asks"). A store of
    # under ``YOUNG_STORE_RECORDS`` records follows the search's evidence-gap verdict instead
    # (``context.decide``).
    asked_gate_threshold: float = 0.07
    # A memory injected earlier in the session comes again only as the first hit of a
    # prompt whose gate is at least this sure: the agent already has it in its context.
    repeat_threshold: float = 0.9
    # Where someone asked, the best candidates come as pointers whatever the gate says.
    asked_pointer_threshold: float = 0.0
    max_full: int = 3
    max_pointers: int = 3
    enabled: bool = True


def gate_features(vectors: bool) -> tuple[str, ...]:
    evidence = WARM_EVIDENCE if vectors else LEXICAL_EVIDENCE
    return ("bias", "log_terms", "top_other", *(f"max_{e}" for e in evidence), *(f"top_{e}" for e in evidence))


def item_features(vectors: bool) -> tuple[str, ...]:
    return ("bias", "log_terms", "rank", "other", *(WARM_EVIDENCE if vectors else LEXICAL_EVIDENCE))


class Judged(NamedTuple):
    """One hit's evidence (z-scores against the null) and the item score's probability."""

    id: str
    evidence: dict[str, float]
    probability: float
    other_project: bool


class Decision(NamedTuple):
    """Whether to inject, what, in which tier, and why (``--explain`` and the bench read it).

    ``chosen`` are the full items (title and matching sentences), ``pointers`` the titles
    only: evidence too weak to hand over a memory, strong enough to let the agent judge
    (it opens one with ``lore show ID`` or the MCP ``show`` tool).
    """

    inject: bool
    gate: float
    chosen: tuple[str, ...]  # ids, best first
    judged: tuple[Judged, ...]
    reason: str
    vectors: bool
    gate_inputs: dict[str, float] = {}  # noqa: RUF012  (a NamedTuple default, never mutated)
    pointers: tuple[str, ...] = ()

    @property
    def tier(self) -> str:
        """``full`` (at least one full item), ``pointer`` (titles only) or ``none``."""
        return "full" if self.chosen else "pointer" if self.pointers else "none"


def raw_evidence(query_terms: Sequence[str], term_idf: Mapping[str, float], title: str, content: str,
                 cosine: float | None, passage: float | None = None) -> dict[str, float]:  # fmt: skip
    """The evidence that one hit applies to the prompt, before normalisation.

    ``coverage``: the share of the prompt's idf mass the record holds; ``coverage_rest``:
    the same without its single best term (one shared rare word is how near misses
    match); ``title_share``: the share of the record's title terms the prompt names;
    ``title_coverage``: the share of the prompt's idf mass in the title alone;
    ``cosine``: the vector channel's cosine; ``passage``: the best cosine between the
    prompt's own vector and the record's title or one of its sentences
    (``Candidate.passage_cosine``; the record's ``cosine`` when it has none). Both only
    where vectors ran.
    """
    terms = list(dict.fromkeys(query_terms))
    total = sum(term_idf.get(t, 0.0) for t in terms) or 1.0
    title_terms = set(analysis.terms(title))
    body_terms = title_terms | set(analysis.terms(content))
    held = [term_idf.get(t, 0.0) for t in terms if t in body_terms]
    in_title = [term_idf.get(t, 0.0) for t in terms if t in title_terms]
    values = {
        "coverage": sum(held) / total,
        "coverage_rest": (sum(held) - max(held, default=0.0)) / total,
        "title_share": len(title_terms & set(terms)) / len(title_terms) if title_terms else 0.0,
        "title_coverage": sum(in_title) / total,
    }
    if cosine is not None:
        values["cosine"] = cosine
        values["passage"] = cosine if passage is None else passage
    return values


# The z-scores the scores were fitted on lie within [-3.0, 6.7] (the dev streams, every
# evidence); outside it the logistic scores extrapolate (their weights on correlated
# evidence have opposite signs), and a store whose null is degenerate gives z-scores of
# 15 and more: 23 records, null prompts matching nothing, an on-topic prompt's gate 0.01.
Z_RANGE = (-4.0, 8.0)


def normalise(raw: Mapping[str, float], null: Null) -> dict[str, float]:
    """Each evidence as a z-score against the store's null prompts, within ``Z_RANGE``."""
    low, high = Z_RANGE
    out = {}
    for name, value in raw.items():
        mean, spread = null.get(name, (0.0, 1.0))
        out[name] = min(high, max(low, (value - mean) / (spread or 1.0)))
    return out


def _logistic(values: Mapping[str, float], weights: Sequence[float], names: Sequence[str]) -> float:
    if len(weights) != len(names):
        return 1.0  # no fitted weights: the decision is off
    score = sum(w * values.get(n, 0.0) for w, n in zip(weights, names, strict=True))
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, score))))


class Hit(NamedTuple):
    """What the decision reads of a search hit (a ``Candidate`` has all of it)."""

    id: str
    project: str | None
    title: str
    content: str
    cosine: float | None
    passage: float | None = None


def judge(hits: Sequence[Hit], query: str, term_idf: Mapping[str, float], *, project: str | None,
          null: NullEvidence) -> tuple[tuple[Judged, ...], dict[str, float], bool]:  # fmt: skip
    """Every hit's normalised evidence, and the prompt-level features of the gate."""
    query_terms = analysis.unique_terms(query)
    vectors = any(h.cosine is not None for h in hits)
    stats = null.warm if vectors else null.cold
    log_terms = math.log1p(len(query_terms))
    judged = []
    for rank, hit in enumerate(hits, start=1):
        cosine = (hit.cosine or 0.0) if vectors else None
        evidence = normalise(raw_evidence(query_terms, term_idf, hit.title, hit.content, cosine, hit.passage), stats)
        other = bool(project and hit.project and hit.project != project)
        evidence.update(bias=1.0, log_terms=log_terms, rank=float(rank), other=float(other))
        judged.append(Judged(hit.id, evidence, 0.0, other))
    prompt: dict[str, float] = {"bias": 1.0, "log_terms": log_terms}
    if judged:
        prompt["top_other"] = judged[0].evidence["other"]
        for name in WARM_EVIDENCE if vectors else LEXICAL_EVIDENCE:
            prompt[f"max_{name}"] = max(j.evidence[name] for j in judged)
            prompt[f"top_{name}"] = judged[0].evidence[name]
    return tuple(judged), prompt, vectors


def decide(hits: Sequence[Hit], query: str, term_idf: Mapping[str, float], *, project: str | None = None,
           seen: Iterable[str] = (), pointed: Iterable[str] = (), null: NullEvidence = DEFAULT_NULL,
           settings: InjectSettings | None = None, asked: bool = False) -> Decision:  # fmt: skip
    """Which hits to hand over for ``query``, and how; nothing when the evidence says none applies.

    The gate below the pointer threshold: nothing. At or above it the block opens: a hit
    whose item score clears the item threshold goes in full (the first hit too when the
    gate clears the full threshold), at most ``max_full``; the other first hits go as
    pointers (titles), at most ``max_pointers``. ``seen``: full items handed earlier in
    the session (again only as a first hit the gate is sure of); ``pointed``: earlier
    pointers (not pointed to again; strong evidence still hands one over in full).
    ``asked``: someone asked (``lore context``, MCP ``context``): the asked thresholds apply.
    """
    s = settings or DEFAULT_SETTINGS
    judged, prompt, vectors = judge(hits, query, term_idf, project=project, null=null)
    if not judged:
        return Decision(False, 0.0, (), (), "no hits", vectors, prompt)
    gate_w, item_w = (s.warm_gate, s.warm_item) if vectors else (s.cold_gate, s.cold_item)
    if vectors:
        full_t, item_t, pointer_t = s.warm_gate_threshold, s.warm_item_threshold, s.warm_pointer_threshold
    else:
        full_t, item_t, pointer_t = s.cold_gate_threshold, s.cold_item_threshold, s.cold_pointer_threshold
    if asked:
        full_t, pointer_t = s.asked_gate_threshold, s.asked_pointer_threshold
    gate = _logistic(prompt, gate_w, gate_features(vectors))
    names = item_features(vectors)
    judged = tuple(j._replace(probability=_logistic(j.evidence, item_w, names)) for j in judged)
    if not s.enabled:
        return Decision(True, gate, tuple(j.id for j in judged), judged, "decision off", vectors, prompt)
    if gate < pointer_t:
        return Decision(False, gate, (), judged, f"gate {gate:.2f} below {pointer_t:.2f}", vectors, prompt)
    already, shown = set(seen), set(pointed)
    chosen: list[str] = []
    repeats = 0
    for rank, j in enumerate(judged):
        if len(chosen) >= s.max_full:
            break
        if not ((rank == 0 and gate >= full_t) or j.probability >= item_t):
            continue
        if j.id in already and not (rank == 0 and gate >= s.repeat_threshold):
            repeats += 1
            continue
        chosen.append(j.id)
    pointers = tuple(j.id for j in judged if j.id not in chosen and j.id not in already and j.id not in shown)
    pointers = pointers[: s.max_pointers]
    if chosen:
        return Decision(True, gate, tuple(chosen), judged, f"gate {gate:.2f}", vectors, prompt, pointers)
    if pointers:
        return Decision(False, gate, (), judged, f"gate {gate:.2f}: no item strong enough to hand in full: pointers",
                        vectors, prompt, pointers)  # fmt: skip
    return Decision(False, gate, (), judged, f"only memories handed earlier in this session ({repeats})", vectors, prompt)


DEFAULT_SETTINGS = InjectSettings()
