"""The evaluation sets of the benchmark harness (`python -m benchmarks`), each split into a dev part (tune on it) and a test part (report it).

| set | store | questions | dev | test |
| --- | --- | --- | --- | --- |
| scifact | 5,183 SciFact abstracts as decisions | BEIR queries | the 809 train queries | the 300 test queries |
| knownitem | 5,000 git commits (subject, body, files) | 95 lexical-gap questions + 42 unanswerable | half | half |
| memory | 8,000 short git memories (subject + first paragraph, <= 300 chars) | 280 coding-agent prompts + 79 unanswerable | half | half |
| memory-fresh | the memory set's store | 200 coding-agent prompts written after every default was frozen | none | all |
| demo | the bundled demo data (`data/`) | coding-agent prompts + unanswerable | half | half |
| locomo | LoCoMo-10: ten conversations, each its own store, one record per turn (benchmarks.locomo) | categories 1-4 + category 5 (adversarial) | alternate questions | the others |

The split of each question file is written in the file itself (``"split"``), so it
never changes silently. No default, weight or threshold may be chosen on a test
split (docs/search.md names the dev split behind each one).

The questions are files of the harness (``benchmarks/data``); the corpora are read
from the shared directory by path and never copied. LoCoMo is the exception: its
conversations and questions come together in one public file, downloaded into the
bench cache when the set first runs (benchmarks.locomo says from where).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks import corpora
from lore.errors import NotFoundError

DATA = Path(__file__).resolve().parent / "data"
SPLITS = ("dev", "test")
MEMORY_SLICE = (20000, 8000)  # commits [20,000, 28,000): disjoint from the known-item slice (the first 5,000)
MEMORY_CHARS = 300


def data_file(name: str) -> Path:
    """A question file of the harness (benchmarks/data), with an error naming it when it is missing."""
    path = DATA / name
    if not path.is_file():
        raise NotFoundError(
            f"benchmark question file {name} not found at {path}",
            hint="run the harness from a checkout of lore (the files are in benchmarks/data)",
        )
    return path


read_jsonl = corpora.read_jsonl


@dataclass
class EvalSet:
    """One set: a store to build, its questions by split, and what each answerable one should find."""

    name: str
    raws: list[dict[str, Any]]  # decision lines for the store (empty: ``data_dir`` is an existing dir)
    questions: dict[str, str]  # qid -> text (answerable and unanswerable)
    qrels: dict[str, dict[str, int]]  # answerable qid -> {record id: grade}
    split: dict[str, str]  # qid -> "dev" | "test"
    now: float
    data_dir: Path | None = None  # an existing data dir (the demo set)
    label_of: dict[str, str] = field(default_factory=dict)  # record id -> the id qrels use (SciFact's)
    primary: str = "R@10"
    hit_any: bool = False  # a question is found when any of its relevant records is (R@k as Success@k)

    def answerable(self, split: str) -> dict[str, str]:
        return {q: t for q, t in self.questions.items() if q in self.qrels and self.split[q] == split}

    def unanswerable(self, split: str) -> dict[str, str]:
        return {q: t for q, t in self.questions.items() if q not in self.qrels and self.split[q] == split}

    def judged(self, split: str) -> dict[str, dict[str, int]]:
        return {q: r for q, r in self.qrels.items() if self.split[q] == split}


# -- SciFact -------------------------------------------------------------------------------
def scifact(shared: Path, *, quick: bool = False, query_count: int = 50, sample_docs: int = 1000) -> EvalSet:
    data = corpora.load_scifact(shared)
    dev = {q: data.queries[q] for q in data.train_qrels if q in data.queries}
    test = {q: data.queries[q] for q in data.test_qrels if q in data.queries}
    docs = data.docs
    if quick:
        test = dict(sorted(test.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else 0)[:query_count])
        dev = dict(list(dev.items())[:query_count])
        needed = {d for q in test for d in data.test_qrels[q]} | {d for q in dev for d in data.train_qrels[q]}
        rest = [d for d in docs if d[0] not in needed]
        docs = [d for d in docs if d[0] in needed] + rest[: max(0, sample_docs - len(needed))]
    taken: set[str] = set()
    raws, label_of = [], {}
    for beir_id, title, text in docs:
        record_id = corpora.scifact_lore_id(beir_id, taken)
        label_of[record_id] = beir_id
        raws.append(corpora.decision_raw(record_id, corpora.SCIFACT_TIME, title.strip() or text[:80], text))
    qrels = {**{q: data.train_qrels[q] for q in dev}, **{q: data.test_qrels[q] for q in test}}
    split = {**dict.fromkeys(dev, "dev"), **dict.fromkeys(test, "test")}
    return EvalSet("scifact", raws, {**dev, **test}, qrels, split, corpora.epoch(corpora.SCIFACT_TIME),
                   label_of=label_of, primary="nDCG@10")  # fmt: skip


# -- known-item questions over 5,000 git commits ---------------------------------------------
def knownitem(shared: Path, *, commits: int = 5000) -> EvalSet:
    raws, mapping, _ = corpora.commit_raws(corpora.load_commits(shared, commits))
    return _commit_set("knownitem", raws, mapping, data_file("known_item_questions.jsonl"))


def _commit_set(name: str, raws: list[dict[str, Any]], mapping: dict[str, str], path: Path) -> EvalSet:
    by_sha = {sha: rid for rid, sha in mapping.items()}
    questions, qrels, split = {}, {}, {}
    for q in read_jsonl(path):
        if q.get("answerable", True):
            relevant = {by_sha[s]: 1 for s in q.get("relevant", []) if s in by_sha}
            if not relevant:
                continue  # a quick run's smaller slice may not hold the answer
            qrels[q["qid"]] = relevant
        questions[q["qid"]] = q["question"]
        split[q["qid"]] = q["split"]
    now = max(corpora.epoch(r["timestamp"]) for r in raws)
    return EvalSet(name, raws, questions, qrels, split, now)


# -- the memory regime: short records, coding-agent prompts -------------------------------------
def memory_record(commit: dict[str, Any]) -> dict[str, Any]:
    """A short memory from a commit: subject, then the body's first paragraph, <= 300 characters together.

    Tags are the top-level paths the commit touched (``builtin``, ``t``, ``refs.c``),
    as a person would tag a note by area.
    """
    subject = str(commit.get("subject") or "").strip() or commit["sha"][:12]
    body = corpora.strip_trailers(str(commit.get("body") or ""))
    paragraph = " ".join(re.split(r"\n\s*\n", body.strip())[0].split()) if body.strip() else ""
    room = MEMORY_CHARS - len(subject) - 1
    if len(paragraph) > room:
        cut = paragraph[: max(0, room)]
        paragraph = cut.rsplit(" ", 1)[0] if " " in cut else cut
    tags = list(dict.fromkeys(str(f).split("/", 1)[0] for f in commit.get("files") or []))
    return corpora.decision_raw(corpora.commit_id(commit["sha"]), str(commit["date"]), subject, paragraph,
                                tags=tags, project="git")  # fmt: skip


def memory_commits(shared: Path) -> list[dict[str, Any]]:
    start, count = MEMORY_SLICE
    return corpora.load_commits(shared, start + count)[start:]


def memory(shared: Path, questions: str = "memory_questions.jsonl", name: str = "memory") -> EvalSet:
    raws, mapping, seen = [], {}, set()
    for commit in memory_commits(shared):
        raw = memory_record(commit)
        if raw["id"] in seen:
            continue
        seen.add(raw["id"])
        mapping[raw["id"]] = commit["sha"]
        raws.append(raw)
    return _commit_set(name, raws, mapping, data_file(questions))


def memory_fresh(shared: Path) -> EvalSet:
    """The memory store with 200 new questions, written after every default was frozen: a test split only.

    The memory set's own test split had been looked at while the defaults were chosen
    (never tuned on, but seen); this one had not been written yet.
    """
    return memory(shared, "memory_fresh_questions.jsonl", "memory-fresh")


# -- the bundled demo data -----------------------------------------------------------------
DEMO_NOW = "2026-11-24T00:00:00Z"


def demo(data_dir: Path | None = None) -> EvalSet:
    from benchmarks import demo_dir

    data_dir = data_dir or demo_dir()
    questions, qrels, split = {}, {}, {}
    for q in read_jsonl(data_file("demo_questions.jsonl")):
        questions[q["qid"]] = q["question"]
        split[q["qid"]] = q["split"]
        if q.get("answerable", True):
            qrels[q["qid"]] = {rid: 1 for rid in q["relevant"]}
    return EvalSet("demo", [], questions, qrels, split, corpora.epoch(DEMO_NOW), data_dir=data_dir)


# A quick run asks the memory sets this many answerable questions per split (and their unanswerable
# ones in proportion): asked whole, with the grep baseline's one `grep -ril` over 8,000 files per
# question word, the two sets took 207 of the 281 s of a quick run (`--quick`) on a loaded 2-core machine.
QUICK_QUESTIONS = 50


def first_questions(evalset: EvalSet, answerable: int) -> EvalSet:
    """``evalset`` with the first ``answerable`` answerable questions of each split, and as large a share of its unanswerable ones."""
    keep: set[str] = set()
    for split in SPLITS:
        asked, unasked = list(evalset.answerable(split)), list(evalset.unanswerable(split))
        count = min(len(asked), answerable)
        keep.update(asked[:count])
        keep.update(unasked[: round(len(unasked) * count / len(asked))] if asked else unasked[:answerable])
    return replace(evalset, questions={q: t for q, t in evalset.questions.items() if q in keep},
                   qrels={q: r for q, r in evalset.qrels.items() if q in keep},
                   split={q: s for q, s in evalset.split.items() if q in keep})  # fmt: skip


def all_sets(shared: Path, *, quick: bool = False) -> dict[str, Any]:
    """Loaders by name of the sets that are one EvalSet each (called lazily: each set's corpus is read only when it runs).

    LoCoMo (ten stores) is loaded by the runner (``benchmarks.locomo.load``): ``benchmarks.locomo``
    builds on this module, so this one does not import it back.
    """

    def sample(evalset: EvalSet) -> EvalSet:
        return first_questions(evalset, QUICK_QUESTIONS) if quick else evalset

    return {
        "scifact": lambda: scifact(shared, quick=quick),
        "knownitem": lambda: knownitem(shared, commits=1000 if quick else 5000),
        "memory": lambda: sample(memory(shared)),
        "memory-fresh": lambda: sample(memory_fresh(shared)),
        "demo": lambda: demo(),
    }
