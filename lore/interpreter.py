"""The command line of a child process that runs lore's own Python: written once, so every child starts alike.

``-P`` (Python 3.11+) keeps the working directory (``-m``, ``-c``) off the child's
import path. Without it a child started from inside a checkout of lore, or from any
directory that holds a ``lore/`` package, imports that ``lore`` instead of the one
running: the index build worker then recorded another model identity than its
parent, and every search after a rebuild rebuilt the index again. Not ``-I``: the
children read ``LORE_*`` from the environment and honour ``PYTHONPATH`` as their
parent did.

Standard library only: the hooks import this module when they spawn a child.
"""

from __future__ import annotations

import sys


def python_argv(*args: str) -> list[str]:
    """``python -P ARGS`` with this interpreter."""
    return [sys.executable, "-P", *args]


def lore_argv(*args: str) -> list[str]:
    """``python -P -m lore ARGS`` with this interpreter: lore's CLI without relying on PATH."""
    return python_argv("-m", "lore", *args)


def running(pid: int) -> bool:
    """Whether process ``pid`` runs: it answers ``kill(0)`` and is not a zombie (exited, not yet reaped)."""
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # not ours to signal, but there
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return True  # no /proc: kill(0) alone says it runs
