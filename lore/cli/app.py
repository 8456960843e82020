"""The CLI's entry: registers every command module on the application and is the one exit point (``run``).

The application, its global options and the error boundary live in ``lore.cli.base``,
which the command modules import; this module imports them, never the reverse.
"""

from __future__ import annotations

import copy
import os
import sys
from typing import Any

import typer

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
# The click command typer builds from ``app``: ~20-40 ms to build (every command's signature
# is read), once per process; the warm helper runs many commands (``run_parsed``).
_every_command: Any = None


def app_for(args: list[str]) -> typer.Typer:
    """The application holding just the command ``args`` names, for typer to build.

    Building the click object of every command (their signatures are read) cost ~25 ms a
    process on a loaded 2-core machine, for one command to run. The whole application when
    it takes them all: no command or an unknown one (click lists or suggests them), help,
    shell completion.
    """
    from lore.cli.argv import command_name as command_of

    name = command_of(args)
    if name is None or "--help" in args or "-h" in args or "_LORE_COMPLETE" in os.environ:
        return app
    commands = [info for info in app.registered_commands
                if (info.name or typer.main.get_command_name(info.callback.__name__ if info.callback else "")) == name]
    groups = [info for info in app.registered_groups if info.name == name]
    if len(commands) + len(groups) != 1:
        return app
    one = copy.copy(app)  # the same callback, settings and class (LoreGroup)
    one.registered_commands, one.registered_groups = commands, groups
    return one


def run(args: list[str]) -> int:
    """Run the CLI with ``args``; return the process exit code."""
    try:
        app_for(args)(args=args, prog_name="lore")
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except KeyboardInterrupt:
        return 130
    except Exception as error:
        return _failed(error, args)
    return 0


def prepare() -> Any:
    """The click command of every command, built once (``run_parsed``'s; the warm helper builds it when idle)."""
    global _every_command
    if _every_command is None:
        _every_command = typer.main.get_command(app)
    return _every_command


def run_parsed(args: list[str], host: dict[str, Any] | None = None) -> int | None:
    """``run`` in a process that runs many commands (the warm helper): the exit code, or None when click
    cannot parse ``args``. ``host``: ``lore.Lore``'s keywords for the command's memory (the asking
    process's environment, working directory and terminal; the helper's warm session).

    None means nothing ran and nothing was printed: a usage error is raised by click while it
    parses, before any command's callback, and the write commands raise none of their own
    (their errors are ``LoreError``s). The caller then leaves ``args`` to a ``lore`` process,
    which prints click's message for its own terminal.
    """
    from typer._click.exceptions import ClickException  # typer's own copy of click raises it

    command = prepare()
    try:
        code = command.main(args=args, prog_name="lore", standalone_mode=False, obj=host)
    except (ClickException, typer.Abort):
        return None
    except Exception as error:
        return _failed(error, args)
    return code if isinstance(code, int) else 0


def _failed(error: Exception, args: list[str]) -> int:
    """The exit code of ``error`` raised out of a command, reported as ``run`` reports it."""
    if isinstance(error, LoreError):  # raised outside a command (e.g. in a callback)
        if "--debug" in args:
            raise error
        report_error(error)
        return error.exit_code
    if isinstance(error, BrokenPipeError):
        sys.stderr.close()
        return 0
    if "--debug" in args:  # a bug in lore: one clear line, the traceback only on request
        raise error
    report_error(LoreError(f"unexpected {type(error).__name__}: {error}",
                           hint="this is a bug in lore; run the command again with --debug for the traceback"))  # fmt: skip
    return INTERNAL_ERROR_EXIT
