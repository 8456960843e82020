"""The public library API, used as a program would: only `from lore import ...`.

Real files in the test's own data dir (conftest isolates every test), the real
bundled model for search, real processes for LORE_LLM_CMD.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import string
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from lore import (
    DuplicateError,
    Lore,
    LoreError,
    LoreWarning,
    NotFoundError,
    Record,
    SearchHit,
    SearchResponse,
    UsageError,
)

HEAVY = ("numpy", "whoosh", "networkx", "tokenizers", "typer", "rich", "yaml", "model2vec")


def fresh() -> Lore:
    """A Lore on the test's data dir (LORE_DATA_DIR, named, so it is created explicitly, as `lore init`)."""
    memory = Lore(project="acme")
    memory.init()
    return memory


def test_import_and_construct_import_nothing_heavy_and_read_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    code = (
        "import sys, lore\n"
        f"m = lore.Lore(data_dir={str(missing)!r}, index_dir={str(tmp_path / 'idx')!r}, project='p')\n"
        "m2 = lore.Lore()\n"
        f"print(','.join(sorted(n for n in {HEAVY!r} if n in sys.modules)))\n"
        "print(','.join(sorted(n for n in sys.modules if n.startswith('lore.'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    heavy, lore_modules = out.split("\n")[:2]
    assert heavy == ""
    # Only the API module, the light error family, the settings and the version load before the first call.
    assert set(lore_modules.split(",")) <= {"lore.api", "lore.errors", "lore.settings", "lore.version"}
    assert not missing.exists() and not (tmp_path / "idx").exists()


def test_public_names_are_exported_and_nothing_else() -> None:
    import lore

    assert set(lore.__all__) == set(dir(lore))
    assert "Lore" in lore.__all__ and "capture" not in lore.__all__
    with pytest.raises(AttributeError):
        lore.NoSuchThing  # noqa: B018


def test_add_every_kind_get_and_delete(data_dir: Path) -> None:
    memory = fresh()
    made = {
        "decision": memory.add("decision", "Use Postgres for sessions", rationale="Transactions with orders",
                               tags=["db"], importance=4),
        "pattern": memory.add("pattern", "Retry with jitter", solution="Sleep a random share of the backoff"),
        "anti_pattern": memory.add("anti-pattern", "Catch-all except", fix="Catch what you handle", severity="high"),
        "handoff": memory.add("handoff", "Moved sessions to Postgres", next_steps=["drop the Redis cluster"]),
        "failure": memory.add("failure", text="connection refused", error_type="OperationalError", tool="psql"),
        "observation": memory.ingest("observation", "Session latency spiked when Redis evicted keys"),
        "lesson": memory.add("lesson", situation="deploy", error_pattern="relation does not exist",
                             oversight="migrations ran after start", fix="migrate first",
                             rule="Run migrations before starting the app", severity="high", scope="deploy"),
    }
    for kind, record in made.items():
        assert isinstance(record, Record) and record.kind == kind
        fetched = memory.get(record.id)
        assert fetched is not None and fetched.id == record.id and fetched.project == "acme"
    assert memory.get(made["decision"].id[:8]).id == made["decision"].id  # type: ignore[union-attr]
    assert made["decision"].raw["rationale"] == "Transactions with orders" and made["decision"].tags == ["db"]
    assert memory.get("dec-00000000") is None
    assert memory.stats()["by_type"] == dict.fromkeys(
        ("decision", "pattern", "anti_pattern", "lesson", "handoff", "failure", "observation"), 1
    )
    # The same files the CLI writes.
    decisions = (data_dir / "journal/data/decisions.jsonl").read_text()
    assert made["decision"].id in decisions
    deleted = memory.delete(made["observation"].id)
    assert deleted.id == made["observation"].id and memory.get(deleted.id) is None
    with pytest.raises(NotFoundError):
        memory.delete(made["observation"].id)


def test_write_errors_and_checks(data_dir: Path) -> None:
    memory = fresh()
    with pytest.raises(UsageError, match="unknown record type"):
        memory.add("wish", "a pony")
    with pytest.raises(UsageError, match="unknown field 'rationle' for a decision") as caught:
        memory.add("decision", "Use Redis", rationle="typo")
    assert caught.value.hint is not None and "rationale" in caught.value.hint
    with pytest.raises(UsageError, match="a failure needs error_type"):
        memory.add("failure", "boom")
    with pytest.raises(UsageError, match="decision is empty"):
        memory.add("decision", "   ")
    with pytest.raises(UsageError, match="importance must be 1-5"):
        memory.add("decision", "Use Redis", importance=9)
    with pytest.raises(UsageError, match="a lesson needs error_pattern, oversight, fix, rule, severity, scope"):
        memory.add("lesson", situation="deploy")
    with pytest.raises(UsageError, match="unknown field 'redact' for a lesson"):
        memory.add("lesson", **LESSON, redact=False)
    assert memory.add("observation", "tagged once", tags="db").tags == ["db"]  # a lone tag, not ["d", "b"]
    with pytest.raises(UsageError, match="force and merge"):
        memory.add("decision", "Use Redis", force=True, merge=True)

    first = memory.add("decision", "Use Redis for the session cache")
    with pytest.raises(DuplicateError) as duplicate:
        memory.add("decision", "Use Redis for the session cache")
    assert duplicate.value.existing_id == first.id and isinstance(duplicate.value, LoreError)
    before = memory.stats()["records"]
    with pytest.warns(LoreWarning, match=f"merged into {first.id}"):
        merged = memory.add("decision", "Use Redis for the session cache", merge=True)
    assert merged.id == first.id and memory.stats()["records"] == before
    with pytest.warns(LoreWarning, match=f"written despite a likely duplicate of {first.id}"):
        forced = memory.add("decision", "Use Redis for the session cache", force=True)
    assert forced.id != first.id

    # Secrets are scrubbed as on the command line, unless redact=False (which warns).
    rng = random.Random(7)
    token = "ghp_" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(36))
    note = memory.add("observation", f"Deploy token {token} belongs to jane@example.com")
    assert token not in note.raw["content"] and "[REDACTED:github_token]" in note.raw["content"]
    with pytest.warns(LoreWarning, match="stored without redaction"):
        kept = memory.add("observation", "mail jane@example.com", redact=False)
    assert kept.raw["content"] == "mail jane@example.com"

    # A contradiction is written, with a warning naming both records.
    enable = memory.add("decision", "Enable strict mode in tsconfig for all packages")
    with pytest.warns(LoreWarning, match="contradicts") as caught_warnings:
        disable = memory.add("decision", "Disable strict mode in tsconfig for all packages")
    message = str(caught_warnings[0].message)
    assert enable.id in message and disable.id in message and "{new_id}" not in message


def test_a_named_data_dir_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    memory = Lore(data_dir=tmp_path / "typo")
    with pytest.raises(NotFoundError, match="does not exist"):
        memory.add("observation", "x")
    with pytest.raises(NotFoundError):
        memory.search("anything")
    with pytest.raises(NotFoundError):
        memory.stats()
    assert memory.get("dec-12345678") is None


def test_lifecycle_retract_restore_supersede_link(data_dir: Path) -> None:
    memory = fresh()
    old = memory.add("decision", "Keep sessions in Redis")
    new = memory.add("decision", "Keep sessions in Postgres with the orders")
    note = memory.add("observation", "Redis evicted session keys under memory pressure")

    superseded = memory.supersede(old.id, new.id)
    assert superseded.status == "superseded" and superseded.raw["superseded_by"] == new.id
    edge = memory.link(note.id, new.id, "affects")
    assert (edge.source, edge.target, edge.relation) == (note.id, new.id, "affects")
    assert memory.stats()["edges"] == 2  # supersedes + affects
    with pytest.raises(UsageError, match="unknown relation"):
        memory.link(note.id, new.id, "likes")
    with pytest.raises(NotFoundError):
        memory.link(note.id, "dec-00000000")
    with pytest.raises(UsageError, match="only an active record can supersede"):
        memory.supersede(new.id, old.id)

    retracted = memory.retract(note.id, "measured wrong")
    assert retracted.status == "retracted" and retracted.raw["retracted_reason"] == "measured wrong"
    assert memory.get(note.id).status == "retracted"  # type: ignore[union-attr]
    assert memory.restore(note.id).status == "active"
    with pytest.raises(UsageError, match="only a retracted record"):
        memory.restore(note.id)
    audit = [json.loads(line) for line in (data_dir / "audit/log.jsonl").read_text().splitlines()]
    assert [e["op"] for e in audit if e["id"] == note.id] == ["retain", "link", "retract", "restore"]
    assert {e["actor"] for e in audit} == {"test"}  # LORE_ACTOR, as the CLI


def test_search_and_context(data_dir: Path) -> None:
    memory = fresh()
    decision = memory.add("decision", "Use Postgres for sessions", rationale="We need transactions with the orders table")
    memory.add("pattern", "Retry with jitter", solution="Sleep a random share of the exponential backoff")
    gone = memory.add("observation", "Sessions were stored in memcached in 2019")
    memory.retract(gone.id, "obsolete")

    response = memory.search("where do we keep user sessions?", limit=3)
    assert isinstance(response, SearchResponse) and response.query == "where do we keep user sessions?"
    top = response.hits[0]
    assert isinstance(top, SearchHit)
    assert (top.id, top.kind, top.title, top.project, top.status) == (
        decision.id, "decision", "Use Postgres for sessions", "acme", "active")  # fmt: skip
    assert "transactions with the orders table" in top.content and 0 < top.score <= 1
    assert top.timestamp is not None and top.timestamp.endswith("Z")
    assert gone.id not in [h.id for h in response.hits]
    assert gone.id in [h.id for h in memory.search("sessions memcached", include_all=True).hits]
    assert [h.kind for h in memory.search("backoff", kinds=["pattern"]).hits] == ["pattern"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        top.score = 2.0  # type: ignore[misc]
    with pytest.raises(UsageError, match="unknown search option 'limt'"):
        memory.search("sessions", limt=3)
    with pytest.raises(UsageError, match="the query is empty"):
        memory.search("  ")

    block = memory.context("sessions database", budget_tokens=60, max_items=2)
    assert block.text.startswith("## Relevant Memories") and decision.id in block.text
    assert len(block.text) <= 60 * 4 and 1 <= len(block.items) <= 2
    with pytest.raises(UsageError):
        memory.context("sessions", budget_tokens=0)
    memory.close()
    assert memory.search("postgres sessions").hits[0].id == decision.id  # reopens after close


def test_the_search_response_is_the_pipelines_own(data_dir: Path) -> None:
    """One response type (issue #26): ``Lore.search`` returns what `lore search --json` renders."""
    import lore.api
    from lore.rank.pipeline import SearchResponse as PipelineResponse
    from lore.rank.stages import Candidate
    from lore.render.results import response_json

    assert SearchResponse is PipelineResponse is lore.api.SearchResponse
    assert SearchHit is Candidate is lore.api.SearchHit
    memory = fresh()
    decision = memory.add("decision", "Use Postgres for sessions", rationale="We need transactions with the orders table")
    response = memory.search("postgres sessions")
    data = response_json(response)
    assert [item["id"] for item in data["results"]] == [hit.id for hit in response.hits] == [decision.id]
    top = response.hits[0]
    assert data["results"][0]["timestamp"] == top.timestamp and data["results"][0]["score"] == round(top.score, 6)
    assert data["evidence_gap"] is response.evidence_gap is response.gap.gap is False
    assert data["warnings"] == list(response.warnings)
    with pytest.raises(AttributeError):
        response.hits = ()  # type: ignore[misc]
    memory.close()


LESSON = dict(situation="deploying the API", error_pattern="relation \"users\" does not exist",
              oversight="the app started before migrations ran", fix="run migrations first",
              rule="Run database migrations before starting the app", severity="high", scope="deploy")  # fmt: skip


def test_distill_lesson_is_idempotent_and_query_lessons(data_dir: Path) -> None:
    memory = fresh()
    first = memory.distill_lesson(**LESSON)  # type: ignore[arg-type]
    expected_id = hashlib.sha256((LESSON["error_pattern"] + LESSON["scope"]).encode()).hexdigest()[:16]
    assert first.kind == "lesson" and first.raw["lesson_pattern_id"] == expected_id and first.confidence == 0.7
    again = memory.distill_lesson(**LESSON)  # type: ignore[arg-type]
    assert again.id == first.id and memory.stats()["by_type"] == {"lesson": 1}
    weaker = memory.distill_lesson(**LESSON, confidence=0.5)  # type: ignore[arg-type]
    assert weaker.id == first.id and memory.stats()["records"] == 1
    stronger = memory.distill_lesson(**{**LESSON, "fix": "migrate in an init container"}, confidence=0.9)  # type: ignore[arg-type]
    assert stronger.id != first.id and stronger.confidence == 0.9
    assert memory.get(first.id).status == "superseded"  # type: ignore[union-attr]
    memory.distill_lesson(situation="writing tests", error_pattern="flaky sleep", oversight="slept instead of polling",
                          fix="poll for the condition", rule="Poll, never sleep, in tests", severity="medium",
                          scope="tests", inverse="Do not sleep for a fixed time")  # fmt: skip
    found = memory.query_lessons("database migrations deploy")
    assert [r.id for r in found] == [stronger.id]
    assert [r.title for r in memory.query_lessons("tests polling sleep", limit=1)] == ["Poll, never sleep, in tests"]
    with pytest.raises(UsageError, match="severity must be one of"):
        memory.distill_lesson(**{**LESSON, "severity": "urgent"})  # type: ignore[arg-type]


def _graph_edges(data_dir: Path) -> list[tuple[str, str, str]]:
    graph = json.loads((data_dir / "graph/data/graph.json").read_text())
    names = {key: node["name"] for key, node in graph["nodes"].items()}
    return [(names[e["from"]], names[e["to"]], e["relation"]) for e in graph["edges"]]


def _memories(memory: Lore) -> dict[str, Record]:
    made = {
        "decision": memory.add("decision", "Store sessions in Postgres", rationale="Transactions with orders"),
        "handoff": memory.add("handoff", "Moved sessions from Redis to Postgres", next_steps=["drop Redis"]),
        "observation": memory.add("observation", "Postgres session table needs an index on expires_at"),
        "other": memory.add("observation", "The release calendar moved to Thursdays"),
    }
    memory.link(made["handoff"].id, made["decision"].id, "implements")
    return made


def test_reflect_extractive_is_stored_linked_and_searchable(data_dir: Path) -> None:
    memory = fresh()
    with pytest.raises(UsageError, match="nothing to reflect on"):
        memory.reflect()
    made = _memories(memory)
    reflection = memory.reflect(lookback=10)
    assert reflection.kind == "observation" and reflection.raw["type"] == "reflection"
    assert reflection.tags == ["reflection"] and reflection.raw["method"] == "extractive"
    sources = reflection.raw["derived_from"]
    # The three records about sessions join each other; the release calendar joins nothing.
    assert set(sources[:3]) == {made["decision"].id, made["handoff"].id, made["observation"].id}
    text = reflection.raw["content"]
    assert text.startswith("Reflection on recent memories (4 record(s) considered). Central: ")
    assert f"{made['handoff'].id} -implements-> {made['decision'].id}" in text and "postgres" in text
    edges = _graph_edges(data_dir)
    assert {(reflection.id, s, "derived_from") for s in sources} <= set(edges)

    on_topic = memory.reflect("postgres sessions", lookback=3)
    assert on_topic.raw["topic"] == "postgres sessions" and "Reflection on postgres sessions" in on_topic.raw["content"]
    assert made["other"].id not in on_topic.raw["derived_from"] and reflection.id not in on_topic.raw["derived_from"]
    hits = memory.search("reflection postgres sessions", tags=["reflection"]).hits
    assert {h.id for h in hits} == {reflection.id, on_topic.id}
    with pytest.raises(UsageError, match="lookback"):
        memory.reflect(lookback=0)
    # A topic the memory holds nothing reliable about (an evidence gap) gives no reflection.
    assert memory.search("kubernetes helm chart upgrade").evidence_gap
    with pytest.raises(UsageError, match="no reliable memory about 'kubernetes helm chart upgrade' to reflect on"):
        memory.reflect("kubernetes helm chart upgrade")


def _script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_reflect_through_lore_llm_cmd(data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = fresh()
    made = _memories(memory)
    prompt = tmp_path / "prompt.txt"
    monkeypatch.setenv("LORE_LLM_CMD", _script(tmp_path / "llm.sh", f"cat > {prompt}\necho 'Sessions live in Postgres now.'\n"))
    reflection = Lore(project="acme").reflect(lookback=10)  # settings are read when a Lore is constructed
    assert reflection.raw["method"] == "llm" and reflection.raw["content"] == "Sessions live in Postgres now."
    asked = prompt.read_text()
    assert made["decision"].id in asked and f"{made['handoff'].id} -implements-> {made['decision'].id}" in asked
    assert {(reflection.id, s, "derived_from") for s in reflection.raw["derived_from"]} <= set(_graph_edges(data_dir))

    monkeypatch.setenv("LORE_LLM_CMD", _script(tmp_path / "broken.sh", "exit 3\n"))
    with pytest.warns(LoreWarning, match="LORE_LLM_CMD failed"):
        fallback = Lore(project="acme").reflect(lookback=10)
    assert fallback.raw["method"] == "extractive" and fallback.raw["content"].startswith("Reflection on recent memories")


def test_record_outcome_and_prune_are_reversible(data_dir: Path) -> None:
    memory = fresh()
    shaky = memory.add("pattern", "Cache the config in a global", solution="Read it once at import")
    solid = memory.add("pattern", "Pin dependencies in CI", solution="Use a lock file", confidence=0.6)
    untested = memory.add("pattern", "Tabs over spaces", solution="Always", confidence=0.2)
    lesson = memory.distill_lesson(**LESSON)  # type: ignore[arg-type]

    assert memory.record_outcome(solid.id, True).confidence == pytest.approx((1 + 4 * 0.6) / 5)
    after = memory.record_outcome(shaky.id, False)
    assert after.confidence == pytest.approx((4 * 0.5) / 5) and after.raw["failures"] == 1
    assert after.raw["validations"] == 0
    for _ in range(2):
        after = memory.record_outcome(shaky.id, False)
    assert after.confidence == pytest.approx(2 / 7, abs=1e-4) and after.raw["failures"] == 3
    # A lesson's confidence is its rule_confidence.
    assert memory.record_outcome(lesson.id, True).raw["rule_confidence"] == pytest.approx((1 + 4 * 0.7) / 5)
    with pytest.raises(UsageError, match="outcomes are recorded for patterns"):
        memory.record_outcome(memory.add("observation", "x").id, True)

    assert [r.id for r in memory.prune(0.4, dry_run=True)] == [shaky.id]
    assert memory.get(shaky.id).status == "active"  # type: ignore[union-attr]
    pruned = memory.prune(0.4)
    assert [r.id for r in pruned] == [shaky.id]  # untested (0.2, no failure) is not unreliable
    assert memory.get(shaky.id).status == "retracted" and memory.get(untested.id).status == "active"  # type: ignore[union-attr]
    assert memory.prune(0.4) == []
    assert memory.restore(shaky.id).status == "active"
    ops = [json.loads(line)["op"] for line in (data_dir / "audit/log.jsonl").read_text().splitlines()
           if json.loads(line)["id"] == shaky.id]  # fmt: skip
    assert ops == ["retain", "outcome", "outcome", "outcome", "prune", "restore"]
    with pytest.raises(UsageError, match="between 0 and 1"):
        memory.prune(1.5)


def test_warnings_can_be_escalated(data_dir: Path) -> None:
    memory = fresh()
    with warnings.catch_warnings():
        warnings.simplefilter("error", LoreWarning)
        with pytest.raises(LoreWarning):
            memory.add("observation", "plain text", redact=False)


def test_docs_api_examples_run(data_dir: Path) -> None:
    import doctest

    docs = Path(__file__).resolve().parent.parent / "docs" / "api.md"
    result = doctest.testfile(str(docs), module_relative=False, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
                              raise_on_error=False, verbose=False, report=True)  # fmt: skip
    assert result.attempted > 20 and result.failed == 0


def test_readme_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme[readme.index("### Embedding lore in your agent"):]
    code = section[section.index("```python\n") + 10 : section.index("\n```", section.index("```python"))]
    assert len(code.splitlines()) == 5
    Lore().init()  # conftest names the data dir (LORE_DATA_DIR), so it is not created on the first write
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert " decision Use Postgres for sessions\n" in out and "## Relevant Memories" in out


def test_concurrent_outcomes_are_all_counted(data_dir: Path) -> None:
    memory = fresh()
    pattern = memory.add("pattern", "Retry with jitter", solution="Sleep a random share of the backoff")
    code = ("import lore\nm = lore.Lore(project='acme')\n"
            f"for _ in range(5): m.record_outcome({pattern.id!r}, True)\n")  # fmt: skip
    writers = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(2)]
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    counted = memory.get(pattern.id)
    assert counted is not None and counted.raw["validations"] == 10
    # Ten successes from 0.5: (10 + 4 * 0.5) / (10 + 4), whatever the interleaving.
    assert counted.confidence == pytest.approx(12 / 14, abs=1e-3)


def test_a_session_shared_with_another_llm_cmd_reads_the_access_history_on_disk_not_the_shared_copys(
    demo_indexed: Any, tmp_path: Path,
) -> None:
    # The warm helper answers a `lore` process whose LORE_LLM_CMD differs from its own with a copy of its
    # session; the copies shared one dict of access counts, so a search counted accesses that were not on
    # disk (reinforcement raised every score by the same factor: the parity test's failure under load).
    from lore.search import SearchSession, search
    from lore.settings import Settings

    locations = demo_indexed
    settings = Settings.from_env()._replace(llm_cmd=_script(tmp_path / "llm.sh", "cat >/dev/null; echo 'Retry failed charges with backoff.'\n"))
    shared = SearchSession(locations)
    query = "how do we retry failed stripe charges without hammering the payment provider"
    # The helper's own session searches first (a prompt, whose access it does not log): it holds the empty
    # history it read when there was no log.
    search(shared, query, Lore(settings=settings).search_options(), log_access=False)
    first = Lore(locations.data_dir, locations.index_dir, settings=settings, session=shared)
    first.search(query)  # logs its top hits as accessed
    assert locations.access_log.exists()
    locations.access_log.unlink()
    asked = Lore(locations.data_dir, locations.index_dir, settings=settings, session=shared).search(query)
    locations.access_log.unlink()
    alone = Lore(locations.data_dir, locations.index_dir, settings=settings).search(query)  # its own session
    assert [h.id for h in asked.hits] == [h.id for h in alone.hits]
    assert [h.score for h in asked.hits] == pytest.approx([h.score for h in alone.hits], rel=1e-6)  # decay's `now`
