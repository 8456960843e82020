"""Hand a capture to a detached process, so a hook returns at once.

The hook spawns ``python -m lore capture-session PATH --session ID`` in its own
session with stdin from /dev/null and output appended to ``<cache dir>/capture.log``:
an agent waits for a hook's pipes to close, never for this process. Captures of the
same data dir take turns (the capture lock), and each reads only what is new.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lore.settings import Settings

CAPTURE_SETTING = "LORE_CAPTURE"


def capture_enabled(flag: bool, settings: Settings) -> bool:
    """``--capture`` on the hook's command line, or ``LORE_CAPTURE=on``; ``LORE_CAPTURE=off`` wins over both."""
    return settings.capture if settings.capture is not None else flag


def spawn_capture(transcript: str, session_id: str | None, settings: Settings, *, data_dir: str | None = None,
                  index_dir: str | None = None, project: str | None = None) -> int:  # fmt: skip
    """Start the capture in the background; its pid. ``os.posix_spawn``: no fork of the hook's memory."""
    from lore.paths import cache_dir

    log = cache_dir(settings) / "capture.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    from lore.interpreter import lore_argv

    argv = lore_argv()
    if data_dir:
        argv += ["--data-dir", os.path.abspath(data_dir)]
    if index_dir:
        argv += ["--index-dir", os.path.abspath(index_dir)]
    if project:
        argv += ["--project", project]
    argv += ["capture-session", os.path.abspath(transcript), "--json"]
    if session_id:
        argv += ["--session", session_id]
    env = dict(os.environ)
    if env.get("LORE_DATA_DIR"):
        env["LORE_DATA_DIR"] = os.path.abspath(env["LORE_DATA_DIR"])
    if hasattr(os, "posix_spawn"):
        actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                   (os.POSIX_SPAWN_OPEN, 1, str(log), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600),
                   (os.POSIX_SPAWN_DUP2, 1, 2)]  # fmt: skip
        with contextlib.suppress(NotImplementedError):
            return os.posix_spawn(sys.executable, argv, env, file_actions=actions, setsid=True)
    import subprocess

    with log.open("ab") as handle:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=handle, stderr=handle,
                                   start_new_session=True, close_fds=True, env=env)  # fmt: skip
    return process.pid
