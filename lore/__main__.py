"""Entry point. Dispatches the latency-critical paths before importing the CLI stack.

``lore --version``, ``lore hook prompt`` and ``lore hook session-start`` run on
every shell completion, every agent prompt and every session; importing typer
alone costs ~150 ms on a small machine.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    if args in (["--version"], ["-V"]):
        from lore import __version__

        sys.stdout.write(f"lore {__version__}\n")
        return
    if len(args) >= 2 and args[0] == "hook" and args[1] in ("prompt", "session-start") and "--help" not in args:
        import os

        from lore.hook import run_prompt_hook, run_session_start_hook

        code = (run_prompt_hook if args[1] == "prompt" else run_session_start_hook)(args[2:])
        sys.stdout.flush()
        # Skip interpreter teardown: faster, and a worker thread cut off at the
        # deadline cannot delay the exit.
        os._exit(code)
    if _command(args) == "mcp":
        _exit_on_signals_while_starting()
    from lore.cli.app import run

    sys.exit(run(args))


# Global options that take a value (lore.cli.app's callback); the command follows them.
_VALUED = frozenset({"--data-dir", "--index-dir", "--project", "-P"})


def _command(args: list[str]) -> str | None:
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in _VALUED:
            skip = True
        elif not arg.startswith("-"):
            return arg
    return None


def _exit_on_signals_while_starting() -> None:
    """`lore mcp` takes seconds to import the MCP SDK; a client that gives up meanwhile sends SIGINT.

    Until the server installs its own handlers (which finish the tool call in progress),
    either signal ends the process at once, with exit 0 and no traceback.
    """
    import os
    import signal

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda number, frame: os._exit(0))


if __name__ == "__main__":
    main()
