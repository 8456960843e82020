"""`lore search`, `lore context` and the write commands run by the warm helper, when one runs for the index.

A terminal ``lore search`` imports typer, rich, numpy and the tokenizer and opens the
index: about 0.4 s at 10k records. The warm helper (``lore server``, started by the
agent hooks) already holds all of that. ``lore.__main__`` hands it the command line
(``run_remote`` for the reads, ``run_remote_command`` for the writes) with the asking
process's environment, working directory and terminal; the helper parses it with the
CLI's own declarations and runs the CLI's own command in process (``run_command``),
through a ``lore.Lore`` built from that environment and directory (nothing of the
helper's is swapped), and sends back what it printed, in order. So the helper takes
exactly the options the CLI takes, and answers what the CLI answers. Whatever click
cannot parse, no helper, or a helper whose index is behind the data files (the CLI then
refreshes it first): the full CLI answers, as before.

A write goes in two steps so that it never runs twice (``lore.agent.client.run_on_server``).

The client side (``run_remote``, ``run_remote_command``, ``locate``) imports only the
standard library and ``lore.paths``; the helper side (``answer``, ``run_command``) imports
what the CLI would.
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False  # typing costs ~3 ms to import; the client side needs none of it
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# How long a terminal command waits for the helper before answering itself (the helper
# answers a search at 10k records in ~15 ms; a busy one must not make the CLI slower).
REMOTE_TIMEOUT_S = 2.0
# What rich reads from the environment to decide on colour and layout.
_RICH_ENV = ("TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES", "TTY_COMPATIBLE",
             "TTY_INTERACTIVE", "TERM_PROGRAM")  # fmt: skip
# The reads a running helper answers from the index it holds.
READ_COMMANDS = frozenset({"search", "context"})


class EnvironmentDirectories:
    """The settings that place lore's directories (``lore.paths.Directories``), read as ``Settings.from_env`` reads them.

    This client side is an entry point (``lore search`` before typer), so it reads the
    environment itself, and not through ``lore.settings``, which imports typing (~3 ms
    on every warm search). A test checks that both readings agree.
    """

    __slots__ = ("cache_dir", "data_dir", "embed_model", "index_dir", "state_dir", "xdg_cache_home", "xdg_data_home",
                 "xdg_state_home")  # fmt: skip
    data_dir: str | None
    index_dir: str | None
    state_dir: str | None
    cache_dir: str | None
    xdg_data_home: str | None
    xdg_cache_home: str | None
    xdg_state_home: str | None
    embed_model: str | None
    VARIABLES = (("data_dir", "LORE_DATA_DIR"), ("index_dir", "LORE_INDEX_DIR"), ("state_dir", "LORE_STATE_DIR"),
                 ("cache_dir", "LORE_CACHE_DIR"), ("xdg_data_home", "XDG_DATA_HOME"),
                 ("xdg_cache_home", "XDG_CACHE_HOME"), ("xdg_state_home", "XDG_STATE_HOME"),
                 ("embed_model", "LORE_EMBED_MODEL"))  # fmt: skip

    def __init__(self, environ: Any) -> None:
        for field, name in self.VARIABLES:
            setattr(self, field, environ.get(name, "").strip() or None)


def run_remote(args: list[str]) -> int | None:
    """Print the helper's answer to the read ``args`` and return its exit code; None if the CLI must answer itself."""
    located = locate(args, READ_COMMANDS)
    if located is None:
        return None
    try:
        # As the prompt hook: a running helper is asked whatever LORE_SERVER says (the
        # variable decides whether the hooks start one, not whether one is used).
        from lore.paths import Locations

        directories = EnvironmentDirectories(os.environ)
        locations = Locations.resolve(*located, directories)
        if not locations.data_dir.is_dir():
            return None  # the CLI reports it
        from lore.agent.client import ask_server_reply

        request = _request("cli", args, str(locations.data_dir.resolve()))
        reply = ask_server_reply(request, time.monotonic() + REMOTE_TIMEOUT_S, locations.index_dir, directories)
    except Exception:  # whatever went wrong here, the full CLI answers (and reports it)
        return None
    if reply is None or not isinstance(reply.get("code"), int) or not isinstance(reply.get("output"), list):
        return None
    _print(reply["output"])
    return int(reply["code"])


def _request(op: str, args: list[str], data_dir: str) -> dict[str, Any]:
    """What the helper needs to run ``args`` as this process would: its environment, directory and terminal."""
    terminal = {key: os.environ[key] for key in _RICH_ENV if key in os.environ}
    tty = sys.stdout.isatty()
    if tty:
        terminal["LORE_TERMINAL_WIDTH"] = str(os.get_terminal_size(sys.stdout.fileno()).columns)
    return {"op": op, "argv": args, "data_dir": data_dir, "cwd": os.getcwd(), "environ": dict(os.environ),
            "terminal": terminal, "tty": tty, "err_tty": sys.stderr.isatty()}  # fmt: skip


def _print(output: list[Any]) -> None:
    """What the command printed, on this process's streams in the order it was written."""
    try:
        for fd, text in output:
            stream = sys.stdout if fd == 1 else sys.stderr
            stream.write(text)
            stream.flush()
    except BrokenPipeError:
        # As the CLI: a reader that went away early (`| head`) is not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


# The commands a running helper runs for a `lore` process: the writes (they need the duplicate
# check's pool and encoder, which the helper keeps warm), and `lesson show`, which shares `lesson`.
WRITE_COMMANDS = frozenset({"remember", "learn", "lesson", "handoff", "fail", "observe", "capture"})
# The root options (lore.cli.base.main_options) that may come before the command: with a value, and flags.
_ROOT_VALUED = {"--data-dir": 0, "--index-dir": 1, "--project": 2, "-P": 2}


def locate(args: list[str], commands: frozenset[str] = WRITE_COMMANDS) -> tuple[str | None, str | None] | None:
    """The ``--data-dir`` and ``--index-dir`` given before one of ``commands`` in ``args``; None if it is not one.

    Only finds the helper to ask: the helper parses ``args`` with the CLI itself. Anything
    else before the command (``--debug``, ``--version``, a typo) is left to the CLI.
    """
    given: list[str | None] = [None, None, None]
    i = 0
    while i < len(args) and args[i].startswith("-"):
        arg = args[i]
        name, equals, value = arg.partition("=")
        if arg in _ROOT_VALUED and i + 1 < len(args):
            given[_ROOT_VALUED[arg]] = args[i + 1]
            i += 1
        elif equals and name in _ROOT_VALUED and name != "-P":
            given[_ROOT_VALUED[name]] = value
        elif arg.startswith("-P") and len(arg) > 2:
            given[2] = arg[2:]
        else:
            return None  # --debug (a traceback is for the terminal that asked), --version, a typo
        i += 1
    if i >= len(args) or args[i] not in commands or "--help" in args or "-h" in args:
        return None
    return given[0], given[1]


def run_remote_command(args: list[str]) -> int | None:
    """Have the running helper run the write command ``args``: print what the CLI prints, return its exit code.

    None when no helper started it (none runs, it declined, it did not answer in time, or
    click could not parse ``args``): the CLI runs the command then.
    """
    located = locate(args)
    if located is None:
        return None
    try:
        from lore.paths import Locations
        settings = EnvironmentDirectories(os.environ)  # this surface's edge: read once, passed down
        locations = Locations.resolve(*located, settings)
        if not locations.data_dir.is_dir():
            return None  # the CLI reports it (or creates the default one)
        from lore.agent.client import LOST, run_on_server

        request = _request("run", args, str(locations.data_dir.resolve()))
        reply = run_on_server(request, time.monotonic() + REMOTE_TIMEOUT_S, locations.index_dir, settings)
    except Exception:  # whatever went wrong before the helper started it, the CLI runs it
        return None
    if reply is None or reply.get("declined") is True:
        return None  # nothing ran: the CLI runs it
    if reply is LOST or not isinstance(reply.get("code"), int) or not isinstance(reply.get("output"), list):
        # It started, and no answer came: running it again here could store the record twice.
        sys.stderr.write("Error: the warm helper took this command and did not answer; it may or may not have "
                         "run\nHint: check with `lore list` before running it again\n")  # fmt: skip
        return 1
    _print(reply["output"])
    return int(reply["code"])


def run_command(request: dict[str, Any], data_dir: str, run_parsed: Callable[[list[str], dict[str, Any]], int | None],
                commands: frozenset[str] = WRITE_COMMANDS, **host: Any) -> dict[str, Any]:
    """The helper's side of ``run_remote_command`` (and of ``answer``): the CLI command, in this process, as the
    asking process runs it.

    ``run_parsed`` is the CLI's (``lore.cli.app.run_parsed``), handed down by the entry point: the agent
    imports no CLI. The command's ``lore.Lore`` is built from the asking process's environment and
    working directory (so the same settings, project and actor) and ``host`` (``Lore``'s keywords: the
    helper's warm session, settings already read); its output is captured in the order it was written,
    ANSI codes kept or stripped as click does for the asking process's streams. ``declined``: not a
    request this side runs, or click could not parse the arguments; nothing ran.
    """
    import contextlib

    from lore.api import Lore

    argv, environ, cwd, terminal = request.get("argv"), request.get("environ"), request.get("cwd"), request.get("terminal")
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv) and isinstance(environ, dict)
            and isinstance(cwd, str) and os.path.isabs(cwd) and isinstance(terminal, dict | None)):  # fmt: skip
        return {"ok": True, "declined": True}
    located = locate(argv, commands)
    if located is None or not os.path.isdir(cwd):  # its working directory gone: it says so itself
        return {"ok": True, "declined": True}
    environ = {str(key): str(value) for key, value in environ.items()}
    host = {"environ": environ, "cwd": cwd, "terminal": terminal, **host}
    try:
        asked = Lore(*located, environ=environ, cwd=cwd, settings=host.get("settings"), read_settings=False)
        if str(asked.data_dir.resolve()) != data_dir:
            return {"ok": True, "declined": True}  # not this helper's data dir after all
    except Exception:  # a bad setting: the asking process reports it
        return {"ok": True, "declined": True}
    output: list[list[Any]] = []
    out = _Captured(1, output, bool(request.get("tty")))
    err = _Captured(2, output, bool(request.get("err_tty")))
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run_parsed(argv, host)
    if code is None:
        return {"ok": True, "declined": True}
    return {"ok": True, "code": code, "output": output}


class _Captured:
    """A text stream that records what is written to it, in order with its sibling (``output``)."""

    encoding = "utf-8"
    errors = "strict"

    def __init__(self, fd: int, output: list[list[Any]], tty: bool) -> None:
        self.fd, self.output, self.tty = fd, output, tty

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # click probes a stream with b"": a text stream refuses bytes
            raise TypeError("write() argument must be str")
        if text:
            if self.output and self.output[-1][0] == self.fd:
                self.output[-1][1] += text
            else:
                self.output.append([self.fd, text])
        return len(text)

    def flush(self) -> None:
        return None

    def isatty(self) -> bool:
        return self.tty  # click strips ANSI codes from what it echoes to a stream that is not a terminal

    def writable(self) -> bool:
        return True


def answer(session: Any, request: dict[str, Any], data_dir: str,
           run_parsed: Callable[[list[str], dict[str, Any]], int | None] | None) -> dict[str, Any]:
    """The helper's side of ``run_remote``: `lore search`/`lore context` run by the CLI's own command over
    the loaded index (``run_command`` with the helper's session), the bytes the CLI would print.

    Declines (``ok: False``) when the loaded index is not the current, fresh generation:
    the CLI then refreshes the index and answers itself, so a record written a moment ago
    is never missing from a terminal search. The command then reads the index as it is
    (``index_refresh`` ``ignore``): the helper never builds on a request's path.
    """
    from lore.errors import LoreError
    from lore.index.manager import IndexManager
    from lore.settings import Settings

    reader = session.reader
    manager = IndexManager(session.locations)
    if reader is None or manager.current_dir() != reader.directory or manager.staleness(reader.meta) is not None:
        return {"ok": False, "error": "the loaded index is not current"}
    if run_parsed is None or not isinstance(request.get("environ"), dict):
        return {"ok": False, "error": "bad request"}
    try:
        settings = Settings.from_env(request["environ"])._replace(index_refresh="ignore")
    except LoreError as error:  # the CLI says what is wrong, as it does without a helper
        return {"ok": False, "error": error.message}
    reply = run_command(request, data_dir, run_parsed, READ_COMMANDS, session=session, settings=settings)
    if reply.get("declined"):
        return {"ok": False, "error": "declined"}
    return reply
