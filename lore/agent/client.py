"""The warm helper's client side: find, ask, start, stop and show the helper for an index.

The hooks import this module on every prompt: it imports only the standard library.
The helper itself (``lore.agent.daemon``) depends on this module, never the reverse.
Protocol: one JSON line in, one JSON line out, per connection, on a Unix socket.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time

try:  # the same SHA-1 without hashlib, whose OpenSSL binding cost the hook ~3 ms to import
    from _sha1 import sha1
except ImportError:  # pragma: no cover - a Python built without its own SHA-1
    from hashlib import sha1

# The prompt hook imports this module for ask_server(); keep its imports cheap.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from lore.paths import Directories
    from lore.settings import Settings

DEFAULT_IDLE_S = 600
# A helper spawned by a hook waits this long at most for the hook to exit before it warms up.
AFTER_CALLER_S = 2.0
# ...and, spawned by the session-start hook, this long more: a scripted session (claude -p)
# sends its first prompt within ~100 ms of the session start, and that prompt's in-process
# search should not share two cores with the helper's warm-up (measured with Claude Code:
# context on 3 of 7 such prompts without the pause, 6 of 7 with the helper off). A person
# takes longer than this to type a first prompt, which then finds the helper ready.
SESSION_SETTLE_S = 1.0
# A helper that was spawned but died before serving (no usable data, a crash) is not
# respawned by every prompt: at most once per this many seconds.
SPAWN_RETRY_S = 10.0


def _key(index_dir: Path) -> str:
    return sha1(str(index_dir.absolute()).encode()).hexdigest()[:12]


def server_paths(index_dir: Path, settings: Directories) -> dict[str, Path]:
    """The helper's files for ``index_dir``, in the cache dir of ``settings``."""
    from lore.paths import cache_dir

    base = cache_dir(settings) / "server"
    key = _key(index_dir)
    return {"dir": base, "socket": base / f"{key}.sock", "lock": base / f"{key}.lock", "status": base / f"{key}.json",
            "spawn": base / f"{key}.spawn", "log": base / f"{key}.log"}  # fmt: skip


def running_lore() -> dict[str, str]:
    """Which lore this process runs: its version, package directory and interpreter.

    The helper writes it into its status, so ``lore doctor`` can tell a helper that
    still runs the code of an earlier install (an upgrade does not stop it) from one
    that runs this lore.
    """
    import lore

    return {"version": lore.__version__, "package": os.path.dirname(os.path.abspath(lore.__file__ or "")),
            "python": sys.executable}  # fmt: skip


def auto_start_enabled(settings: Settings) -> bool:
    """Whether the hooks start the helper: ``LORE_SERVER`` (``Settings.server``) when set, else not ``lore server disable``."""
    if settings.server is not None:
        return settings.server
    from lore.paths import state_dir

    return not (state_dir(settings) / "server-off").exists()


def ask_server(request: dict[str, Any], deadline: float, index_dir: Path, settings: Directories) -> str | None:
    """Send a request to the running helper; None when none answers in time (the caller works in-process)."""
    reply = ask_server_reply(request, deadline, index_dir, settings)
    text = reply.get("text") if reply is not None else None
    return text if isinstance(text, str) else None


def ask_server_reply(request: dict[str, Any], deadline: float, index_dir: Path,
                     settings: Directories) -> dict[str, Any] | None:  # fmt: skip
    """The helper's whole reply to ``request`` when it says ``ok``; None when none answers in time, or it declines."""
    paths = server_paths(index_dir, settings)
    if not paths["socket"].exists():
        return None
    remaining = deadline - time.monotonic()
    if remaining <= 0.01:
        return None
    try:
        # The C module, not `socket`: its wrapper (with selectors, enum and array) costs ~3 ms
        # to import, and the warm hook and every terminal search the helper answers pay it.
        import _socket

        client = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            client.settimeout(remaining)
            client.connect(str(paths["socket"]))
            client.sendall(json.dumps(request).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                client.settimeout(max(0.001, deadline - time.monotonic()))
                chunk = client.recv(65536)
                if not chunk:
                    break
                data += chunk
        finally:
            client.close()
    except (OSError, TimeoutError):
        return None
    try:
        reply = json.loads(data)
    except ValueError:
        return None
    if not isinstance(reply, dict) or not reply.get("ok"):
        return None
    return reply


# What ``run_on_server`` returns when the helper took the command but its answer never came.
LOST = {"ok": False, "lost": True}


def run_on_server(request: dict[str, Any], deadline: float, index_dir: Path, settings: Directories) -> dict[str, Any] | None:
    """Have the running helper run a command that writes; its reply, None if it did not start it, or ``LOST``.

    Two steps, so that a command is never run twice: the helper answers ``ready`` (or
    declines) before it does anything, then runs only once this side says ``go``. Before
    ``go`` (no helper, a decline, no answer by ``deadline``) None: the caller runs the
    command itself. After it, this side waits for the answer however long the command
    takes, and a helper that dies meanwhile gives ``LOST``: the command may or may not
    have run, and running it again here could store a record twice.
    """
    path = server_paths(index_dir, settings)["socket"]
    if not path.exists() or deadline - time.monotonic() <= 0.01:
        return None
    import _socket

    client = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        try:
            client.settimeout(max(0.001, deadline - time.monotonic()))
            client.connect(str(path))
            client.sendall(json.dumps(request).encode() + b"\n")
            ready, rest = _read_line(client, deadline)
            if not isinstance(ready, dict) or not ready.get("ok") or not ready.get("ready"):
                return None
            client.settimeout(max(0.001, deadline - time.monotonic()))
            client.sendall(b"go\n")
        except (OSError, TimeoutError):
            return None
        try:
            client.settimeout(None)  # committed: the command runs now, for as long as it takes
            reply, _ = _read_line(client, None, rest)
        except (OSError, TimeoutError):
            return LOST
        return reply if isinstance(reply, dict) else LOST
    finally:
        client.close()


def _read_line(client: Any, deadline: float | None, data: bytes = b"") -> tuple[Any, bytes]:
    """One JSON line from ``client`` (None if the connection closed first), and what came after it."""
    while b"\n" not in data:
        if deadline is not None:
            client.settimeout(max(0.001, deadline - time.monotonic()))
        chunk = client.recv(65536)
        if not chunk:
            return None, b""
        data += chunk
    line, _, rest = data.partition(b"\n")
    try:
        return json.loads(line), rest
    except ValueError:
        return None, rest


def start_detached(index_dir: Path, settings: Directories, idle: int = DEFAULT_IDLE_S, data_dir: Path | None = None,
                   after_caller: bool = False, settle_s: float = 0.0) -> int:  # fmt: skip
    """Start a helper in its own session (it outlives this process by design); return its pid.

    Spawn and return: nothing here waits for the helper. Its stdin, stdout and stderr
    are not the caller's (an agent waits for a hook's pipes to close), its locations
    are absolute and it changes to ``/`` itself (it pins no directory); ``-P`` keeps
    the caller's working directory off its import path. ``os.posix_spawn`` costs
    under a millisecond where ``subprocess`` costs 5-10 ms to import and as much to
    fork: the session-start hook pays this on every session.

    ``after_caller``: the helper waits for this process to exit (at most
    ``AFTER_CALLER_S``), then ``settle_s`` more, before it imports and loads anything
    (lore.__main__ does the waiting), so the hook that spawns it, and a prompt sent
    right after a session start, do not share the CPU with its warm-up on a small machine.
    """
    index_dir = index_dir.absolute()
    paths = server_paths(index_dir, settings)
    paths["dir"].mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "LORE_INDEX_DIR": str(index_dir)}
    if data_dir is not None:
        env["LORE_DATA_DIR"] = str(data_dir.absolute())
    elif env.get("LORE_DATA_DIR"):
        env["LORE_DATA_DIR"] = os.path.abspath(env["LORE_DATA_DIR"])
    env.pop("LORE_SERVER_AFTER_PID", None)
    env.pop("LORE_SERVER_SETTLE_MS", None)
    if after_caller:
        env["LORE_SERVER_AFTER_PID"] = str(os.getpid())
        env["LORE_SERVER_SETTLE_MS"] = str(int(max(0.0, settle_s) * 1000))
    from lore.interpreter import lore_argv

    argv = lore_argv("server", "run", "--idle", str(idle))
    if hasattr(os, "posix_spawn"):
        actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                   (os.POSIX_SPAWN_OPEN, 1, str(paths["log"]), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600),
                   (os.POSIX_SPAWN_DUP2, 1, 2)]  # fmt: skip
        with contextlib.suppress(NotImplementedError):  # setsid where the platform lacks it
            return os.posix_spawn(sys.executable, argv, env, file_actions=actions, setsid=True)
    import subprocess

    with paths["log"].open("ab") as log:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                   close_fds=True, cwd="/", env=env)  # fmt: skip
    # Never waited for: once this (short-lived) process exits, init reaps the helper.
    return process.pid


def ensure_started(index_dir: Path, data_dir: Path, settings: Settings, settle_s: float = 0.0) -> int | None:
    """Start a helper for ``index_dir`` in the background unless one serves or is starting.

    Never waits for it: the caller (a hook) answers this prompt without it. Returns the
    new helper's pid, or None when none was started (disabled, no data dir, one runs,
    or one died moments ago). Costs a few stat calls when a helper runs.
    """
    if not auto_start_enabled(settings) or not data_dir.is_dir():
        return None
    paths = server_paths(index_dir, settings)
    if read_status(index_dir, settings) is not None:
        return None
    try:
        spawned = json.loads(paths["spawn"].read_text())
        pid, at = int(spawned["pid"]), float(spawned["at"])
    except (OSError, ValueError, KeyError, TypeError):
        pid, at = 0, 0.0
    if pid and _alive(pid):
        return None  # still warming up (it writes its status once it serves)
    if 0.0 <= time.time() - at < SPAWN_RETRY_S:
        return None
    pid = start_detached(index_dir, settings, data_dir=data_dir, after_caller=True, settle_s=settle_s)
    with contextlib.suppress(OSError):
        tmp = paths["spawn"].with_name(f"{paths['spawn'].name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"pid": pid, "at": time.time()}))
        tmp.replace(paths["spawn"])
    return pid


def read_status(index_dir: Path, settings: Directories) -> dict[str, Any] | None:
    paths = server_paths(index_dir, settings)
    try:
        status = json.loads(paths["status"].read_text())
    except (OSError, ValueError):
        return None
    pid = status.get("pid")
    if not isinstance(pid, int) or not _alive(pid):
        return None
    return status if isinstance(status, dict) else None


def _alive(pid: int) -> bool:
    # A helper that exited but is not reaped yet (its parent, `lore server start`, is gone)
    # still answers kill(0): it is a zombie, not a running helper.
    from lore.interpreter import running

    return running(pid)


def _warming_pid(index_dir: Path, settings: Directories) -> int | None:
    """A helper the hooks spawned that has not announced itself yet (Linux: checked against its command line)."""
    try:
        pid = int(json.loads(server_paths(index_dir, settings)["spawn"].read_text())["pid"])
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            words = cmdline.read().split(b"\0")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return pid if b"server" in words and b"run" in words and _alive(pid) else None


def stop(index_dir: Path, settings: Directories, timeout: float = 5.0) -> int | None:
    """Stop the helper for the index (serving or still warming up); return its pid, or None if none ran."""
    status = read_status(index_dir, settings)
    pid = int(status["pid"]) if status is not None else _warming_pid(index_dir, settings)
    if pid is None:
        return None
    import signal

    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + timeout
    while time.monotonic() < end and _alive(pid):
        time.sleep(0.05)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    # Stopped on purpose, not crashed: the next hook may start a fresh one at once.
    with contextlib.suppress(OSError):
        server_paths(index_dir, settings)["spawn"].unlink()
    return pid
