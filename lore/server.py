"""The optional warm helper: one process per index that keeps the index, model and graph loaded.

A prompt hook pays the interpreter start plus a socket round trip instead of
importing numpy and the tokenizer and loading the index every time.
Rules: a single instance per index (file lock); it exits after an idle period
(default 10 minutes) and when its index is rebuilt; ``lore server status|stop``
show and stop it; it only starts when the user enabled it (``lore server start``,
or ``LORE_SERVER=auto`` / ``lore server enable`` for the hook to start it);
the hook falls back to in-process work whenever it does not answer.
Protocol: one JSON line in, one JSON line out, per connection, on a Unix socket.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import sys
import time

# The prompt hook imports this module for ask_server(); keep its imports cheap.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

DEFAULT_IDLE_S = 600
ACCEPT_POLL_S = 1.0
MAX_REQUEST = 1 << 20


def _key(index_dir: Path) -> str:
    return hashlib.sha1(str(index_dir.absolute()).encode()).hexdigest()[:12]


def server_paths(index_dir: Path) -> dict[str, Path]:
    from lore.paths import cache_dir

    base = cache_dir() / "server"
    key = _key(index_dir)
    return {"dir": base, "socket": base / f"{key}.sock", "lock": base / f"{key}.lock", "status": base / f"{key}.json"}


def _current_index_dir() -> Path:
    from lore.paths import Locations

    return Locations.resolve().index_dir


def auto_start_enabled() -> bool:
    value = os.environ.get("LORE_SERVER")
    if value is not None:
        return value.lower() in ("auto", "on", "1", "yes")
    from lore.paths import state_dir

    return (state_dir() / "server-auto").exists()


def ask_server(request: dict[str, Any], deadline: float, index_dir: Path | None = None) -> str | None:
    """Send a request to the running helper; None when none answers in time (the caller works in-process)."""
    index_dir = index_dir or _current_index_dir()
    paths = server_paths(index_dir)
    if not paths["socket"].exists():
        if auto_start_enabled():
            start_detached(index_dir)
        return None
    remaining = deadline - time.monotonic()
    if remaining <= 0.01:
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
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
    except (OSError, TimeoutError):
        return None
    try:
        reply = json.loads(data)
    except ValueError:
        return None
    if not isinstance(reply, dict) or not reply.get("ok"):
        return None
    text = reply.get("text")
    return text if isinstance(text, str) else None


def start_detached(index_dir: Path | None = None, idle: int = DEFAULT_IDLE_S) -> int:
    """Start a helper in its own session (it outlives this process by design); return its pid."""
    import subprocess

    index_dir = index_dir or _current_index_dir()
    paths = server_paths(index_dir)
    paths["dir"].mkdir(parents=True, exist_ok=True)
    log = (paths["dir"] / f"{_key(index_dir)}.log").open("ab")
    process = subprocess.Popen(
        [sys.executable, "-m", "lore", "server", "run", "--idle", str(idle)],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True,
        env={**os.environ, "LORE_INDEX_DIR": str(index_dir)},
    )  # fmt: skip
    log.close()
    return process.pid


def read_status(index_dir: Path | None = None) -> dict[str, Any] | None:
    paths = server_paths(index_dir or _current_index_dir())
    try:
        status = json.loads(paths["status"].read_text())
    except (OSError, ValueError):
        return None
    pid = status.get("pid")
    if not isinstance(pid, int) or not _alive(pid):
        return None
    return status if isinstance(status, dict) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop(index_dir: Path | None = None, timeout: float = 5.0) -> int | None:
    """Stop the helper for the index; return its pid, or None if none was running."""
    status = read_status(index_dir)
    if status is None:
        return None
    import signal

    pid = int(status["pid"])
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
    return pid


def serve(idle_seconds: int = DEFAULT_IDLE_S) -> int:
    """Run the helper in the foreground until idle, rebuilt, or stopped. Returns an exit code."""
    import signal

    import filelock

    from lore.hook import context_for_prompt, log_failure
    from lore.index.manager import IndexManager
    from lore.paths import Locations
    from lore.search import SearchSession

    locations = Locations.resolve()
    paths = server_paths(locations.index_dir)
    paths["dir"].mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(paths["lock"]), timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        return 3  # another helper already serves this index
    session = SearchSession(locations)
    manager = IndexManager(locations)
    generation = manager.current_dir()
    stopping = {"flag": False}

    def on_term(signum: int, frame: Any) -> None:
        stopping["flag"] = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    with contextlib.suppress(FileNotFoundError):
        paths["socket"].unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(paths["socket"]))
    os.chmod(paths["socket"], 0o600)
    listener.listen(16)
    listener.settimeout(ACCEPT_POLL_S)
    started = time.time()
    last_used = time.monotonic()
    served = 0

    def write_status() -> None:
        status = {"pid": os.getpid(), "socket": str(paths["socket"]), "index_dir": str(locations.index_dir),
                  "data_dir": str(locations.data_dir), "started_at": started, "idle_exit_s": idle_seconds,
                  "requests": served, "generation": generation.name if generation else None}  # fmt: skip
        tmp = paths["status"].with_suffix(".tmp")
        tmp.write_text(json.dumps(status))
        tmp.replace(paths["status"])

    # Warm everything a request needs before announcing ourselves.
    with contextlib.suppress(Exception):
        reader = session.open("ignore")
        if reader.has_vectors:
            session.get_encoder()
            session.get_centroids(reader)
        _ = reader.table, reader.bm25, reader.adjacency
        from lore.index import analysis

        analysis.terms("warm the stemmer")
    write_status()
    reason = "stopped"
    try:
        while not stopping["flag"]:
            if time.monotonic() - last_used > idle_seconds:
                reason = "idle"
                break
            if manager.current_dir() != generation:
                reason = "index rebuilt"
                break
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if stopping["flag"]:
                    break
                raise
            last_used = time.monotonic()
            with conn:
                stale = _handle(conn, session, manager, context_for_prompt, log_failure)
            served += 1
            write_status()
            if stale:
                # Refresh after answering, so no prompt waits for it.
                try:
                    manager.build(lock_timeout=5.0)
                    session.open("refresh")
                except Exception as exc:
                    log_failure("server-refresh", repr(exc))
    finally:
        listener.close()
        for key in ("socket", "status"):
            with contextlib.suppress(FileNotFoundError):
                paths[key].unlink()
        lock.release()
        sys.stderr.write(f"lore server exiting: {reason}\n")
    return 0


def _handle(conn: socket.socket, session: Any, manager: Any, context_for_prompt: Any, log_failure: Any) -> bool:
    """Answer one request; return True when the index turned out stale."""
    conn.settimeout(2.0)
    data = b""
    try:
        while not data.endswith(b"\n") and len(data) < MAX_REQUEST:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        request = json.loads(data)
        reply: dict[str, Any]
        stale = False
        if request.get("op") == "ping":
            reply = {"ok": True, "text": "pong"}
        elif request.get("op") == "context":
            session.open("ignore")
            stale = session.reader is not None and manager.staleness(session.reader.meta) is not None
            text = context_for_prompt(session, str(request.get("prompt", "")), request.get("cwd"),
                                      int(request.get("budget", 1500)), None, bool(request.get("gap_line")))  # fmt: skip
            reply = {"ok": True, "text": text}
        else:
            reply = {"ok": False, "error": "unknown op"}
        conn.sendall(json.dumps(reply).encode() + b"\n")
        return stale
    except Exception as exc:
        log_failure("server", repr(exc))
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps({"ok": False, "error": str(exc)}).encode() + b"\n")
        return False
