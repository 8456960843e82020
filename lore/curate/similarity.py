"""Text similarity for write-time duplicate and contradiction checks.

Pure functions, no I/O: normalisation and a normalised-text hash, word Jaccard,
a self-normalised BM25 score, an extractor for the specifics that make two
near-identical notes different (numbers, versions, flags, identifiers, file
names, product names), and a heuristic for "same topic, opposite advice".

Words, stopwords and stems are ``lore.analysis``'s, the BM25 channel's own: the one
difference is that contractions are spelt out first ("don't" -> "do not"), so that
a negation is a word here (the search index drops "don't" whole).
"""

from __future__ import annotations

import difflib
import hashlib
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from lore import analysis
from lore.analysis import STOPWORDS, stem

# -- normalisation --------------------------------------------------------------

_SPACE = re.compile(r"\s+")
_TRAILING_PUNCT = re.compile(r"[.;:!?,]+(?=\s|$)")
_EDGE_PUNCT = " \t\n.;:!?,'\"`"


def normalise(text: str) -> str:
    """NFKC, case-folded, whitespace collapsed, sentence punctuation at word ends dropped."""
    text = unicodedata.normalize("NFKC", text or "").casefold()
    text = _TRAILING_PUNCT.sub("", _SPACE.sub(" ", text))
    return text.strip(_EDGE_PUNCT)


def text_hash(text: str) -> str:
    """SHA-256 of the normalised text: equal for texts that differ only in case and spacing."""
    return hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()


# -- tokens ---------------------------------------------------------------------

_CONTRACTIONS = (
    (re.compile(r"\bcan['’]t\b"), "can not"),
    (re.compile(r"\bwon['’]t\b"), "will not"),
    (re.compile(r"\bshan['’]t\b"), "shall not"),
    (re.compile(r"n['’]t\b"), " not"),
)


def _split(words: str) -> list[str]:
    return words.split()


NEGATIONS = frozenset({"not", "no", "never", "none", "nothing", "nor", "without", "neither"})


def _expand_contractions(text: str) -> str:
    text = text.casefold()
    for pattern, replacement in _CONTRACTIONS:
        text = pattern.sub(replacement, text)
    return text


def tokens(text: str) -> list[str]:
    """``lore.analysis.terms`` of the text with contractions spelt out: Snowball stems, negations kept."""
    text = text or ""
    if not text.isascii():  # NFKC leaves ASCII unchanged
        text = unicodedata.normalize("NFKC", text)
    # The contraction rules all need an apostrophe; without one, expanding is just case-folding,
    # which on ASCII is the lower-casing analysis.terms does anyway.
    if "'" in text or "\u2019" in text:
        text = _expand_contractions(text)
    elif not text.isascii():
        text = text.casefold()
    return analysis.terms(text)


def word_set(text: str) -> frozenset[str]:
    return frozenset(tokens(text))


def jaccard(a: str | Iterable[str], b: str | Iterable[str]) -> float:
    """Jaccard similarity of the word sets of ``a`` and ``b`` (texts or token iterables)."""
    set_a = word_set(a) if isinstance(a, str) else frozenset(a)
    set_b = word_set(b) if isinstance(b, str) else frozenset(b)
    if not set_a and not set_b:
        return 1.0
    return len(set_a & set_b) / len(set_a | set_b)


# -- BM25, normalised -----------------------------------------------------------


@dataclass
class Bm25Stats:
    """Document frequencies of a corpus (the existing records of one kind) for BM25."""

    doc_count: int = 0
    avg_len: float = 0.0
    # Any mapping: the write check's pool passes the counts of the terms it compares (lore.curate.pool).
    df: Mapping[str, int] = field(default_factory=Counter)
    k1: float = 1.2
    b: float = 0.75
    # Values already computed (a write check compares one text with 50 others: the same terms and
    # the same texts' self-scores come up again and again); the statistics never change after build.
    _idf: dict[str, float] = field(default_factory=dict, repr=False, compare=False)
    _self: dict[tuple[str, ...], float] = field(default_factory=dict, repr=False, compare=False)
    _counts: dict[tuple[str, ...], tuple[Counter[str], set[str]]] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def build(cls, texts: Iterable[str | list[str]], *, k1: float = 1.2, b: float = 0.75) -> Bm25Stats:
        df: Counter[str] = Counter()
        count, total = 0, 0
        for text in texts:
            toks = tokens(text) if isinstance(text, str) else text
            count += 1
            total += len(toks)
            df.update(set(toks))
        return cls(doc_count=count, avg_len=(total / count) if count else 0.0, df=df, k1=k1, b=b)

    def idf(self, term: str) -> float:
        value = self._idf.get(term)
        if value is None:
            n, df = self.doc_count, self.df.get(term, 0)
            # The "+1" form never goes negative, so a word in every record still counts a little.
            value = self._idf[term] = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        return value

    def self_score(self, toks: list[str]) -> float:
        """``score(toks, toks)``, once per text."""
        key = tuple(toks)
        value = self._self.get(key)
        if value is None:
            value = self._self[key] = self.score(toks, toks)
        return value

    def _counted(self, toks: list[str]) -> tuple[Counter[str], set[str]]:
        """A text's term counts and term set, once per text (the same texts meet 50 others in a write check)."""
        key = tuple(toks)
        found = self._counts.get(key)
        if found is None:
            found = self._counts[key] = (Counter(toks), set(toks))
        return found

    def score(self, query: list[str], doc: list[str]) -> float:
        if not query or not doc:
            return 0.0
        tf = self._counted(doc)[0]
        avg = self.avg_len or float(len(doc))
        norm = self.k1 * (1.0 - self.b + self.b * len(doc) / avg)
        total = 0.0
        for term in self._counted(query)[1]:
            f = tf.get(term, 0)
            if f:
                total += self.idf(term) * f * (self.k1 + 1.0) / (f + norm)
        return total


def bm25_normalised(a: str | list[str], b: str | list[str], stats: Bm25Stats) -> float:
    """BM25 of ``a`` as a query against ``b``, divided by ``a`` against itself (capped at 1)."""
    ta = tokens(a) if isinstance(a, str) else a
    tb = tokens(b) if isinstance(b, str) else b
    self_score = stats.self_score(ta)
    if self_score <= 0.0:
        return 1.0 if not ta and not tb else 0.0
    return min(1.0, stats.score(ta, tb) / self_score)


def bm25_symmetric(a: str | list[str], b: str | list[str], stats: Bm25Stats) -> float:
    """The lower of the two directions: a short note inside a long one is not a duplicate of it."""
    return min(bm25_normalised(a, b, stats), bm25_normalised(b, a, stats))


# -- specifics: numbers, versions, flags, identifiers, files ---------------------

_NUMBER_WORDS = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
    "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "fifteen": "15", "twenty": "20",
    "thirty": "30", "forty": "40", "fifty": "50", "sixty": "60", "ninety": "90", "once": "1", "twice": "2",
}  # fmt: skip
# "four hundred", "ten thousand", "10 thousand": one number, as "400" and "10000" would be written.
_MULTIPLIED = re.compile(r"\b(\d+)\s+(hundred|thousand|million)\b", re.IGNORECASE)
_MULTIPLIERS = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_UNITS = {
    "ms": "ms", "msec": "ms", "millisecond": "ms", "milliseconds": "ms",
    "s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
    "m": "min", "min": "min", "mins": "min", "minute": "min", "minutes": "min",
    "h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
    "d": "d", "day": "d", "days": "d", "w": "w", "week": "w", "weeks": "w",
    "b": "b", "byte": "b", "bytes": "b", "kb": "kb", "kib": "kb", "k": "k", "mb": "mb", "mib": "mb",
    "gb": "gb", "gib": "gb", "tb": "tb", "%": "%", "percent": "%", "x": "x",
}  # fmt: skip
_NUM = re.compile(
    r"(?<![\w.-])v?(\d+(?:[.,]\d+)*)(?:[\s-]?(%|[a-z]+)\b)?",
    re.IGNORECASE,
)
_VERSION = re.compile(r"^\d+(?:\.\d+){1,3}$")
_FLAG = re.compile(r"(?<![\w-])(--?[a-zA-Z][\w-]*(?:=[^\s`'\",;)\]]+)?)")
_CALL = re.compile(r"\b([A-Za-z_][\w.]*)\(\s*[^()]{0,40}\)")
_CAMEL = re.compile(r"\b([a-z]+[A-Z][A-Za-z0-9]*|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*)\b")
_SNAKE = re.compile(r"\b([A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+)\b")
# Letters then digits in one word: ``n10``, ``w0``, ``ipv6``, ``sha256``, ``ec2``. A change in
# one of these is a different thing ("concurrent decision w0 n10" is not "... w0 n1").
_LETTER_DIGIT = re.compile(r"\b([A-Za-z]+[0-9][A-Za-z0-9]*)\b")
# Hyphenated names whose last part is one letter or a number: ``worker-a``, ``node-2``,
# ``db-01``. "Run the cron on worker-a" and "... on worker-b" are different decisions.
_SUFFIXED_NAME = re.compile(r"(?<![\w-])([A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*-(?:[A-Za-z]|[0-9]+))(?![\w-])")
_UPPER_SNAKE_OR_ACRONYM = re.compile(r"\b([A-Z][A-Z0-9]{1,})\b")
_DOTTED = re.compile(r"(?<![\w/.])([A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)+)(?![\w(])")
_PATH = re.compile(r"(?<![\w.])((?:~|\.{1,2})?/?[\w.@-]+(?:/[\w.@*-]+)+/?)")
# Capitalised words that do not start a line or a sentence: product and project names.
_CAPITALISED = re.compile(
    r"(?<![.!?:;]\s)(?<![.!?:;])(?<!^)(?<!\n)(?<!\n\s)\b([A-Z][a-z][a-zA-Z0-9]*)\b", re.MULTILINE
)
_FILE_EXTENSIONS = frozenset(
    _split(
        """py pyi js mjs cjs ts tsx jsx json jsonl yaml yml toml ini cfg conf md rst txt csv sql sh bash zsh go rs
    rb java kt c h cc cpp hpp cs php lock env xml html css scss proto tf hcl dockerfile gradle mod sum log"""
    )
)
_NOT_IDENTIFIERS = frozenset({"e.g", "i.e", "etc", "vs", "a.k.a"})
# Words that start sentences or are ordinary capitalised English; not product names.
_COMMON_CAPS = frozenset(
    _split(
        """i we you they it this that these those the a an use do don't never always prefer avoid keep run set
    when if on in for with after before by to our my us note see"""
    )
)


@dataclass(frozen=True)
class Specifics:
    """The concrete details a text names, by category."""

    numbers: frozenset[str] = frozenset()
    versions: frozenset[str] = frozenset()
    flags: frozenset[str] = frozenset()
    identifiers: frozenset[str] = frozenset()
    files: frozenset[str] = frozenset()
    names: frozenset[str] = frozenset()

    def by_category(self) -> dict[str, frozenset[str]]:
        return {
            "number": self.numbers, "version": self.versions, "flag": self.flags,
            "identifier": self.identifiers, "file": self.files, "name": self.names,
        }  # fmt: skip


def _word_numbers(text: str) -> str:
    def swap(match: re.Match[str]) -> str:
        return _NUMBER_WORDS[match.group(0).lower()]

    def multiply(match: re.Match[str]) -> str:
        return str(int(match.group(1)) * _MULTIPLIERS[match.group(2).lower()])

    text = re.sub(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b", swap, text, flags=re.IGNORECASE)
    text = _MULTIPLIED.sub(multiply, text)
    # What is left stands alone: "a hundred requests".
    return re.sub(r"\b(hundred|thousand|million)\b", lambda m: str(_MULTIPLIERS[m.group(1).lower()]), text,
                  flags=re.IGNORECASE)  # fmt: skip


_SPECIAL_FILES = ("dockerfile", "makefile", "justfile", "procfile", "gemfile", "rakefile", "containerfile")


def _is_file(token: str) -> bool:
    tail = token.rsplit("/", 1)[-1].lower()
    if tail.startswith(_SPECIAL_FILES):
        return True
    if "." in tail.strip("."):
        # "src/app.config" is a path even with an unknown extension; "pyproject.toml" by its extension.
        return "/" in token or tail.rsplit(".", 1)[-1] in _FILE_EXTENSIONS or tail.startswith(".")
    return False


def extract_specifics(text: str) -> Specifics:
    """Numbers (with units), versions, CLI flags, identifiers, file names/paths and product names."""
    text = text or ""
    files: set[str] = set()
    identifiers: set[str] = set()
    masked = text
    for match in _PATH.finditer(text):
        token = match.group(1).rstrip("/.")
        segments = [s for s in token.split("/") if s]
        # "read/write", "sync/async", "and/or" are prose, not paths.
        if token.startswith(("/", "./", "../", "~/")) or _is_file(token) or len(segments) >= 3:
            files.add(token.lower())
            masked = masked.replace(match.group(1), " ")
    for match in _CALL.finditer(masked):
        identifiers.add(match.group(1).lower() + "()")
    masked = _CALL.sub(" ", masked)
    for match in _DOTTED.finditer(masked):
        token = match.group(1).rstrip(".")
        if token.lower() in _NOT_IDENTIFIERS or "." not in token:
            continue
        if _is_file(token):
            files.add(token.lower())
        elif not re.fullmatch(r"[A-Za-z]\.[A-Za-z]", token):  # initials
            identifiers.add(token.lower())
    masked = _DOTTED.sub(" ", masked)
    flags = {m.group(1).lower() for m in _FLAG.finditer(masked) if not m.group(1).lstrip("-").isdigit()}
    masked = _FLAG.sub(" ", masked)
    identifiers.update(m.group(1).lower() for m in _SNAKE.finditer(masked))
    identifiers.update(m.group(1).lower() for m in _CAMEL.finditer(masked))
    identifiers.update(m.group(1).lower() for m in _LETTER_DIGIT.finditer(masked))
    identifiers.update(m.group(1).lower() for m in _SUFFIXED_NAME.finditer(masked))
    names: set[str] = set()
    for match in _UPPER_SNAKE_OR_ACRONYM.finditer(masked):
        names.add(match.group(1).lower())
    for match in _CAPITALISED.finditer(masked):
        word = match.group(1)
        if word.lower() not in _COMMON_CAPS:
            names.add(word.lower())
    names -= identifiers
    numbers: set[str] = set()
    versions: set[str] = set()
    for match in _NUM.finditer(_word_numbers(masked)):
        value, unit = match.group(1).replace(",", ""), (match.group(2) or "").lower()
        if _VERSION.match(value) and value.count(".") >= 1 and (match.group(0).lower().startswith("v") or
                                                                 value.count(".") >= 2 or not unit):  # fmt: skip
            versions.add(value)
            continue
        canonical_unit = _UNITS.get(unit, "")
        if value.endswith(".0"):
            value = value[:-2]
        if canonical_unit == "k" and value.isdigit():  # "10k rows" is "ten thousand rows"
            value, canonical_unit = str(int(value) * 1000), ""
        numbers.add(value + canonical_unit)
    return Specifics(
        numbers=frozenset(numbers), versions=frozenset(versions), flags=frozenset(flags),
        identifiers=frozenset(identifiers), files=frozenset(files), names=frozenset(names),
    )  # fmt: skip


# Mutually exclusive choices: naming one side and not the other is a different note, not a duplicate
# (and not a contradiction either: "async for the gateway" and "sync for the back office" can both hold).
_CHOICES: tuple[tuple[frozenset[str], frozenset[str]], ...] = tuple(
    (frozenset(left.split()), frozenset(right.split()))
    for left, right in (
        ("manual manually hand", "automatic automatically automated automate"),
        ("client client-side browser frontend", "server server-side backend"),
        ("sync synchronous synchronously", "async asynchronous asynchronously"),
        ("eager eagerly", "lazy lazily"),
        ("optimistic optimistically", "pessimistic pessimistically"),
        ("public", "private"),
        ("internal internally", "external externally"),
        ("local locally", "remote remotely"),
        ("stateless", "stateful"),
        ("mutable", "immutable"),
        ("horizontal horizontally", "vertical vertically"),
        ("blocking", "non-blocking nonblocking"),
        ("staging", "production prod"),
        ("minimum min", "maximum max"),
        ("increase raise", "decrease reduce lower"),
        ("more", "fewer less"),
        ("first", "last"),
        ("encrypted", "unencrypted plaintext"),
    )
)


def _choice_difference(words_a: set[str], words_b: set[str]) -> str | None:
    for left, right in _CHOICES:
        a_left, a_right = words_a & left, words_a & right
        b_left, b_right = words_b & left, words_b & right
        if a_left and not a_right and b_right and not b_left:
            return f"choice {min(a_left)} vs {min(b_right)}"
        if a_right and not a_left and b_left and not b_right:
            return f"choice {min(a_right)} vs {min(b_left)}"
    return None


_UNIT_CLASSES = {"ms": "time", "s": "time", "min": "time", "h": "time", "d": "time", "w": "time",
                 "b": "size", "kb": "size", "mb": "size", "gb": "size", "tb": "size"}  # fmt: skip


def _unit_class(number: str) -> str:
    """The kind of quantity of a canonical number from ``extract_specifics`` ("30s" -> "time", "10" -> "")."""
    unit = number.lstrip("0123456789.")
    return _UNIT_CLASSES.get(unit, unit)


def differs_in_specifics(a: str, b: str) -> str | None:
    """Why ``a`` and ``b`` are not duplicates despite similar wording, or None.

    A difference is a *substitution*: each text names a specific (of one category)
    that the other does not mention anywhere. One text merely adding a detail the
    other leaves out is not a difference.
    """
    spec_a, spec_b = extract_specifics(a), extract_specifics(b)
    raw_a = set(analysis.words(_word_numbers(a).casefold()))
    raw_b = set(analysis.words(_word_numbers(b).casefold()))
    words_a, words_b = {stem(w) for w in raw_a}, {stem(w) for w in raw_b}
    pooled_a = set().union(*spec_a.by_category().values())
    pooled_b = set().union(*spec_b.by_category().values())
    cats_b = spec_b.by_category()
    for category, items_a in spec_a.by_category().items():
        items_b = cats_b[category]
        if not items_a or not items_b:
            continue
        if category == "name":  # a product name may appear lower-cased in the other text
            only_a = sorted(i for i in items_a if stem(i) not in words_b and i not in pooled_b)
            only_b = sorted(i for i in items_b if stem(i) not in words_a and i not in pooled_a)
        else:
            only_a = sorted(items_a - items_b - pooled_b)
            only_b = sorted(items_b - items_a - pooled_a)
        if category == "number":
            # A number replaces another of its own kind: "30s" -> "5min", "1 MB" -> "10 MB". "90 days"
            # against "SOC 2" in a paraphrase is two unrelated numbers, not a substitution.
            swapped = [(x, y) for x in only_a for y in only_b if _unit_class(x) == _unit_class(y)]
            if swapped:
                return f"number {swapped[0][0]} vs {swapped[0][1]}"
            continue
        if only_a and only_b:
            return f"{category} {only_a[0]} vs {only_b[0]}"
    return _choice_difference(raw_a, raw_b)


def _content_words(text: str) -> list[str]:
    # Number words as digits: "four hundred" and "400" are the same slot filler, not a swap.
    return [w for w in analysis.words(_expand_contractions(_word_numbers(text))) if w not in STOPWORDS]


def _content_sequence(text: str) -> list[str]:
    return [stem(w) for w in _content_words(text)]


def substituted_slot(a: str, b: str, *, max_slot: int = 2) -> str | None:
    """The words swapped when ``a`` and ``b`` differ in one short slot only ("at the CDN" / "in the browser").

    Two notes worded identically but for one or two adjacent words are a minimal pair, and in
    engineering notes a minimal pair almost always records a different choice. Spelling fixes
    (the swapped words nearly identical) are not counted.
    """
    words_a, words_b = _content_words(a), _content_words(b)
    seq_a, seq_b = [stem(w) for w in words_a], [stem(w) for w in words_b]
    changes = [op for op in difflib.SequenceMatcher(None, seq_a, seq_b, autojunk=False).get_opcodes()
               if op[0] != "equal"]  # fmt: skip
    if len(changes) != 1 or changes[0][0] != "replace":
        return None
    _, a0, a1, b0, b1 = changes[0]
    if a1 - a0 > max_slot or b1 - b0 > max_slot or len(seq_a) - (a1 - a0) < 2:
        return None
    # The words as written: a stem can hide a typo's likeness ("advisroy" / "advisori").
    left, right = " ".join(words_a[a0:a1]), " ".join(words_b[b0:b1])
    if difflib.SequenceMatcher(None, left, right).ratio() >= 0.8:
        return None  # a typo fix or an inflection the stemmer missed
    return f"wording {left} vs {right}"


# -- contradiction heuristic ----------------------------------------------------

# Words that turn advice into its opposite ("avoid X" vs "use X"). Each flips a clause's polarity.
NEGATIVE_CUES = frozenset(
    _split(
        """not no never without avoid avoiding avoided disable disabling disabled forbid forbidden forbids
    disallow disallowed prohibit prohibited ban banned deny denied drop dropped dropping abandon abandoned
    remove removed removing exclude excluded excluding stop stopped stopping off reject rejected
    discourage discouraged deprecate deprecated unset freeze frozen halt halted"""
    )
)
# Positive counterparts: removed from the topic words so "enable X" and "disable X" share a topic.
POSITIVE_CUES = frozenset(
    _split(
        """use using used enable enabling enabled always allow allowed permit permitted adopt adopted keep
    include included including add added adding start require required requiring do prefer preferred
    favour favor encourage set on turn"""
    )
)
_CLAUSE_SPLIT = re.compile(
    r"[;.!?\n]+|,\s*(?=(?:but|and|not|never|instead|rather|then)\b)|,|\bbut\b|\bhowever\b"
)
_CONDITION = re.compile(r"\b(?:because|since|so|as it|as they|which|otherwise|unless|due to)\b.*$")
# "Whether or not the features are ready, ..." says "regardless", not "no": not a polarity flip.
_WHETHER_OR_NOT = re.compile(r"\bwhether\s+or\s+not\b")
_PREFERENCE = re.compile(
    r"(?P<x>[\w.+#/-]+(?:\s+[\w.+#/-]+){0,3}?)\s*,?\s+(?:over|instead of|rather than|in favou?r of|not)\s+"
    r"(?P<y>[\w.+#/-]+(?:\s+[\w.+#/-]+){0,3})"
)


@dataclass(frozen=True)
class Clause:
    topic: frozenset[str]
    negative: bool


def _clauses(text: str) -> list[Clause]:
    text = _WHETHER_OR_NOT.sub("regardless of whether", _expand_contractions(text))
    result = []
    for part in _CLAUSE_SPLIT.split(text):
        part = _CONDITION.sub("", part).strip()
        if not part:
            continue
        words = analysis.words(part)
        flips = sum(1 for w in words if w in NEGATIVE_CUES)
        topic = frozenset(
            stem(w) for w in words if w not in STOPWORDS and w not in NEGATIVE_CUES and w not in POSITIVE_CUES
        )
        if topic:
            result.append(Clause(topic=topic, negative=flips % 2 == 1))
    return result


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Share of the smaller topic that the other covers."""
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


def _preferences(text: str) -> list[tuple[frozenset[str], frozenset[str]]]:
    """(preferred, rejected) word sets from "X over Y", "X instead of Y", "X rather than Y", "X, not Y"."""
    found = []
    for sentence in re.split(r"[;.!?\n]+", _expand_contractions(text)):
        match = _PREFERENCE.search(sentence)
        if not match:
            continue
        # The nearest words on each side of "over" carry the choice.
        x_words = [
            stem(w) for w in analysis.words(match.group("x")) if w not in STOPWORDS and w not in POSITIVE_CUES
        ]
        y_words = [stem(w) for w in analysis.words(match.group("y")) if w not in STOPWORDS]
        if x_words and y_words:
            found.append((frozenset(x_words[-2:]), frozenset(y_words[:2])))
    return found


_ORDER = re.compile(
    r"(?P<x>[\w.+#/-]+(?:\s+[\w.+#/-]+){0,4}?)\s+(?P<rel>before|after|ahead of|prior to)\s+"
    r"(?P<y>[\w.+#/-]+(?:\s+[\w.+#/-]+){0,4})"
)


def _orderings(text: str) -> list[tuple[frozenset[str], frozenset[str]]]:
    """(earlier, later) word sets from "X before Y" / "X after Y" (a leading "Before Y, X" is skipped)."""
    found = []
    for sentence in re.split(r"[;.!?\n,]+", _expand_contractions(text)):
        match = _ORDER.search(sentence.strip())
        if not match:
            continue
        x = frozenset(w for w in _content_sequence(match.group("x")) if w not in POSITIVE_CUES)
        y = frozenset(w for w in _content_sequence(match.group("y")) if w not in POSITIVE_CUES)
        if x and y:
            found.append((y, x) if match.group("rel") == "after" else (x, y))
    return found


def opposite_advice(a: str, b: str, *, min_overlap: float = 0.6) -> bool:
    """True when ``a`` and ``b`` give opposite advice on the same thing.

    Signals: a clause of each on the same topic words with opposite polarity
    (use/avoid, enable/disable, always/never, do/don't, allow/forbid, adopt/drop),
    swapped preferences ("prefer X over Y" vs "prefer Y over X"), swapped order
    ("X before Y" vs "Y before X"), or two or more words that one text only uses
    positively and the other only negatively. Different but compatible choices
    (sync vs async, Redis vs Memcached) are not opposites.
    """
    same_choice = False
    for px, py in _preferences(a):
        for qx, qy in _preferences(b):
            # Words on both sides of "over" ("soft deletes over hard deletes") name the
            # thing chosen between, not the choice: compare what differs.
            px, py = (px - py or px), (py - px or py)
            qx, qy = (qx - qy or qx), (qy - qx or qy)
            if px & qy and py & qx and not (px & qx):
                return True
            same_choice = same_choice or bool(px & qx and py & qy)
    if same_choice:
        # "Nightly, not on every pull request" and "every night rather than per pull
        # request" state one choice; the "not" is its other half, not a reversal.
        return False
    for ex, lx in _orderings(a):
        for ey, ly in _orderings(b):
            if _overlap(ex, ly) >= 0.5 and _overlap(lx, ey) >= 0.5 and not (ex & ey):
                return True
    clauses_a, clauses_b = _clauses(a), _clauses(b)

    def echoed(clause: Clause, others: list[Clause]) -> bool:
        """The other text also says this, with the same polarity, in some clause."""
        return any(o.negative == clause.negative and _overlap(clause.topic, o.topic) >= min_overlap for o in others)

    for ca in clauses_a:
        for cb in clauses_b:
            if ca.negative != cb.negative and _overlap(ca.topic, cb.topic) >= min_overlap:
                shared = ca.topic & cb.topic
                # One shared generic word ("tests", "config") is not a topic.
                if not (len(shared) >= 2 or len(ca.topic | cb.topic) == 1):
                    continue
                # "Remove the flag within two weeks" against "clean up flags after rollout;
                # within two weeks, delete it": b says a's negative clause too.
                if echoed(ca, clauses_b) or echoed(cb, clauses_a):
                    continue
                return True
    # The clauses may not line up ("Use CSS Modules; don't introduce Tailwind" against "Use Tailwind
    # and avoid custom CSS"), but the things each text says yes and no to can: two or more words
    # that one text only ever uses positively and the other only negatively are a reversal.
    return len(_flipped_words(clauses_a, clauses_b)) >= 2


def _polarity(clauses: list[Clause]) -> dict[str, bool]:
    """Topic word -> negative, for the words used with a single polarity throughout the text."""
    seen: dict[str, set[bool]] = {}
    for clause in clauses:
        for word in clause.topic:
            seen.setdefault(word, set()).add(clause.negative)
    return {word: polarities.pop() for word, polarities in seen.items() if len(polarities) == 1}


def _flipped_words(clauses_a: list[Clause], clauses_b: list[Clause]) -> list[str]:
    polarity_a, polarity_b = _polarity(clauses_a), _polarity(clauses_b)
    return sorted(w for w in polarity_a.keys() & polarity_b.keys() if polarity_a[w] != polarity_b[w])
