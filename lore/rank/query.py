"""Query scrubbing and light query analysis (pure, no third-party imports)."""

from __future__ import annotations

import re
from typing import NamedTuple

_MARKUP = re.compile(
    r"```.*?```|`([^`]*)`|<[^>\n]{1,200}>|!\[[^\]]*\]\([^)]*\)|\[([^\]]*)\]\([^)]*\)"
    r"|[*#>|~]{1,3}|(?<![A-Za-z0-9])_{1,3}|_{1,3}(?![A-Za-z0-9])",
    re.S,
)
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_'\-]*|\d+[A-Za-z0-9.\-]*")

STOPWORDS = frozenset(
    ["a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "aren't", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "cannot", "could", "couldn't", "did", "didn't", "do", "does", "doesn't", "doing", "don't", "down", "during", "each", "few", "for", "from", "further", "had", "hadn't", "has", "hasn't", "have", "haven't", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "isn't", "it", "it's", "its", "itself", "let's", "me", "more", "most", "mustn't", "my", "myself", "no", "nor", "not", "of", "off", "on", "once", "only", "or", "other", "ought", "our", "ours", "ourselves", "out", "over", "own", "same", "shan't", "she", "should", "shouldn't", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "wasn't", "we", "were", "weren't", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "won't", "would", "wouldn't", "you", "your", "yours", "yourself", "yourselves", "please", "thanks", "thank", "hi", "hello", "hey", "ok", "okay", "yes", "yeah", "just", "also", "us", "get", "got", "make", "made", "use", "using", "used", "want", "need", "let", "lets", "know", "tell", "show", "give", "can", "could", "would", "should", "maybe", "really", "actually"]
)


class ScrubbedQuery(NamedTuple):
    text: str
    redactions: tuple[str, ...]


def redact_query(raw: str, *, max_chars: int = 2000) -> str:
    """``raw`` with its secrets redacted, nothing else changed (the query language parses this)."""
    from lore.scrub import scrub

    return scrub(raw[: max_chars * 4]).text


def scrub_query(raw: str, *, max_chars: int = 2000) -> ScrubbedQuery:
    """Normalise whitespace, strip markup, redact secrets: before anything is logged or embedded."""
    from lore.scrub import scrub

    # Redact before stripping markup: stripping could break a token apart and hide it.
    result = scrub(raw[: max_chars * 4])
    text = _MARKUP.sub(lambda m: " " + (m.group(1) or m.group(2) or "") + " ", result.text)
    text = _SPACE.sub(" ", text).strip()[:max_chars]
    return ScrubbedQuery(text, tuple(f.kind for f in result.findings))


def content_words(text: str) -> list[str]:
    """Lower-cased words that carry meaning (no stopwords, no redaction markers)."""
    words = []
    for word in _WORD.findall(text.replace("[REDACTED", " ")):
        lowered = word.lower().strip("'-")
        if len(lowered) > 1 and lowered not in STOPWORDS and not lowered.startswith("redacted"):
            words.append(lowered)
    return words


_QUOTED = re.compile(r'"([^"\n]{1,200})"')


def quoted_phrases(text: str) -> list[str]:
    """Phrases the user put in double quotes: every result must contain each of them."""
    return [p.strip() for p in _QUOTED.findall(text) if p.strip()]


def key_phrases(text: str, limit: int = 6) -> list[str]:
    """Runs of adjacent content words: a cheap stand-in for noun phrases."""
    phrases: list[str] = []
    current: list[str] = []
    for word in _WORD.findall(text):
        lowered = word.lower()
        if lowered in STOPWORDS or len(lowered) < 2:
            if current:
                phrases.append(" ".join(current))
                current = []
        else:
            current.append(lowered)
    if current:
        phrases.append(" ".join(current))
    return list(dict.fromkeys(phrases))[:limit]


def hyde_document(query: str) -> str:
    """HyDE-lite: a template pseudo-answer embedded as a second vector query."""
    phrases = key_phrases(query) or [query]
    return f"[CONTEXT] {query} [ANSWER] {', '.join(phrases)} is relevant because it explains {phrases[0]}."
