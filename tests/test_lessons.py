"""Lessons: storing (idempotent by error pattern + scope), listing, showing, and the yamo wire format."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from lore.curate.lessons import (
    lesson_pattern_id,
    parse_yamo,
    render_yamo,
    short_name,
    yamo_escape,
    yamo_unescape,
)
from lore.errors import DataError, ModelError
from lore.store import Store
from lore.store.records import Record
from tests.conftest import read_jsonl

PATTERNS = Path("patterns/data/patterns.yaml")
GRAPH = Path("graph/data/graph.json")
AUDIT = Path("audit/log.jsonl")

BASE = [
    "--situation", "Deploying the billing service on a Friday",
    "--error-pattern", "ALTER TABLE locked the invoices table; the deploy hung",
    "--oversight", "Did not set lock_timeout before the migration",
    "--fix", "Set lock_timeout and ran the migration in batches",
    "--rule", "Always set lock_timeout before ALTER TABLE on large tables",
    "--severity", "high",
    "--scope", "billing-api",
]  # fmt: skip


@pytest.fixture(autouse=True)
def lexical_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The write-time duplicate check runs without the embedding model: deterministic everywhere."""

    def no_model(spec: str | None = None):
        raise ModelError("no model in these tests")

    monkeypatch.setattr("lore.embedder.get_query_encoder", no_model)


def lessons_in(data_dir: Path) -> list[dict]:
    doc = yaml.safe_load((data_dir / PATTERNS).read_text())
    return [p for p in doc["patterns"] if p.get("kind") == "lesson"]


def with_option(args: list[str], name: str, value: str) -> list[str]:
    out = list(args)
    out[out.index(name) + 1] = value
    return out


def test_lesson_pattern_id_is_sha256_of_error_and_scope() -> None:
    expected = hashlib.sha256(b"boom" + b"global").hexdigest()[:16]
    assert lesson_pattern_id("boom", "global") == expected and len(expected) == 16


def test_short_name_cuts_at_a_word() -> None:
    assert short_name("Quote shell variables") == "Quote shell variables"
    long = "Always " + "quote every shell variable expansion " * 4
    name = short_name(long)
    assert len(name) <= 80 and name.endswith("…") and name[:-1] == long[: len(name) - 1].rstrip()


def test_lesson_stores_a_pattern_item_with_every_field(cli, initialised: Path) -> None:
    result = cli("lesson", *BASE, "--inverse", "Never run ALTER TABLE on a large table without lock_timeout",
                 "--confidence", "0.9", "--tag", "postgres")  # fmt: skip
    assert result.exit_code == 0, result.output
    [lesson] = lessons_in(initialised)
    assert (
        result.stdout
        == f"Learned lesson {lesson['id']}: Always set lock_timeout before ALTER TABLE on large tables\n"
    )
    assert lesson == {
        "id": lesson["id"],
        "kind": "lesson",
        "name": "Always set lock_timeout before ALTER TABLE on large tables",
        "context": "Deploying the billing service on a Friday",
        "problem": "ALTER TABLE locked the invoices table; the deploy hung",
        "solution": "Set lock_timeout and ran the migration in batches",
        "category": "lesson",
        "situation": "Deploying the billing service on a Friday",
        "error_pattern": "ALTER TABLE locked the invoices table; the deploy hung",
        "oversight": "Did not set lock_timeout before the migration",
        "fix": "Set lock_timeout and ran the migration in batches",
        "rule": "Always set lock_timeout before ALTER TABLE on large tables",
        "inverse": "Never run ALTER TABLE on a large table without lock_timeout",
        "severity": "high",
        "scope": "billing-api",
        "rule_confidence": 0.9,
        "lesson_pattern_id": lesson_pattern_id(
            "ALTER TABLE locked the invoices table; the deploy hung", "billing-api"
        ),
        "validations": 0,
        "created_at": lesson["created_at"],
        "project": "acme-api",
        "tags": ["lesson_learned", "postgres"],
        "schema_version": 1,
    }
    assert lesson["id"].startswith("pat-") and len(lesson["id"].rsplit("-", 1)[1]) == 4
    assert lesson["created_at"].endswith("Z")
    [entry] = read_jsonl(initialised / AUDIT)
    assert (entry["op"], entry["id"]) == ("lesson", lesson["id"])
    # It reads back as a lesson, with the rule confidence as its confidence.
    [record] = Store(initialised).load().of_kind("lesson")
    assert record.confidence == 0.9 and "lesson_learned" in record.tags


def test_default_confidence_and_no_inverse(cli, initialised: Path) -> None:
    cli("lesson", *BASE)
    [lesson] = lessons_in(initialised)
    assert lesson["rule_confidence"] == 0.8
    assert "inverse" not in lesson


def test_same_lesson_again_returns_the_stored_one(cli, initialised: Path) -> None:
    first = cli("lesson", *BASE)
    assert first.exit_code == 0
    [lesson] = lessons_in(initialised)
    before = (initialised / PATTERNS).read_bytes()
    again = cli("lesson", *with_option(BASE, "--rule", "Another wording of the rule"), "--confidence", "0.8")
    assert again.exit_code == 0, again.output
    assert again.stdout == (
        f"Lesson already exists: {lesson['id']} (same error pattern and scope, rule confidence 0.80); nothing written\n"
        f"{lesson['id']}  lesson  acme-api  {lesson['created_at'][:10]} (0min ago)\n"
        "Always set lock_timeout before ALTER TABLE on large tables\n"
        "\n"
        "Situation: Deploying the billing service on a Friday\n"
        "Error pattern: ALTER TABLE locked the invoices table; the deploy hung\n"
        "Oversight: Did not set lock_timeout before the migration\n"
        "Fix: Set lock_timeout and ran the migration in batches\n"
        "Rule: Always set lock_timeout before ALTER TABLE on large tables\n"
        "Scope: billing-api\n"
        "\n"
        "status active · severity high · rule confidence 0.80 · tags lesson_learned\n"
    )
    lower = cli("lesson", *BASE, "--confidence", "0.5")
    assert lower.exit_code == 0 and lower.stdout.startswith(f"Lesson already exists: {lesson['id']} ")
    assert (initialised / PATTERNS).read_bytes() == before
    assert len(read_jsonl(initialised / AUDIT)) == 1


def test_other_scope_is_another_lesson(cli, initialised: Path) -> None:
    cli("lesson", *BASE)
    result = cli("lesson", *with_option(with_option(BASE, "--scope", "ledger-api"), "--rule",
                                        "Run ALTER TABLE on the ledger only in the maintenance window"))  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Learned lesson ")
    assert len({lesson["lesson_pattern_id"] for lesson in lessons_in(initialised)}) == 2


def test_higher_confidence_supersedes_and_keeps_history(cli, initialised: Path) -> None:
    cli("lesson", *BASE, "--confidence", "0.7")
    [old] = lessons_in(initialised)
    result = cli(
        "lesson", *with_option(BASE, "--rule", "Set lock_timeout on every migration"), "--confidence", "0.95"
    )
    assert result.exit_code == 0, result.output
    old_now, new = lessons_in(initialised)
    assert result.stdout == (
        f"Learned lesson {new['id']}: Set lock_timeout on every migration\n"
        f"Superseded lesson {old['id']} (rule confidence 0.70 -> 0.95)\n"
    )
    assert old_now["id"] == old["id"]
    assert (old_now["status"], old_now["superseded_by"]) == ("superseded", new["id"])
    assert {
        k: v for k, v in old_now.items() if k not in ("status", "superseded_by", "status_changed_at", "updated_at")
    } == old
    assert new["lesson_pattern_id"] == old["lesson_pattern_id"] and new["rule_confidence"] == 0.95
    graph = orjson.loads((initialised / GRAPH).read_bytes())
    nodes = {key: node["name"] for key, node in graph["nodes"].items()}
    assert [(nodes[e["from"]], nodes[e["to"]], e["relation"]) for e in graph["edges"]] == [
        (new["id"], old["id"], "supersedes")
    ]
    assert [e["op"] for e in read_jsonl(initialised / AUDIT)] == ["lesson", "lesson", "supersede", "link"]
    # Only the new one is listed.
    listed = cli("lessons")
    assert (
        listed.stdout
        == f"{new['id']:<22} high     0.95  Set lock_timeout on every migration  [billing-api]\n"
    )


def test_lesson_text_is_scrubbed(cli, initialised: Path) -> None:
    result = cli(
        "lesson",
        *with_option(BASE, "--fix", "Pushed with token ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5 again"),
    )
    assert result.exit_code == 0
    assert result.stderr.endswith("Redacted 1 secret(s) before storing: github_token\n")
    [lesson] = lessons_in(initialised)
    assert lesson["fix"] == lesson["solution"] == "Pushed with token [REDACTED:github_token] again"
    assert "ghp_" not in (initialised / PATTERNS).read_text()


def test_missing_options_and_bad_values_are_usage_errors(cli, initialised: Path) -> None:
    result = cli("lesson", "--situation", "x", "--rule", "y")
    assert result.exit_code == 2
    assert result.stderr == (
        "Error: missing --error-pattern, --oversight, --fix, --severity, --scope\n"
        "Hint: a lesson needs --situation, --error-pattern, --oversight, --fix, --rule, --severity and --scope; "
        "`lore lesson show ID` shows one\n"
    )
    bad = cli("lesson", *with_option(BASE, "--severity", "urgent"))
    assert bad.exit_code == 2
    assert bad.stderr == "Error: severity must be one of critical, high, medium, low, got 'urgent'\n"
    over = cli("lesson", *BASE, "--confidence", "1.5")
    assert (over.exit_code, over.stderr) == (2, "Error: confidence must be between 0 and 1, got 1.5\n")
    assert lessons_in(initialised) == []


def test_near_duplicate_pattern_is_refused_like_other_writes(cli, initialised: Path) -> None:
    cli("lesson", *BASE)
    [lesson] = lessons_in(initialised)
    # Same rule and error text, other scope: another identity, but the text duplicates the first.
    result = cli("lesson", *with_option(BASE, "--scope", "ledger-api"))
    assert result.exit_code == 3
    assert lesson["id"] in result.stderr and "--force" in result.stderr
    forced = cli("lesson", *with_option(BASE, "--scope", "ledger-api"), "--force")
    assert forced.exit_code == 0 and len(lessons_in(initialised)) == 2


# -- listing -------------------------------------------------------------------------------------


def add(cli, rule: str, severity: str, confidence: str, error: str, scope: str = "global") -> None:
    args = with_option(
        with_option(with_option(BASE, "--rule", rule), "--severity", severity), "--error-pattern", error
    )
    args = with_option(with_option(args, "--oversight", "Missed it"), "--fix", "Fixed it")
    result = cli("lesson", *with_option(args, "--scope", scope), "--confidence", confidence,
                 "--situation", f"While working on {rule.lower()}")  # fmt: skip
    assert result.exit_code == 0, result.output


def ids_by_rule(data_dir: Path) -> dict[str, str]:
    return {lesson["rule"]: lesson["id"] for lesson in lessons_in(data_dir)}


def test_lessons_lists_by_severity_then_relevance(cli, initialised: Path) -> None:
    add(cli, "Pin the Docker base image digest", "medium", "0.9", "Image drifted between builds")
    add(
        cli, "Run database migrations before deploying code", "critical", "0.8", "New code hit the old schema"
    )
    add(
        cli,
        "Check Docker build cache keys for secrets",
        "high",
        "0.75",
        "A secret ended up in a cached layer",
    )
    add(cli, "Quote shell variables", "low", "0.95", "Word splitting broke a path with spaces")
    add(cli, "Guess the Docker tag", "critical", "0.5", "Tag was wrong")  # below 0.7: never listed
    ids = ids_by_rule(initialised)

    def line(rule: str, severity: str, confidence: str) -> str:
        return f"{ids[rule]:<22} {severity:<8} {confidence}  {rule}  [global]\n"

    result = cli("lessons")
    assert result.exit_code == 0
    assert result.stdout == (
        line("Run database migrations before deploying code", "critical", "0.80")
        + line("Check Docker build cache keys for secrets", "high", "0.75")
        + line("Pin the Docker base image digest", "medium", "0.90")
        + line("Quote shell variables", "low", "0.95")
    )
    docker = cli("lessons", "docker image builds")
    assert docker.stdout == (
        line("Check Docker build cache keys for secrets", "high", "0.75")
        + line("Pin the Docker base image digest", "medium", "0.90")
    )
    limited = cli("lessons", "--limit", "2", "--min-confidence", "0.5")
    assert limited.stdout == (
        line("Run database migrations before deploying code", "critical", "0.80")
        + line("Guess the Docker tag", "critical", "0.50")
    )
    rows = [orjson.loads(line) for line in cli("lessons", "shell", "--json").stdout.splitlines()]
    assert [(r["id"], r["type"], r["relevance"] > 0) for r in rows] == [
        (ids["Quote shell variables"], "lesson", True)
    ]


def test_relevance_orders_within_a_severity(cli, initialised: Path) -> None:
    add(cli, "Set timeouts on outbound HTTP calls", "high", "0.8", "A slow upstream hung every worker")
    add(cli, "Retry idempotent HTTP calls with jitter and timeouts on each attempt", "high", "0.8",
        "Retries without timeouts piled up")  # fmt: skip
    ids = ids_by_rule(initialised)
    out = cli("lessons", "timeouts jitter retry").stdout.splitlines()
    assert [row.split()[0] for row in out] == [
        ids["Retry idempotent HTTP calls with jitter and timeouts on each attempt"],
        ids["Set timeouts on outbound HTTP calls"],
    ]
    # A joined word matches its parts: pg_dump answers "dump".
    assert cli("lessons", "dump").stdout == "No lessons matching 'dump' with rule confidence >= 0.70\n"
    add(
        cli,
        "Use pg_dump with the custom format for backups",
        "low",
        "0.8",
        "Plain SQL exports restored too slowly",
    )
    ids = ids_by_rule(initialised)
    assert cli("lessons", "dump").stdout.split()[0] == ids["Use pg_dump with the custom format for backups"]


def test_lessons_when_there_are_none(cli, initialised: Path) -> None:
    result = cli("lessons")
    assert (result.exit_code, result.stdout) == (0, "No lessons with rule confidence >= 0.70\n")


# -- show ----------------------------------------------------------------------------------------


def test_show_formats(cli, initialised: Path) -> None:
    cli("lesson", *BASE, "--inverse", "Never ALTER a big table without lock_timeout; ever")
    [lesson] = lessons_in(initialised)
    lid = lesson["id"]
    yamo = cli("lesson", "show", lid, "--format", "yamo")
    assert yamo.exit_code == 0, yamo.output
    assert yamo.stdout == (
        "agent: lore;\n"
        "intent: LessonLearned;\n"
        "context: situation=Deploying the billing service on a Friday, "
        "error_pattern=ALTER TABLE locked the invoices table\\; the deploy hung, "
        "oversight=Did not set lock_timeout before the migration;\n"
        "constraints: rule=Always set lock_timeout before ALTER TABLE on large tables, "
        "inverse=Never ALTER a big table without lock_timeout\\; ever, scope=billing-api;\n"
        "priority: high;\n"
        "output: fix=Set lock_timeout and ran the migration in batches;\n"
        f"meta: id={lid}, lesson_pattern_id={lesson['lesson_pattern_id']}, rule_confidence=0.8, project=acme-api, "
        "tags=lesson_learned, schema_version=1;\n"
        f"log: created_at={lesson['created_at']}, status=active, validations=0;\n"
        "handoff: action=apply_rule, scope=billing-api;\n"
    )
    parsed = parse_yamo(yamo.stdout)
    assert parsed["context"] == {
        "situation": lesson["situation"], "error_pattern": lesson["error_pattern"], "oversight": lesson["oversight"],
    }  # fmt: skip
    text = cli("lesson", "show", lid[:12])
    assert text.stdout.splitlines()[1:3] == ["Always set lock_timeout before ALTER TABLE on large tables", ""]
    assert "Inverse: Never ALTER a big table without lock_timeout; ever\n" in text.stdout
    as_json = orjson.loads(cli("lesson", "show", lid, "--format", "json").stdout)
    assert (as_json["id"], as_json["type"], as_json["record"]) == (lid, "lesson", lesson)


def test_show_errors(cli, initialised: Path) -> None:
    cli("remember", "Use Postgres advisory locks for the job queue")
    [decision] = read_jsonl(initialised / "journal/data/decisions.jsonl")
    not_lesson = cli("lesson", "show", decision["id"])
    assert (not_lesson.exit_code, not_lesson.stderr) == (
        2, f"Error: {decision['id']} is a decision, not a lesson\nHint: list lessons with `lore lessons`\n",
    )  # fmt: skip
    missing = cli("lesson", "show", "pat-0-0000")
    assert missing.exit_code == 1 and missing.stderr.startswith("Error: no record with id 'pat-0-0000'")
    cli("lesson", *BASE)
    [lesson] = lessons_in(initialised)
    bad_format = cli("lesson", "show", lesson["id"], "--format", "xml")
    assert (bad_format.exit_code, bad_format.stderr) == (
        2, "Error: unknown format 'xml'\nHint: formats: yamo, text, json\n",
    )  # fmt: skip
    mixed = cli("lesson", "--rule", "x", "show", lesson["id"])
    assert (mixed.exit_code, mixed.stderr) == (2, "Error: --rule cannot be combined with `lesson show`\n")


# -- the wire format -------------------------------------------------------------------------------

NASTY = "a; b, c = d \\ e\nnext line\ttab; \\; \\n literal"


def test_yamo_round_trips_every_field() -> None:
    raw = {
        "kind": "lesson", "name": "n", "situation": NASTY, "error_pattern": "err; =,", "oversight": "o\\",
        "fix": "f\r\n", "rule": "rule: x;", "inverse": "never; ever", "severity": "critical", "scope": "a=b",
        "rule_confidence": 0.75, "lesson_pattern_id": "0123456789abcdef", "created_at": "2026-01-02T03:04:05Z",
        "project": "p;q", "tags": ["lesson_learned", "x y"], "validations": 2, "schema_version": 1,
        "status": "superseded", "superseded_by": "pat-2-bbbb",
    }  # fmt: skip
    record = Record(kind="lesson", id="pat-1-aaaa", raw=raw)
    block = render_yamo(record)
    assert len(block.splitlines()) == 9  # one line per section: escaped text never breaks a line
    assert parse_yamo(block) == {
        "agent": "lore",
        "intent": "LessonLearned",
        "context": {"situation": NASTY, "error_pattern": "err; =,", "oversight": "o\\"},
        "constraints": {"rule": "rule: x;", "inverse": "never; ever", "scope": "a=b"},
        "priority": "critical",
        "output": {"fix": "f\r\n"},
        "meta": {
            "id": "pat-1-aaaa",
            "lesson_pattern_id": "0123456789abcdef",
            "rule_confidence": "0.75",
            "project": "p;q",
            "tags": "lesson_learned,x y",
            "schema_version": "1",
        },
        "log": {
            "created_at": "2026-01-02T03:04:05Z",
            "status": "superseded",
            "superseded_by": "pat-2-bbbb",
            "validations": "2",
        },
        "handoff": {"action": "apply_rule", "scope": "a=b"},
    }


@given(st.text())
def test_escape_round_trip(value: str) -> None:
    escaped = yamo_escape(value)
    assert yamo_unescape(escaped) == value
    assert "\n" not in escaped and ";" not in escaped.replace("\\;", "").replace("\\\\", "")


def test_parse_yamo_is_whitespace_tolerant_and_rejects_garbage() -> None:
    assert parse_yamo("  agent:lore ;intent: LessonLearned;\n\noutput:  fix = a\\, b ,  ;") == {
        "agent": "lore", "intent": "LessonLearned", "output": {"fix": "a, b"},
    }  # fmt: skip
    for bad in ("agent lore;", "agent: a;agent: b;", "context: =x;", "output: fix=a\\q;", "priority: high\\"):
        with pytest.raises(DataError):
            parse_yamo(bad)


def test_cli_default_min_confidence_is_the_core_one() -> None:
    from lore.cli.cmd_lessons import LIST_MIN_CONFIDENCE
    from lore.curate.lessons import LIST_MIN_CONFIDENCE as CORE

    assert LIST_MIN_CONFIDENCE == CORE
