"""Benchmark corpora as lore data dirs: BEIR SciFact abstracts and git commits as decisions.

Decisions are written straight to ``journal/data/decisions.jsonl`` in the
original schema (docs/schema.md): far faster than the capture path for 50k
records, and byte-for-byte what ``lore remember`` would store.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from benchmarks import PROJECT_ROOT

SCIFACT_TIME = "2024-01-01T00:00:00Z"
DECISIONS = Path("journal/data/decisions.jsonl")
QUESTIONS = Path(__file__).resolve().parent / "data" / "known_item_questions.jsonl"
# Trailer lines (key: value at the start of a line) dropped from commit bodies.
_TRAILER = re.compile(
    r"^\s*(Signed-off-by|Reviewed-by|Acked-by|Helped-by|Reported-by|Co-authored-by|Cc|Tested-by|"
    r"Suggested-by|Mentored-by|Original-patch-by|Based-on-patch-by|Noticed-by|Requested-by|"
    r"Thanks-to|Inspired-by|Improved-by|Reviewed-on|Change-Id|Link)\s*:",
    re.IGNORECASE,
)


def decision_raw(record_id: str, timestamp: str, title: str, rationale: str, *, tags: Iterable[str] = (),
                 project: str | None = None, importance: int = 3) -> dict[str, Any]:  # fmt: skip
    """A decision line in the original Lore schema."""
    return {
        "id": record_id, "timestamp": timestamp, "session_id": "session-bench",
        "decision": title, "rationale": rationale, "alternatives": [],
        "outcome": "pending", "status": "active", "superseded_by": None,
        "retracted_reason": None, "status_changed_at": None,
        "tags": list(tags), "project": project, "importance": importance, "confidence": 0.8,
        "type": "other", "entities": [], "lesson_learned": None, "related_decisions": [],
        "git_commit": None, "valid_at": None, "spec_quality": 0.5, "schema_version": 1,
    }  # fmt: skip


def write_decisions(data_dir: Path, raws: Iterable[dict[str, Any]]) -> int:
    """Write a fresh data dir holding only these decisions; return how many."""
    path = data_dir / DECISIONS
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [orjson.dumps(raw) + b"\n" for raw in raws]
    path.write_bytes(b"".join(lines))
    return len(lines)


def append_decision(data_dir: Path, raw: dict[str, Any]) -> None:
    with (data_dir / DECISIONS).open("ab") as handle:
        handle.write(orjson.dumps(raw) + b"\n")


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The objects of a JSONL file, blank lines skipped."""
    with path.open("rb") as handle:
        for line in handle:
            if line.strip():
                yield orjson.loads(line)


# -- BEIR SciFact ------------------------------------------------------------------
@dataclass
class SciFact:
    docs: list[tuple[str, str, str]]  # (beir id, title, text)
    queries: dict[str, str]  # every query (train and test)
    test_qrels: dict[str, dict[str, int]]
    train_qrels: dict[str, dict[str, int]]
    ids: dict[str, str] = field(default_factory=dict)  # lore id -> beir id


def _qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        parts = line.split("\t")
        if (number == 0 and parts[0] == "query-id") or len(parts) < 3:
            continue
        qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    return qrels


def load_scifact(shared: Path) -> SciFact:
    root = shared / "beir" / "scifact"
    docs = [(str(d["_id"]), str(d.get("title") or ""), str(d.get("text") or "")) for d in read_jsonl(root / "corpus.jsonl")]
    queries = {str(q["_id"]): str(q["text"]) for q in read_jsonl(root / "queries.jsonl")}
    for q in read_jsonl(root / "queries_test.jsonl"):
        queries.setdefault(str(q["_id"]), str(q["text"]))
    return SciFact(docs, queries, _qrels(root / "qrels" / "test.tsv"), _qrels(root / "qrels" / "train.tsv"))


def scifact_lore_id(beir_id: str, taken: set[str]) -> str:
    """A lore decision id (``dec-`` + 8 hex) derived from the BEIR id, unique within ``taken``."""
    salt = 0
    while True:
        digest = hashlib.sha1(f"scifact:{beir_id}:{salt}".encode()).hexdigest()[:8]
        record_id = f"dec-{digest}"
        if record_id not in taken:
            taken.add(record_id)
            return record_id
        salt += 1


def write_scifact(data_dir: Path, docs: list[tuple[str, str, str]]) -> dict[str, str]:
    """Each abstract as a decision (title -> decision, text -> rationale); return lore id -> beir id."""
    taken: set[str] = set()
    mapping: dict[str, str] = {}
    raws = []
    for beir_id, title, text in docs:
        record_id = scifact_lore_id(beir_id, taken)
        mapping[record_id] = beir_id
        raws.append(decision_raw(record_id, SCIFACT_TIME, title.strip() or text[:80], text, importance=3))
    write_decisions(data_dir, raws)
    return mapping


# -- git commits ---------------------------------------------------------------------
def load_commits(shared: Path, count: int) -> list[dict[str, Any]]:
    """The first ``count`` lines of the git corpus (newest commits first)."""
    commits = []
    for commit in read_jsonl(shared / "corpora" / "git-commits.jsonl"):
        commits.append(commit)
        if len(commits) >= count:
            break
    return commits


def strip_trailers(body: str) -> str:
    kept = [line for line in body.splitlines() if not _TRAILER.match(line)]
    return "\n".join(kept).strip()


def commit_id(sha: str) -> str:
    return f"dec-{sha[:8].lower()}"


def commit_raws(commits: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, str], int]:
    """Decisions for commits, a lore id -> sha map, and how many duplicate short ids were skipped."""
    raws, mapping, duplicates = [], {}, 0
    for commit in commits:
        record_id = commit_id(commit["sha"])
        if record_id in mapping:
            duplicates += 1
            continue
        mapping[record_id] = commit["sha"]
        raws.append(commit_raw(commit, record_id))
    return raws, mapping, duplicates


def commit_raw(commit: dict[str, Any], record_id: str) -> dict[str, Any]:
    """The decision of one commit: its subject, its message without trailers, its files as tags."""
    subject = str(commit.get("subject") or "").strip() or commit["sha"][:12]
    return decision_raw(record_id, str(commit["date"]), subject, strip_trailers(str(commit.get("body") or "")),
                        tags=[str(f) for f in commit.get("files") or []], project="git")  # fmt: skip


def commit_raws_at_least(shared: Path, count: int) -> list[dict[str, Any]]:
    """``commit_raws`` of the whole corpus, then of it again under new ids until there are ``count``.

    The corpus holds about 60,000 commits; a store larger than that (the team harness at
    100,000) repeats real text rather than inventing it. Pass ``k`` names a commit by the
    ``k``-th 8 hex digits of its sha (an id already taken is skipped) and keeps its date.
    """
    commits = load_commits(shared, count + 200)
    raws, mapping, _ = commit_raws(commits)
    passes = 1
    while len(raws) < count and passes < 5:
        for commit in commits:
            record_id = commit_id(commit["sha"][8 * passes :])
            if record_id in mapping or len(record_id) < 12:
                continue
            mapping[record_id] = commit["sha"]
            raws.append(commit_raw(commit, record_id))
            if len(raws) >= count:
                break
        passes += 1
    return raws


def remembered_commit_raws(commits: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """Decisions for commits as a user's ``lore remember SUBJECT -r MESSAGE`` stores them, and the duplicate ids skipped.

    The real-text store beside ``commit_raws``' (docs/performance.md): the whole commit
    message as the rationale (trailers kept), run through lore's scrubber as every write
    is (e-mail addresses become ``[REDACTED:email]``), no tags, project ``git``. The ids
    and timestamps are the commit's, so both stores rank the same commits by recency.
    """
    from lore.scrub import scrub

    raws: list[dict[str, Any]] = []
    seen: set[str] = set()
    duplicates = 0
    for commit in commits:
        record_id = commit_id(commit["sha"])
        if record_id in seen:
            duplicates += 1
            continue
        seen.add(record_id)
        subject = str(commit.get("subject") or "").strip() or commit["sha"][:12]
        message = str(commit.get("body") or "").strip()
        raws.append(decision_raw(record_id, str(commit["date"]), scrub(subject).text, scrub(message).text, project="git"))
    return raws, duplicates


def commit_text(raw: dict[str, Any]) -> str:
    """The plain-text file a grep user would have for one commit."""
    return f"{raw['decision']}\n\n{raw['rationale']}\n\n" + "\n".join(raw["tags"]) + "\n"


def epoch(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def load_questions(path: Path = QUESTIONS) -> list[dict[str, Any]]:
    return list(read_jsonl(path))


# -- the machine ----------------------------------------------------------------------
def machine_info() -> dict[str, Any]:
    from benchmarks import settings as lore_settings
    from lore import __version__
    from lore.embedder import model_identity, model_spec

    model_name = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model_name = line.split(":", 1)[1].strip()
                break
    except OSError:
        model_name = platform.processor()
    ram = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    commit, dirty = None, None
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True,
                                timeout=10, check=False).stdout.strip() or None  # fmt: skip
        status = subprocess.run(["git", "status", "--porcelain"], cwd=PROJECT_ROOT, capture_output=True, text=True,
                                timeout=10, check=False).stdout  # fmt: skip
        dirty = bool(status.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": model_name,
        "ram_gib": ram,
        "load_average_at_start": load,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "lore_version": __version__,
        "git_commit": commit,
        "git_dirty": dirty,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "embedding_model": model_spec(lore_settings().embed_model),
        "embedding_model_identity": model_identity(lore_settings().embed_model),
    }


# -- CPython's changelog (Debian's python3.11 package ships it): a third store of real text ---------
PYTHON_NEWS = Path("/usr/share/doc/python3.11/NEWS.gz")
_NEWS_VERSION = re.compile(r"^What's New in Python (\S+)")
_NEWS_DATE = re.compile(r"^\*Release date: (\d{4}-\d{2}-\d{2})\*")
_NEWS_ENTRY = re.compile(r"^- (?:(gh-issue|bpo)-(\d+): )?(.*)")
_RST_ROLE = re.compile(r":[a-z:]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`")
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\]])\.\s+(?=[A-Z])")


def _plain(text: str) -> str:
    """An entry's reStructuredText as a person would paste it: roles and literals unwrapped."""
    text = _RST_ROLE.sub(r"\1", text)
    return " ".join(text.replace("``", "`").split())


def python_news(path: Path = PYTHON_NEWS, count: int = 3000) -> list[dict[str, Any]]:
    """The newest ``count`` entries of CPython's NEWS file as decisions (project ``cpython``).

    The title is the entry's first sentence, the rationale the rest; tags are the section
    (``Library``, ``Core and Builtins``) and the release. Ids hash the entry's issue and text.
    """
    import gzip

    if not path.exists():
        raise FileNotFoundError(f"{path} not found: install Debian's python3.11 package (apt-get install python3.11)")
    version, date, section = "", "", ""
    raws: list[dict[str, Any]] = []
    seen: set[str] = set()
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as news:
        lines = news.read().splitlines()
    entry: list[str] = []

    def flush() -> None:
        if not entry or not date:
            entry.clear()
            return
        match = _NEWS_ENTRY.match(entry[0])
        body = _plain(" ".join([match.group(3) if match else entry[0], *entry[1:]]))
        entry.clear()
        issue = f"{match.group(1)}-{match.group(2)}" if match and match.group(1) else ""
        parts = _SENTENCE_END.split(body, maxsplit=1)
        title = parts[0].rstrip(".")
        rationale = parts[1] if len(parts) > 1 else ""
        record_id = "dec-" + hashlib.sha1(f"{issue}|{body}".encode()).hexdigest()[:8]
        if record_id in seen or len(title) < 8:
            return
        seen.add(record_id)
        tags = [t for t in (section.lower().replace(" ", "-"), f"python-{version}", issue) if t]
        raws.append(decision_raw(record_id, f"{date}T12:00:00Z", title, rationale, tags=tags, project="cpython"))

    for index, line in enumerate(lines):
        if (m := _NEWS_VERSION.match(line)) is not None:
            flush()
            version = m.group(1).rstrip("?")
        elif (m := _NEWS_DATE.match(line)) is not None:
            date = m.group(1)
        elif index + 1 < len(lines) and lines[index + 1].startswith("---") and line.strip() and not line.startswith(" "):
            flush()
            section = line.strip()
        elif line.startswith("- "):
            flush()
            entry.append(line)
        elif entry and line.startswith("  ") and line.strip():
            entry.append(line.strip())
        elif not line.strip():
            flush()
        if len(raws) >= count:
            break
    flush()
    return raws[:count]
