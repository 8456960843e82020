"""Entry point. Dispatches the latency-critical paths before importing the CLI stack.

``lore --version`` and ``lore hook prompt`` run on every shell completion and
every agent prompt, ``lore merge-driver`` once per file of a git merge;
importing typer alone costs ~150 ms on a small machine.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    if args in (["--version"], ["-V"]):
        from lore import __version__

        sys.stdout.write(f"lore {__version__}\n")
        return
    if len(args) >= 2 and args[0] == "hook" and args[1] == "prompt" and "--help" not in args:
        import os

        from lore.hook import run_prompt_hook

        code = run_prompt_hook(args[2:])
        sys.stdout.flush()
        # Skip interpreter teardown: faster, and a worker thread cut off at the
        # deadline cannot delay the exit.
        os._exit(code)
    if args[:1] == ["merge-driver"] and "--help" not in args:
        # git runs the merge driver once per merged file: typer's import cost would multiply.
        from lore.sync.driver import main as merge_driver

        merge_driver(args[1:])
        return
    from lore.cli.app import run

    sys.exit(run(args))


if __name__ == "__main__":
    main()
