"""Claude Code's files on this machine: session transcripts (for backfill) and memory files.

Transcripts live in ``~/.claude/projects/<slug>/<session-id>.jsonl`` (the slug is the
session's working directory with ``/`` and ``.`` turned into ``-``); ``CLAUDE_CONFIG_DIR``
moves ``~/.claude``. Memory files: ``~/.claude/CLAUDE.md`` (user), the project's
``CLAUDE.md``, ``.claude/CLAUDE.md``, ``CLAUDE.local.md`` and ``.claude/rules/*.md``, and
the auto-memory notes Claude Code keeps in ``~/.claude/projects/<slug>/memory/*.md``.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lore.store import Store

if TYPE_CHECKING:
    from lore.settings import Settings


# A batch of an import: this many transcripts, or fewer once it has run this long.
BATCH_TRANSCRIPTS = 50
BATCH_SECONDS = 5.0


def config_dir(configured: str | None) -> Path:
    """Claude Code's own directory: ``configured`` (its ``CLAUDE_CONFIG_DIR``, read by the command), else ``~/.claude``."""
    return Path(configured).expanduser() if configured else Path.home() / ".claude"


def slug(directory: str | Path) -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", str(directory))


def transcripts(root: Path, project: str | None = None, since: datetime | None = None) -> list[Path]:
    """Session transcripts in ``root`` (``config_dir(...) / "projects"``), oldest first; ``project``: a project
    name or directory the slug ends with."""
    base = root
    if not base.is_dir():
        return []
    wanted = slug(project).strip("-") if project else None
    found = []
    for folder in sorted(p for p in base.iterdir() if p.is_dir()):
        if wanted and not (folder.name.strip("-") == wanted or folder.name.endswith("-" + wanted)):
            continue
        for path in folder.glob("*.jsonl"):
            try:
                mtime = path.stat().st_mtime
            except OSError:
                continue
            if since is None or datetime.fromtimestamp(mtime, UTC) >= since:
                found.append((mtime, path))
    return [p for _, p in sorted(found)]


@dataclass
class ImportSummary:
    dry_run: bool = False
    transcripts: int = 0
    with_new_lines: int = 0
    added: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        verb = "would add" if self.dry_run else "added"
        added = ", ".join(f"{n} {k}" for k, n in sorted(self.added.items())) or "none"
        skipped = ", ".join(f"{n} {k}" for k, n in sorted(self.skipped.items())) or "none"
        return [f"transcripts: {self.transcripts} ({self.with_new_lines} with new lines)",
                f"{verb} (as candidates): {added}", f"skipped: {skipped}"]  # fmt: skip


def import_transcripts(store: Store, paths: list[Path], *, project: str | None = None, dry_run: bool = False,
                       method: str | None = None, step: Callable[[Path], None] | None = None,
                       settings: Settings, batch_size: int = BATCH_TRANSCRIPTS,
                       batch_seconds: float = BATCH_SECONDS) -> ImportSummary:  # fmt: skip
    """Capture each transcript (only what the per-session state has not seen); the distillation once at the end.

    The captures are written in batches (``CaptureBatch``) of ``batch_size`` transcripts, or
    fewer once a batch has run ``batch_seconds`` (the capture lock is held for a batch, and a
    hook's capture waits for it): one store load per import while nothing else writes, one
    write of the records and one of the capture state per batch. A killed import loses at
    most its last batch, which the next import reads again. A dry run captures one by one.
    """
    from lore.sessions import state
    from lore.sessions.pipeline import CaptureBatch, capture_session, distill_after_capture

    summary = ImportSummary(dry_run=dry_run, transcripts=len(paths))

    def capture(path: Path, batch: CaptureBatch | None) -> None:
        report = capture_session(store, path, project=project, method=method, dry_run=dry_run, distill=False,
                                 settings=settings, batch=batch)  # fmt: skip
        _count(summary, report)
        if step is not None:
            step(path)

    if dry_run:
        for item in paths:
            capture(item, None)
        return summary
    batch = CaptureBatch(store, settings)
    todo = iter(paths)
    path: Path | None = next(todo, None)
    while path is not None:
        store.prepare_write()
        with state.locked(batch.base):
            batch.begin()
            try:
                while path is not None:
                    capture(path, batch)
                    path = next(todo, None)
                    if batch.full(batch_size, batch_seconds):
                        break
            except Exception:
                batch.flush()  # what the batch captured before the error stays, as it did one at a time
                raise
            batch.flush()
    if summary.added.get("failure"):
        summary.notices.extend(distill_after_capture(store, settings))
    return summary


def _count(summary: ImportSummary, report: Any) -> None:
    summary.with_new_lines += report.lines is not None
    for record in report.added:
        summary.added[record.kind] += 1
    for raw in report.proposed:
        summary.added[str(raw["kind"])] += 1
    summary.added.update({f"updated {r.kind}": 1 for r in report.updated})
    summary.skipped.update(report.skipped)
    summary.warnings.extend(report.warnings)
    summary.notices.extend(report.notices)


# -- memory files ------------------------------------------------------------------------------------
def memory_files(project_dir: Path, home: Path) -> list[tuple[str, Path]]:
    """``(scope, path)`` of the memory files that exist: user (in ``home``, Claude Code's ``config_dir``), project,
    local, rules, auto memory."""
    found: list[tuple[str, Path]] = [("user", home / "CLAUDE.md"), ("project", project_dir / "CLAUDE.md"),
                                     ("project", project_dir / ".claude" / "CLAUDE.md"),
                                     ("local", project_dir / "CLAUDE.local.md")]  # fmt: skip
    rules = project_dir / ".claude" / "rules"
    if rules.is_dir():
        found.extend(("rules", p) for p in sorted(rules.glob("*.md")))
    memory = home / "projects" / slug(project_dir.resolve()) / "memory"
    if memory.is_dir():
        found.extend(("auto-memory", p) for p in sorted(memory.glob("*.md")))
    return [(scope, path) for scope, path in found if path.is_file()]


def project_root(cwd: Path) -> Path:
    """The git work tree holding ``cwd`` (where Claude Code looks for CLAUDE.md), else ``cwd``."""
    for folder in (cwd, *cwd.parents):
        if (folder / ".git").exists():
            return folder
    return cwd


_HEADING = re.compile(r"^(#{1,6})\s+(.*\S)\s*$")
_ITEM = re.compile(r"^\s{0,3}(?:[-*+]|\d+[.)])\s+(.*\S)\s*$")


def memory_items(text: str) -> list[tuple[str, str]]:
    """``(heading, item)``: each list item, and each paragraph outside lists, under its nearest heading."""
    items: list[tuple[str, str]] = []
    heading = ""
    paragraph: list[str] = []
    in_code = False

    def flush() -> None:
        if paragraph:
            joined = " ".join(" ".join(paragraph).split())
            if len(joined) >= 12:
                items.append((heading, joined))
            paragraph.clear()

    for line in text.splitlines():
        if line.strip().startswith("```"):
            flush()
            in_code = not in_code
            continue
        if in_code:
            continue
        match = _HEADING.match(line)
        if match:
            flush()
            heading = match.group(2)
            continue
        item = _ITEM.match(line)
        if item:
            flush()
            paragraph.append(item.group(1))
            continue
        if not line.strip():
            flush()
        else:
            paragraph.append(line.strip())  # a paragraph, or a wrapped list item
    flush()
    return items


def read_claude_memory(project_dir: Path, project: str, home: Path) -> Any:
    """The memory files as a ``lore.transfer.Source``: one observation per item (active: a person wrote them)."""
    from lore.transfer import Problem, Source

    source = Source()
    for scope, path in memory_files(project_dir, home):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            source.problems.append(Problem(path, None, f"cannot read: {error}"))
            continue
        for heading, item in memory_items(text):
            content = f"{item}" + (f" ({heading})" if heading else "")
            digest = hashlib.sha256(f"{path.name}\0{scope}\0{content}".encode()).hexdigest()[:12]
            raw: dict[str, Any] = {"id": f"obs-cm-{digest}", "content": content, "tags": ["claude-memory", scope],
                                   "source": "claude-memory", "source_file": str(path)}  # fmt: skip
            if scope != "user":
                raw["project"] = project
            source.records.append(("observation", raw))
    return source
