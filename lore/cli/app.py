"""The CLI's entry: registers every command module on the application and is the one exit point (``run``).

The application, its global options and the error boundary live in ``lore.cli.base``,
which the command modules import; this module imports them, never the reverse.
"""

from __future__ import annotations

import sys

# Imported for their side effect of registering commands on ``app``.
from lore.cli import (  # noqa: F401
    cmd_bench,
    cmd_capture,
    cmd_curate,
    cmd_hook,
    cmd_hook_install,
    cmd_import,
    cmd_inbox,
    cmd_index,
    cmd_lessons,
    cmd_mcp,
    cmd_read,
    cmd_records,
    cmd_search,
    cmd_sessions,
    cmd_sync,
    cmd_ui,
)
from lore.cli.base import app, report_error
from lore.errors import LoreError

INTERNAL_ERROR_EXIT = 70  # EX_SOFTWARE (sysexits.h)


def run(args: list[str]) -> int:
    """Run the CLI with ``args``; return the process exit code."""
    try:
        app(args=args, prog_name="lore")
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except LoreError as error:  # raised outside a command (e.g. in a callback)
        if "--debug" in args:
            raise
        report_error(error)
        return error.exit_code
    except BrokenPipeError:
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # a bug in lore: one clear line, the traceback only on request
        if "--debug" in args:
            raise
        report_error(LoreError(f"unexpected {type(error).__name__}: {error}",
                               hint="this is a bug in lore; run the command again with --debug for the traceback"))  # fmt: skip
        return INTERNAL_ERROR_EXIT
    return 0
