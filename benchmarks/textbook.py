"""A textbook BM25: the baseline every ranking figure of the benchmark harness is compared with.

Deliberately plain, and deliberately outside lore's pipeline (it shares no code
with ``lore.index``): one field holding all of a record's text, lower-cased,
tokens ``[a-z0-9]+``, a short English stopword list, Snowball English stems,
k1 = 1.2, b = 0.75, idf = ln(1 + (N - df + 0.5) / (df + 0.5)), OR semantics.
Ties are broken by insertion order, so the ranking is deterministic.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

# Articles, pronouns, auxiliaries, wh-words and the commonest prepositions and conjunctions.
STOPWORDS = frozenset(
    ["a", "an", "the", "and", "or", "but", "if", "then", "of", "to", "in", "on", "at", "by", "for", "with", "from", "as", "into", "about", "i", "me", "my", "we", "us", "our", "you", "your", "he", "him", "his", "she", "her", "it", "its", "they", "them", "their", "this", "that", "these", "those", "is", "are", "was", "were", "be", "been", "being", "am", "do", "does", "did", "have", "has", "had", "will", "would", "shall", "should", "can", "could", "may", "might", "must", "what", "which", "who", "whom", "whose", "when", "where", "why", "how"]
)
_TOKEN = re.compile(r"[a-z0-9]+")


def _stemmer() -> Any:
    import Stemmer  # PyStemmer: Snowball English

    return Stemmer.Stemmer("english")


class TextbookBM25:
    def __init__(self, docs: Iterable[tuple[str, str]], k1: float = 1.2, b: float = 0.75) -> None:
        """``docs``: (id, all of the record's text) pairs."""
        self.k1, self.b = k1, b
        self._stem = _stemmer().stemWords
        self.ids: list[str] = []
        self.tfs: list[Counter[str]] = []
        self.lengths: list[int] = []
        self.df: Counter[str] = Counter()
        for doc_id, text in docs:
            terms = self.analyse(text)
            tf = Counter(terms)
            self.ids.append(doc_id)
            self.tfs.append(tf)
            self.lengths.append(len(terms))
            self.df.update(tf.keys())
        self.n = len(self.ids)
        self.avgdl = (sum(self.lengths) / self.n) if self.n else 0.0
        self.postings: dict[str, list[int]] = {}
        for row, tf in enumerate(self.tfs):
            for term in tf:
                self.postings.setdefault(term, []).append(row)

    def analyse(self, text: str) -> list[str]:
        words = [w for w in _TOKEN.findall(text.lower()) if w not in STOPWORDS]
        return list(self._stem(words))

    def idf(self, term: str) -> float:
        df = self.df.get(term, 0)
        return math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))

    def scores(self, query: str) -> dict[int, float]:
        """Row -> BM25 score, for every row holding at least one query term (OR semantics)."""
        totals: dict[int, float] = {}
        for term in dict.fromkeys(self.analyse(query)):
            idf = self.idf(term)
            for row in self.postings.get(term, ()):
                tf = self.tfs[row][term]
                norm = self.k1 * (1.0 - self.b + self.b * self.lengths[row] / self.avgdl)
                totals[row] = totals.get(row, 0.0) + idf * tf * (self.k1 + 1.0) / (tf + norm)
        return totals

    def search(self, query: str, limit: int = 10) -> list[str]:
        scored = self.scores(query)
        ranked = sorted(scored, key=lambda row: (-scored[row], row))
        return [self.ids[row] for row in ranked[:limit]]


def record_text(raw: dict[str, object], fields: Sequence[str] | None = None) -> str:
    """All of a stored record's text fields, concatenated (lists joined), as the baseline indexes it."""
    skip = {"id", "timestamp", "session_id", "status", "superseded_by", "retracted_reason", "status_changed_at",
            "project", "importance", "confidence", "type", "schema_version", "valid_at", "spec_quality",
            "git_commit", "outcome", "kind", "created_at", "updated_at"}  # fmt: skip
    parts: list[str] = []

    def add(value: object) -> None:
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, list | tuple):
            for item in value:
                add(item)
        elif isinstance(value, dict):
            for item in value.values():
                add(item)

    for key, value in raw.items():
        if (fields is None and key not in skip) or (fields is not None and key in fields):
            add(value)
    return "\n".join(p for p in parts if p)
