"""Text analysis for BM25: words, code identifiers split into parts, stopwords, Snowball stems.

Chosen on the dev splits of every benchmark set (docs/search.md, "The lexical
channel"): the short stopword list of the textbook baseline (a longer list
dropped words like "not", "only" and "after" that questions rely on), and
compound identifiers (``builtin/fetch.c``, ``snake_case``, ``billing-api``)
kept whole *and* split at their punctuation. camelCase is not split: pieces
such as "Postgre"+"SQL" or "UUI"+"Dv" from product names cost the demo set
2.6 points of MRR@10 and gained nothing elsewhere.

The same function analyses documents at build time and queries at search time,
so the two always agree. It is pure Python plus PyStemmer (a C extension that
imports in about a millisecond), which keeps whoosh and numpy off the prompt
hook's path. Analysing the titles and bodies of 10k git commits takes about
3 s here, against 8 s for Whoosh's filter chain, which is why the BM25 channel
does not reuse it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

# Runs of word characters joined by the punctuation of code: dotted names, paths,
# kebab-case and version numbers stay one token (and are split into parts below).
_TOKEN = re.compile(r"[^\W_]+(?:[_./\-]+[^\W_]+)*")
_SEPARATORS = re.compile(r"[_./\-]+")
# Articles, pronouns, auxiliaries, wh-words and the commonest prepositions and
# conjunctions: the list of the textbook baseline (benchmarks/textbook.py).
ENGLISH_STOPWORDS = frozenset(
    ["a", "an", "the", "and", "or", "but", "if", "then", "of", "to", "in", "on", "at", "by", "for", "with", "from", "as", "into", "about", "i", "me", "my", "we", "us", "our", "you", "your", "he", "him", "his", "she", "her", "it", "its", "they", "them", "their", "this", "that", "these", "those", "is", "are", "was", "were", "be", "been", "being", "am", "do", "does", "did", "have", "has", "had", "will", "would", "shall", "should", "can", "could", "may", "might", "must", "what", "which", "who", "whom", "whose", "when", "where", "why", "how"]
)  # fmt: skip
# Contractions are split at the apostrophe by the tokenizer; their stems must not survive either.
# Longer tokens are cut to this many characters (at build and query time alike), which
# bounds the width of the index's sorted term array; nobody types a 48-character word.
MAX_TERM_CHARS = 48
_STOP = ENGLISH_STOPWORDS | {
    "t",
    "s",
    "d",
    "ll",
    "re",
    "ve",
    "m",
    "don",
    "doesn",
    "didn",
    "isn",
    "wasn",
    "aren",
}


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    import Stemmer  # PyStemmer: Snowball (Porter2) English, in C

    return Stemmer.Stemmer("english", 100_000)


def _words(text: str) -> list[str]:
    """Lower-cased words, with each compound identifier (joined by ``_./-``) followed by its parts."""
    words: list[str] = []
    append = words.append
    for token in _TOKEN.findall(text):
        if token.isalnum():  # fast path (most tokens): no punctuation to split at
            append(token.lower())
        else:
            words.extend(_compound_words(token))
    return words


def _compound_words(token: str) -> list[str]:
    parts = [p for p in _SEPARATORS.split(token) if p]
    if len(parts) > 1:
        # The whole identifier matches exactly (``builtin/fetch.c``, ``snake_case``);
        # its parts match the words people actually type.
        return ["\x00" + token.lower(), *(p.lower() for p in parts)]
    return [token.lower()]


def terms(text: str) -> list[str]:
    """BM25 terms of ``text``, in order, repeats kept (term frequency matters)."""
    return _terms_of(_words(text))


def token_terms(token: str) -> list[str]:
    """``terms(token)`` for one of the tokens ``tokens`` finds, without tokenizing it again."""
    return _terms_of([token.lower()] if token.isalnum() else _compound_words(token))


def _terms_of(words: list[str]) -> list[str]:
    kept = [w for w in words if len(w) > 1 and w not in _STOP]
    if not kept:
        return []
    plain = [i for i, w in enumerate(kept) if w[0] != "\x00"]
    stems = _stemmer().stemWords([kept[i] for i in plain])
    for i, stem in zip(plain, stems, strict=True):
        kept[i] = stem
    # Whole identifiers are kept verbatim (no stemming), minus the marker.
    return [(w[1:] if w[0] == "\x00" else w)[:MAX_TERM_CHARS] for w in kept]


def tokens(text: str) -> list[str]:
    """The raw tokens of ``text``: ``terms(text)`` is the concatenation of ``terms(token)`` over them.

    Every step after the tokenizer (splitting an identifier, lower-casing, the stopword and
    length filters, stemming, the length cut) looks at one token at a time, so a caller that
    analyses many texts can analyse each distinct token once (``bm25.build_forward``).
    """
    return _TOKEN.findall(text)


def unique_terms(text: str) -> list[str]:
    """Distinct BM25 terms of a query, first occurrence order."""
    return list(dict.fromkeys(terms(text)))


_EDIT_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


def one_edit_away(term: str) -> set[str]:
    """Every string one deletion, transposition, substitution or insertion from ``term``.

    Lower-case letters and digits only, like the terms themselves; used to tell a
    typo of a stored word from a word the store has never seen.
    """
    splits = [(term[:i], term[i:]) for i in range(len(term) + 1)]
    deletes = {a + b[1:] for a, b in splits if b}
    transposes = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    replaces = {a + c + b[1:] for a, b in splits if b for c in _EDIT_ALPHABET}
    inserts = {a + c + b for a, b in splits for c in _EDIT_ALPHABET}
    return (deletes | transposes | replaces | inserts) - {term}
