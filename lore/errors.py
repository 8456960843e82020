"""The one family of errors the lore core raises.

The CLI turns every ``LoreError`` into ``Error: <message>`` (plus a hint) on
stderr and the error's exit code, in exactly one place (``lore.cli.base``).
"""

from __future__ import annotations

from pathlib import Path


class LoreError(Exception):
    """Base class: a failure the user can understand and act on."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(LoreError):
    """The command line asked for something that does not make sense."""

    exit_code = 2


class NotFoundError(LoreError):
    """A record, file or directory that was named does not exist."""


class DataError(LoreError):
    """A data file (or an input) is malformed; names the file, line and field."""

    def __init__(
        self,
        message: str,
        *,
        path: Path | str | None = None,
        line: int | None = None,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.path = path
        self.line = line
        self.field = field
        super().__init__(format_location(path, line, field) + message, hint=hint)


class UnsafeRewriteError(DataError):
    """Refusing to rewrite a file that did not parse completely."""


class DuplicateError(LoreError):
    """The record about to be written duplicates an existing one (exit 3)."""

    exit_code = 3

    def __init__(self, message: str, *, existing_id: str, similarity: float, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.existing_id = existing_id
        self.similarity = similarity


class LockTimeoutError(LoreError):
    """Another lore process held the data-dir lock for too long."""


class IndexUnavailableError(LoreError):
    """The derived index is missing, corrupt or from another version."""


class ModelError(LoreError):
    """The embedding model could not be loaded; lexical search still works."""


class LoreWarning(UserWarning):
    """A notice about a write that succeeded (a possible contradiction, a skipped check, ...).

    The CLI prints these as ``Warning: ...``; the library (``lore.Lore``) issues them
    through ``warnings.warn`` so a program can log, ignore or escalate them.
    """

def format_location(path: Path | str | None, line: int | None, field: str | None) -> str:
    """``file:line: field 'x': `` prefix for data errors and warnings."""
    parts = []
    if path is not None:
        parts.append(str(path) + (f":{line}" if line is not None else ""))
    prefix = ": ".join(parts)
    if field:
        prefix = f"{prefix}: field '{field}'" if prefix else f"field '{field}'"
    return f"{prefix}: " if prefix else ""

