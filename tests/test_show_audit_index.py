"""`lore show` for every record type, `lore audit verify|log`, and `lore index [status]`: exact CLI output.

Records are written straight into the original bash Lore layout (docs/schema.md) with
fixed ids and timestamps, and `lore show` runs against a fixed clock, so the rendered
text (ages included) is stable.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
import yaml

from tests.conftest import read_jsonl

PATTERNS = Path("patterns/data/patterns.yaml")
FAILURES = Path("failures/data/failures.jsonl")
OBSERVATIONS = Path("inbox/data/observations.jsonl")
DECISIONS = Path("journal/data/decisions.jsonl")
SESSIONS = Path("transfer/data/sessions")
GRAPH = Path("graph/data/graph.json")
AUDIT = Path("audit/log.jsonl")

NOW = datetime(2026, 12, 1, tzinfo=UTC)

# The shapes of docs/schema.md and docs/lessons.md, as the original bash Lore wrote them.
PATTERNS_YAML = """\
# Pattern Learner Database
patterns:
  - id: "pat-1739102400-a1b2"
    name: "Safe bash arithmetic"
    context: "Incrementing variables in bash with set -e"
    problem: "((x++)) returns exit code 1 when x is 0"
    solution: "Use x=$((x + 1)) instead"
    category: "bash"
    origin: "session-2026-02-09"
    confidence: 0.9
    validations: 5
    created_at: "2026-02-09T12:00:00Z"
    examples:
      - bad: "((count++))"
      - good: "count=$((count + 1))"
    project: "infra"
    tags: ["bash"]
    schema_version: 1
  - id: "pat-1739102600-e5f6"
    name: "Safe arithmetic in any shell"
    solution: "Use $((...)) expansions, never let or (( ))"
    category: "shell"
    confidence: 0.7
    validations: 1
    created_at: "2026-02-11T08:00:00Z"
    examples:
      - {bad: "let x++", good: "x=$((x + 1))"}
    project: "infra"
    tags: []
    schema_version: 1
  - id: "pat-1795309051-4d1c"
    kind: lesson
    name: "Always set lock_timeout before ALTER TABLE on large tables"
    category: lesson
    situation: "Deploying the billing service on a Friday"
    error_pattern: "ALTER TABLE locked the invoices table; the deploy hung"
    oversight: "Did not set lock_timeout before the migration"
    fix: "Set lock_timeout=5s and ran the migration in batches"
    rule: "Always set lock_timeout before ALTER TABLE on large tables"
    inverse: "Never ALTER a large table without lock_timeout"
    severity: high
    scope: billing-api
    rule_confidence: 0.9
    lesson_pattern_id: 0bda300fbbe87c3d
    validations: 0
    created_at: '2026-11-22T00:57:31Z'
    project: billing-api
    tags:
      - lesson_learned
      - postgres
    schema_version: 1
anti_patterns:
  - id: "anti-1739102500-c3d4"
    name: "Secrets in shell history"
    symptom: "Tokens passed as command-line arguments"
    risk: "They land in shell history and process listings"
    fix: "Read secrets from a file or the environment"
    category: "security"
    severity: "high"
    created_at: "2026-02-10T09:30:00Z"
    project: "infra"
    tags: ["security"]
    schema_version: 1
"""

NESTED_HANDOFF = {
    "id": "session-20261122-002100-2ea3d7c2",
    "started_at": "2026-11-22T00:21:00Z",
    "ended_at": "2026-11-22T00:21:00Z",
    "summary": "Auth 80% done; OAuth callback next",
    "goals_addressed": [], "decisions_made": [], "patterns_learned": [], "open_threads": [],
    "handoff": {"message": "Auth 80% done; OAuth callback next\nThe token refresh path is untested.",
                "next_steps": ["Wire the OAuth callback", "Test token refresh"], "blockers": ["Waiting on the client secret"],
                "questions": ["PKCE for the mobile app?"], "created_at": "2026-11-22T00:21:00Z"},
    "git_state": {"branch": "", "commits": [], "uncommitted": []},
    "context": {"project": "x2", "active_files": [], "recent_commands": [], "environment": {}},
    "related": {"journal_entries": ["dec-1a2b3c4d"], "patterns": ["pat-1739102400-a1b2"], "goals": []},
    "schema_version": 1,
}  # fmt: skip

# The flat layout docs/schema.md also reads: `handoff` as a string, lists at top level.
FLAT_HANDOFF = {
    "id": "session-20261120-090000-aabbccdd",
    "timestamp": "2026-11-20T09:00:00Z",
    "project": "x2",
    "handoff": "Cache layer half done",
    "next_steps": ["Add eviction"],
    "blockers": [],
    "open_questions": ["LRU or LFU?"],
    "related_ids": ["pat-1739102400-a1b2"],
}

FAILURE = {"id": "fail-c0c437df", "timestamp": "2026-11-22T00:20:53Z", "error_type": "ToolError",
           "error_message": "Permission denied writing cache", "tool": "Bash", "project": "x2", "schema_version": 1}  # fmt: skip
FAILURE_NO_TOOL = {"id": "fail-0badf00d", "timestamp": "2026-11-22T00:20:53Z", "error_type": "Timeout",
                   "error_message": "pytest hung on the payments suite", "project": "x2", "schema_version": 1}  # fmt: skip


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> datetime:
    """`lore show` reads the time once to print ages; pin it."""
    monkeypatch.setattr("lore.cli.cmd_read._now", lambda: NOW)
    return NOW


@pytest.fixture
def records(initialised: Path, clock: datetime) -> Path:
    """One record of every type but decisions (covered in test_cli_store.py), fixed ids and times."""
    (initialised / PATTERNS).write_text(PATTERNS_YAML)
    (initialised / FAILURES).write_bytes(orjson.dumps(FAILURE) + b"\n" + orjson.dumps(FAILURE_NO_TOOL) + b"\n")
    for session in (NESTED_HANDOFF, FLAT_HANDOFF):
        (initialised / SESSIONS / f"{session['id']}.json").write_bytes(orjson.dumps(session, option=orjson.OPT_INDENT_2))
    return initialised


def show(cli, record_id: str) -> str:  # type: ignore[no-untyped-def]
    result = cli("show", record_id)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    return result.stdout


# -- lore show: one test per record type ----------------------------------------------------


def test_show_pattern_with_context_problem_solution_examples_and_meta(cli, records: Path) -> None:
    assert show(cli, "pat-1739102400-a1b2") == (
        "pat-1739102400-a1b2  pattern  infra  2026-02-09 (9mo ago)\n"
        "Safe bash arithmetic\n"
        "\n"
        "Context: Incrementing variables in bash with set -e\n"
        "Problem: ((x++)) returns exit code 1 when x is 0\n"
        "Solution: Use x=$((x + 1)) instead\n"
        "Example (bad): ((count++))\n"
        "Example (good): count=$((count + 1))\n"
        "\n"
        "status active · confidence 0.90 · validations 5 · tags bash\n"
    )


def test_show_pattern_example_mapping_with_both_keys_and_no_tags(cli, records: Path) -> None:
    assert show(cli, "pat-1739102600-e5f6") == (
        "pat-1739102600-e5f6  pattern  infra  2026-02-11 (9mo ago)\n"
        "Safe arithmetic in any shell\n"
        "\n"
        "Solution: Use $((...)) expansions, never let or (( ))\n"
        "Example (bad): let x++\n"
        "Example (good): x=$((x + 1))\n"
        "\n"
        "status active · confidence 0.70 · validations 1\n"
    )


def test_show_anti_pattern_symptom_risk_fix_and_severity(cli, records: Path) -> None:
    assert show(cli, "anti-1739102500-c3d4") == (
        "anti-1739102500-c3d4  anti-pattern  infra  2026-02-10 (9mo ago)\n"
        "Secrets in shell history\n"
        "\n"
        "Symptom: Tokens passed as command-line arguments\n"
        "Risk: They land in shell history and process listings\n"
        "Fix: Read secrets from a file or the environment\n"
        "\n"
        "status active · severity high · confidence 0.80 · tags security\n"
    )


def test_show_lesson_fields_rule_confidence_and_tags(cli, records: Path) -> None:
    assert show(cli, "pat-1795309051-4d1c") == (
        "pat-1795309051-4d1c  lesson  billing-api  2026-11-22 (8d ago)\n"
        "Always set lock_timeout before ALTER TABLE on large tables\n"
        "\n"
        "Situation: Deploying the billing service on a Friday\n"
        "Error pattern: ALTER TABLE locked the invoices table; the deploy hung\n"
        "Oversight: Did not set lock_timeout before the migration\n"
        "Fix: Set lock_timeout=5s and ran the migration in batches\n"
        "Rule: Always set lock_timeout before ALTER TABLE on large tables\n"
        "Inverse: Never ALTER a large table without lock_timeout\n"
        "\n"
        "status active · severity high · confidence 0.90 · validations 0 · tags lesson_learned, postgres\n"
    )


def test_show_lesson_written_by_lore_lesson_shows_each_text_once(cli, initialised: Path) -> None:
    """`lore lesson` mirrors situation/error_pattern/fix into context/problem/solution so that
    pattern readers can show a lesson (docs/lessons.md); `lore show` knows lessons and should
    not print those three texts twice under two labels."""
    result = cli(
        "lesson", "--situation", "Deploying the billing service on a Friday",
        "--error-pattern", "ALTER TABLE locked the invoices table; the deploy hung",
        "--oversight", "Did not set lock_timeout before the migration",
        "--fix", "Set lock_timeout=5s and ran the migration in batches",
        "--rule", "Always set lock_timeout before ALTER TABLE on large tables",
        "--severity", "high", "--scope", "billing-api",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lesson = yaml.safe_load((initialised / PATTERNS).read_text())["patterns"][0]
    assert lesson["context"] == lesson["situation"]  # the mirror this test is about
    body = show(cli, lesson["id"]).splitlines()[3:-2]
    values = sorted(line.split(": ", 1)[1] for line in body)  # whatever the labels and their order
    assert values == sorted([
        "Deploying the billing service on a Friday",
        "ALTER TABLE locked the invoices table; the deploy hung",
        "Did not set lock_timeout before the migration",
        "Set lock_timeout=5s and ran the migration in batches",
        "Always set lock_timeout before ALTER TABLE on large tables",
    ])  # fmt: skip


def test_show_nested_handoff_message_lists_and_related_ids(cli, records: Path) -> None:
    assert show(cli, "session-20261122-002100-2ea3d7c2") == (
        "session-20261122-002100-2ea3d7c2  handoff  x2  2026-11-22 (8d ago)\n"
        "Auth 80% done; OAuth callback next\n"
        "\n"
        "Auth 80% done; OAuth callback next\n"
        "The token refresh path is untested.\n"
        "Next steps:\n"
        "  - Wire the OAuth callback\n"
        "  - Test token refresh\n"
        "Blockers:\n"
        "  - Waiting on the client secret\n"
        "Open questions:\n"
        "  - PKCE for the mobile app?\n"
        "Related: dec-1a2b3c4d, pat-1739102400-a1b2\n"
        "\n"
        "status active · confidence 0.80\n"
    )


def test_show_flat_handoff_open_questions_and_related_ids(cli, records: Path) -> None:
    # The message equals the title, so it is not repeated; empty blockers print nothing.
    assert show(cli, "session-20261120-090000-aabbccdd") == (
        "session-20261120-090000-aabbccdd  handoff  x2  2026-11-20 (10d ago)\n"
        "Cache layer half done\n"
        "\n"
        "Next steps:\n"
        "  - Add eviction\n"
        "Open questions:\n"
        "  - LRU or LFU?\n"
        "Related: pat-1739102400-a1b2\n"
        "\n"
        "status active · confidence 0.80\n"
    )


def test_show_failure_with_and_without_tool(cli, records: Path) -> None:
    assert show(cli, "fail-c0c437df") == (
        "fail-c0c437df  failure  x2  2026-11-22 (8d ago)\n"
        "ToolError: Permission denied writing cache\n"
        "\n"
        "Tool: Bash\n"
        "\n"
        "status active · confidence 0.80\n"
    )
    assert show(cli, "fail-0badf00d") == (
        "fail-0badf00d  failure  x2  2026-11-22 (8d ago)\n"
        "Timeout: pytest hung on the payments suite\n"
        "\n"
        "status active · confidence 0.80\n"
    )


def test_show_superseded_and_retracted_records(cli, records: Path) -> None:
    old, new = "pat-1739102400-a1b2", "pat-1739102600-e5f6"
    assert cli("supersede", old, new).stdout == f"{old} is superseded by {new}\n"
    reason = "Covered by the secrets scanner"
    assert cli("retract", "anti-1739102500-c3d4", "--reason", reason).exit_code == 0
    assert show(cli, old) == (
        "pat-1739102400-a1b2  pattern  infra  2026-02-09 (9mo ago)\n"
        "Safe bash arithmetic\n"
        "\n"
        "Context: Incrementing variables in bash with set -e\n"
        "Problem: ((x++)) returns exit code 1 when x is 0\n"
        "Solution: Use x=$((x + 1)) instead\n"
        "Example (bad): ((count++))\n"
        "Example (good): count=$((count + 1))\n"
        "\n"
        "status superseded · confidence 0.90 · validations 5 · tags bash\n"
        "Superseded by: pat-1739102600-e5f6\n"
        "Links:\n"
        "  <- supersedes <- pat-1739102600-e5f6 [pattern] Safe arithmetic in any shell\n"
    )
    assert show(cli, "anti-1739102500-c3d4") == (
        "anti-1739102500-c3d4  anti-pattern  infra  2026-02-10 (9mo ago)\n"
        "Secrets in shell history\n"
        "\n"
        "Symptom: Tokens passed as command-line arguments\n"
        "Risk: They land in shell history and process listings\n"
        "Fix: Read secrets from a file or the environment\n"
        "\n"
        "status retracted · severity high · confidence 0.80 · tags security\n"
        "Retracted: Covered by the secrets scanner\n"
    )
    assert show(cli, new).endswith("Links:\n  -> supersedes -> pat-1739102400-a1b2 [pattern] Safe bash arithmetic\n")


def _graph(edges: list[dict], nodes: dict | None = None) -> bytes:
    return orjson.dumps({"nodes": nodes or {}, "edges": edges}, option=orjson.OPT_INDENT_2) + b"\n"


def test_show_links_out_and_in_through_original_graph_nodes(cli, records: Path) -> None:
    nodes = {
        "pattern-1f2e3d4c": {"type": "pattern", "name": "pat-1739102400-a1b2", "data": {}},
        "failure-5a6b7c8d": {"type": "failure", "name": "fail-c0c437df", "data": {"record_id": "fail-c0c437df"}},
    }
    edges = [
        {"from": "pattern-1f2e3d4c", "to": "anti-1739102500-c3d4", "relation": "contradicts", "weight": 1},
        {"from": "failure-5a6b7c8d", "to": "pattern-1f2e3d4c", "relation": "learned_from", "weight": 1},
        {"from": "pattern-1f2e3d4c", "to": "fail-0badf00d", "relation": "affects", "status": "retracted"},  # inactive
        {"from": "pat-1795309051-4d1c", "to": "pattern-1f2e3d4c", "relation": "derived_from"},
    ]
    (records / GRAPH).write_bytes(_graph(edges, nodes))
    assert show(cli, "pat-1739102400-a1b2").split("\n\n")[-1] == (
        "status active · confidence 0.90 · validations 5 · tags bash\n"
        "Links:\n"
        "  -> contradicts -> anti-1739102500-c3d4 [anti-pattern] Secrets in shell history\n"
        "  <- learned_from <- fail-c0c437df [failure] ToolError: Permission denied writing cache\n"
        "  <- derived_from <- pat-1795309051-4d1c [lesson] Always set lock_timeout before ALTER TABLE on large tables\n"
    )
    assert show(cli, "fail-0badf00d").endswith("status active · confidence 0.80\n")  # the retracted edge is not shown


def test_show_dangling_edge_names_the_missing_id(cli, records: Path) -> None:
    """An edge to a record that no longer exists: `lore doctor` names the id, and so should `lore show`."""
    nodes = {"decision-f7d16ecb": {"type": "decision", "name": "dec-575c7671",
                                   "data": {"journal_id": "dec-575c7671", "decision": "Use JSONL"}}}  # fmt: skip
    edges = [
        {"from": "fail-c0c437df", "to": "decision-f7d16ecb", "relation": "relates_to"},
        {"from": "obs-5e6f7a8b", "to": "fail-c0c437df", "relation": "affects"},
    ]
    (records / GRAPH).write_bytes(_graph(edges, nodes))
    assert show(cli, "fail-c0c437df").split("Links:\n")[1] == (
        "  -> relates_to -> dec-575c7671 (missing record)\n"
        "  <- affects <- obs-5e6f7a8b (missing record)\n"
    )


# -- lore show: id prefixes and unknown ids -------------------------------------------------------


def test_show_unique_prefix_without_building_the_index(cli, records: Path, tmp_path: Path) -> None:
    by_prefix = cli("show", "anti-17391")
    assert by_prefix.exit_code == 0
    assert by_prefix.stdout == show(cli, "anti-1739102500-c3d4")
    assert cli("show", "fail-c").stdout.startswith("fail-c0c437df  failure  x2")  # six characters suffice
    assert not (tmp_path / "index").exists()  # show reads the files, never the derived index


def test_show_prefix_shorter_than_six_characters_is_not_resolved(cli, records: Path) -> None:
    result = cli("show", "anti-")  # matches one record, but is too short to be taken as its id
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == ("Error: no record with id 'anti-'\n"
                             "Hint: a prefix needs at least 6 characters and must match one record\n")


def test_show_ambiguous_prefix_says_so_and_lists_the_candidates(cli, records: Path) -> None:
    result = cli("show", "pat-17391")
    assert result.exit_code == 1
    assert result.stdout == ""
    message, hint = result.stderr.splitlines()
    assert hint == "Hint: did you mean pat-1739102400-a1b2, pat-1739102600-e5f6?"
    # Two records match: "no record with id" is wrong; the message should call the prefix ambiguous.
    assert message.startswith("Error: ") and "ambiguous" in message and "no record" not in message


def test_show_unknown_id_is_an_error_with_a_hint(cli, records: Path) -> None:
    result = cli("show", "obs-00000000")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == "Error: no record with id 'obs-00000000'\nHint: list ids with `lore list`\n"


# -- lore audit -------------------------------------------------------------------------------------


@pytest.fixture
def audited(cli, initialised: Path) -> tuple[Path, list[dict]]:
    """Four audited writes through the CLI: two observations, a link, a retraction."""
    for text in ("CI flakes on the arm runner", "The arm runner has too little memory"):
        assert cli("observe", text).exit_code == 0
    first, second = (r["id"] for r in read_jsonl(initialised / OBSERVATIONS))
    assert cli("link", first, second, "relates_to").exit_code == 0
    assert cli("retract", second, "--reason", "Memory was raised").exit_code == 0
    entries = read_jsonl(initialised / AUDIT)
    assert [e["op"] for e in entries] == ["retain", "retain", "link", "retract"]
    return initialised / AUDIT, entries


def test_audit_verify_intact(cli, audited: tuple[Path, list[dict]]) -> None:
    result = cli("audit", "verify")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "Audit log intact: 4 entries\n", "")


def test_audit_verify_without_any_writes(cli, initialised: Path) -> None:
    assert cli("audit", "verify").stdout == "Audit log intact: 0 entries\n"


def _rewrite(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(line + b"\n" for line in lines))


def _tamper(how: str, path: Path) -> None:
    lines = path.read_bytes().splitlines()
    if how == "edited":
        entry = orjson.loads(lines[1])
        entry["actor"] = "someone-else"
        lines[1] = orjson.dumps(entry)
    elif how == "edited-and-rehashed":
        entry = orjson.loads(lines[1])
        entry["actor"] = "someone-else"
        body = {k: v for k, v in entry.items() if k != "hash"}
        entry["hash"] = hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()
        lines[1] = orjson.dumps(entry)
    elif how == "removed":
        del lines[1]
    elif how == "removed-first":
        del lines[0]
    elif how == "reordered":
        lines[2], lines[3] = lines[3], lines[2]
    elif how == "not-json":
        lines[2] = lines[2][:40]  # a line cut short
    _rewrite(path, lines)


@pytest.mark.parametrize(
    ("how", "where", "message"),
    [
        ("edited", "seq 2 ({path}:2)", "hash does not match the entry's content (it was edited)"),
        # the edited entry re-hashed: the chain breaks at the next entry, which no longer points to it
        ("edited-and-rehashed", "seq 3 ({path}:3)", "prev_hash does not match the previous entry's hash"),
        ("removed", "seq 3 ({path}:2)", "expected seq 2, found 3 (an entry was removed, inserted or reordered)"),
        ("removed-first", "seq 2 ({path}:1)", "expected seq 1, found 2 (an entry was removed, inserted or reordered)"),
        ("reordered", "seq 4 ({path}:3)", "expected seq 3, found 4 (an entry was removed, inserted or reordered)"),
        ("not-json", "line 3 ({path}:3)", "line is not a JSON object"),
    ],
)
def test_audit_verify_names_the_broken_entry(cli, audited: tuple[Path, list[dict]], how: str, where: str,
                                            message: str) -> None:  # fmt: skip
    path, _ = audited
    _tamper(how, path)
    result = cli("audit", "verify")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == f"Audit log broken at {where.format(path=path)}: {message}\n"


def test_audit_log_text_lists_every_entry_with_detail(cli, audited: tuple[Path, list[dict]]) -> None:
    _, entries = audited
    first, second = entries[0]["id"], entries[1]["id"]
    ts = [e["timestamp"] for e in entries]
    result = cli("audit", "log")
    assert result.exit_code == 0
    assert result.stdout == (
        f"    1 {ts[0]} retain    {first} test\n"
        f"    2 {ts[1]} retain    {second} test\n"
        f"    3 {ts[2]} link      {first} test to={second} relation=relates_to\n"
        f"    4 {ts[3]} retract   {second} test reason=Memory was raised\n"
    )


def test_audit_log_leaves_out_details_that_were_not_given(cli, audited: tuple[Path, list[dict]]) -> None:
    _, entries = audited
    first, second = entries[0]["id"], entries[1]["id"]
    assert cli("unlink", first, second).exit_code == 0  # no --relation: every edge between them
    last = cli("audit", "log").stdout.splitlines()[-1]
    assert last.endswith(f"unlink    {first} test to={second}"), last  # not "relation=None"


def test_audit_log_for_a_record_includes_links_to_it(cli, audited: tuple[Path, list[dict]]) -> None:
    _, entries = audited
    first, second = entries[0]["id"], entries[1]["id"]
    ops = [line.split()[2] for line in cli("audit", "log", "--id", second).stdout.splitlines()]
    assert ops == ["retain", "link", "retract"]  # the link was written under the first record
    assert [line.split()[2] for line in cli("audit", "log", "--id", first).stdout.splitlines()] == ["retain", "link"]


def test_list_shortens_long_titles_at_a_word(cli, initialised: Path) -> None:
    title = "Route every outbound payment provider call through one client with shared timeouts and retries"
    assert cli("remember", title, "-r", "One place to tune").exit_code == 0
    line = cli("list").stdout.splitlines()[0]
    shown = line.split(" acme-api ", 1)[1].strip()
    assert shown.endswith("…") and title.startswith(shown.removesuffix("…"))
    assert title[len(shown) - 1] == " ", f"cut mid-word: {shown!r}"


def test_list_columns_line_up_whatever_the_id_length(cli, records: Path) -> None:
    lines = cli("list").stdout.splitlines()
    assert any(line.startswith("session-") for line in lines) and any(line.startswith("fail-") for line in lines)
    dates = {re.search(r" \d{4}-\d{2}-\d{2}  ", line).start() for line in lines}  # type: ignore[union-attr]
    assert len(dates) == 1, lines  # every date (and so every column after it) starts at the same offset
    project_at = dates.pop() + len(" 2026-01-01  ") + 12 + 1
    # Where the title starts: after the project name and its padding.
    title_at = {len(line) - len(line[project_at:].split(" ", 1)[1].lstrip(" ")) for line in lines}
    assert len(title_at) == 1, lines  # and every title after the widest project


def test_audit_log_json_and_id_filter(cli, audited: tuple[Path, list[dict]]) -> None:
    path, entries = audited
    assert cli("audit", "log", "--json").stdout == path.read_text()  # the stored lines, verbatim
    second = entries[1]["id"]
    filtered = cli("audit", "log", "--id", second, "--json").stdout
    assert [orjson.loads(line) for line in filtered.splitlines()] == [entries[1], entries[2], entries[3]]
    text = cli("audit", "log", "--id", second).stdout
    assert text == (
        f"    2 {entries[1]['timestamp']} retain    {second} test\n"
        f"    3 {entries[2]['timestamp']} link      {entries[0]['id']} test to={second} relation=relates_to\n"
        f"    4 {entries[3]['timestamp']} retract   {second} test reason=Memory was raised\n"
    )
    nothing = cli("audit", "log", "--id", "obs-00000000")
    assert (nothing.exit_code, nothing.stdout) == (0, "")


def test_audit_log_skips_a_damaged_line(cli, audited: tuple[Path, list[dict]]) -> None:
    path, entries = audited
    _tamper("not-json", path)
    shown = [orjson.loads(line) for line in cli("audit", "log", "--json").stdout.splitlines()]
    assert shown == [entries[0], entries[1], entries[3]]


def test_audit_commands_need_a_data_dir(cli, data_dir: Path) -> None:
    for args in (("audit", "verify"), ("audit", "log")):
        result = cli(*args)
        assert result.exit_code == 1, args
        assert result.stdout == ""
        assert result.stderr == (
            f"Error: data directory {data_dir} does not exist\n"
            "Hint: create it with `lore init`, or point --data-dir / LORE_DATA_DIR at an existing one\n"
        ), args


# -- lore index ------------------------------------------------------------------------------------


def test_index_status_before_any_build(cli, initialised: Path, tmp_path: Path) -> None:
    index_dir = tmp_path / "index"
    result = cli("index", "status")
    assert result.exit_code == 0
    assert result.stdout == f"Index: {index_dir}\nState: missing (no index yet); run `lore index`\n"
    assert orjson.loads(cli("index", "status", "--json").stdout) == {
        "index_dir": str(index_dir), "exists": False, "stale": True, "reason": "no index yet", "counts": {},
        "records": 0, "embeddings": False, "model": None, "model_spec": None, "size_bytes": 0,
        "built_at": None, "updated_at": None, "revision": None,
    }  # fmt: skip


def test_index_build_status_refresh_and_up_to_date(cli, records: Path, tmp_path: Path) -> None:
    index_dir = tmp_path / "index"
    built = cli("index")
    assert built.exit_code == 0, built.output
    assert re.fullmatch(r"Built index of 8 records in \d+\.\d\ds\n", built.stdout), built.stdout

    status = orjson.loads(cli("index", "status", "--json").stdout)
    assert (status["exists"], status["stale"], status["reason"], status["revision"]) == (True, False, "up to date", 1)
    assert sorted(status["counts"].items()) == [("anti_pattern", 1), ("failure", 2), ("handoff", 2), ("lesson", 1),
                                                ("pattern", 2)]  # fmt: skip
    counts = ", ".join(f"{k.replace('_', '-')} {v}" for k, v in status["counts"].items())  # text shows anti-pattern
    lines = cli("index", "status").stdout.splitlines()
    assert lines[:4] == [
        f"Index: {index_dir}",
        "State: up to date",
        f"Records: 8 ({counts})",
        f"Embeddings: {status['model']}",
    ]
    assert status["model"].startswith("bundled@")
    assert re.fullmatch(r"Size: \d+\.\d MB", lines[4]), lines[4]
    assert lines[5:] == [f"Built: {status['built_at']}, updated {status['updated_at']} (revision 1)"]

    # A record added to the files makes the index stale; `lore index` refreshes it incrementally.
    with (records / OBSERVATIONS).open("ab") as handle:
        handle.write(b'{"id":"obs-5e6f7a8b","timestamp":"2026-11-22T00:20:53Z","content":"CI flakes on the arm runner",'
                     b'"tags":[],"project":"x2","schema_version":1}\n')  # fmt: skip
    stale = cli("index", "status").stdout.splitlines()
    assert stale[1] == "State: stale (inbox/data/observations.jsonl changed)"
    assert stale[2] == f"Records: 8 ({counts})"  # what the index holds, not yet the new record
    refreshed = cli("index")
    assert re.fullmatch(r"Refreshed index: 1 added, 0 updated, 0 deleted \(9 records, \d+\.\d\ds\)\n",
                        refreshed.stdout), refreshed.stdout  # fmt: skip
    assert cli("index").stdout == "Index is up to date (9 records)\n"
    report = orjson.loads(cli("index", "--json").stdout)
    assert (report["mode"], report["records"], report["added"], report["warnings"]) == ("up-to-date", 9, 0, [])
    after = orjson.loads(cli("index", "status", "--json").stdout)
    assert (after["stale"], after["records"], after["revision"], after["counts"]["observation"]) == (False, 9, 2, 1)
    assert after["built_at"] == status["built_at"]


def test_linking_again_what_is_linked_adds_no_audit_entry(cli, audited: tuple[Path, list[dict]]) -> None:
    path, entries = audited
    first, second = entries[0]["id"], entries[1]["id"]
    before = path.read_text()
    assert cli("link", first, second, "relates_to").exit_code == 0
    assert path.read_text() == before
    assert cli("link", first, second, "relates_to", "--weight", "0.5").exit_code == 0  # a real change is audited
    assert path.read_text().count('"op":"link"') == 2
