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

The client side (``run_remote``) imports only the standard library and ``lore.paths``;
the helper side (``answer``) imports what the CLI would.
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False  # typing costs ~3 ms to import; the client side needs none of it
if TYPE_CHECKING:
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


def answer(session: Any, request: dict[str, Any]) -> dict[str, Any]:
    """The helper's side: what ``lore search``/``lore context`` would print, from the loaded index.

    Declines (``ok: False``) when the loaded index is not the current, fresh generation:
    the CLI then refreshes the index and answers itself, so a record written a moment ago
    is never missing from a terminal search.
    """
    import io

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
                                 phrases="filter")  # fmt: skip
        response = search(session, query, options, policy="ignore")
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

        from lore.context import TERMINAL, block_for, block_json
        from lore.rank import null

        max_items = int(request.get("max_items", 5))
        fmt = str(request.get("format", "markdown"))
        options = search_options(limit=max_items, graph_depth=1, current_project=str(project), include_candidates=False)
        response = search(session, query, options, policy="ignore")
        profile = TERMINAL._replace(budget_chars=int(request.get("budget_tokens", 500)) * 4, max_items=max_items, fmt=fmt,
                                    gap_line=bool(request.get("gap_line")))  # fmt: skip
        block = block_for(response, profile, project=str(project), null=null.load(reader.directory))
        for notice in block.notices:
            err.write(notice + "\n")
        if fmt == "json":
            out.write(orjson.dumps(block_json(block)).decode() + "\n")
        elif block.text:
            out.write(block.text + "\n")
    return {"ok": True, "stdout": out.getvalue(), "stderr": err.getvalue()}
