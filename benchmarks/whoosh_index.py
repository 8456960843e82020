"""The Whoosh full-text index lore built until index format 11 (``lore/index/lexical.py`` then), kept for the bench.

Builds no longer write it: writing it took most of every full build (35 of 36 s at
10,866 records), and the one thing it answered, quoted phrases, now comes from the
BM25 index's term sequence (``Bm25Index.phrase_rows``; docs/whoosh-choice.md has the
comparison). It lives in benchmarks/, in no wheel, as the reference those figures are
measured against: the bench's bare Whoosh writer uses its schema, and its searcher gives
Whoosh's phrase answers to compare with. lore itself uses only Whoosh's query parser
(``lore.rank.querylang``).

Titles outweigh bodies through field boosts; the analyser stems English and splits
code identifiers (camelCase, snake_case, dotted names, paths) while keeping the whole
identifier too. Only the record id is stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Titles outweigh bodies, but only by 1.5: 3.0 cost recall on both benchmarks
# (known-item recall@10 0.474 vs 0.537, SciFact-train BM25 nDCG@10 0.676 vs 0.691).
FIELD_BOOSTS = {"title": 1.5, "tags": 1.5, "body": 1.0, "extra": 0.6}
_TOKEN = r"[\w][\w./\-]*\w|\w"
# Fields a phrase must appear in (the same two the BM25 channel ranks).
QUERY_FIELDS = ("title", "body")


def analyzer() -> Any:
    from whoosh.analysis import IntraWordFilter, LowercaseFilter, RegexTokenizer, StemFilter, StopFilter

    return (
        RegexTokenizer(_TOKEN)
        | IntraWordFilter(mergewords=True, mergenums=True)
        | LowercaseFilter()
        | StopFilter()
        | StemFilter(cachesize=50000)
    )


def schema() -> Any:
    from whoosh.fields import ID, TEXT, Schema

    ana = analyzer()
    return Schema(
        id=ID(stored=True, unique=True),
        title=TEXT(analyzer=ana, field_boost=FIELD_BOOSTS["title"]),
        body=TEXT(analyzer=ana, field_boost=FIELD_BOOSTS["body"]),
        extra=TEXT(analyzer=ana, field_boost=FIELD_BOOSTS["extra"]),
        tags=TEXT(analyzer=ana, field_boost=FIELD_BOOSTS["tags"]),
    )


@dataclass(frozen=True)
class LexicalDoc:
    id: str
    title: str
    body: str
    extra: str
    tags: str


def create(directory: Path, docs: Iterable[LexicalDoc], *, procs: int = 1, limitmb: int = 256) -> int:
    """Build a fresh index in ``directory``; return the number of documents."""
    from whoosh import index

    directory.mkdir(parents=True, exist_ok=True)
    ix = index.create_in(str(directory), schema())
    kwargs: dict[str, Any] = {"limitmb": limitmb}
    if procs > 1:
        kwargs.update(procs=procs, multisegment=True)
    writer = ix.writer(**kwargs)
    count = 0
    try:
        for doc in docs:
            writer.add_document(id=doc.id, title=doc.title, body=doc.body, extra=doc.extra, tags=doc.tags)
            count += 1
    except BaseException:
        writer.cancel()
        raise
    writer.commit()
    ix.close()
    return count


def query_terms(text: str) -> list[str]:
    """Analysed terms of a query (what BM25 will actually match)."""
    return [token.text for token in analyzer()(text)]


class LexicalSearcher:
    """An open Whoosh searcher for what needs positions: quoted phrases.

    Ranking itself uses the BM25F impact index (``lore.index.bm25``), which
    scores a query in well under a millisecond where Whoosh's Python scoring
    loop took ~170 ms at 10k records.
    """

    def __init__(self, directory: Path) -> None:
        from whoosh import index

        self._ix = index.open_dir(str(directory))
        self._searcher = self._ix.searcher()
        self.doc_count = self._searcher.doc_count()

    def matching(self, phrases: Sequence[str]) -> set[str] | None:
        """Ids of the records whose title or body contains every phrase; None if no phrase has a word.

        Words are matched as analysed (stemmed, stopwords skipped), in order and adjacent.
        """
        from whoosh import query as q

        clauses = []
        for phrase in phrases:
            words = query_terms(phrase)
            if not words:
                continue
            per_field = [q.Phrase(f, words) if len(words) > 1 else q.Term(f, words[0]) for f in QUERY_FIELDS]
            clauses.append(q.Or(per_field))
        if not clauses:
            return None
        return {hit["id"] for hit in self._searcher.search(q.And(clauses), limit=None, scored=False)}

    def close(self) -> None:
        self._searcher.close()
        self._ix.close()
