"""`lore search` and `lore context` answered by the warm helper, when one runs for the index.

A terminal ``lore search`` imports typer, rich, numpy and the tokenizer and opens the
index: about 0.4 s at 10k records. The warm helper (``lore server``, started by the
agent hooks) already holds all of that. ``lore.__main__`` asks it first for the common
forms of the two commands (``lore [--data-dir D] [--index-dir I] [-P P] search QUERY
[--json] [-n N] [--explain]`` and ``... context QUERY [--format F] [--max-items N]
[--budget-tokens N] [--gap-line]``); the helper runs the very search and renderer the
CLI runs and sends back the bytes the CLI would have printed (rich renders into a
buffer with the asking terminal's width and environment). Anything else, no helper,
or a helper whose index is behind the data files (the CLI then refreshes it first):
the full CLI answers, as before.

The write commands (``WRITE_COMMANDS``) go to the helper whole: ``run_remote_command``
sends the arguments, environment and working directory, and the helper runs the CLI
command itself (``run_command``), in two steps so that a write never runs twice
(``lore.agent.client.run_on_server``).

The client side (``run_remote``, ``run_remote_command``) imports only the standard
library and ``lore.paths``; the helper side (``answer``, ``run_command``) imports what
the CLI would.
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
_GLOBAL = {"--data-dir": "data_dir", "--index-dir": "index_dir", "--project": "project", "-P": "project"}
_FLAGS = {"search": {"--json": "json", "--explain": "explain"}, "context": {"--gap-line": "gap_line"}}
_VALUED: dict[str, dict[str, tuple[str, int | None, int | None]]] = {
    "search": {"--limit": ("limit", 1, 200), "-n": ("limit", 1, 200)},
    "context": {"--max-items": ("max_items", 1, 50), "--budget-tokens": ("budget_tokens", 10, 100000),
                "--format": ("format", None, None)},
}  # fmt: skip
FORMATS = ("markdown", "compact", "json")


def parse(args: list[str]) -> dict[str, Any] | None:
    """The request for ``args``, or None when the full CLI must parse them (any other option or form)."""
    request: dict[str, Any] = {}
    i = 0
    while i < len(args) and args[i] in _GLOBAL and i + 1 < len(args):
        request[_GLOBAL[args[i]]] = args[i + 1]
        i += 2
    if i >= len(args) or args[i] not in _FLAGS:
        return None
    command = request["command"] = args[i]
    positional: list[str] = []
    i += 1
    while i < len(args):
        arg = args[i]
        if arg in _FLAGS[command]:
            request[_FLAGS[command][arg]] = True
        elif arg in _VALUED[command] and i + 1 < len(args):
            key, low, high = _VALUED[command][arg]
            value = args[i + 1]
            if low is None:
                if value not in FORMATS:
                    return None
                request[key] = value
            elif high is None or not value.isdigit() or not low <= int(value) <= high:
                return None  # the CLI says what is wrong with it
            else:
                request[key] = int(value)
            i += 1
        elif arg.startswith("-") and arg != "-":
            return None
        else:
            positional.append(arg)
        i += 1
    if len(positional) != 1 or not positional[0].strip():
        return None
    request["query"] = positional[0]
    return request


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
    """Print the helper's answer to ``args`` and return the exit code; None if the CLI must answer itself."""
    request = parse(args)
    if request is None:
        return None
    try:
        # As the prompt hook: a running helper is asked whatever LORE_SERVER says (the
        # variable decides whether the hooks start one, not whether one is used).
        from lore.paths import Locations

        directories = EnvironmentDirectories(os.environ)
        locations = Locations.resolve(request.pop("data_dir", None), request.pop("index_dir", None), directories)
        if not locations.data_dir.is_dir():
            return None  # the CLI reports it
        from lore.agent.client import ask_server_reply

        environ = {key: os.environ[key] for key in _RICH_ENV if key in os.environ}
        tty = sys.stdout.isatty()
        if tty:
            environ["LORE_TERMINAL_WIDTH"] = str(os.get_terminal_size(sys.stdout.fileno()).columns)
        request.update(op="cli", data_dir=str(locations.data_dir.resolve()), cwd=os.getcwd(), tty=tty,
                       err_tty=sys.stderr.isatty(), environ=environ)  # fmt: skip
        reply = ask_server_reply(request, time.monotonic() + REMOTE_TIMEOUT_S, locations.index_dir, directories)
    except Exception:  # whatever went wrong here, the full CLI answers (and reports it)
        return None
    if reply is None or not isinstance(reply.get("stdout"), str) or not isinstance(reply.get("stderr"), str):
        return None
    try:
        sys.stderr.write(reply["stderr"])
        sys.stdout.write(reply["stdout"])
        sys.stdout.flush()
    except BrokenPipeError:
        # As the CLI: a reader that went away early (`| head`) is not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


# The commands a running helper runs for a `lore` process: the writes (they need the duplicate
# check's pool and encoder, which the helper keeps warm), and `lesson show`, which shares `lesson`.
WRITE_COMMANDS = frozenset({"remember", "learn", "lesson", "handoff", "fail", "observe", "capture"})
# The root options (lore.cli.base.main_options) that may come before the command: with a value, and flags.
_ROOT_VALUED = {"--data-dir": 0, "--index-dir": 1, "--project": 2, "-P": 2}


def locate(args: list[str]) -> tuple[str | None, str | None] | None:
    """The ``--data-dir`` and ``--index-dir`` given before a write command in ``args``; None if it is not one.

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
    if i >= len(args) or args[i] not in WRITE_COMMANDS or "--help" in args or "-h" in args:
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

        request = {"op": "run", "argv": args, "data_dir": str(locations.data_dir.resolve()), "cwd": os.getcwd(),
                   "environ": dict(os.environ), "tty": sys.stdout.isatty(), "err_tty": sys.stderr.isatty()}  # fmt: skip
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
    try:
        for fd, text in reply.get("output") or []:
            stream = sys.stdout if fd == 1 else sys.stderr
            stream.write(text)
            stream.flush()
    except BrokenPipeError:
        # As the CLI: a reader that went away early is not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return int(reply["code"])


def run_command(request: dict[str, Any], data_dir: str, run_parsed: Callable[[list[str]], int | None]) -> dict[str, Any]:
    """The helper's side of ``run_remote_command``: the CLI command, in this process, as the asking process runs it.

    ``run_parsed`` is the CLI's (``lore.cli.app.run_parsed``), handed down by the entry point: the agent
    imports no CLI.

    With its environment and working directory (so the same settings, project and actor),
    and its output captured in the order it was written, ANSI codes kept or stripped as
    click does for the asking process's streams. ``declined``: click could not parse the
    arguments, nothing ran.
    """
    import contextlib

    argv, environ, cwd = request.get("argv"), request.get("environ"), request.get("cwd")
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv) and isinstance(environ, dict)
            and isinstance(cwd, str) and locate(argv) is not None):  # fmt: skip
        return {"ok": True, "declined": True}  # not a request this side runs: nothing ran
    output: list[list[Any]] = []
    out = _Captured(1, output, bool(request.get("tty")))
    err = _Captured(2, output, bool(request.get("err_tty")))
    if not os.path.isdir(cwd):
        return {"ok": True, "declined": True}  # its working directory is gone: it says so itself
    with _AsClient(environ, cwd):
        from lore.paths import Locations

        located = locate(argv)
        assert located is not None
        if str(Locations.resolve(*located, EnvironmentDirectories(os.environ)).data_dir.resolve()) != data_dir:
            return {"ok": True, "declined": True}  # not this helper's data dir after all
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = run_parsed(argv)
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


class _AsClient:
    """The asking process's environment and working directory, for the time of a command (the helper's after)."""

    def __init__(self, environ: dict[str, Any], cwd: str) -> None:
        self.environ = {str(key): str(value) for key, value in environ.items()}
        self.cwd = cwd

    def __enter__(self) -> None:
        self.saved, self.here = dict(os.environ), os.getcwd()
        os.chdir(self.cwd)  # gone: OSError, and the client runs the command itself
        os.environ.clear()
        os.environ.update(self.environ)

    def __exit__(self, *exc: object) -> None:
        os.environ.clear()
        os.environ.update(self.saved)
        os.chdir(self.here)


def answer(session: Any, request: dict[str, Any]) -> dict[str, Any]:
    """The helper's side: what ``lore search``/``lore context`` would print, from the loaded index.

    Declines (``ok: False``) when the loaded index is not the current, fresh generation:
    the CLI then refreshes the index and answers itself, so a record written a moment ago
    is never missing from a terminal search.
    """
    import io

    from lore.errors import LoreError
    from lore.index.manager import IndexManager
    from lore.project import detect_project
    from lore.search import search, search_options

    reader = session.reader
    manager = IndexManager(session.locations)
    if reader is None or manager.current_dir() != reader.directory or manager.staleness(reader.meta) is not None:
        return {"ok": False, "error": "the loaded index is not current"}
    command = request.get("command")
    query = request.get("query")
    if command not in _FLAGS or not isinstance(query, str) or not query.strip():
        return {"ok": False, "error": "bad request"}
    cwd = request.get("cwd")
    project = request.get("project") or detect_project(cwd if isinstance(cwd, str) else None)
    environ = request.get("environ") if isinstance(request.get("environ"), dict) else {}
    out, err = io.StringIO(), io.StringIO()
    if command == "search":
        options = search_options(limit=int(request.get("limit", 10)), current_project=str(project), include_candidates=True,
                                 phrases="filter", syntax=True)  # fmt: skip
        try:
            response = search(session, query, options, policy="ignore")
        except LoreError as error:  # a malformed query: the CLI says what is wrong, as it does without a helper
            return {"ok": False, "error": error.message}
        if request.get("json"):
            import orjson

            from lore.render.results import response_json

            out.write(orjson.dumps(response_json(response)).decode() + "\n")
        else:
            from lore.render.terminal import console, render_search

            render_search(response, explain=bool(request.get("explain")),
                          out=console(file=out, tty=bool(request.get("tty")), environ=environ),
                          err=console(stderr=True, file=err, tty=bool(request.get("err_tty")), environ=environ))  # fmt: skip
    else:
        import orjson

        from lore.context import TERMINAL, asked, block_json, context_for

        max_items = int(request.get("max_items", 5))
        fmt = str(request.get("format", "markdown"))
        options = search_options(limit=max_items, graph_depth=1, current_project=str(project), include_candidates=False)
        block = context_for(session, query, options, asked(TERMINAL, int(request.get("budget_tokens", 500)), max_items,
                                                           fmt=fmt, gap_line=bool(request.get("gap_line"))),
                            project=str(project))  # fmt: skip
        for notice in block.notices:
            err.write(notice + "\n")
        if fmt == "json":
            out.write(orjson.dumps(block_json(block)).decode() + "\n")
        elif block.text:
            out.write(block.text + "\n")
    return {"ok": True, "stdout": out.getvalue(), "stderr": err.getvalue()}
