"""`lore consolidate` (review and merge near-duplicates), `lore migrate` (version 0 -> 1), and the
write-time duplicate check's candidate prefilter."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest
import yaml

from lore import capture
from lore.capture import WriteOptions
from lore.curate import dedup
from lore.curate.lessons import lesson_pattern_id
from lore.curate.similarity import tokens
from lore.errors import DuplicateError, ModelError
from lore.store import Store
from tests.conftest import read_jsonl
from tests.test_dedup import load_pairs

DECISIONS = Path("journal/data/decisions.jsonl")
PATTERNS = Path("patterns/data/patterns.yaml")
GRAPH = Path("graph/data/graph.json")
AUDIT = Path("audit/log.jsonl")
SESSIONS = Path("transfer/data/sessions")


@pytest.fixture(autouse=True)
def lexical_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clusters and duplicate checks without the embedding model: the same result on every machine."""

    def no_model(spec: str | None = None):
        raise ModelError("no model in these tests")

    monkeypatch.setattr("lore.embedder.get_query_encoder", no_model)


def line(raw: dict) -> bytes:
    return orjson.dumps(raw) + b"\n"


DEC_A = {"id": "dec-0000000a", "timestamp": "2026-01-01T10:00:00Z", "decision": "Store all timestamps in UTC",
         "rationale": "One time zone everywhere", "confidence": 0.9, "status": "active", "schema_version": 1}  # fmt: skip
DEC_B = {"id": "dec-0000000b", "timestamp": "2026-02-01T10:00:00Z", "decision": "store all timestamps in utc.",
         "rationale": "One time zone everywhere", "confidence": 0.7, "status": "active", "schema_version": 1,
         "custom_field": "kept"}  # fmt: skip
DEC_C = {"id": "dec-0000000c", "timestamp": "2026-01-15T10:00:00Z", "decision": "Adopt Tailwind for the design system",
         "schema_version": 1}  # fmt: skip
DEC_D = {"id": "dec-0000000d", "timestamp": "2026-01-20T10:00:00Z", "decision": "Store all timestamps in UTC",
         "rationale": "One time zone everywhere", "confidence": 0.8, "status": "superseded", "schema_version": 1}  # fmt: skip
PAT_1 = {"id": "pat-1700000000-aaaa", "name": "Graceful shutdown", "solution": "Finish in-flight jobs, then exit",
         "confidence": 0.6, "validations": 2, "created_at": "2026-01-05T00:00:00Z", "schema_version": 1}  # fmt: skip
PAT_2 = {"id": "pat-1700000001-bbbb", "name": "Graceful shutdown", "solution": "Finish in-flight jobs then exit",
         "confidence": 0.5, "validations": 0, "created_at": "2026-01-06T00:00:00Z", "schema_version": 1}  # fmt: skip


@pytest.fixture
def clustered(initialised: Path) -> Path:
    (initialised / DECISIONS).write_bytes(b"".join(line(r) for r in (DEC_A, DEC_B, DEC_C, DEC_D)))
    doc = {"patterns": [PAT_1, PAT_2], "anti_patterns": []}
    (initialised / PATTERNS).write_text("# Pattern Learner Database\n" + yaml.safe_dump(doc, sort_keys=False))
    return initialised


REVIEW_DECISIONS = (
    "Cluster 1: 2 decision records\n"
    "  dec-0000000a           2026-01-01  0.90  100% exact     Store all timestamps in UTC\n"
    "  dec-0000000b           2026-02-01  0.70  keep           store all timestamps in utc.\n"
)
REVIEW_PATTERNS = (
    "Cluster 2: 2 pattern records\n"
    "  pat-1700000000-aaaa    2026-01-05  0.60  100% exact     Graceful shutdown\n"
    "  pat-1700000001-bbbb    2026-01-06  0.50  keep           Graceful shutdown\n"
)


def test_consolidate_lists_clusters_and_writes_nothing(cli, clustered: Path) -> None:
    before = {p: p.read_bytes() for p in clustered.rglob("*") if p.is_file()}
    result = cli("consolidate")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        REVIEW_DECISIONS + "\n" + REVIEW_PATTERNS
        + "\n2 cluster(s); `lore consolidate --apply` merges them (asks per cluster)\n"
    )  # fmt: skip
    assert result.stderr == "Note: semantic duplicate check skipped: no model in these tests\n"
    assert {p: p.read_bytes() for p in clustered.rglob("*") if p.is_file()} == before


def test_consolidate_type_filter(cli, clustered: Path) -> None:
    result = cli("consolidate", "--type", "pattern")
    assert result.stdout == (
        REVIEW_PATTERNS.replace("Cluster 2", "Cluster 1")
        + "\n1 cluster(s); `lore consolidate --apply` merges them (asks per cluster)\n"
    )
    bad = cli("consolidate", "--type", "handoff")
    assert (bad.exit_code, bad.stderr) == (
        2, "Error: cannot consolidate handoff records\nHint: types: decision, pattern, anti-pattern\n",
    )  # fmt: skip


def test_consolidate_apply_with_nothing_to_answer_is_a_usage_error(cli, clustered: Path) -> None:
    result = cli("consolidate", "--apply", input="")  # no terminal, nothing piped
    assert result.exit_code == 2
    assert result.stderr.endswith("Error: --apply asks before each merge, and nothing answered\n"
                                  "Hint: review with `lore consolidate`, then run `lore consolidate --apply --yes`\n")  # fmt: skip
    assert "Aborted" not in result.output
    assert "Merged" not in result.stdout


def test_consolidate_apply_asks_per_cluster(cli, clustered: Path) -> None:
    result = cli("consolidate", "--apply", input="y\nn\n")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        REVIEW_DECISIONS
        + "Merge 1 record(s) into dec-0000000b? [y/N]: y\n"
        + "Merged dec-0000000a into dec-0000000b (confidence 0.90)\n"
        + "\n"
        + REVIEW_PATTERNS
        + "Merge 1 record(s) into pat-1700000001-bbbb? [y/N]: n\n"
        + "Skipped cluster 2\n"
        + "\nMerged 1 of 2 cluster(s)\n"
    )
    a, b, c, d = read_jsonl(clustered / DECISIONS)
    # The survivor (newest) takes the highest confidence; every other field is kept.
    assert b == {**DEC_B, "confidence": 0.9, "updated_at": b["updated_at"]}
    # The merged record is superseded, never deleted.
    assert a == {**DEC_A, "status": "superseded", "superseded_by": "dec-0000000b",
                 "status_changed_at": a["status_changed_at"], "updated_at": a["updated_at"]}  # fmt: skip
    assert (c, d) == (DEC_C, DEC_D)
    graph = orjson.loads((clustered / GRAPH).read_bytes())
    names = {key: node["name"] for key, node in graph["nodes"].items()}
    assert [(names[e["from"]], names[e["to"]], e["relation"]) for e in graph["edges"]] == [
        ("dec-0000000b", "dec-0000000a", "supersedes")
    ]
    entries = read_jsonl(clustered / AUDIT)
    assert [(e["op"], e["id"]) for e in entries] == [
        ("merge", "dec-0000000b"), ("supersede", "dec-0000000a"), ("link", "dec-0000000b"),
    ]  # fmt: skip
    assert entries[0]["detail"]["merged"] == ["dec-0000000a"] and entries[0]["detail"]["confidence"] == 0.9
    # The skipped cluster is untouched.
    assert yaml.safe_load((clustered / PATTERNS).read_text())["patterns"] == [PAT_1, PAT_2]
    again = cli("consolidate", "--type", "decision")
    assert again.stdout == "No near-duplicates found\n"


def test_consolidate_apply_yes_merges_every_cluster(cli, clustered: Path) -> None:
    result = cli("consolidate", "--apply", "--yes")
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith(
        "Merged pat-1700000000-aaaa into pat-1700000001-bbbb (confidence 0.60)\n\nMerged 2 of 2 cluster(s)\n"
    )
    old, survivor = yaml.safe_load((clustered / PATTERNS).read_text())["patterns"]
    assert survivor == {**PAT_2, "confidence": 0.6, "validations": 1, "updated_at": survivor["updated_at"]}
    assert (old["status"], old["superseded_by"]) == ("superseded", PAT_2["id"])
    assert cli("consolidate").stdout == "No near-duplicates found\n"


def test_consolidate_yes_needs_apply_and_empty_store(cli, initialised: Path) -> None:
    bad = cli("consolidate", "--yes")
    assert (bad.exit_code, bad.stderr) == (2, "Error: --yes only makes sense with --apply\n")
    assert cli("consolidate").stdout == "No near-duplicates found\n"


def test_survivor_rule_ties() -> None:
    from lore.curate.consolidate import choose_survivor
    from lore.store.records import Record

    same_time = {"timestamp": "2026-01-01T00:00:00Z", "decision": "x"}
    low = Record("decision", "dec-00000002", {**same_time, "confidence": 0.5})
    high = Record("decision", "dec-00000001", {**same_time, "confidence": 0.9})
    newer = Record(
        "decision", "dec-00000003", {"timestamp": "2026-01-02T00:00:00Z", "decision": "x", "confidence": 0.1}
    )
    assert choose_survivor([low, high]) is high
    assert choose_survivor([low, high, newer]) is newer


# -- migrate ---------------------------------------------------------------------------------------

OLD_DECISION = {"id": "dec-000000f1", "timestamp": "2025-01-01T00:00:00Z", "decision": "Use JSONL for the journal",
                "rationale": "Greppable", "outcome": "successful", "type": "implementation", "spec_quality": 0.5}  # fmt: skip
NEW_DECISION = {
    "id": "dec-000000f2",
    "timestamp": "2026-01-01T00:00:00Z",
    "decision": "Use ruff",
    "schema_version": 1,
}
OLD_PATTERNS = """# Pattern Learner Database
patterns:
  - id: "pat-1739102400-a1b2"
    name: "Safe bash arithmetic"
    solution: "Use x=$((x + 1)) instead"
    confidence: 0.9
    origin: "session-2026-02-09"
  - id: "pat-1739102401-c3d4"
    kind: lesson
    name: "Quote variables"
    error_pattern: "Word splitting broke a path"
    scope: "bash"
    confidence: 0.6
    tags: ["bash"]
anti_patterns:
  - id: "anti-1739102500-c3d4"
    name: "Secrets in shell history"
    severity: "high"
    schema_version: 1
"""
OLD_SESSION = {"id": "session-20250101-000000-aaaaaaaa", "handoff": "Auth half done", "next_steps": ["callback"],
               "project": "x2", "timestamp": "2025-01-01T00:00:00Z"}  # fmt: skip


@pytest.fixture
def version0(initialised: Path) -> Path:
    (initialised / DECISIONS).write_bytes(
        line(OLD_DECISION) + b"\n" + line(NEW_DECISION)
    )  # a blank line kept
    (initialised / PATTERNS).write_text(OLD_PATTERNS)
    (initialised / SESSIONS / f"{OLD_SESSION['id']}.json").write_bytes(orjson.dumps(OLD_SESSION))
    return initialised


PLAN = (
    "journal/data/decisions.jsonl: 1 record(s)\n"
    "  dec-000000f1: + alternatives, status, superseded_by, retracted_reason, status_changed_at, tags, project, "
    "importance, confidence, schema_version\n"
    "patterns/data/patterns.yaml: 2 record(s)\n"
    "  pat-1739102400-a1b2: + validations, examples, tags, project, schema_version\n"
    "  pat-1739102401-c3d4: + validations, project, rule_confidence, tags[lesson_learned], lesson_pattern_id, "
    "schema_version\n"
    "transfer/data/sessions/session-20250101-000000-aaaaaaaa.json: 1 record(s)\n"
    "  session-20250101-000000-aaaaaaaa: + schema_version\n"
)


def snapshot_files(root: Path) -> dict[Path, bytes]:
    return {
        p.relative_to(root): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".lore.lock"
    }


def test_migrate_dry_run_writes_nothing(cli, version0: Path) -> None:
    before = snapshot_files(version0)
    result = cli("migrate", "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.stdout == PLAN + "Would migrate 4 record(s) in 3 file(s)\n"
    assert snapshot_files(version0) == before


def test_migrate_upgrades_backs_up_and_audits(cli, version0: Path) -> None:
    before = snapshot_files(version0)
    result = cli("migrate")
    assert result.exit_code == 0, result.output
    [backup] = list((version0 / "backups").iterdir())
    assert result.stdout == PLAN + f"Migrated 4 record(s) in 3 file(s)\nBackups in {backup}\n"
    # Backups hold the files exactly as they were.
    for relative in (DECISIONS, PATTERNS, SESSIONS / f"{OLD_SESSION['id']}.json"):
        assert (backup / relative).read_bytes() == before[relative]
    assert len(list(backup.rglob("*.*"))) == 3
    # Decisions: fields added at the end, nothing dropped; the version-1 line and the blank line untouched.
    old_line, blank, new_line, end = (version0 / DECISIONS).read_bytes().split(b"\n")
    assert (blank, new_line, end) == (b"", orjson.dumps(NEW_DECISION), b"")
    assert orjson.loads(old_line) == {
        **OLD_DECISION, "alternatives": [], "status": "active", "superseded_by": None, "retracted_reason": None,
        "status_changed_at": None, "tags": [], "project": None, "importance": 3, "confidence": 0.8,
        "schema_version": 1,
    }  # fmt: skip
    assert list(orjson.loads(old_line))[: len(OLD_DECISION)] == list(OLD_DECISION)
    doc = yaml.safe_load((version0 / PATTERNS).read_text())
    pattern, lesson = doc["patterns"]
    assert pattern == {"id": "pat-1739102400-a1b2", "name": "Safe bash arithmetic",
                       "solution": "Use x=$((x + 1)) instead", "confidence": 0.9, "origin": "session-2026-02-09",
                       "validations": 0, "examples": [], "tags": [], "project": None, "schema_version": 1}  # fmt: skip
    assert lesson == {"id": "pat-1739102401-c3d4", "kind": "lesson", "name": "Quote variables",
                      "error_pattern": "Word splitting broke a path", "scope": "bash", "confidence": 0.6,
                      "tags": ["bash", "lesson_learned"], "validations": 0, "project": None, "rule_confidence": 0.6,
                      "lesson_pattern_id": lesson_pattern_id("Word splitting broke a path", "bash"),
                      "schema_version": 1}  # fmt: skip
    assert doc["anti_patterns"] == [{"id": "anti-1739102500-c3d4", "name": "Secrets in shell history",
                                     "severity": "high", "schema_version": 1}]  # fmt: skip
    session = orjson.loads((version0 / SESSIONS / f"{OLD_SESSION['id']}.json").read_bytes())
    assert session == {**OLD_SESSION, "schema_version": 1}
    entries = read_jsonl(version0 / AUDIT)
    assert [(e["op"], e["id"]) for e in entries] == [
        ("migrate", "dec-000000f1"), ("migrate", "pat-1739102400-a1b2"), ("migrate", "pat-1739102401-c3d4"),
        ("migrate", OLD_SESSION["id"]),
    ]  # fmt: skip
    assert entries[0]["detail"]["file"] == "journal/data/decisions.jsonl"
    assert entries[0]["detail"]["backup"] == f"backups/{backup.name}/journal/data/decisions.jsonl"
    # Reading gives the same records, now all at version 1; migrating again is a no-op.
    records = Store(version0).load().records
    assert all(r.schema_version == 1 for r in records.values())
    assert records["pat-1739102401-c3d4"].confidence == 0.6
    again = cli("migrate")
    assert again.stdout == "Nothing to migrate: every record has schema_version 1\n"


def test_migrate_refuses_a_file_that_did_not_parse(cli, version0: Path) -> None:
    with (version0 / DECISIONS).open("ab") as handle:
        handle.write(b'{"id": "dec-broken", "decision": \n')
    before = snapshot_files(version0)
    result = cli("migrate")
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {version0 / DECISIONS}:4: refusing to rewrite a file that did not parse completely "
        "(invalid JSON: unexpected end of data at column 33)\n"
        "Hint: fix or remove the bad line first; `lore doctor` lists every problem\n"
    )
    assert snapshot_files(version0) == before
    assert not (version0 / "backups").exists()


def test_migrate_the_original_bash_lore_dir(cli, bash_lore_copy: Path) -> None:
    before = Store(bash_lore_copy).load().records
    result = cli("--data-dir", str(bash_lore_copy), "migrate")
    assert result.exit_code == 0, result.output
    after = Store(bash_lore_copy).load().records
    assert set(after) == set(before)
    for record_id, record in before.items():
        upgraded = after[record_id].raw
        assert upgraded["schema_version"] == 1
        assert {k: upgraded[k] for k in record.raw} == record.raw  # every original field, unchanged
        assert (after[record_id].confidence, after[record_id].importance) == (
            record.confidence,
            record.importance,
        )


# -- the write-time prefilter ------------------------------------------------------------------------


def test_the_duplicate_check_analyses_text_as_the_search_index_does() -> None:
    from lore import analysis

    texts = [
        dedup._join(*dedup.compared_text(p["kind"], raw)) for p in load_pairs() for raw in (p["a"], p["b"])
    ]
    texts += ["", "lock_timeout v2.1.0 --flag builtin/fetch.c", "Caching cached caches"]
    for text in texts:
        if "'" not in text and "\u2019" not in text:
            assert tokens(text) == analysis.terms(text.casefold()), text
    # The one difference: contractions are spelt out, so a negation is a word (the index drops "don't").
    assert tokens("Don't use café’s NFKC ﬁle; can't won't") == ["not", "use", "café", "nfkc", "file", "not", "not"]
    assert "not" not in analysis.terms("Don't use it")


def test_shortlist_keeps_the_closest() -> None:
    from lore.curate.similarity import Bm25Stats

    docs = [
        tokens(t) for t in ("use postgres advisory locks", "postgres backups nightly", "tailwind css", "")
    ]
    query = tokens("use postgres advisory locks for the queue")
    stats = Bm25Stats.build([*docs, query])
    assert dedup.shortlist(query, docs, stats, 1) == [0]
    assert dedup.shortlist(query, docs, stats, 10) == [0, 1]  # no shared word: never a candidate


def test_write_check_embeds_a_bounded_shortlist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "big")
    store.init()
    rows = [{"id": f"dec-{i:08x}", "decision": f"Adopt service {i} for workload {i * 7}", "schema_version": 1}
            for i in range(300)]  # fmt: skip
    rows.append({"id": "dec-ffffffff", "decision": "Use Postgres advisory locks for the job queue",
                 "rationale": "No separate broker", "schema_version": 1})  # fmt: skip
    store.path(DECISIONS).write_bytes(b"".join(line(r) for r in rows))
    batches: list[int] = []

    class Fake:
        def encode(self, texts: list[str]) -> np.ndarray:
            batches.append(len(texts))
            vectors = np.zeros((len(texts), 4), dtype=np.float32)
            vectors[:, 0] = 1.0
            return vectors

    monkeypatch.setattr("lore.embedder.get_query_encoder", lambda spec=None: Fake())
    with pytest.raises(DuplicateError) as caught:
        capture.remember(store, "use postgres advisory locks for the job queue.", project="x",
                         rationale="No separate broker", options=WriteOptions(redact=False))  # fmt: skip
    assert caught.value.existing_id == "dec-ffffffff"
    # Three texts per record (primary, full, core): the new one and at most EMBED_CANDIDATES others.
    assert batches and max(batches) <= 3 * (dedup.EMBED_CANDIDATES + 1)
