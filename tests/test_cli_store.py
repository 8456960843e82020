"""CLI tests for the store commands: exact output and exact files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import yaml

from tests.conftest import read_jsonl

DECISIONS = Path("journal/data/decisions.jsonl")
PATTERNS = Path("patterns/data/patterns.yaml")


def only(path: Path) -> dict:
    rows = read_jsonl(path)
    assert len(rows) == 1, rows
    return rows[0]


def test_init_scaffolds_layout_and_is_idempotent(cli, data_dir: Path) -> None:
    result = cli("init")
    assert result.exit_code == 0
    assert result.stdout == (
        f"Initialised {data_dir}\n"
        "  created journal/data/decisions.jsonl\n"
        "  created failures/data/failures.jsonl\n"
        "  created inbox/data/observations.jsonl\n"
        "  created patterns/data/patterns.yaml\n"
        "  created transfer/data/sessions\n"
        "  created graph/data/graph.json\n"
    )
    assert yaml.safe_load((data_dir / PATTERNS).read_text()) == {"patterns": [], "anti_patterns": []}
    assert orjson.loads((data_dir / "graph/data/graph.json").read_bytes()) == {"nodes": {}, "edges": []}
    again = cli("init")
    assert again.stdout == f"{data_dir} is already initialised\n"


def test_init_git_writes_merge_attributes(cli, data_dir: Path) -> None:
    result = cli("init", "--git")
    assert "  created .gitattributes\n" in result.stdout
    assert "*.jsonl merge=lore" in (data_dir / ".gitattributes").read_text().splitlines()
    assert ".lore.lock" in (data_dir / ".gitignore").read_text().splitlines()


def test_remember_writes_original_schema_and_prints_id(cli, initialised: Path) -> None:
    result = cli(
        "remember", "Use Postgres advisory locks for the job queue",
        "--rationale", "Avoids double processing without a broker",
        "--alternative", "Redis + RQ", "--alternative", "SKIP LOCKED",
        "--tag", "queue,postgres", "--importance", "4", "--confidence", "0.9",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    record = only(initialised / DECISIONS)
    assert result.stdout == f"Remembered decision {record['id']}: Use Postgres advisory locks for the job queue\n"
    assert record["id"].startswith("dec-") and len(record["id"]) == 12
    assert record["decision"] == "Use Postgres advisory locks for the job queue"
    assert record["rationale"] == "Avoids double processing without a broker"
    assert record["alternatives"] == ["Redis + RQ", "SKIP LOCKED"]
    assert record["tags"] == ["queue", "postgres"]
    assert (record["importance"], record["confidence"]) == (4, 0.9)
    assert (record["outcome"], record["status"]) == ("pending", "active")
    assert record["superseded_by"] is None and record["retracted_reason"] is None
    assert record["project"] == "acme-api"  # the working directory's name
    assert record["schema_version"] == 1
    assert record["timestamp"].endswith("Z")


def test_project_option_and_project_yaml_and_git_origin(cli, initialised: Path, tmp_path: Path, monkeypatch) -> None:
    cli("--project", "explicit", "observe", "one")
    repo = tmp_path / "work" / "checkout"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text('[core]\n\tbare = false\n[remote "origin"]\n\turl = git@github.com:acme/billing-api.git\n')
    (repo / "src").mkdir()
    monkeypatch.chdir(repo / "src")
    cli("observe", "two")
    (repo / ".claude").mkdir()
    (repo / ".claude" / "project.yaml").write_text("project:\n  name: billing\n  owner: payments\n")
    cli("observe", "three")
    projects = [r["project"] for r in read_jsonl(initialised / "inbox/data/observations.jsonl")]
    assert projects == ["explicit", "billing-api", "billing"]


def test_learn_pattern_and_anti_pattern_yaml_shape(cli, initialised: Path) -> None:
    result = cli(
        "learn", "Retry with jitter", "--context", "Calls to flaky upstreams", "--problem", "Thundering herd",
        "--solution", "Exponential backoff with full jitter", "--category", "reliability",
        "--example-bad", "sleep(1) in a loop", "--example-good", "sleep(random.uniform(0, 2**n))",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = yaml.safe_load((initialised / PATTERNS).read_text())
    pattern = doc["patterns"][0]
    assert result.stdout == f"Learned pattern {pattern['id']}: Retry with jitter\n"
    assert pattern["examples"] == [{"bad": "sleep(1) in a loop"}, {"good": "sleep(random.uniform(0, 2**n))"}]
    assert pattern["validations"] == 0 and pattern["category"] == "reliability"
    assert (initialised / PATTERNS).read_text().startswith("# Pattern Learner Database\npatterns:\n  - id: pat-")
    anti = cli("learn", "Secrets in shell history", "--anti", "--symptom", "Tokens on the command line",
               "--risk", "History leaks", "--fix", "Read from a file", "--severity", "high")  # fmt: skip
    doc = yaml.safe_load((initialised / PATTERNS).read_text())
    assert anti.stdout == f"Learned anti-pattern {doc['anti_patterns'][0]['id']}: Secrets in shell history\n"
    assert doc["anti_patterns"][0]["severity"] == "high"


def test_handoff_and_resume(cli, initialised: Path) -> None:
    result = cli("handoff", "Auth 80% done; OAuth callback next", "--next", "Wire the callback",
                 "--blocker", "Waiting on client secret", "--question", "PKCE for the mobile app?")  # fmt: skip
    files = list((initialised / "transfer/data/sessions").glob("*.json"))
    assert len(files) == 1
    session = orjson.loads(files[0].read_bytes())
    assert result.stdout == f"Handed off handoff {session['id']}: Auth 80% done; OAuth callback next\n"
    assert files[0].name == session["id"] + ".json"
    assert session["handoff"]["message"] == "Auth 80% done; OAuth callback next"
    assert session["handoff"]["next_steps"] == ["Wire the callback"]
    assert session["context"]["project"] == "acme-api"
    resume = cli("resume")
    assert resume.stdout == (
        f"Last handoff for acme-api (0min ago, {session['id']})\n\n"
        "Auth 80% done; OAuth callback next\n\n"
        "Next steps:\n  - Wire the callback\n\n"
        "Blockers:\n  - Waiting on client secret\n\n"
        "Open questions:\n  - PKCE for the mobile app?\n"
    )


def test_resume_without_handoff_is_a_clear_error(cli, initialised: Path) -> None:
    result = cli("resume")
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: no handoff for project 'acme-api'\nHint: leave one with `lore handoff TEXT --next ...`\n"
    )


def test_capture_routes_like_the_original(cli, initialised: Path) -> None:
    cli("capture", "Adopt ruff", "--rationale", "One fast linter")
    cli("capture", "Guard clauses", "--solution", "Return early")
    cli("capture", "Timeout", "--error-type", "ToolError")
    cli("capture", "The build cache is cold on Mondays")
    assert read_jsonl(initialised / DECISIONS)[0]["decision"] == "Adopt ruff"
    assert yaml.safe_load((initialised / PATTERNS).read_text())["patterns"][0]["solution"] == "Return early"
    failure = read_jsonl(initialised / "failures/data/failures.jsonl")[0]
    assert (failure["error_type"], failure["error_message"]) == ("ToolError", "Timeout")
    assert read_jsonl(initialised / "inbox/data/observations.jsonl")[0]["content"] == "The build cache is cold on Mondays"


def test_show_exact_output_with_links(cli, initialised: Path) -> None:
    cli("observe", "Payments webhooks arrive out of order", "--tag", "payments")
    cli("fail", "Timeout", "Webhook handler took 31s", "--tool", "pytest")
    obs = read_jsonl(initialised / "inbox/data/observations.jsonl")[0]
    fail = read_jsonl(initialised / "failures/data/failures.jsonl")[0]
    assert cli("link", fail["id"], obs["id"], "learned_from").stdout == f"Linked {fail['id']} -learned_from-> {obs['id']}\n"
    day = obs["timestamp"][:10]
    result = cli("show", obs["id"][:8])  # a unique prefix works
    assert result.stdout == (
        f"{obs['id']}  observation  acme-api  {day} (0min ago)\n"
        "Payments webhooks arrive out of order\n"
        "\n"
        "status active · confidence 0.80 · tags payments\n"
        "Links:\n"
        f"  <- learned_from <- {fail['id']} [failure] Timeout: Webhook handler took 31s\n"
    )
    payload = orjson.loads(cli("show", obs["id"], "--json").stdout)
    assert payload["type"] == "observation" and payload["record"] == obs
    assert payload["links"] == [{"from": fail["id"], "to": obs["id"], "relation": "learned_from", "weight": 1.0}]


def test_show_unknown_id_exits_1_with_message(cli, initialised: Path) -> None:
    result = cli("show", "dec-ffffffff")
    assert result.exit_code == 1
    assert result.stderr == "Error: no record with id 'dec-ffffffff'\nHint: list ids with `lore list`\n"


def test_list_filters_and_json(cli, initialised: Path) -> None:
    lines = [
        '{"id":"dec-00000001","timestamp":"2025-01-01T00:00:00Z","decision":"Old choice","tags":["db"],"project":"a"}',
        '{"id":"dec-00000002","timestamp":"2025-06-01T00:00:00Z","decision":"Middle choice","tags":["db","perf"],"project":"b"}',
        '{"id":"dec-00000003","timestamp":"2025-09-01T00:00:00Z","decision":"Gone choice","status":"retracted","project":"a"}',
    ]
    (initialised / DECISIONS).write_text("\n".join(lines) + "\n")
    out = cli("list", "--type", "decision").stdout
    assert out == (
        "dec-00000002 2025-06-01  decision     b Middle choice\n"
        "dec-00000001 2025-01-01  decision     a Old choice\n"
    )
    assert "Gone choice [retracted]" in cli("list", "--type", "decision", "--all").stdout
    assert cli("list", "--project", "a").stdout.count("\n") == 1
    assert [r["id"] for r in orjson.loads(cli("list", "--tag", "perf", "--json").stdout)] == ["dec-00000002"]
    since = orjson.loads(cli("list", "--type", "decision", "--since", "2025-03-01", "--until", "2025-12-31", "--json").stdout)
    assert [r["id"] for r in since] == ["dec-00000002"]
    assert cli("list", "--since", "yesterday-ish").exit_code == 2


def test_retract_delete_supersede_validate(cli, initialised: Path) -> None:
    lines = [
        '{"id":"dec-aaaaaaaa","timestamp":"2025-01-01T00:00:00Z","decision":"Use Redis for sessions","project":"p","extra_field":{"keep":true}}',
        '{"id":"dec-bbbbbbbb","timestamp":"2025-02-01T00:00:00Z","decision":"Use Postgres for sessions","project":"p"}',
        '{"id":"dec-cccccccc","timestamp":"2025-03-01T00:00:00Z","decision":"Nightly VACUUM","project":"p"}',
    ]
    (initialised / DECISIONS).write_text("\n".join(lines) + "\n")
    assert cli("supersede", "dec-aaaaaaaa", "dec-bbbbbbbb").stdout == "dec-aaaaaaaa is superseded by dec-bbbbbbbb\n"
    rows = {r["id"]: r for r in read_jsonl(initialised / DECISIONS)}
    assert rows["dec-aaaaaaaa"]["status"] == "superseded"
    assert rows["dec-aaaaaaaa"]["superseded_by"] == "dec-bbbbbbbb"
    assert rows["dec-aaaaaaaa"]["extra_field"] == {"keep": True}  # unknown fields survive
    assert rows["dec-aaaaaaaa"]["status_changed_at"].endswith("Z")
    # the other lines are byte-identical
    text = (initialised / DECISIONS).read_text().splitlines()
    assert text[1:] == lines[1:]
    graph = orjson.loads((initialised / "graph/data/graph.json").read_bytes())
    assert [e["relation"] for e in graph["edges"]] == ["supersedes"]

    retract = cli("retract", "dec-cccccccc", "--reason", "Autovacuum is enough")
    assert retract.stdout == "Retracted decision dec-cccccccc: Nightly VACUUM\n"
    assert {r["id"]: r for r in read_jsonl(initialised / DECISIONS)}["dec-cccccccc"]["retracted_reason"] == "Autovacuum is enough"

    refused = cli("delete", "dec-cccccccc")
    assert refused.exit_code == 2 and "add --yes to confirm" in refused.stderr
    assert cli("delete", "dec-cccccccc", "--yes").stdout == "Deleted decision dec-cccccccc: Nightly VACUUM\n"
    assert "dec-cccccccc" not in (initialised / DECISIONS).read_text()

    cli("learn", "Guard clauses", "--solution", "Return early")
    pattern_id = yaml.safe_load((initialised / PATTERNS).read_text())["patterns"][0]["id"]
    first = cli("validate", pattern_id).stdout
    second = cli("validate", pattern_id).stdout
    # validate is `outcome --success`: the Beta mean (s + 4 * 0.5) / (s + 4), so 3/5 then 4/6.
    assert first == f"Validated {pattern_id}: 1 validation(s), confidence 0.60\n"
    assert second == f"Validated {pattern_id}: 2 validation(s), confidence 0.67\n"


def test_outcome_prune_restore(cli, initialised: Path) -> None:
    cli("learn", "Retry with jitter", "--solution", "Sleep a random share of the backoff")
    pattern_id = yaml.safe_load((initialised / PATTERNS).read_text())["patterns"][0]["id"]
    assert cli("outcome", pattern_id, "--success").stdout == (
        f"Recorded success of {pattern_id}: 1 success(es), 0 failure(s), confidence 0.60\n")
    # (0.6 * 5 + 0) / 6 = 0.5, then (0.5 * 6) / 7 = 0.4286, then 3 / 8 = 0.375
    for expected in ("0.50", "0.43", "0.38"):
        out = cli("outcome", pattern_id, "--failure").stdout
        assert out.endswith(f"failure(s), confidence {expected}\n"), out
    stored = yaml.safe_load((initialised / PATTERNS).read_text())["patterns"][0]
    assert (stored["validations"], stored["failures"], stored["confidence"]) == (1, 3, 0.375)
    assert cli("outcome", pattern_id).exit_code == 2  # --success or --failure is required

    cli("learn", "Untested idea", "--solution", "Nobody tried it yet", "--confidence", "0.1")
    assert cli("prune", "--below", "0.4", "--dry-run").stdout.startswith(f"Would retract {pattern_id} (confidence 0.38")
    assert yaml.safe_load((initialised / PATTERNS).read_text())["patterns"][0] == stored  # a dry run writes nothing
    out = cli("prune", "--below", "0.4").stdout
    assert out.startswith(f"Retracted {pattern_id} ") and "Untested idea" not in out
    pruned = yaml.safe_load((initialised / PATTERNS).read_text())["patterns"][0]
    assert pruned["status"] == "retracted" and pruned["retracted_reason"].startswith("pruned: reliability 0.38 below 0.40")
    assert cli("prune", "--below", "0.4").stdout == "No pattern with a recorded failure is below 0.40\n"
    assert cli("restore", pattern_id).stdout == f"Restored pattern {pattern_id}: Retry with jitter\n"
    restored = yaml.safe_load((initialised / PATTERNS).read_text())["patterns"][0]
    assert restored["status"] == "active" and restored["retracted_reason"] is None
    ops = [e["op"] for e in read_jsonl(initialised / "audit/log.jsonl") if e["id"] == pattern_id]
    assert ops == ["retain", "validate", "outcome", "outcome", "outcome", "prune", "restore"]
    refused = cli("restore", pattern_id)
    assert refused.exit_code == 2 and "only a retracted record can be restored" in refused.stderr


def test_unlink_and_unknown_relation(cli, initialised: Path) -> None:
    cli("observe", "a")
    cli("observe", "b")
    a, b = (r["id"] for r in read_jsonl(initialised / "inbox/data/observations.jsonl"))
    bad = cli("link", a, b, "likes")
    assert bad.exit_code == 2 and bad.stderr.startswith("Error: unknown relation 'likes'\nHint: relations: relates_to")
    cli("link", a, b, "relates_to")
    assert cli("unlink", a, b).stdout == f"Removed 1 edge(s) from {a} to {b}\n"
    assert cli("unlink", a, b).exit_code == 1


def test_stats_and_doctor_report_file_and_line(cli, initialised: Path) -> None:
    (initialised / DECISIONS).write_text(
        '{"id":"dec-00000001","timestamp":"2025-01-01T00:00:00Z","decision":"One","project":"p"}\n'
        "{not json\n"
        '{"id":"dec-00000001","timestamp":"2025-01-02T00:00:00Z","decision":"One, revised","project":"p","importance":9}\n'
    )
    (initialised / "graph/data/graph.json").write_text(
        '{\n  "nodes": {},\n  "edges": [\n    {"from": "dec-00000001", "to": "dec-99999999", "relation": "relates_to"},\n'
        '    {"from": "dec-00000001", "to": "dec-00000001", "relation": "likes"}\n  ]\n}\n'
    )
    result = cli("doctor")
    assert result.exit_code == 1
    decisions = initialised / DECISIONS
    graph = initialised / "graph/data/graph.json"
    lines = result.stdout.splitlines()
    lines = lines[: lines.index("Agent side:")]
    # orjson's wording of the parse error varies between versions; the location must not.
    assert lines[0].startswith(f"{decisions}:2: malformed: invalid JSON: ") and lines[0].endswith(" at column 2")
    assert lines[1:] == [
        f"{decisions}:3: malformed: field 'importance': expected an integer 1-5, found 9",
        f"{decisions}:1: duplicate-id: dec-00000001 also appears later; the last version wins",
        f"{graph}:4: dangling-edge: dec-00000001 -relates_to-> dec-99999999: dec-99999999 does not exist",
        f"{graph}:5: unknown-relation: relation 'likes' is not one of relates_to, depends_on, implements, "
        "learned_from, affects, produces, contradicts, supersedes, derived_from, part_of, summarized_by",
        f"5 problem(s) in {initialised}",
    ]
    stats = orjson.loads(cli("stats", "--json").stdout)
    assert stats["records"] == 1 and stats["by_type"] == {"decision": 1} and stats["warnings"] == 2


def test_doctor_clean(cli, initialised: Path) -> None:
    cli("observe", "hello world")
    result = cli("doctor")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[:2] == [f"No problems found in {initialised} (1 records, 1 audit entries)", "Agent side:"]
    assert lines[-1] == "No problems on the agent side"  # tests/test_doctor.py checks the agent side line by line


def test_version_is_fast_path_without_heavy_imports() -> None:
    code = (
        "import sys\nfrom lore.__main__ import main\nmain(['--version'])\n"
        "heavy = [m for m in ('typer', 'rich', 'numpy', 'whoosh', 'model2vec', 'networkx', 'yaml', 'click') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0].startswith("lore ")
    assert out.splitlines()[1] == "HEAVY []"


def test_python_dash_m_and_console_script() -> None:
    from lore import __version__

    out = subprocess.run([sys.executable, "-m", "lore", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout == f"lore {__version__}\n"


@pytest.mark.parametrize("output", [[], ["--json"], ["--explain"]])
def test_a_reader_that_stops_early_is_not_a_failure(data_dir: Path, output: list[str]) -> None:
    """`lore search ... | head`: exit 0 and say nothing once the reader has closed the pipe."""
    from lore import capture
    from lore.capture import WriteOptions
    from lore.store import Store

    store = Store(data_dir, actor="test")
    store.init()
    for i in range(30):
        capture.remember(store, f"Retry webhook delivery {i} with exponential backoff", project="p",
                         options=WriteOptions(check_duplicates=False))  # fmt: skip
    command = [sys.executable, "-m", "lore", "search", "retry webhook", "--limit", "30", *output]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()  # closed before lore writes a byte: every write meets a broken pipe
    stderr = process.stderr.read()
    assert process.wait(timeout=60) == 0
    assert stderr == b""


def test_an_unexpected_error_is_one_line_and_exit_70_without_debug(initialised: Path, monkeypatch, capsys) -> None:
    from lore.cli.app import run
    from lore.store.store import Store

    def broken_load(self):  # type: ignore[no-untyped-def]  # fault injection: a bug deep in the core
        raise RuntimeError("disk gremlin")

    monkeypatch.setattr(Store, "load", broken_load)
    assert run(["list"]) == 70
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == ("Error: unexpected RuntimeError: disk gremlin\n"
                            "Hint: this is a bug in lore; run the command again with --debug for the traceback\n")  # fmt: skip
    with pytest.raises(RuntimeError, match="disk gremlin"):
        run(["--debug", "list"])


def test_a_data_dir_that_is_a_file_or_cannot_be_made_is_a_clear_error(cli, tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    stats = cli("--data-dir", str(afile), "stats")
    assert (stats.exit_code, stats.stderr) == (1, f"Error: data directory {afile} is not a directory\n"
                                                  "Hint: point --data-dir / LORE_DATA_DIR at a directory\n")  # fmt: skip
    init = cli("--data-dir", str(afile), "init")
    assert (init.exit_code, init.stderr) == (1, f"Error: {afile} is a file, not a data directory\n"
                                                "Hint: choose another --data-dir, or move the file away\n")  # fmt: skip
    nested = cli("--data-dir", str(afile / "sub"), "init")
    assert (nested.exit_code, nested.stderr) == (1, f"Error: cannot create the data directory {afile / 'sub'}: "
                                                    "Not a directory\n")  # fmt: skip
    assert afile.read_text() == "not a directory"


def test_remember_refuses_an_unknown_decision_type(cli, initialised: Path) -> None:
    result = cli("remember", "Adopt uv", "--type", "bogus")
    assert (result.exit_code, result.stderr) == (
        2, "Error: type must be one of architecture, implementation, process, tooling, other, got 'bogus'\n")
    assert (initialised / "journal/data/decisions.jsonl").read_text() == ""
    assert cli("remember", "Adopt uv", "--type", "tooling").exit_code == 0


def test_the_first_write_creates_the_default_data_dir(tmp_path, monkeypatch, cli) -> None:  # type: ignore[no-untyped-def]
    # A fresh machine: no LORE_DATA_DIR, no ~/.local/share/lore. `lore remember` used to fail
    # with "data directory ... does not exist".
    monkeypatch.delenv("LORE_DATA_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    result = cli("remember", "Use PgBouncer in transaction mode", "-r", "asyncpg exhausted connections")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "xdg" / "lore" / "journal" / "data" / "decisions.jsonl").read_text().count("\n") == 1
    assert cli("search", "pgbouncer").exit_code == 0


def test_an_explicit_data_dir_that_does_not_exist_stays_an_error(tmp_path, cli) -> None:  # type: ignore[no-untyped-def]
    missing = tmp_path / "typo"
    result = cli("--data-dir", str(missing), "remember", "Use PgBouncer in transaction mode")
    assert result.exit_code == 1
    assert "does not exist" in result.stderr and not missing.exists()


def test_reflect_command(cli, initialised: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    assert cli("reflect").stderr == "Error: nothing to reflect on\nHint: record some memories first\n"
    cli("remember", "Store sessions in Postgres", "--rationale", "Transactions with orders")
    cli("observe", "Postgres session table needs an index on expires_at")
    script = tmp_path / "broken-llm.sh"
    script.write_text("#!/bin/sh\nexit 3\n")
    script.chmod(0o755)
    monkeypatch.setenv("LORE_LLM_CMD", str(script))
    result = cli("reflect", "--json")
    assert result.exit_code == 0
    assert result.stderr == "Warning: LORE_LLM_CMD failed (LORE_LLM_CMD exited 3); the reflection is extractive\n"
    stored = orjson.loads(result.stdout)
    observations = read_jsonl(initialised / "inbox/data/observations.jsonl")
    reflection = next(o for o in observations if o.get("type") == "reflection")
    assert stored["id"] == reflection["id"] and reflection["method"] == "extractive" and len(reflection["derived_from"]) == 2
    audit = read_jsonl(initialised / "audit/log.jsonl")
    assert [(e["op"], e["actor"]) for e in audit if e["id"] == reflection["id"]][:2] == [("reflect", "test"), ("link", "test")]
    monkeypatch.delenv("LORE_LLM_CMD")
    out = cli("reflect", "postgres sessions", "--lookback", "5").stdout
    assert out.startswith("Reflected obs-") and "Reflection on postgres sessions (2 record(s) considered)" in out


@pytest.mark.parametrize("args", [
    ["remember", "Use UTC everywhere", "-r", "one zone"], ["remember", "x", "--bogus"], ["remember"],
    ["remember", "--importance", "9", "x"], ["list", "--json"], ["list", "--bogus"], ["lesson", "show"],
    ["lesson", "--situation", "s"], ["audit", "bogus"], ["audit", "verify"], ["index", "status", "--bogus"],
    ["--project", "p", "learn", "a pattern"], ["--data-dir", "nowhere", "stats"], ["search"], ["show", "dec-00000000"],
])  # fmt: skip
def test_the_application_of_one_command_answers_as_the_whole_one(initialised: Path, tmp_path: Path,
                                                                  args: list[str]) -> None:  # fmt: skip
    """`lore X` builds only X's click command (the rest cost ~25 ms a process): the same output and exit code."""
    import re
    import shutil

    import typer
    from typer.testing import CliRunner

    from lore.cli.app import app, app_for

    one = app_for(args)
    assert len(typer.main.get_command(one).commands) == 1  # type: ignore[attr-defined]
    twin = tmp_path / "twin"
    shutil.copytree(initialised, twin)
    runner = CliRunner()
    got = runner.invoke(one, args)
    expected = runner.invoke(app, args, env={"LORE_DATA_DIR": str(twin)})
    ids = re.compile(r"\b(dec-[0-9a-f]{8}|pat-\d+-[0-9a-f]{4})\b")  # generated: the rest is the same bytes
    assert (got.exit_code, ids.sub("<id>", got.stdout), got.stderr) == (expected.exit_code, ids.sub("<id>", expected.stdout),
                                                                         expected.stderr)  # fmt: skip


@pytest.mark.parametrize("args", [[], ["--help"], ["remember", "--help"], ["rememebr", "x"], ["--version"]])
def test_help_and_unknown_commands_get_the_whole_application(args: list[str]) -> None:
    from lore.cli.app import app, app_for

    assert app_for(args) is app
