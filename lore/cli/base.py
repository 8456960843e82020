"""The typer application every command module registers on: global options, state, the error boundary.

Commands parse arguments, call the core, and hand results to a renderer. Any
``LoreError`` raised below becomes ``Error: ...`` on stderr and its exit code in
``LoreGroup.invoke``; tracebacks only with ``--debug``. The command modules import
this module; ``lore.cli.app`` imports them (one way).
"""

from __future__ import annotations

import os
import sys
from types import ModuleType
from typing import Any

import typer
from typer.core import TyperGroup

from lore import __version__
from lore.api import Lore
from lore.errors import LoreError


def lazy_module(name: str) -> ModuleType:
    """``name``, loaded on first attribute access (the stdlib LazyLoader recipe).

    Every command module is imported to register its commands, so their core
    modules (capture, lessons, ...) are bound lazily: ``lore search`` should not
    pay for the YAML store and the duplicate detector it never calls.
    """
    import importlib.util

    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.loader is not None, name
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


def report_error(error: LoreError) -> None:
    """The single place where core errors become user-facing messages."""
    message = f"Error: {error.message}"
    if error.hint:
        message += f"\nHint: {error.hint}"
    typer.echo(message, err=True)


# The order `lore --help` (and completion) lists the commands in, whatever module registers them;
# a command missing here follows, in registration order.
COMMAND_ORDER = (
    "bench", "init", "remember", "learn", "handoff", "fail", "observe", "capture", "retract", "delete", "supersede",
    "link", "unlink", "outcome", "validate", "prune", "reflect", "restore", "export", "lessons", "consolidate",
    "migrate", "mcp", "show", "list", "resume", "stats", "doctor", "search", "context", "sync", "ui", "audit", "hook",
    "server", "import", "inbox", "capture-session", "index", "lesson",
)  # fmt: skip


class LoreGroup(TyperGroup):
    def list_commands(self, ctx: Any) -> list[str]:
        position = {name: number for number, name in enumerate(COMMAND_ORDER)}
        return sorted(super().list_commands(ctx), key=lambda name: position.get(name, len(COMMAND_ORDER)))

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except LoreError as error:
            state = ctx.obj if isinstance(ctx.obj, Lore) else None
            if state is not None and state.debug:
                raise
            report_error(error)
            ctx.exit(error.exit_code)
        except BrokenPipeError:
            # `lore search ... --json | head`: the reader had enough and nothing failed.
            # Point stdout at /dev/null so the final flush cannot fail again, and exit 0
            # as grep and ripgrep do (click would exit 1).
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            ctx.exit(0)


app = typer.Typer(
    cls=LoreGroup,
    name="lore",
    help="A memory that compounds: decisions, patterns and handoffs in flat files, with hybrid search.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _enable_completion() -> None:
    """Register typer's bash/zsh/fish completion classes (``add_completion=False`` skips it).

    We keep ``add_completion=False`` so ``--install-completion`` does not clutter
    every help page; the scripts in ``completions/`` call back with ``_LORE_COMPLETE``.
    """
    try:
        from typer._completion_classes import completion_init
    except ImportError:  # pragma: no cover - older typer registers them itself
        return
    completion_init()


_enable_completion()


def _version(value: bool) -> None:
    if value:
        typer.echo(f"lore {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    ctx: typer.Context,
    data_dir: str | None = typer.Option(None, "--data-dir", help="Data directory (default: $LORE_DATA_DIR or the platform data dir).", envvar=None),
    index_dir: str | None = typer.Option(None, "--index-dir", help="Index directory (default: $LORE_INDEX_DIR or a per-data-dir cache folder)."),
    project: str | None = typer.Option(None, "--project", "-P", help="Project for new records and the search boost (default: detected from the working directory)."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True, help="Show the version and exit."),
) -> None:
    # A process running commands for others (the warm helper) hands the asking process's environment,
    # working directory, terminal and its warm search session in ``obj`` (``Lore``'s keywords).
    host = ctx.obj if isinstance(ctx.obj, dict) else {}
    # Settings are read on first use, not here: ``lore hook ...`` must exit 0 whatever the environment holds.
    ctx.obj = Lore(data_dir, index_dir, project, channel="cli", debug=debug, read_settings=False, **host)


def state(ctx: typer.Context) -> Lore:
    """The command line's memory (``lore.Lore``): its root options, settings, store and search session."""
    obj = ctx.find_root().obj
    return obj if isinstance(obj, Lore) else Lore(channel="cli", read_settings=False)
