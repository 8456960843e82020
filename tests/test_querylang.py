"""`lore search`'s query language: Whoosh's parser, evaluated against lore's own index (lore.rank.querylang).

Parser cases need no index; the rest runs on real files: a small store written as JSONL,
indexed by lore, searched through the search service, the CLI (in process and as a real
process), ``Lore.search`` and the MCP server's search tool.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from lore.errors import UsageError
from lore.rank import querylang
from lore.rank.querylang import AllOf, AnyOf, Fuzzy, Not, Prefix, Value, Words, parse, uses_syntax
from tests.conftest import PROJECT_ROOT, resolve_locations

DAY = 86400
NOW = time.time()


def ago(days: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW - days * DAY))


# -- parsing (no index) -------------------------------------------------------------------
@pytest.mark.parametrize("query", [
    "retry type:decision", "tag:postgres pooling", "project:billing-api charges", "title:retry",
    "retry -celery", 'jitter -"exponential backoff"', "NOT celery retry", "postgres OR mysql", "a AND b",
    "retr* backoff", "bakoff~ jitter", "bakoff~2", "(NOT celery) retry", "retry OR",
])  # fmt: skip
def test_queries_in_the_language_are_recognised(query: str) -> None:
    assert uses_syntax(query)


@pytest.mark.parametrize("query", [
    "how do we retry failed stripe charges", '"exponential backoff" retry',  # phrases alone: as always
    "run the tests with -x", "compile with -O0", "git push --force", "e-mail bounces", "the -exclude-standard flag",
    "does NOT show up in stderr", "a NOT NULL column", "a fixed-size char* array", "*retry* policy",
    "~/.bashrc", "error: timeout", "Title: retry", "(see above) retry", "10 - 3",
])  # fmt: skip
def test_natural_language_is_not_taken_for_syntax(query: str) -> None:
    assert not uses_syntax(query)


def test_no_question_or_prompt_of_the_benchmark_sets_is_taken_for_syntax() -> None:
    # 1,626 engineers' questions and agent prompts (flags, globs, SQL, emphasis): each must rank
    # exactly as it always did, so none may be read in the language.
    questions = []
    for path in sorted((PROJECT_ROOT / "benchmarks" / "data").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if text := row.get("question") or row.get("prompt"):
                questions.append(text)
    assert len(questions) > 1500
    assert [q for q in questions if uses_syntax(q)] == []


def test_parse_builds_lores_tree_and_the_text_that_ranks() -> None:
    parsed = parse('retry type:decisions tag:#Postgres project:billing-api title:jitter -celery "full jitter"')
    assert parsed.tree == AllOf((
        Words("text", "retry"), Value("type", "decision"), Value("tag", "postgres"), Value("project", "billing-api"),
        Words("title", "jitter"), Not(Words("text", "celery")), Words("text", "full jitter", phrase=True),
    ), juxtaposed=True)  # fmt: skip
    # The plain words and the side-by-side phrase rank (the phrase keeps its quotes for the
    # pipeline's own phrase matching); title words rank too; negated words never do.
    assert parsed.text == 'retry jitter "full jitter"'


def test_operators_prefix_fuzzy_and_groups() -> None:
    assert parse("postgres OR mysql pooling").tree == AllOf(
        (AnyOf((Words("text", "postgres"), Words("text", "mysql"))), Words("text", "pooling")), juxtaposed=True)
    assert parse("retry AND backoff").tree == AllOf((AllOf((Words("text", "retry"), Words("text", "backoff"))),),
                                                    juxtaposed=True)  # fmt: skip
    assert parse("NOT celery retry").tree == AllOf((Not(Words("text", "celery")), Words("text", "retry")),
                                                   juxtaposed=True)  # fmt: skip
    assert parse("Retr* x").tree.clauses[0] == Prefix("text", "retr")  # type: ignore[union-attr]
    assert parse("bakoff~ x").tree.clauses[0] == Fuzzy("text", "bakoff", 1)  # type: ignore[union-attr]
    assert parse("title:bakoff~2 x").tree.clauses[0] == Fuzzy("title", "bakoff", 2)  # type: ignore[union-attr]
    assert parse("bakoff~2/3 x").tree.clauses[0] == Fuzzy("text", "bakoff", 2, 3)  # type: ignore[union-attr]
    assert parse("tag:post* x").tree.clauses[0] == Value("tag", "post", prefix=True)  # type: ignore[union-attr]
    # In a query read in the language, NOT anywhere is the operator, and a minus before a flag is text.
    parsed = parse("retry NOT celery -x type:pattern")
    assert Not(Words("text", "celery")) in parsed.tree.clauses  # type: ignore[union-attr]
    assert parsed.text == "retry -x"


@pytest.mark.parametrize(("query", "message"), [
    ('retry "unclosed -celery', "unbalanced double quote"),
    ("(retry OR backoff -celery", "unbalanced parenthesis"),
    ("retry OR", "OR needs a clause on each side"),
    ("AND retry", "AND needs a clause on each side"),
    ("retry -celery NOT", "NOT needs a clause after it"),
    ("retry type:banana", "unknown record type 'banana'"),
    ("test_*.py -celery", "only a trailing * is supported"),
    ("retry~3", "at most 2 edits"),
    ("type:dec* retry", "a record type is named whole"),
    ("tag:postgres~ retry", "applies to words"),
    ("type:decision", "has no words to rank by"),
    ("-celery", "has no words to rank by"),
    ("title: retry -celery", "title: needs a value"),
])  # fmt: skip
def test_a_malformed_query_is_a_clear_usage_error(query: str, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse(query)
    assert message in caught.value.message
    assert caught.value.exit_code == 2


# -- evaluation on a real store -------------------------------------------------------------
def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))


@pytest.fixture
def store(initialised: Path) -> Path:
    write_jsonl(initialised / "journal/data/decisions.jsonl", [
        {"id": "dec-0000000a", "timestamp": ago(3), "decision": "Retry failed Stripe charges with exponential backoff",
         "rationale": "Stripe rate limits bursts; full jitter spreads the retries", "project": "acme-api",
         "tags": ["payments", "reliability"]},
        {"id": "dec-0000000b", "timestamp": ago(40), "decision": "Store money as integer minor units",
         "rationale": "Floats lose cents when Stripe invoices are summed", "project": "billing-api", "tags": ["payments"]},
        {"id": "dec-0000000c", "timestamp": ago(10), "decision": "Move background jobs from Celery to Postgres",
         "rationale": "Celery retries duplicated Stripe webhooks", "project": "acme-api", "tags": ["queue", "postgres"]},
        {"id": "dec-0000000d", "timestamp": ago(5), "decision": "Use SKIP LOCKED for the job queue",
         "rationale": "Advisory locks leaked when workers crashed", "project": "acme-api", "tags": ["queue", "Postgres"]},
    ])  # fmt: skip
    write_jsonl(initialised / "failures/data/failures.jsonl", [
        {"id": "fail-0000000a", "timestamp": ago(1), "error_type": "Timeout",
         "error_message": "Stripe webhook handler took 31s", "tool": "pytest", "project": "acme-api"},
    ])  # fmt: skip
    write_jsonl(initialised / "inbox/data/observations.jsonl", [
        {"id": "obs-0000000a", "timestamp": ago(2), "content": "Stripe webhooks arrive out of order",
         "tags": ["payments"], "project": "billing-api"},
    ])  # fmt: skip
    return initialised


def run(data_dir: Path, query: str, **options: Any) -> Any:
    from lore.search import SearchSession, search, search_options

    opts = search_options(limit=20, disable=["threshold"], **options)._replace(now=NOW)
    return search(SearchSession(resolve_locations(data_dir)), query, opts, log_access=False, use_llm=False)


def ranked(response: Any) -> list[tuple[str, float]]:
    return [(hit.id, round(hit.score, 9)) for hit in response.hits]


def ids(response: Any) -> set[str]:
    return {hit.id for hit in response.hits}


def texts(response: Any) -> dict[str, str]:
    return {hit.id: f"{hit.title} {hit.content}".lower() for hit in response.hits}


def test_a_field_ranks_exactly_as_the_flag_it_stands_for(store: Path) -> None:
    query = "stripe retries and webhooks"
    assert ranked(run(store, f"{query} type:decision", syntax=True)) == ranked(run(store, query, kinds=["decision"]))
    assert ranked(run(store, f"tag:payments {query}", syntax=True)) == ranked(run(store, query, tags=["payments"]))
    assert ranked(run(store, f"{query} project:billing-api", syntax=True)) == ranked(run(store, query, project="billing-api"))
    # Fields and flags combine: both narrow.
    both = run(store, f"{query} tag:queue", syntax=True, kinds=["decision"], project="acme-api")
    assert ids(both) == {"dec-0000000c", "dec-0000000d"} & ids(run(store, query, tags=["queue"]))
    # Tags match whatever their case (as --tag does).
    assert ids(run(store, "jobs queue tag:postgres", syntax=True)) == {"dec-0000000c", "dec-0000000d"}


def test_a_plain_query_ranks_the_same_with_the_language_on_or_off(store: Path) -> None:
    for query in ("stripe retries and webhooks", '"exponential backoff" stripe', "how do we run -x tests on celery"):
        assert not uses_syntax(query)
        on, off = run(store, query, syntax=True, phrases="filter"), run(store, query, phrases="filter")
        assert ranked(on) == ranked(off) and on.warnings == off.warnings and on.query == off.query
    # And a query in the language is only read so where the surface asks for it.
    assert ids(run(store, "stripe -webhooks")) != ids(run(store, "stripe -webhooks", syntax=True))


def test_negation_excludes_words_and_phrases(store: Path) -> None:
    everything = run(store, "stripe", syntax=True)
    assert {"dec-0000000c", "fail-0000000a", "obs-0000000a"} <= ids(everything)
    without = run(store, "stripe -webhooks", syntax=True)  # analysed as BM25 does: "webhook" too
    assert ids(without) == ids(everything) - {"dec-0000000c", "fail-0000000a", "obs-0000000a"}
    assert ids(run(store, "NOT webhook stripe", syntax=True)) == ids(without)
    phrase = run(store, 'stripe -"exponential backoff"', syntax=True)
    assert "dec-0000000a" not in ids(phrase) and "dec-0000000b" in ids(phrase)
    assert ids(run(store, "stripe -(celery OR order)", syntax=True)) == ids(everything) - {"dec-0000000c", "obs-0000000a"}


def test_or_and_and_are_conditions(store: Path) -> None:
    either = run(store, "celery OR locks", syntax=True)
    assert ids(either) == {"dec-0000000c", "dec-0000000d"}
    assert ids(run(store, "stripe AND celery", syntax=True)) == {"dec-0000000c"}
    # Side by side, plain words only rank: the records holding either word, and more.
    assert len(ids(run(store, "stripe celery", syntax=True))) > 1


def test_title_prefix_and_fuzzy_words(store: Path) -> None:
    title = run(store, "title:stripe charges", syntax=True)
    # Two decisions hold "Stripe" in their rationale only; a failure's title is its message, an observation's its text.
    assert ids(title) == {"dec-0000000a", "fail-0000000a", "obs-0000000a"}
    assert ids(run(store, 'title:"minor units" money', syntax=True)) == {"dec-0000000b"}
    prefix = run(store, "webh* stripe", syntax=True)  # webhook, webhooks
    assert ids(prefix) == {"dec-0000000c", "fail-0000000a", "obs-0000000a"}
    # Its terms rank too: a query of the prefix alone finds them.
    assert ids(run(store, "webh*", syntax=True)) == ids(prefix)
    assert ids(run(store, "retry*", syntax=True)) == {"dec-0000000a", "dec-0000000c"}  # "retri": retry, retries
    fuzzy = run(store, "celry~ jobs", syntax=True)
    assert ids(fuzzy) == {"dec-0000000c"}
    assert ids(run(store, "celry jobs -celry~", syntax=True)) & {"dec-0000000c"} == set()
    assert ids(run(store, "jobs title:celry~", syntax=True)) == {"dec-0000000c"}
    # word~N/P: the first P letters as written ("felery": its stem "feleri" is one edit from "celeri", Celery's).
    assert ids(run(store, "felery~ jobs", syntax=True)) == {"dec-0000000c"}
    assert ids(run(store, "felery~/1 jobs", syntax=True)) == set()


def test_a_prefix_standing_for_too_many_terms_is_refused(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert querylang.MAX_EXPANSION == 200  # this store is too small to reach it: lowered for the test
    monkeypatch.setattr(querylang, "MAX_EXPANSION", 1)
    with pytest.raises(UsageError, match=r"st\* stands for more than 1 words"):
        run(store, "st* charges", syntax=True)  # stripe, store


def test_a_query_nothing_matches_says_so(store: Path) -> None:
    response = run(store, "stripe type:lesson", syntax=True)
    assert response.hits == ()
    assert "no record matches type:lesson" in response.warnings


def test_conditions_read_a_delta_segment(store: Path, cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("index").exit_code == 0
    assert cli("remember", "Pin the Stripe SDK version", "-r", "A minor release changed webhook retries",
               "-t", "stripe-sdk", "--force").exit_code == 0  # fmt: skip
    from lore.index.manager import IndexManager

    report = IndexManager(resolve_locations(store)).build()
    assert report.mode != "full"  # the new record sits in a delta segment beside the base
    found = run(store, "stripe title:pin tag:stripe* -celery", syntax=True)
    assert [hit.title for hit in found.hits] == ["Pin the Stripe SDK version"]
    assert "dec-0000000c" not in ids(run(store, "webhook* -celery", syntax=True))


def test_the_response_keeps_the_query_as_written(store: Path) -> None:
    response = run(store, "stripe   -celery type:decision", syntax=True)
    assert response.query == "stripe -celery type:decision"


# -- surfaces ----------------------------------------------------------------------------
def test_cli_search_reads_the_language_and_reports_a_malformed_query(store: Path, cli) -> None:  # type: ignore[no-untyped-def]
    result = cli("search", "stripe -webhooks type:decision", "--json")
    assert result.exit_code == 0, result.output
    payload = orjson.loads(result.stdout)
    found = [r["id"] for r in payload["results"]]
    assert found[:2] == ["dec-0000000a", "dec-0000000b"] and "dec-0000000c" not in found  # c: Stripe webhooks
    assert {r["type"] for r in payload["results"]} == {"decision"}
    assert payload["query"] == "stripe -webhooks type:decision"
    # The flags still work beside the fields.
    flagged = orjson.loads(cli("search", "stripe -webhooks", "--type", "decision", "--project", "acme-api", "--json").stdout)
    assert [r["id"] for r in flagged["results"]] == ["dec-0000000a"]
    bad = cli("search", "stripe OR")
    assert bad.exit_code == 2
    assert "Error: OR needs a clause on each side" in bad.stderr
    unknown = cli("search", "stripe type:banana")
    assert unknown.exit_code == 2 and "unknown record type 'banana'" in unknown.stderr


def test_the_warm_helper_answers_it_and_reports_a_malformed_query(store: Path, cli) -> None:  # type: ignore[no-untyped-def]
    import os

    from lore.agent.remote import answer
    from lore.cli.app import run_parsed
    from lore.search import SearchSession

    assert cli("index").exit_code == 0
    locations = resolve_locations(store)
    session = SearchSession(locations)
    session.open()

    def asked(*argv: str) -> dict:
        request = {"argv": ["--data-dir", str(store), *argv], "environ": dict(os.environ), "cwd": str(store)}
        return answer(session, request, str(locations.data_dir.resolve()), run_parsed)

    ok = asked("search", "stripe -webhooks type:decision", "--json")
    assert ok["ok"] and ok["code"] == 0
    found = [r["id"] for r in orjson.loads(ok["output"][0][1])["results"]]
    assert found[:2] == ["dec-0000000a", "dec-0000000b"] and "dec-0000000c" not in found
    # The CLI's own command says what is wrong, as it does without a helper.
    bad = asked("search", "stripe OR")
    assert bad["code"] == 2 and bad["output"][0][0] == 2 and bad["output"][0][1].startswith("Error: OR needs a clause on each side\n")


def test_lore_search_and_the_mcp_search_tool_read_it_too(store: Path) -> None:
    import anyio

    from lore import Lore
    from lore.agent.mcp import LoreMCP, build_server

    lore = Lore(data_dir=store)
    found = [hit.id for hit in lore.search("stripe -webhooks type:decision").hits]
    assert found[:2] == ["dec-0000000a", "dec-0000000b"] and "dec-0000000c" not in found
    assert "dec-0000000c" in {hit.id for hit in lore.search("stripe -webhooks", syntax=False, limit=20).hits}
    with pytest.raises(UsageError, match="unbalanced double quote"):
        lore.search('stripe "charges -celery')
    lore.close()

    server = build_server(LoreMCP(resolve_locations(store)))
    got: dict[str, Any] = {}

    async def main() -> None:
        got["ok"] = await server.call_tool("search", {"query": "stripe -webhooks type:decision"})
        got["bad"] = await server.call_tool("search", {"query": "stripe OR"})

    anyio.run(main)
    ok = got["ok"].model_dump(mode="json", by_alias=True, exclude_none=True)
    found = [hit["id"] for hit in ok["structuredContent"]["results"]]
    assert found[:2] == ["dec-0000000a", "dec-0000000b"] and "dec-0000000c" not in found
    bad = got["bad"].model_dump(mode="json", by_alias=True, exclude_none=True)
    assert bad.get("isError") is True and "OR needs a clause on each side" in bad["content"][0]["text"]


def test_the_hook_and_context_blocks_never_read_it() -> None:
    from lore.rank.cold import hook_options
    from lore.search import search_options

    # The prompt hook (both paths) and every context block search with these: quotes and
    # minus signs in a prompt are words there, as they always were.
    assert search_options().syntax is False
    assert hook_options("p", NOW).syntax is False


IMPORTS = """
import sys
from lore.__main__ import main
try:
    main(["search", QUERY, "--json"])
except SystemExit:
    pass
print("WHOOSH", "whoosh" in sys.modules, "whoosh.qparser" in sys.modules)
"""


def test_whoosh_is_imported_only_for_a_query_in_the_language_and_builds_no_index(store: Path, cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("index").exit_code == 0
    env = {**os.environ, "LORE_DATA_DIR": str(store)}

    def whoosh_after(query: str) -> str:
        code = IMPORTS.replace("QUERY", repr(query))
        out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True, env=env,
                             cwd=PROJECT_ROOT)  # fmt: skip
        assert '"results"' in out.stdout, out.stderr
        return out.stdout.strip().splitlines()[-1]

    assert whoosh_after('stripe "exponential backoff" retries') == "WHOOSH False False"
    assert whoosh_after("stripe -celery type:decision") == "WHOOSH True True"
    # The parser only: no Whoosh index is written anywhere (its table of contents is _MAIN_N.toc).
    index_dir = resolve_locations(store).index_dir
    assert list(index_dir.rglob("*.toc")) == [] and list(index_dir.rglob("*.seg")) == []
