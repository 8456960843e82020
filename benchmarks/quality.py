"""Shared pieces of the quality figures: scoring with ir-measures, the in-process searcher, the grep baseline.

Every figure is computed with ir-measures (pytrec_eval underneath), never by
hand. A query the system returns nothing for scores 0 and still counts in the
mean: means are over every judged query, not only the ones with results.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import corpora

Progress = Callable[[str], None]


def _quiet(message: str) -> None:
    return None


# -- scoring ---------------------------------------------------------------------------
def evaluate(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]], measures: Sequence[str]) -> dict[str, float]:
    """Mean of each measure over every query in ``qrels`` (missing from ``run`` = 0)."""
    import ir_measures

    parsed = [ir_measures.parse_measure(m) for m in measures]
    qrel_rows = [ir_measures.Qrel(q, d, int(r)) for q, docs in qrels.items() for d, r in docs.items()]
    run_rows = [
        ir_measures.ScoredDoc(q, d, float(len(ranked) - i))
        for q, ranked in run.items() if q in qrels
        for i, d in enumerate(dict.fromkeys(ranked))
    ]  # fmt: skip
    totals = {str(m): 0.0 for m in parsed}
    for metric in ir_measures.iter_calc(parsed, qrel_rows, run_rows):
        totals[str(metric.measure)] += float(metric.value)
    count = max(len(qrels), 1)
    return {name: round(total / count, 4) for name, total in totals.items()}


def stage_names() -> frozenset[str]:
    from lore.rank.stages import SWITCHABLE

    return frozenset(SWITCHABLE)


@dataclass
class Searcher:
    """An open in-process search session over one data dir (no access logging, no LLM)."""

    data_dir: Path
    index_dir: Path

    def __post_init__(self) -> None:
        from benchmarks import settings
        from lore.paths import Locations
        from lore.search import SearchSession

        # A state dir of its own, beside the index: the demo set searches the checkout's data/ in place,
        # and the access log of a developer's own `lore --data-dir data search` runs (keyed by that
        # path in the user's state dir) fed the reinforcement stage and moved the demo figures.
        own = settings()._replace(state_dir=str(self.index_dir.parent / f"{self.index_dir.name}-state"))
        self.session = SearchSession(Locations.resolve(self.data_dir, self.index_dir, own))

    def build(self) -> Any:
        from lore.index.manager import IndexManager

        return IndexManager(self.session.locations).build()

    def query(self, text: str, options: Any) -> Any:
        from lore.search import search

        response = search(self.session, text, options._replace(hyde_text=None), log_access=False, use_llm=False)
        return response

    def close(self) -> None:
        if self.session.reader is not None:
            self.session.reader.close()


# -- the grep baseline -------------------------------------------------------------------------
def _content_words(question: str) -> list[str]:
    from whoosh.analysis import STOP_WORDS

    from lore.rank.query import STOPWORDS

    words = re.findall(r"[a-z0-9]+", question.lower())
    return list(dict.fromkeys(w for w in words if len(w) > 2 and w not in STOPWORDS and w not in STOP_WORDS))


class GrepBaseline:
    """Rank records by how many of the question's content words ``grep -i`` finds in them.

    The records are one file, a record per line (its newlines made spaces: a content word
    holds none, so no match is made or lost), and each word is one ``grep -inoF`` over it:
    the records that hold the word, as ``grep -ril`` over a file per record finds them, in
    one file open instead of thousands (that took over a minute of each CI run).
    """

    def __init__(self, directory: Path, raws: Sequence[dict[str, Any]]) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / "records.txt"
        self.ids = [str(raw["id"]) for raw in raws]
        self.order = {rid: position for position, rid in enumerate(self.ids)}
        lines = (corpora.commit_text(raw).replace("\n", " ") for raw in raws)
        self.path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        self._cache: dict[str, set[str]] = {}
        self.grep_calls = 0
        self.grep_seconds = 0.0

    def files_with(self, word: str) -> set[str]:
        if word not in self._cache:
            started = time.perf_counter()
            done = subprocess.run(["grep", "-inoaF", "-e", word, str(self.path)], capture_output=True, text=True,
                                  check=False)  # fmt: skip
            self.grep_seconds += time.perf_counter() - started
            self.grep_calls += 1
            self._cache[word] = {self.ids[int(line.split(":", 1)[0]) - 1] for line in done.stdout.splitlines() if line}
        return self._cache[word]

    def search(self, question: str, limit: int = 10) -> list[str]:
        counts: dict[str, int] = {}
        for word in _content_words(question):
            for rid in self.files_with(word):
                counts[rid] = counts.get(rid, 0) + 1
        # Ties: newest commit first (the order `ls -t` would show).
        ranked = sorted(counts, key=lambda rid: (-counts[rid], self.order.get(rid, 0)))
        return ranked[:limit]


def temporary_workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="lore-bench-"))
