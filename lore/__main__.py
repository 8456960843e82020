"""Entry point. Dispatches the latency-critical paths before importing the CLI stack.

``lore --version``, ``lore hook prompt`` and ``lore hook session-start`` run on
every shell completion, every agent prompt and every session, ``lore merge-driver``
once per file of a git merge; importing typer alone costs ~150 ms on a small machine.
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
        import gc
        import os

        # A short-lived process that frees nothing: the cyclic collector only walks the index's
        # columns (tens of thousands of objects) again and again.
        gc.disable()

        from lore.agent.hook import run_prompt_hook, run_session_start_hook

        code = (run_prompt_hook if args[1] == "prompt" else run_session_start_hook)(args[2:])
        sys.stdout.flush()
        # Skip interpreter teardown: faster, and a worker thread cut off at the
        # deadline cannot delay the exit.
        os._exit(code)
    if args[:1] == ["merge-driver"] and "--help" not in args:
        # git runs the merge driver once per merged file: typer's import cost would multiply.
        from lore.sync.driver import main as merge_driver

        merge_driver(args[1:])
        return
    if args[:2] == ["server", "run"] and "--help" not in args:
        # What the hooks spawn: nothing is imported before the helper has let the hook that
        # spawned it finish (it shares the CPU with that hook on a small machine).
        _wait_for_spawning_hook()
        from lore.agent.daemon import DEFAULT_IDLE_S, serve

        idle = DEFAULT_IDLE_S
        if len(args) == 4 and args[2] == "--idle" and args[3].isdigit():
            idle = max(1, int(args[3]))
        elif len(args) != 2:
            from lore.cli.app import run

            sys.exit(run(args))  # anything else: let the CLI parse (and report) it
        sys.exit(serve(idle, commands=_CliCommands()))
    from lore.cli.argv import command_name as _command

    if _command(args) in ("search", "context") and "--help" not in args and "-h" not in args:
        # A warm helper, when one runs, answers in a few ms what the CLI needs ~0.4 s to import and load.
        from lore.agent.remote import run_remote

        answered = run_remote(args)
        if answered is not None:
            import os

            sys.stdout.flush()
            os._exit(answered)  # skip the interpreter's teardown, as the hook does
    if _command(args) is not None and "--help" not in args and "-h" not in args:
        from lore.agent.remote import WRITE_COMMANDS, run_remote_command

        if _command(args) in WRITE_COMMANDS:
            import os

            # A warm helper, when one runs, runs a write with the duplicate check's pool and
            # encoder already loaded: what the CLI needs ~0.3 s to import and load at 10k records.
            ran = run_remote_command(args)
            if ran is not None:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(ran)
            # Without one: the check's numpy work is a few small arrays, and OpenBLAS's thread
            # pool, started when numpy is imported, cost the process ~30 ms of CPU (50-100 ms
            # wall on a loaded 2-core machine) for nothing. A value the user set is kept.
            os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if _command(args) == "mcp":
        _exit_on_signals_while_starting()
        if args == ["mcp"]:
            _serve_mcp()  # returns only when the CLI should run it (and report what stopped it)
    from lore.cli.app import run

    sys.exit(run(args))


class _CliCommands:
    """``lore.cli.app`` for the warm helper, which runs write commands in process: imported when first used
    (typer costs ~0.15 s; the helper prepares it when idle), and handed down from here, above both, because
    the agent never imports the CLI."""

    def __getattr__(self, name: str) -> object:
        from lore.cli import app

        return getattr(app, name)


def _serve_mcp() -> None:
    """`lore mcp` as the agents run it, without the CLI's ~0.2 s of imports: clients wait about 1 s for it.

    Returns (and the CLI runs the command and reports the error) when the SDK is not
    installed or a ``LORE_*`` setting is invalid; exits once the server has served.
    """
    from lore.agent.mcp_start import require_sdk, serve
    from lore.errors import LoreError
    from lore.paths import Locations
    from lore.settings import Settings

    try:
        require_sdk()
        settings = Settings.from_env()
    except LoreError:
        return
    try:
        serve(Locations.resolve(None, None, settings), settings=settings)
    except LoreError as error:  # the SDK failed to load: the CLI's one exit point reports it
        from lore.cli.base import report_error

        report_error(error)
        sys.exit(error.exit_code)
    sys.exit(0)


def _wait_for_spawning_hook() -> None:
    """Wait while the hook named by LORE_SERVER_AFTER_PID runs (at most 2 s, as lore.agent.daemon.AFTER_CALLER_S),
    then LORE_SERVER_SETTLE_MS more (at most 2 s; lore.agent.daemon.SESSION_SETTLE_S says why)."""
    import os
    import time

    from lore.interpreter import running

    try:
        caller = int(os.environ.pop("LORE_SERVER_AFTER_PID", ""))
        settle = min(2.0, max(0.0, int(os.environ.pop("LORE_SERVER_SETTLE_MS", "0")) / 1000))
    except ValueError:
        return
    end = time.monotonic() + 2.0
    while time.monotonic() < end and running(caller):
        time.sleep(0.005)
    time.sleep(settle)


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
