"""Where each kind of record lives in a data dir (cheap to import: the hook path uses it)."""

from __future__ import annotations

from pathlib import Path

DECISIONS = Path("journal/data/decisions.jsonl")
PATTERNS = Path("patterns/data/patterns.yaml")
SESSIONS = Path("transfer/data/sessions")
FAILURES = Path("failures/data/failures.jsonl")
OBSERVATIONS = Path("inbox/data/observations.jsonl")
SIGNALS = Path("inbox/data/signals.jsonl")
GRAPH = Path("graph/data/graph.json")


def source_files(data_dir: Path) -> list[Path]:
    """Every file that holds records (for change detection by the indexer)."""
    files = [data_dir / p for p in (DECISIONS, PATTERNS, FAILURES, OBSERVATIONS, SIGNALS, GRAPH)]
    sessions = data_dir / SESSIONS
    if sessions.is_dir():
        files.extend(sorted(sessions.glob("*.json")))
    return [f for f in files if f.exists()]
