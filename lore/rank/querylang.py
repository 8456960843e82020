"""`lore search`'s query language: Whoosh's query parser over lore's own index.

``type:decision``, ``tag:postgres``, ``project:billing-api``, ``title:retry``; ``-word``
and ``NOT``; ``OR`` (and ``AND``); ``word*`` and ``word~`` (``word~2``); quoted phrases;
parentheses. ``whoosh.qparser`` parses the query (``parse``; the only place lore imports
whoosh, and only for a query ``uses_syntax`` says is written in the language); the tree
it returns is turned into lore's own (``Node``) and evaluated against lore's index, never
a Whoosh one: BM25's postings and vocabulary, the term sequence (phrases, titles) and the
records' fields (``rows``).

What a query means (docs/search.md, "The query language"): its plain words and phrases
rank exactly as a plain query of those words would (every channel, every stage); the
rest narrows which records may rank. So ``retry type:decision`` is ``retry --type
decision``. Inside ``OR``, ``AND``, ``NOT`` or a field, words and phrases are conditions
(the record holds them, analysed as BM25 analyses); ``word*`` and ``word~`` always are,
and the index terms they stand for join BM25's query terms.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Union

from lore.errors import UsageError

if TYPE_CHECKING:
    import numpy as np

    from lore.index.bm25 import Bm25Index
    from lore.index.manager import IndexReader

# The fields a clause can name; an unknown ``name:`` is plain text ("error: timeout").
VALUE_FIELDS = ("type", "tag", "project")
TEXT_FIELDS = ("text", "title")  # "text": a record's whole text, the default
# When a query is read in the language: measured on the 1,626 natural-language questions and
# prompts of benchmarks/data (engineers' questions, full of `-x` flags, `char*` and upper-case
# emphasis), none of which the rules below take for syntax (tests/test_querylang.py).
# A minus that negates: before a word of three or more letters starting lower-case, a quote or
# a parenthesis ("-celery", "-\"exact words\""); "-x", "-O0", "--force", "-exclude-standard" and
# "e-mail" stay text.
_MINUS = r"-(?=[^\W\d_A-Z][^\W\d_]{2,}(?![\w-])|[\"(])"
_CLAUSE_START = r"(?:^|(?<=[\s(]))"
_WORD_END = r"(?=$|[\s)])"  # where Whoosh ends a word* or word~ (a comma after it makes a wildcard)
# C's pointer types are text, not prefixes ("a fixed-size char* array").
_POINTER_TYPES = r"(?!(?:char|void|int|long|short|float|double|bool|const|unsigned|signed)\*)"
_SYNTAX = re.compile(
    rf"{_CLAUSE_START}(?:title|type|tag|project):(?=[^\s)])"  # a field with a value
    rf"|{_CLAUSE_START}{_MINUS}"  # -word
    # AND and OR between clauses (or dangling: an error); NOT only to start the query or a group:
    # elsewhere upper-case NOT is mostly emphasis ("does NOT show up", "NOT NULL"). In a query
    # read in the language, NOT anywhere is the operator.
    r"|(?<=\s)(?:AND|OR)(?=\s|$)|^(?:AND|OR)(?=\s|$)|^NOT(?=\s|$)|(?<=\()NOT(?=\s)"
    rf"|{_CLAUSE_START}{_POINTER_TYPES}[^\W\d_]{{2,}}\*{_WORD_END}"  # word* (not *emphasis*, not C's char*)
    rf"|{_CLAUSE_START}[^\s*~\"()\-][^\s*~\"()]*~[0-9]?(?:/[1-9][0-9]*)?{_WORD_END}"  # word~, word~2
)
MAX_EDITS = 2  # word~3 and more match almost anything (Whoosh's own advice)
# A prefix or fuzzy word standing for more index terms than this is refused: "a*" would
# rank by thousands of terms.
MAX_EXPANSION = 200


def uses_syntax(query: str) -> bool:
    """Whether ``query`` is written in the query language (cheap: no parse, no whoosh import).

    Quoted phrases alone are not: `lore search` has always matched them without Whoosh.
    """
    return _SYNTAX.search(query) is not None


# -- lore's query tree (what ``parse`` returns; no whoosh type survives parsing) --------
class Words(NamedTuple):
    """Words in ``field`` ("text" or "title"): each of their analysed terms, adjacent and in order if ``phrase``."""

    field: str
    text: str
    phrase: bool = False


class Prefix(NamedTuple):
    """``word*``: any index term that starts with ``prefix`` (or is its stem), in ``field``."""

    field: str
    prefix: str


class Fuzzy(NamedTuple):
    """``word~N`` (``word~N/P``): any index term within ``edits`` edits of the word or of its stem (sharing its first ``prefix`` letters)."""

    field: str
    word: str
    edits: int
    prefix: int = 0


class Value(NamedTuple):
    """``type:``, ``tag:`` or ``project:``: the record's field equals ``value`` (starts with it if ``prefix``)."""

    field: str
    value: str
    prefix: bool = False


class AllOf(NamedTuple):
    """Every clause holds. ``juxtaposed``: written side by side (not with AND), so its plain words only rank."""

    clauses: tuple[Node, ...]
    juxtaposed: bool = False


class AnyOf(NamedTuple):
    clauses: tuple[Node, ...]


class Not(NamedTuple):
    clause: Node


Node = Union[Words, Prefix, Fuzzy, Value, AllOf, AnyOf, Not]  # noqa: UP007  (a runtime alias)


class ParsedQuery(NamedTuple):
    """``text``: what ranks (the plain words and phrases, in order); ``tree``: the whole query, for ``rows``."""

    text: str
    tree: Node


# -- parsing -------------------------------------------------------------------------
def parse(query: str) -> ParsedQuery:
    """Parse ``query`` (already redacted) with Whoosh's parser into lore's tree; ``UsageError`` if malformed."""
    _check_balanced(query)
    parsed = _parser().parse(query, normalize=False)
    tree = _convert(parsed, query)
    text = " ".join(_ranked_text(tree, top=True, positive=True))
    if not text.strip() and not _has_positive_expansion(tree, positive=True):
        raise UsageError(f"the query {query!r} has no words to rank by",
                         hint="add what you are looking for (`type:decision retry`), or list records with `lore list`")  # fmt: skip
    return ParsedQuery(text, tree)


def _check_balanced(query: str) -> None:
    if query.count('"') % 2:
        raise UsageError(f"unbalanced double quote in {query!r}", hint='close the phrase: "exact words"')
    depth = 0
    for char in re.sub(r'"[^"]*"', "", query):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            break
    if depth:
        raise UsageError(f"unbalanced parenthesis in {query!r}", hint="every ( needs its )")


_PARSER: Any = None


def _parser() -> Any:
    global _PARSER
    if _PARSER is None:
        from whoosh import fields, query
        from whoosh.qparser import QueryParser, plugins, syntax

        class Juxtaposed(query.And):
            """Clauses written side by side: Whoosh's default group, told apart from an explicit AND."""

        class JuxtaposedGroup(syntax.AndGroup):
            qclass = Juxtaposed

        # ID fields: Whoosh keeps each clause's text as typed, and lore analyses it as BM25 does.
        schema = fields.Schema(**{name: fields.ID() for name in (*TEXT_FIELDS, *VALUE_FIELDS)})
        chosen: list[Any] = [
            plugins.WhitespacePlugin(), plugins.FieldsPlugin(), plugins.WildcardPlugin(), plugins.PhrasePlugin(),
            plugins.GroupPlugin(), plugins.FuzzyTermPlugin(),
            # AND, OR, NOT and a clause's minus; no ANDNOT, ANDMAYBE or REQUIRE.
            plugins.OperatorsPlugin(Not=rf"(^|(?<=(\s|[()])))(NOT(?=\s)|{_MINUS})", AndNot=None, AndMaybe=None,
                                    Require=None),
        ]  # fmt: skip
        _PARSER = QueryParser("text", schema, plugins=chosen, group=JuxtaposedGroup)
        _PARSER.juxtaposed = Juxtaposed
    return _PARSER


def _convert(parsed: Any, query: str) -> Node:
    from whoosh import query as q

    def clause_text(node: Any) -> str:
        return str(node.text)

    def convert(node: Any) -> Node:
        if isinstance(node, q.Not):
            return Not(convert(node.query))
        if isinstance(node, q.Or):
            return AnyOf(tuple(convert(child) for child in node.subqueries))
        if isinstance(node, q.And):
            return AllOf(tuple(convert(child) for child in node.subqueries), isinstance(node, _parser().juxtaposed))
        if isinstance(node, q.Phrase):
            return _leaf(node.fieldname, " ".join(str(w) for w in node.words), phrase=True)
        if isinstance(node, q.FuzzyTerm):
            return _fuzzy(node.fieldname, clause_text(node), int(node.maxdist), int(node.prefixlength))
        if isinstance(node, q.Prefix):
            return _prefix(node.fieldname, clause_text(node))
        if isinstance(node, q.Wildcard):
            raise UsageError(f"{clause_text(node)!r}: only a trailing * is supported (a prefix: retr*)",
                             hint='to search the words themselves, drop the * or quote them: "test py"')  # fmt: skip
        if isinstance(node, q.Term):
            return _leaf(node.fieldname, clause_text(node), phrase=False)
        if node is q.NullQuery:
            raise UsageError(f"nothing to search for in {query!r}")
        raise UsageError(f"{query!r}: unsupported query syntax ({type(node).__name__})",
                         hint="the query language: docs/search.md, \"The query language\"")  # fmt: skip

    return convert(parsed)


def _leaf(field: str, text: str, *, phrase: bool) -> Node:
    if not phrase and text in ("AND", "OR", "NOT"):
        raise UsageError(f"{text} needs a clause on each side" if text != "NOT" else "NOT needs a clause after it",
                         hint="to search for the word itself, write it in lower case")  # fmt: skip
    if not phrase and text.endswith(":") and text[:-1] in (*TEXT_FIELDS, *VALUE_FIELDS):
        raise UsageError(f"{text} needs a value", hint=f"{text}something, without a space after the colon")
    if field == "type":
        from lore.kinds import normalise_kind

        return Value("type", normalise_kind(text))
    if field in VALUE_FIELDS:
        value = text.strip()
        if not value:
            raise UsageError(f"{field}: needs a value", hint=f'{field}:something, or {field}:"two words"')
        return Value(field, value.lstrip("#").lower() if field == "tag" else value)
    return Words(field, text, phrase)


def _prefix(field: str, text: str) -> Node:
    if field == "type":
        raise UsageError(f"type:{text}*: a record type is named whole", hint="type:decision, type:pattern, ...")
    if field in VALUE_FIELDS:
        return Value(field, text.lstrip("#").lower() if field == "tag" else text, prefix=True)
    if not text:
        raise UsageError("* needs the start of a word before it", hint="retr* matches retry, retries, retrieval")
    return Prefix(field, text.lower())


def _fuzzy(field: str, text: str, edits: int, prefix: int = 0) -> Node:
    if field in VALUE_FIELDS:
        raise UsageError(f"{field}:{text}~: ~ (a fuzzy word) applies to words, not to {field}:",
                         hint="title:word~ or word~ search the text")  # fmt: skip
    if not 1 <= edits <= MAX_EDITS:
        raise UsageError(f"{text}~{edits}: at most {MAX_EDITS} edits", hint=f"{text}~ allows one edit, {text}~2 two")
    return Fuzzy(field, text.lower(), edits, prefix)


def _ranked_text(node: Node, *, top: bool, positive: bool) -> list[str]:
    """The words that rank: every positive word and phrase, in order; a side-by-side phrase keeps its quotes.

    A phrase written side by side at the top stays a phrase for the pipeline to match
    (`lore search` keeps only records holding it, or ranks by its words with a warning);
    anywhere else it is a condition here, and only its words rank.
    """
    if isinstance(node, Words):
        if not positive:
            return []
        return [f'"{node.text}"' if node.phrase and top and node.field == "text" else node.text]
    if isinstance(node, AllOf):
        return [w for c in node.clauses for w in _ranked_text(c, top=top and node.juxtaposed, positive=positive)]
    if isinstance(node, AnyOf):
        return [w for c in node.clauses for w in _ranked_text(c, top=False, positive=positive)]
    if isinstance(node, Not):
        return _ranked_text(node.clause, top=False, positive=False)
    return []


def _has_positive_expansion(node: Node, *, positive: bool) -> bool:
    if isinstance(node, Prefix | Fuzzy):
        return positive
    if isinstance(node, AllOf | AnyOf):
        return any(_has_positive_expansion(c, positive=positive) for c in node.clauses)
    if isinstance(node, Not):
        return _has_positive_expansion(node.clause, positive=not positive)
    return False


# -- evaluation against lore's index -------------------------------------------------
class Narrowed(NamedTuple):
    """The rows the query allows (None: no condition beyond ranking) and the index terms its ``*``/``~`` words stand for."""

    rows: np.ndarray | None
    terms: tuple[str, ...]


def rows(reader: IndexReader, tree: Node) -> Narrowed:
    """Evaluate ``tree`` over the index: which rows may rank, and the BM25 terms its positive ``*``/``~`` words add.

    Conditions are read from the BM25 index (postings; the term sequence for phrases and
    ``title:``) and the table (type, tags, project); Whoosh plays no part. A word in a
    condition that analyses to no term (a stopword, one letter) is a ``UsageError``: it
    could match nothing, so ``-the`` would silently exclude nothing.
    """
    extra: list[str] = []
    mask = _evaluate(reader, tree, top=True, positive=True, extra=extra)
    return Narrowed(mask, tuple(dict.fromkeys(extra)))


def _evaluate(reader: IndexReader, node: Node, *, top: bool, positive: bool, extra: list[str]) -> np.ndarray | None:
    import numpy as np

    count = len(reader.table)
    if isinstance(node, AllOf):
        inner = top and node.juxtaposed
        masks = [m for c in node.clauses if (m := _evaluate(reader, c, top=inner, positive=positive, extra=extra)) is not None]
        return np.logical_and.reduce(masks) if masks else None
    if isinstance(node, AnyOf):
        masks = [m for c in node.clauses if (m := _evaluate(reader, c, top=False, positive=positive, extra=extra)) is not None]
        return np.logical_or.reduce(masks) if masks else None
    if isinstance(node, Not):
        mask = _evaluate(reader, node.clause, top=False, positive=not positive, extra=extra)
        return None if mask is None else ~mask
    if isinstance(node, Words):
        if top and node.field == "text":
            return None  # ranks: the pipeline scores it (and matches it, if a phrase)
        return _mask(count, _word_rows(reader.bm25, node))
    if isinstance(node, Value):
        return np.asarray(_value_matches(reader, node), dtype=bool)
    terms = _expand(reader.bm25, node)
    if positive:
        extra.extend(terms)
    found = [_term_rows(reader.bm25, term, node.field) for term in terms]
    return _mask(count, np.concatenate(found) if found else np.zeros(0, dtype=np.int64))


def _mask(count: int, rows: np.ndarray) -> np.ndarray:
    import numpy as np

    mask = np.zeros(count, dtype=bool)
    mask[np.asarray(rows, dtype=np.int64)] = True
    return mask


def _analysed(node: Words) -> list[str]:
    from lore.analysis import terms

    found = terms(node.text)
    if not found:
        where = "title:" if node.field == "title" else ""
        raise UsageError(f"{where}{node.text!r} is never indexed (a stopword or a single character), so it cannot be a condition",
                         hint="leave it out, or use it among the words that rank")  # fmt: skip
    return found


def _word_rows(bm25: Bm25Index, node: Words) -> np.ndarray:
    """Rows holding the words: as a phrase if it is one or the word is a compound (``billing-api``), else the term."""
    found = _analysed(node)
    if node.field == "text" and len(found) == 1:
        return bm25.postings(found[0])[0]
    # A compound identifier analyses to itself then its parts: its first term is the whole of it.
    return bm25.phrase_rows(found if node.phrase else found[:1], title_only=node.field == "title")


def _term_rows(bm25: Bm25Index, term: str, field: str) -> np.ndarray:
    if field == "title":
        return bm25.phrase_rows([term], title_only=True)
    return bm25.postings(term)[0]


def _expand(bm25: Bm25Index, node: Node) -> list[str]:
    """The index terms a ``*`` or ``~`` word stands for (those some record holds), at most ``MAX_EXPANSION``."""
    from lore.analysis import one_edit_away, stem, terms

    if isinstance(node, Prefix):
        # Terms are stemmed: "retry*" must also find "retri" (retry, retries), which does not start with it.
        found = [*bm25.terms_starting(node.prefix, MAX_EXPANSION + 1), *terms(node.prefix)[:1]]
        shown = f"{node.prefix}*"
    else:
        assert isinstance(node, Fuzzy)
        targets = {node.word, *terms(node.word), stem(node.word)}
        near = set(targets)
        for _ in range(node.edits):
            near |= {variant for word in near for variant in one_edit_away(word)}
        found = [term for term in bm25.known_terms(sorted(near)) if term.startswith(node.word[: node.prefix])]
        shown = f"{node.word}~{node.edits}"
    found = [term for term in dict.fromkeys(found) if bm25.document_frequency(term)]
    if len(found) > MAX_EXPANSION:
        raise UsageError(f"{shown} stands for more than {MAX_EXPANSION} words in this store",
                         hint="make it narrower: a longer prefix, or fewer edits")  # fmt: skip
    return found


def _value_matches(reader: IndexReader, node: Value) -> list[bool]:
    table = reader.table
    if node.field == "type":
        return [kind == node.value for kind in table.kinds]
    if node.field == "project":
        if node.prefix:
            return [bool(p) and str(p).startswith(node.value) for p in table.projects]
        return [p == node.value for p in table.projects]
    wanted = node.value
    out = []
    for row in range(len(table)):
        tags = [t.lower().lstrip("#") for t in table.tags_of(row)]
        out.append(any(t.startswith(wanted) for t in tags) if node.prefix else wanted in tags)
    return out


def describe(node: Node) -> str:
    """The tree as the query language writes it (for messages and ``--explain``)."""
    if isinstance(node, Words):
        text = f'"{node.text}"' if node.phrase else node.text
        return f"title:{text}" if node.field == "title" else text
    if isinstance(node, Prefix):
        return ("title:" if node.field == "title" else "") + f"{node.prefix}*"
    if isinstance(node, Fuzzy):
        return ("title:" if node.field == "title" else "") + f"{node.word}~{node.edits}"
    if isinstance(node, Value):
        return f"{node.field}:{node.value}{'*' if node.prefix else ''}"
    if isinstance(node, Not):
        return f"NOT {describe(node.clause)}"
    if isinstance(node, AnyOf):
        return "(" + " OR ".join(describe(c) for c in node.clauses) + ")"
    joiner = " " if node.juxtaposed else " AND "
    return "(" + joiner.join(describe(c) for c in node.clauses) + ")"


def conditions(tree: Node, *, top: bool = True) -> Sequence[str]:
    """The clauses of ``tree`` that narrow the records (not the words that only rank), as written."""
    if isinstance(tree, Words) and top and tree.field == "text":
        return []
    if isinstance(tree, AllOf) and tree.juxtaposed and top:
        return [c for clause in tree.clauses for c in conditions(clause, top=True)]
    return [describe(tree)]
