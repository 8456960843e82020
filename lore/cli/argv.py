"""The command a `lore` command line names, found without click: ``lore.__main__`` dispatches on it
before typer is imported, and ``lore.cli.app`` builds only that command's click object."""

from __future__ import annotations

# The root options that take a value: the word after one is that value, never the command.
ROOT_VALUED = frozenset({"--data-dir", "--index-dir", "--project", "-P"})


def command_name(args: list[str]) -> str | None:
    """The first word of ``args`` that is neither an option nor a root option's value (the command), or None."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in ROOT_VALUED:
            skip = True
        elif not arg.startswith("-"):
            return arg
    return None
