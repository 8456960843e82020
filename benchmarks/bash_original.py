"""The original bash Lore's `lore search`, side by side with lore's, on the same decisions.

The original is github.com/tslateman/lore at commit c536858. Its `lore search
<query>` (``cmd_search`` and ``_search_fts5`` in ``lore.sh``) does, on every call:

* bash parses ``lore.sh`` (about 2,900 lines) and sources ``lib/paths.sh``;
* it quotes each space-separated word of the query for FTS5 (one ``sed``);
* it runs one ``sqlite3 -separator $'\\t' $LORE_SEARCH_DB`` process, the SQL on
  stdin: a UNION ALL of an FTS5 ``MATCH`` over six tables (decisions, patterns,
  transfers, failures, observations, concepts), joined to an access-log
  frequency CTE and scored by BM25 x recency x access x importance x project,
  top 10;
* for each result line it prints and runs one more ``sqlite3`` process (an
  ``INSERT OR IGNORE`` into ``access_log``).

It never refreshes the FTS tables on a search: ``lore index``
(``lib/search-index.sh build``) builds them from ``journal/data/decisions.jsonl``
(one ``sqlite3`` INSERT per active decision, its fields read with ``jq``), and
captures write through. Without the database it falls back to grep.

This module reproduces that with the sqlite3 CLI, without the original's code:
:func:`build_fts_db` builds the same tables from the same decisions (one
autocommitted INSERT per decision, as the original's loop does, so the FTS5
segments come out the same; the tables no search reads are left out) and
:func:`search_sql` is the query ``_search_fts5`` sends for a plain ``lore search``.
:func:`baselines` also runs the original's own script, given a checkout of it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.corpora import DECISIONS

ORIGINAL = "tslateman/lore@c536858"
ENV_CHECKOUT = "LORE_BENCH_BASH_ORIGINAL"

SQLITE_ROW = "sqlite3 FTS5 (bash original's search)"
SQLITE_WORD_ROW = "sqlite3 FTS5 (bash original's search, one keyword)"
ORIGINAL_ROW = "bash original: lore search"
ORIGINAL_WORD_ROW = "bash original: lore search (one keyword)"
BASELINE_ROWS = (SQLITE_ROW, SQLITE_WORD_ROW, ORIGINAL_ROW, ORIGINAL_WORD_ROW)
_RESULT_LINE = re.compile(r"\[(decision|pattern|transfer|failure|signal|concept)\]")

Command = tuple[list[str], bytes | None, dict[str, str]]


# The FTS5 tables `lore search` reads (lib/search-index.sh create_schema), and the access log it joins.
_SCHEMA = """\
CREATE VIRTUAL TABLE IF NOT EXISTS decisions USING fts5(
    id UNINDEXED, decision, rationale, tags, timestamp UNINDEXED, project UNINDEXED, importance UNINDEXED);
CREATE VIRTUAL TABLE IF NOT EXISTS patterns USING fts5(
    id UNINDEXED, name, context, problem, solution, confidence UNINDEXED, timestamp UNINDEXED);
CREATE VIRTUAL TABLE IF NOT EXISTS transfers USING fts5(
    session_id UNINDEXED, project UNINDEXED, handoff, timestamp UNINDEXED);
CREATE VIRTUAL TABLE IF NOT EXISTS failures USING fts5(
    id UNINDEXED, error_type, error_message, tool, timestamp UNINDEXED);
CREATE VIRTUAL TABLE IF NOT EXISTS observations USING fts5(
    id UNINDEXED, content, tags, timestamp UNINDEXED);
CREATE VIRTUAL TABLE IF NOT EXISTS concepts USING fts5(
    id UNINDEXED, name, definition, timestamp UNINDEXED);
CREATE TABLE IF NOT EXISTS access_log (
    record_type TEXT NOT NULL, record_id TEXT NOT NULL, accessed_at TEXT NOT NULL,
    PRIMARY KEY (record_type, record_id, accessed_at));
"""


def sqlite3_binary() -> str | None:
    return shutil.which("sqlite3")


def _jq_raw(value: Any) -> str:
    """What ``$(echo "$line" | jq -r '.field // ""')`` leaves in a bash variable."""
    if value is None or value is False:
        text = ""
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.rstrip("\n")  # command substitution drops trailing newlines


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def decision_row(raw: Mapping[str, Any]) -> tuple[str, str, str, str, str, str, int] | None:
    """The FTS row the original's ``load_decisions`` inserts for one decision line, or None if it skips it."""
    if _jq_raw(raw.get("status") or "active") != "active":
        return None
    tags = raw.get("tags") or []
    joined = ", ".join(_jq_raw(t) for t in tags) if isinstance(tags, list) else _jq_raw(tags)
    # The project is the first non-null tag's first line (`jq -r '(.tags // [])[] | select(. != null)' | head -1`).
    firsts = [_jq_raw(t) for t in tags if t is not None] if isinstance(tags, list) else []
    project = firsts[0].split("\n", 1)[0] if firsts else ""
    importance = 4 if _jq_raw(raw.get("lesson_learned")) else 3
    return (_jq_raw(raw.get("id")), _jq_raw(raw.get("decision")), _jq_raw(raw.get("rationale")), joined,
            _jq_raw(raw.get("timestamp")), project or "lore", importance)  # fmt: skip


def build_fts_db(data_dir: Path, db: Path, sqlite3: str = "sqlite3") -> int:
    """Build the original's FTS database from ``data_dir``'s decisions with the sqlite3 CLI; return rows loaded."""
    source = data_dir / DECISIONS
    statements = ["PRAGMA synchronous=OFF;", _SCHEMA]  # durability only: the file's contents are the same
    loaded = 0
    if source.exists():
        for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except ValueError as error:
                raise ValueError(f"{source}:{number}: not JSON ({error})") from error
            row = decision_row(raw) if isinstance(raw, dict) else None
            if row is None:
                continue
            values = ", ".join(_quote(v) if isinstance(v, str) else str(v) for v in row)
            # No BEGIN/COMMIT: each INSERT is its own transaction, as in the original's loop.
            statements.append(f"INSERT INTO decisions(id, decision, rationale, tags, timestamp, project, importance) VALUES ({values});")
            loaded += 1
    db.parent.mkdir(parents=True, exist_ok=True)
    db.unlink(missing_ok=True)
    done = subprocess.run([sqlite3, "-bail", str(db)], input="\n".join(statements).encode(), capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"sqlite3 could not build {db}: {done.stderr.decode(errors='replace')[-300:]}")
    return loaded


def fts_query(query: str) -> str:
    """The original's ``sed 's/"/""/g; s/[^ ][^ ]*/"&"/g'``: every space-separated word quoted (an implicit AND)."""
    lines = query.split("\n")
    quoted = "\n".join(re.sub(r"[^ ]+", lambda m: '"' + m.group(0) + '"', line.replace('"', '""')) for line in lines)
    return quoted.rstrip("\n")  # `$(echo "$query" | sed ...)` drops trailing newlines


def search_sql(query: str, project: str = "", limit: int = 10) -> str:
    """The SQL ``_search_fts5`` pipes to sqlite3 for ``lore search <query>`` (all six types, no rerank)."""
    match = fts_query(query).replace("'", "''")
    parts = [
        f"SELECT 'decision' as type, id, decision as content, project, timestamp, importance, rank * -1 as bm25_score FROM decisions WHERE decisions MATCH '{match}'",
        f"SELECT 'pattern' as type, id, name || ': ' || solution as content, 'lore' as project, timestamp, CAST(confidence * 5 AS INT) as importance, rank * -1 as bm25_score FROM patterns WHERE patterns MATCH '{match}'",
        f"SELECT 'transfer' as type, session_id as id, handoff as content, project, timestamp, 3 as importance, rank * -1 as bm25_score FROM transfers WHERE transfers MATCH '{match}'",
        f"SELECT 'failure' as type, id, error_type || ': ' || error_message as content, '' as project, timestamp, 3 as importance, rank * -1 as bm25_score FROM failures WHERE failures MATCH '{match}'",
        f"SELECT 'signal' as type, id, content as content, '' as project, timestamp, 2 as importance, rank * -1 as bm25_score FROM observations WHERE observations MATCH '{match}'",
        f"SELECT 'concept' as type, id, name || ': ' || definition as content, 'lore' as project, timestamp, 4 as importance, rank * -1 as bm25_score FROM concepts WHERE concepts MATCH '{match}'",
    ]  # fmt: skip
    boost = project.replace("'", "''")
    return f"""WITH ranked AS (
    {" UNION ALL ".join(parts)}
),
frequency AS (
    SELECT record_type, record_id, COUNT(*) as access_count, MAX(accessed_at) as last_access
    FROM access_log GROUP BY record_type, record_id
)
SELECT r.type, r.id, SUBSTR(r.content, 1, 200), r.project, SUBSTR(r.timestamp, 1, 10),
    ROUND(
        r.bm25_score
        * (1.0 / (1 + (julianday('now') - julianday(r.timestamp)) / 30))
        * COALESCE(1.0 + (LOG(1 + f.access_count) * 0.15), 1.0)
        * (1.0 + (r.importance / 5.0 * 0.2))
        * COALESCE(1.0 + (0.1 * EXP(-(julianday('now') - julianday(f.last_access)) / 30)), 1.0)
        * CASE WHEN r.project = '{boost}' THEN 1.5 ELSE 1.0 END
    , 2) as final_score
FROM ranked r
LEFT JOIN frequency f ON r.type = f.record_type AND r.id = f.record_id
ORDER BY final_score DESC
LIMIT {limit};
"""


def search_command(db: Path, query: str, sqlite3: str = "sqlite3") -> tuple[list[str], bytes]:
    """The sqlite3 process the original runs per search, and its stdin (the heredoc)."""
    return [sqlite3, "-separator", "\t", str(db)], search_sql(query).encode()


def search(db: Path, query: str, sqlite3: str = "sqlite3") -> list[list[str]]:
    """Run :func:`search_command` and split its tab-separated rows (type, id, content, project, date, score)."""
    command, stdin = search_command(db, query, sqlite3)
    done = subprocess.run(command, input=stdin, capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"sqlite3 search failed: {done.stderr.decode(errors='replace')[-300:]}")
    return [line.split("\t") for line in done.stdout.decode().splitlines() if line]


def checkout_from_env(env: Mapping[str, str]) -> Path | None:
    """The original's checkout named by LORE_BENCH_BASH_ORIGINAL, if it holds ``lore.sh``."""
    value = env.get(ENV_CHECKOUT, "").strip()
    return Path(value) if value and (Path(value) / "lore.sh").is_file() else None


def original_search_command(checkout: Path, query: str) -> list[str]:
    """``lore search <query>`` as its user runs it: the checkout's ``lore`` (a link to lore.sh, #!/usr/bin/env bash)."""
    script = checkout / "lore"
    if not os.access(script, os.X_OK):
        return ["bash", str(checkout / "lore.sh"), "search", query]
    return [str(script), "search", query]


def original_env(env: Mapping[str, str], checkout: Path, data_dir: Path, db: Path) -> dict[str, str]:
    """The original's own paths (its lib/paths.sh reads these): the data dir and its search database."""
    out = {k: v for k, v in env.items() if not k.startswith("LORE_")}
    out.update(LORE_DIR=str(checkout), LORE_DATA_DIR=str(data_dir), LORE_SEARCH_DB=str(db))
    return out


def result_lines(name: str, stdout: bytes) -> int:
    """Results in a baseline's output: sqlite3's rows, or the original's ``[type] id: ...`` lines."""
    text = stdout.decode(errors="replace")
    if name.startswith("sqlite3"):
        return sum(1 for line in text.splitlines() if line.strip())
    return sum(1 for line in text.splitlines() if _RESULT_LINE.search(line))


@dataclass
class Baselines:
    """The original's search as extra latency rows: ``commands(query, keyword)`` gives each row's process."""

    commands: Callable[[str, str], dict[str, Command]]
    notes: list[str] = field(default_factory=list)
    records: int = 0


def baselines(data_dir: Path, work: Path, env: Mapping[str, str]) -> Baselines:
    """Build the original's FTS database from ``data_dir`` (untimed) and name the processes to time.

    The sqlite3 rows run when sqlite3 is installed; the original's own script only when
    LORE_BENCH_BASH_ORIGINAL names a checkout of it (bash, sed and sqlite3 are all its search needs).
    """
    sqlite3 = sqlite3_binary()
    if sqlite3 is None:
        return Baselines(lambda query, keyword: {}, [f"sqlite3 not installed: the bash original's search ({ORIGINAL}) not measured"])
    work.mkdir(parents=True, exist_ok=True)
    db = work / "search.db"
    records = build_fts_db(data_dir, db, sqlite3)
    notes = []
    checkout = checkout_from_env(env)
    original: dict[str, str] | None = None
    if checkout is None:
        wanted = env.get(ENV_CHECKOUT, "").strip()
        notes.append(f"{ENV_CHECKOUT} {'does not hold lore.sh' if wanted else 'not set'}: "
                     f"the bash original's own `lore search` not run (a checkout of {ORIGINAL} runs it)")  # fmt: skip
    else:
        # Its own copy: every result it prints is logged into the database's access_log.
        original = original_env(env, checkout, data_dir, shutil.copyfile(db, work / "original-search.db"))

    def commands(query: str, keyword: str) -> dict[str, Command]:
        rows: dict[str, Command] = {}
        for name, text in ((SQLITE_ROW, query), (SQLITE_WORD_ROW, keyword)):
            command, stdin = search_command(db, text, sqlite3)
            rows[name] = (command, stdin, dict(env))
        if checkout is not None and original is not None:
            rows[ORIGINAL_ROW] = (original_search_command(checkout, query), None, original)
            rows[ORIGINAL_WORD_ROW] = (original_search_command(checkout, keyword), None, original)
        return rows

    return Baselines(commands, notes, records)
