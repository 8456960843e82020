"""lore's text analysis: one tokenizer, one stopword list, one stemmer.

Every lexical scorer of lore's own analyses text here: the BM25 channel (built by
``lore.index.bm25``, read by it and by the hook's numpy-free ``lore.index.cold``,
which must agree bit for bit) and the write-time duplicate and contradiction
checks (``lore.curate.similarity``). The textbook BM25 of ``lore bench`` is the
one exception on purpose: it is a baseline, and shares no code with lore.

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
hook's path; it sits beside ``errors`` and ``settings`` so that every layer may
use it. Analysing the titles and bodies of 10k git commits takes about 3 s here,
against 8 s for Whoosh's filter chain, which is why the BM25 channel does not
reuse it (Whoosh's own analyser only serves its quoted-phrase filter).
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import islice
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

# Runs of word characters joined by the punctuation of code: dotted names, paths,
# kebab-case and version numbers stay one token (and are split into parts below).
_TOKEN = re.compile(r"[^\W_]+(?:[_./\-]+[^\W_]+)*")
_ASCII_TOKEN = re.compile(r"[a-zA-Z0-9]+(?:[_./\-]+[a-zA-Z0-9]+)*")  # _TOKEN on ASCII text
_SEPARATORS = re.compile(r"[_./\-]+")
# Articles, pronouns, auxiliaries, wh-words and the commonest prepositions and
# conjunctions: the list of the textbook baseline (benchmarks/textbook.py).
ENGLISH_STOPWORDS = frozenset(
    ["a", "an", "the", "and", "or", "but", "if", "then", "of", "to", "in", "on", "at", "by", "for", "with", "from", "as", "into", "about", "i", "me", "my", "we", "us", "our", "you", "your", "he", "him", "his", "she", "her", "it", "its", "they", "them", "their", "this", "that", "these", "those", "is", "are", "was", "were", "be", "been", "being", "am", "do", "does", "did", "have", "has", "had", "will", "would", "shall", "should", "can", "could", "may", "might", "must", "what", "which", "who", "whom", "whose", "when", "where", "why", "how"]
)  # fmt: skip
# Longer tokens are cut to this many characters (at build and query time alike), which
# bounds the width of the index's sorted term array; nobody types a 48-character word.
MAX_TERM_CHARS = 48
# Contractions are split at the apostrophe by the tokenizer; their stems must not survive either.
STOPWORDS = ENGLISH_STOPWORDS | {"t", "s", "d", "ll", "re", "ve", "m", "don", "doesn", "didn", "isn", "wasn", "aren"}


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    import Stemmer  # PyStemmer: Snowball (Porter2) English, in C

    return Stemmer.Stemmer("english", 100_000)


# Stems already computed: analysing a text is mostly looking its words up here. Bounded (a
# build sees every word of the store once): cleared when full, which costs a refill at most.
_STEMS: dict[str, str] = {}
_STEMS_MAX = 200_000


def stem(word: str) -> str:
    """The Snowball stem of one lower-cased word, cut to ``MAX_TERM_CHARS`` (memoised)."""
    found = _STEMS.get(word)
    if found is None:
        if len(_STEMS) >= _STEMS_MAX:
            _STEMS.clear()
        found = _STEMS[word] = _stemmer().stemWord(word)[:MAX_TERM_CHARS]
    return found


def words(text: str) -> list[str]:
    """The tokenizer's words in order, lower-cased: a compound identifier stays whole (no parts, no stems)."""
    return [token.lower() for token in _TOKEN.findall(text)]


def terms(text: str) -> list[str]:
    """BM25 terms of ``text``, in order, repeats kept (term frequency matters).

    Each word lower-cased; a compound identifier (joined by ``_./-``) kept whole and
    verbatim, then followed by its parts, which people actually type; words of one
    character and stopwords dropped; the rest stemmed. One pass with the stems memoised:
    twice as fast as stemming each text's words as a batch (30k git commits here).
    """
    get, stopwords = _STEMS.get, STOPWORDS
    if text.isascii():
        # The same tokens, lower-cased at once: in ASCII, [^\W_] is [a-zA-Z0-9] (a regex half as
        # slow as Unicode's class) and lower-casing changes no character's class.
        found = _ASCII_TOKEN.findall(text.lower())
        lowered = found
    else:
        found = _TOKEN.findall(text)
        lowered = [token.lower() for token in found]
    if all(map(str.isalnum, found)):  # no compound identifier (most texts): one comprehension
        return [get(word) or stem(word) for word in lowered if len(word) > 1 and word not in stopwords]
    out: list[str] = []
    append = out.append
    for token, word in zip(found, lowered, strict=True):
        if token.isalnum():  # most tokens: no punctuation to split at
            if len(word) > 1 and word not in stopwords:
                append(get(word) or stem(word))
            continue
        append(word[:MAX_TERM_CHARS])  # the whole identifier (``builtin/fetch.c``, ``snake_case``)
        for part in _SEPARATORS.split(word):
            if len(part) > 1 and part not in stopwords:
                append(get(part) or stem(part))
    return out


def token_terms(token: str) -> list[str]:
    """``terms(token)`` for one of the tokens ``tokens`` finds, without tokenizing it again."""
    word = token.lower()
    if token.isalnum():
        return [stem(word)] if len(word) > 1 and word not in STOPWORDS else []
    return [word[:MAX_TERM_CHARS], *(stem(part) for part in _SEPARATORS.split(word) if len(part) > 1 and part not in STOPWORDS)]


def tokens(text: str) -> list[str]:
    """The raw tokens of ``text``: ``terms(text)`` is the concatenation of ``terms(token)`` over them.

    Every step after the tokenizer (splitting an identifier, lower-casing, the stopword and
    length filters, stemming, the length cut) looks at one token at a time, so a caller that
    analyses many texts can analyse each distinct token once (``bm25.build_forward``).
    """
    # In ASCII the same tokens by the faster class (``terms`` says why): 0.74 -> 0.61 s over 10k commits.
    return _ASCII_TOKEN.findall(text) if text.isascii() else _TOKEN.findall(text)


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


# Sentence ends and line breaks: where a record's body divides into passages (the context
# block's snippets cut at the same places).
SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
MIN_PASSAGE_WORDS = 3
# The title and three sentences: on the dev stream (32 sessions, out of fold) as good as eight, warm 84.3%
# of unanswerable prompts left empty at hit 0.733 and cold 83.8% at 0.750 (eight: 83.8% at
# 0.733 and 0.741), at less than half the cold hook's cost; the title alone left the cold
# path 5.1 hit points under injecting always (82.4% at 0.733 against 0.784).
MAX_PASSAGES = 3


def passages(title: str, content: str, limit: int = MAX_PASSAGES) -> list[str]:
    """The record's title, then its body's first ``limit`` sentences of at least three words.

    What the injection decision compares a prompt with, one passage at a time: a prompt
    that paraphrases a memory is close to its title or to one of its sentences, while the
    whole record's vector is diluted by the rest of its text.
    """
    title = " ".join(title.split())
    body = content[len(title):] if title and content.startswith(title) else content
    sentences = (" ".join(s.split()) for s in _sentences(body) if len(s.split()) >= MIN_PASSAGE_WORDS)
    return ([title] if title else []) + list(islice(sentences, limit))


def _sentences(body: str) -> Iterator[str]:
    """``SENTENCE.split(body)``, lazily: a long body is cut only as far as its first passages (its matches are never empty)."""
    start = 0
    for match in SENTENCE.finditer(body):
        yield body[start : match.start()]
        start = match.end()
    yield body[start:]
