"""The warm helper: one process per index that keeps the index, model and graph loaded.

A prompt hook pays the interpreter start plus a socket round trip instead of
importing numpy and the tokenizer and loading the index every time.
Rules: the SessionStart hook starts it in the background (so the first prompt
is warm) and the prompt hook starts it when none runs, both without waiting for
it (``ensure_started``); ``lore server disable`` or ``LORE_SERVER=off`` turn
that off. A single instance per index (file lock). It exits after an idle
period (default 10 minutes), when its index is rebuilt or removed, when its
data dir disappears, and when its resident memory passes ``LORE_SERVER_MAX_RSS_MB``
(the next prompt starts a fresh one). ``lore server status|stop`` show and stop
it; the hook falls back to in-process work whenever it does not answer.
It also runs the write commands of `lore` processes (``_run_for_client``,
lore.agent.remote), then adds them to its index from the index it holds.
Protocol: one JSON line in, one JSON line out, per connection, on a Unix socket
(a write: a line in, ``ready`` out, ``go`` in, the answer out).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time

from lore.agent.client import AFTER_CALLER_S, DEFAULT_IDLE_S, _alive, running_lore, server_paths
from lore.agent.log import log_failure
from lore.agent.prompt import context_for_prompt
from lore.interpreter import python_argv

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

ACCEPT_POLL_S = 1.0
MAX_REQUEST = 1 << 20
# The helper exits once its resident set passes lore.settings.DEFAULT_SERVER_MAX_RSS_MB
# (512; LORE_SERVER_MAX_RSS_MB overrides): about 100 MB at 10,000 records and 250 MB at
# 50,000 here, so only a leak or a far larger store reaches it; the next prompt then
# starts a fresh helper.


def rss_bytes() -> int | None:
    """This process's resident set now (Linux), else its peak (other Unixes); None when unknown."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (ImportError, OSError):
        return None
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024



def serve(idle_seconds: int = DEFAULT_IDLE_S, commands: Any = None) -> int:
    """Run the helper in the foreground until idle, rebuilt, gone, too big or stopped. Returns an exit code.

    ``commands``: the CLI's app module (``lore.cli.app``: ``prepare``, ``run_parsed``, or a lazy stand-in
    for it) the helper runs commands for ``lore`` processes with, in process. Handed down by
    ``lore.__main__``: the agent never imports the CLI, which itself starts and installs the agent's
    parts. None: those commands are declined (the client runs them).
    """
    started = _start(commands)
    return started if isinstance(started, int) else started.run(idle_seconds)


def _start(commands: Any) -> _Helper | int:
    """The helper, its lock taken and its index loaded and warm; or the exit code when there is none to be."""
    import filelock

    from lore.errors import LoreError
    from lore.paths import Locations
    from lore.settings import Settings

    try:
        settings = Settings.from_env()
    except LoreError as error:
        sys.stderr.write(f"lore server exiting: {error.message}\n")
        return 1
    # Absolute before the chdir below, for this process and the children it starts.
    settings = settings._replace(**{name: os.path.abspath(os.path.expanduser(value)) for name in _DIRECTORIES
                                    if (value := getattr(settings, name))})  # fmt: skip
    locations = Locations.resolve(None, None, settings)
    from lore.agent.log import use_cache_dir
    from lore.paths import cache_dir

    use_cache_dir(cache_dir(settings))
    with contextlib.suppress(OSError):
        os.chdir("/")  # a daemon pins no directory (its locations are absolute)
    paths = server_paths(locations.index_dir, settings)
    paths["dir"].mkdir(parents=True, exist_ok=True)
    # The lock first, before the heavy imports: a second helper started by a racing hook
    # leaves within milliseconds.
    lock = filelock.FileLock(str(paths["lock"]), timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        return 3  # another helper already serves this index
    _wait_for_caller()
    if not locations.data_dir.is_dir():
        lock.release()
        sys.stderr.write(f"lore server exiting: no data dir at {locations.data_dir}\n")
        return 1
    try:
        return _Helper(settings, locations, paths, lock, commands)
    except Exception as exc:
        log_failure("server", f"no usable index: {exc!r}")
        lock.release()
        sys.stderr.write(f"lore server exiting: no usable index ({exc!r})\n")
        return 1


class _Helper:
    """A serving helper: its index, session and counters, and the loop that answers requests (``run``)."""

    def __init__(self, settings: Any, locations: Any, paths: dict[str, Path], lock: Any, commands: Any) -> None:
        """Load and warm what a request needs before the helper announces itself (raises when there is no
        usable index). Without an index, one is built first, in a child process: a build's peak memory
        stays out of the helper. Without a readable index there is nothing to serve: the hook works in-process."""
        from lore.index.manager import IndexManager
        from lore.search import SearchSession

        self.settings, self.locations, self.paths, self.lock, self.commands = settings, locations, paths, lock, commands
        self.session = SearchSession(locations)
        self.manager = IndexManager(locations)
        if self.manager.read_meta() is None:
            _build_in_child(locations)
        stamp = _meta_stamp(self.manager)
        reader = self.session.open("ignore")
        _warm(reader)
        with contextlib.suppress(Exception):
            if reader.has_vectors:
                self.session.get_encoder()
                self.session.get_centroids(reader)
            from lore import analysis

            analysis.terms("warm the stemmer")
        self.generation = reader.directory
        self.data_dir = str(locations.data_dir.resolve())
        self.refresher = _Refresher(locations, self.generation, stamp)
        self.stopping = False
        self.started = time.time()
        self.last_used = time.monotonic()
        self.next_check = 0.0
        self.served = 0
        self.writes = 0  # the commands it ran for `lore` processes (lore.agent.remote)
        self.declined = 0  # requests it said no to (the asking process worked on its own)
        self.refreshes = 0
        self.measured_null = False  # the store's null evidence, at the first idle moment (lore/rank/null.py)
        self.pool_warm = False  # the write check's pool: loaded when the helper is first idle (or by a first write)
        self.tokenizer_loaded = False  # the model's batch tokenizer: loaded at an idle moment, not by a prompt
        self.commands_prepared = False
        self.written: float | None = None  # when the helper last ran a write whose after-work is pending
        self.code = running_lore()
        self.idle_seconds = DEFAULT_IDLE_S

    def write_status(self) -> None:
        current = self.session.reader
        status = {"pid": os.getpid(), "socket": str(self.paths["socket"]), "index_dir": str(self.locations.index_dir),
                  "data_dir": str(self.locations.data_dir), "started_at": self.started,
                  "idle_exit_s": self.idle_seconds, "requests": self.served, "writes": self.writes,
                  "declined": self.declined, "generation": self.generation.name,
                  "revision": current.meta.revision if current is not None else None,
                  "refreshes": self.refreshes, "refreshing": self.refresher.busy(), "lore": self.code,
                  "warmed": {"write_pool": self.pool_warm, "null_evidence": self.measured_null,
                             "tokenizer": self.tokenizer_loaded}}  # fmt: skip
        tmp = self.paths["status"].with_suffix(".tmp")
        tmp.write_text(json.dumps(status))
        tmp.replace(self.paths["status"])

    def after_writes(self) -> None:
        """The index takes the writes in (the reader the helper holds serves the delta, in this
        process), and the write check's pool is saved for CLI processes. Deferred until the
        helper is idle or a read comes: a run of writes does not wait for it, a read sees them."""
        if self.written is None:
            return
        self.written = None
        if _refresh_in_process(self.manager, self.session):
            self.refresher.stamp = _meta_stamp(self.manager)
            self.refreshes += 1
        _save_pool()

    def on_term(self, signum: int, frame: Any) -> None:
        import signal

        self.stopping = True
        # Interrupt a blocking accept() now rather than at its next poll; once only, so
        # the clean-up below cannot be interrupted by a second signal.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise _Stopping

    def exit_reason(self) -> str | None:
        """Why the helper must stop now, if it must."""
        if self.refresher.unusable:
            return "index unreadable"
        if time.monotonic() - self.last_used > self.idle_seconds:
            return "idle"
        if not self.locations.data_dir.is_dir():
            return "data dir gone"
        if not self.locations.index_dir.is_dir():
            return "index dir gone"
        if self.manager.current_dir() != self.generation:
            return "index rebuilt"
        resident, limit = rss_bytes(), self.settings.server_max_rss_bytes
        if resident is not None and resident > limit:
            return f"resident memory {resident / 1048576:.0f} MiB above the {limit / 1048576:.0f} MiB bound"
        return None

    def swap_in_refreshed(self) -> None:
        """The refreshed reader, once ready, swapped in between requests: no request ever sees a reader change under it."""
        fresh = self.refresher.take()
        if fresh is None:
            return
        session = self.session
        old, session.reader, session.warnings = session.reader, fresh, []
        if old is not None and old is not fresh:
            old.close()
        self.refreshes += 1
        self.write_status()

    def revalidate(self) -> None:
        """Stale-while-revalidate: requests are answered from the loaded index; a changed data dir (or an index
        refreshed by another process) is picked up in the background and swapped in when ready. After a write
        the helper ran, its own refresh comes first (``after_writes``)."""
        if time.monotonic() < self.next_check or self.written is not None:
            return
        self.next_check = time.monotonic() + REVALIDATE_S
        if self.session.reader is not None and self.refresher.needed(self.manager, self.session.reader):
            self.refresher.start()
            self.write_status()

    def on_idle(self) -> None:
        """No request came in the wait: the pending after-work, else one warm-up step."""
        if self.written is not None and time.monotonic() >= self.written + AFTER_WRITES_IDLE_S:
            self.after_writes()
            self.write_status()
        elif not self.commands_prepared or (not self.pool_warm and self.measured_null and self.tokenizer_loaded):
            # The first step readies a first write; the rest of the pool's vectors fill (many steps) after
            # the single-step warm-ups, so they do not wait behind it.
            self.pool_warm = _warm_pool(self.locations, self.settings, self.commands, prepared=self.commands_prepared)
            self.commands_prepared = True
            if self.pool_warm:
                self.write_status()
        elif not self.measured_null:
            self.measured_null = True
            _measure_null(self.session)
        elif not self.tokenizer_loaded:
            self.tokenizer_loaded = True
            _load_tokenizer(self.session)
            self.write_status()

    def answer(self, conn: socket.socket) -> None:
        self.last_used = time.monotonic()
        with conn:
            op = _handle(conn, self.session, self.data_dir, before_read=self.after_writes, commands=self.commands)
        self.served += 1
        if op == "run":
            self.written = time.monotonic()
            self.writes += 1
        elif op == "declined":
            self.declined += 1
        self.write_status()
        self.next_check = 0.0  # revalidate right after answering, before the next accept

    def run(self, idle_seconds: int) -> int:
        """Listen on the socket and answer until a reason to stop; then clean up. Returns an exit code."""
        import signal

        self.idle_seconds = idle_seconds
        with contextlib.suppress(FileNotFoundError):
            self.paths["socket"].unlink()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.paths["socket"]))
        os.chmod(self.paths["socket"], 0o600)
        listener.listen(16)
        listener.settimeout(ACCEPT_POLL_S)
        self.write_status()
        reason = "stopped"
        try:
            # Installed inside the try: the handler raises _Stopping, which only this try catches.
            signal.signal(signal.SIGTERM, self.on_term)
            signal.signal(signal.SIGINT, self.on_term)
            while not self.stopping:
                self.swap_in_refreshed()
                found = self.exit_reason()
                if found is not None:
                    reason = found
                    break
                self.revalidate()
                wait = ACCEPT_POLL_S if self.written is None else max(0.0, self.written + AFTER_WRITES_IDLE_S - time.monotonic())
                listener.settimeout(max(0.001, wait))
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    self.on_idle()
                    continue
                except OSError:
                    if self.stopping:
                        break
                    raise
                self.answer(conn)
        except _Stopping:
            reason = "stopped"
        finally:
            self.close(listener, reason)
        return 0

    def close(self, listener: socket.socket, reason: str) -> None:
        listener.close()
        self.refresher.stop()
        for key in ("socket", "status"):
            with contextlib.suppress(FileNotFoundError):
                self.paths[key].unlink()
        self.lock.release()
        if reason != "stopped":
            log_failure("server", f"exiting: {reason}")
        sys.stderr.write(f"lore server exiting: {reason}\n")


# How often an idle helper compares its index with the data dir (it also does right
# after each answer): staleness is a handful of stat calls.
REVALIDATE_S = 1.0
# After the writes it ran, how long the helper waits for another request before it brings
# its index up to date (a read that comes first has it done at once).
AFTER_WRITES_IDLE_S = 0.25
# After a refresh that failed (or left the index as stale as it found it).
REFRESH_RETRY_S = 30.0
# How long the refresh waits for another process's build before giving up (and retrying later).
REFRESH_LOCK_S = 120.0
_REFRESH_CHILD = "from lore.agent.daemon import refresh_child; raise SystemExit(refresh_child())"
# The refresh runs beside the helper and the prompt hooks: keep it to one core.
# The settings naming directories a user may give relative to where the helper was started.
_DIRECTORIES = ("cache_dir", "state_dir")
_ONE_CORE = {"RAYON_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
             "TOKENIZERS_PARALLELISM": "false"}  # fmt: skip


class _Stopping(Exception):
    """Raised by the SIGTERM handler to leave the serving loop at once."""


def _warm(reader: Any) -> None:
    """Load (and check) what a request reads, so the first request after a (re)load pays nothing.

    ``IndexReader.load`` is the one list of what a search reads; a refreshed index that
    fails its checks is logged and retried instead of being swapped in.
    """
    reader.load()
    _ = reader.active_rows


def _measure_null(session: Any) -> None:
    """The injection decision's scale for this generation, if none was measured yet (~0.8 s at 10k; never raises).

    Run at an idle moment of the serving loop, not before the helper announces itself:
    a session's first prompts must not wait for it.
    """
    try:
        from lore.rank import null

        null.ensure(session)
    except Exception as exc:
        log_failure("server", f"null evidence not measured: {exc!r}")


def _load_tokenizer(session: Any) -> None:
    """The model's batch tokenizer, loaded at an idle moment (never raises).

    A helper tokenizes its first characters in pure Python and then loads the ``tokenizers``
    one (``QueryEncoder.token_ids``); loaded by a prompt, that held the prompt up by ~0.4 s.
    """
    try:
        encoder = session.get_encoder()
        if encoder is not None:
            getattr(encoder, "tokenizer", None)
    except Exception as exc:
        log_failure("server", f"tokenizer not loaded: {exc!r}")


def _meta_stamp(manager: Any) -> tuple[str, int, int] | None:
    """Which meta.json is live (generation, size, mtime): a change means another process refreshed the index."""
    directory = manager.current_dir()
    if directory is None:
        return None
    try:
        stat = (directory / "meta.json").stat()
    except OSError:
        return None
    return directory.name, stat.st_size, stat.st_mtime_ns


class _Refresher:
    """Brings the index up to date off the request path and prepares a warm reader for the helper.

    The build runs in a child process (``refresh_child``): the helper's requests never
    wait for it or compete with it for the GIL, and a build can be stopped at any moment
    (the index manager keeps the previous state usable). A thread waits for the child,
    opens the refreshed index and warms it; the serving loop swaps it in between
    requests (``take``).
    """

    def __init__(self, locations: Any, generation: Path, stamp: tuple[str, int, int] | None) -> None:
        import threading

        self.locations = locations
        self.generation = generation
        self.stamp = stamp  # meta.json of the reader the helper serves from
        # The helper's own environment, for the refresh child it starts.
        self.environ = dict(os.environ)
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.child: Any = None
        self.ready: tuple[Any, tuple[str, int, int] | None] | None = None
        self.unusable = False
        self.stopping = False
        self.retry_after = 0.0

    def busy(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def needed(self, manager: Any, reader: Any) -> bool:
        """Whether the served index lags the data dir or the index on disk (cheap: stat calls)."""
        if self.busy() or self.ready is not None or time.monotonic() < self.retry_after:
            return False
        if _meta_stamp(manager) != self.stamp:
            return True
        try:
            return manager.staleness(reader.meta) is not None
        except Exception as exc:
            log_failure("server-refresh", repr(exc))
            self.retry_after = time.monotonic() + REFRESH_RETRY_S
            return False

    def start(self) -> None:
        import threading

        self.thread = threading.Thread(target=self._run, name="lore-refresh", daemon=True)
        self.thread.start()

    def take(self) -> Any:
        """The refreshed reader, once (None when there is none yet)."""
        with self.lock:
            ready, self.ready = self.ready, None
        if ready is None:
            return None
        self.stamp = ready[1]
        return ready[0]

    def stop(self) -> None:
        with self.lock:
            self.stopping = True
            child = self.child
        if child is not None and child.poll() is None:
            import subprocess

            child.terminate()  # the index manager leaves the previous state usable
            try:
                child.wait(2.0)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()

    def _run(self) -> None:
        from lore.index.manager import IndexManager, IndexReader

        manager = IndexManager(self.locations)
        try:
            found = manager.read_meta()
            if found is not None and found[0] != self.generation:
                return  # rebuilt by another process: the serving loop exits
            if found is None or manager.staleness(found[1]) is not None:
                before = manager.source_manifest()
                code = self._build()
                if code is None:
                    return  # the helper is stopping
                if code != 0:
                    log_failure("server-refresh", f"index refresh exited with {code}; retrying in {REFRESH_RETRY_S:.0f}s")
                    self.retry_after = time.monotonic() + REFRESH_RETRY_S
                    return
                found = manager.read_meta()
                if found is not None and manager.staleness(found[1]) is not None and manager.source_manifest() == before:
                    # Built, yet as stale as before: do not loop on it.
                    log_failure("server-refresh", "the index is still stale after a refresh")
                    self.retry_after = time.monotonic() + REFRESH_RETRY_S
            stamp = _meta_stamp(manager)
            found = manager.read_meta()
            if found is None:
                self.unusable = True
                return
            if found[0] != self.generation:
                return  # rebuilt: the serving loop exits
            reader = IndexReader(*found)
            _warm(reader)
        except Exception as exc:
            log_failure("server-refresh", repr(exc))
            self.retry_after = time.monotonic() + REFRESH_RETRY_S
            return
        with self.lock:
            if self.stopping:
                reader.close()
                return
            self.ready = (reader, stamp)

    def _build(self) -> int | None:
        """Run ``refresh_child`` in a child process; its exit code, or None when stopped."""
        import subprocess

        env = {**_ONE_CORE, **self.environ, "LORE_DATA_DIR": str(self.locations.data_dir),
               "LORE_INDEX_DIR": str(self.locations.index_dir)}  # fmt: skip
        with self.lock:
            if self.stopping:
                return None
            self.child = subprocess.Popen(python_argv("-c", _REFRESH_CHILD), stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, env=env, close_fds=True)  # fmt: skip
        code = self.child.wait()
        with self.lock:
            self.child = None
            return None if self.stopping else int(code)


def _wait_for_caller() -> None:
    """Let the hook that spawned this helper finish first (its session start or prompt is waiting on it)."""
    try:
        caller = int(os.environ.pop("LORE_SERVER_AFTER_PID", ""))
    except ValueError:
        return
    end = time.monotonic() + AFTER_CALLER_S
    while time.monotonic() < end and _alive(caller):
        time.sleep(0.005)


def _build_in_child(locations: Any) -> None:
    """Build a missing index in a child process (``refresh_child``) and wait for it."""
    import subprocess

    env = {**_ONE_CORE, **os.environ, "LORE_DATA_DIR": str(locations.data_dir),
           "LORE_INDEX_DIR": str(locations.index_dir)}  # fmt: skip
    subprocess.run(python_argv("-c", _REFRESH_CHILD), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   env=env, close_fds=True, check=False)  # fmt: skip


def refresh_child() -> int:
    """Entry point of the helper's refresh process: bring the index up to date, at low priority."""
    with contextlib.suppress(OSError, AttributeError):
        os.nice(10)  # prompts (the hook and the helper) come first
    from lore.index.manager import IndexManager
    from lore.paths import Locations
    from lore.settings import Settings

    try:  # a process of its own: its entry point reads the settings (a bad value is reported like a failure)
        IndexManager(Locations.resolve(None, None, Settings.from_env())).build(lock_timeout=REFRESH_LOCK_S)
    except Exception as exc:
        sys.stderr.write(f"lore server: index refresh failed: {exc!r}\n")
        return 1
    return 0


def _handle(conn: socket.socket, session: Any, data_dir: str, before_read: Any = None, commands: Any = None) -> str | None:
    """Answer one request from the loaded index, as it is; never refresh or build here. Returns its op ("declined"
    when the reply said no: the asking process works on its own).

    ``before_read`` runs before a request that reads (the prompt hook, the session-start
    block, a terminal search): the helper's pending work after the writes it ran.
    """
    conn.settimeout(2.0)
    data = b""
    request: Any = None
    try:
        while not data.endswith(b"\n") and len(data) < MAX_REQUEST:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        request = json.loads(data)
        reply: dict[str, Any]
        if request.get("op") == "run":
            return "run" if _run_for_client(conn, request, data_dir, commands) else "declined"
        if request.get("op") in ("context", "session", "cli") and before_read is not None:
            before_read()
        reader = session.reader
        if request.get("op") == "ping":
            reply = {"ok": True, "text": "pong"}
        elif request.get("op") not in ("context", "session", "cli"):
            reply = {"ok": False, "error": "unknown op"}
        elif request.get("data_dir") is not None and not _same_dir(request["data_dir"], data_dir):
            reply = {"ok": False, "error": f"this helper serves {data_dir}"}
        elif request.get("op") == "session":
            # The session-start block: read from the store (not the index), here because the
            # helper has the store's modules loaded; a hook that asks saves their imports.
            from lore.agent.session import session_start_text
            from lore.project import detect_project

            cwd = request.get("cwd")
            project = request.get("project") or detect_project(cwd if isinstance(cwd, str) else None)
            reply = {"ok": True, "text": session_start_text(session.locations, str(project),
                                                            int(request.get("budget", 1500)))}  # fmt: skip
        elif request.get("op") == "cli":
            # `lore search` / `lore context` from a terminal (lore.agent.remote): the CLI's output.
            from lore.agent.remote import answer

            reply = answer(session, request, data_dir, commands.run_parsed if commands is not None else None)
        elif reader is None or reader.meta.data_dir != data_dir:
            reply = {"ok": False, "error": "the loaded index was built for another data dir"}
        else:
            seen, pointed = request.get("seen"), request.get("pointed")
            handed = context_for_prompt(session, str(request.get("prompt", "")), request.get("cwd"),
                                        int(request.get("budget", 1500)), None, bool(request.get("gap_line")),
                                        policy="ignore", seen=tuple(str(i) for i in seen) if isinstance(seen, list) else (),
                                        pointed=tuple(str(i) for i in pointed) if isinstance(pointed, list) else ())  # fmt: skip
            reply = {"ok": True, "text": handed.text, "ids": list(handed.ids), "pointers": list(handed.pointers)}
        conn.sendall(json.dumps(reply).encode() + b"\n")
        if not reply.get("ok"):
            return "declined"
    except (BrokenPipeError, ConnectionResetError):
        return None  # the hook gave up (its deadline passed): nothing to report
    except _Stopping:
        raise
    except Exception as exc:
        log_failure("server", repr(exc))
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps({"ok": False, "error": str(exc)}).encode() + b"\n")
    return request.get("op") if isinstance(request, dict) else None


def _run_for_client(conn: socket.socket, request: dict[str, Any], data_dir: str, commands: Any) -> bool:
    """A write command for a `lore` process (lore.agent.remote): ready, go, run, answer. Whether it ran.

    Nothing is done before the client says ``go`` (it runs the command itself otherwise),
    and once it has, the command runs to its end and is answered before SIGTERM or SIGINT
    (held back meanwhile) can stop the helper: a client whose helper died after ``go``
    cannot know whether the record was stored.
    """
    import signal

    from lore.agent.remote import run_command

    if request.get("data_dir") is None or not _same_dir(request["data_dir"], data_dir):
        conn.sendall(json.dumps({"ok": False, "error": f"this helper serves {data_dir}"}).encode() + b"\n")
        return False
    conn.sendall(b'{"ok": true, "ready": true}\n')
    go = b""
    with contextlib.suppress(OSError):
        while not go.endswith(b"\n") and len(go) < 16:
            chunk = conn.recv(16)
            if not chunk:
                break
            go += chunk
    if go != b"go\n":
        return False  # the client gave up first and runs it itself
    held = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        try:
            # The pool is saved between requests instead (after_writes), not after each write.
            reply = (run_command(request, data_dir, commands.run_parsed, save_pool=False) if commands is not None
                     else {"ok": True, "declined": True})  # fmt: skip
            answer = json.dumps(reply).encode() + b"\n"
        except Exception as exc:
            # Maybe run, maybe not: never "declined", which would make the client run it again.
            log_failure("server", f"run: {exc!r}")
            reply = {"ok": False, "error": repr(exc)}
            answer = json.dumps(reply).encode() + b"\n"
        with contextlib.suppress(OSError):
            conn.settimeout(5.0)
            conn.sendall(answer)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)
    return reply.get("declined") is not True


def _refresh_in_process(manager: Any, session: Any) -> bool:
    """After a write it ran: the index's delta segment from the reader the helper holds, swapped in. Whether it was."""
    reader = session.reader
    if reader is None:
        return False
    try:
        meta = manager.append_delta(reader)
        if meta is None:
            return False  # the refresher (a child process) brings it up to date
        from lore.index.manager import IndexReader

        fresh = IndexReader(reader.directory, meta)
        _warm(fresh)
    except Exception as exc:
        log_failure("server-refresh", f"in process: {exc!r}")
        return False
    session.reader, session.warnings = fresh, []
    reader.close()
    return True


# Texts the warm helper encodes for the write check's vectors in one idle step (~0.1-0.2 s of
# commit messages): a prompt that comes in meanwhile waits for at most one step.
FILL_STEP = 256


def _warm_pool(locations: Any, settings: Any, commands: Any, *, prepared: bool = False) -> bool:
    """What a first write needs, so it is warm too: the CLI's commands (~0.1 s to import and build) and the
    write check's pool when a cache file of it exists (~20 ms at 10,000 decisions), with the vectors of its
    decisions' texts, ``FILL_STEP`` texts a step. Without a cache file the first write builds it: a whole
    read of the store (1-2 s at 10,000), which would hold up the prompts here. True when nothing is left to do."""
    done = True
    try:
        from lore.curate.pool import cache_path, pool_for
        from lore.curate.write_check import model_embed
        from lore.embedder import model_identity
        from lore.paths import write_check_dir
        from lore.store import Store

        if commands is not None and not prepared:
            commands.prepare()
        if cache_path(locations.data_dir, write_check_dir(settings)).exists():
            pool = pool_for(locations.data_dir, write_check_dir(settings))
            with pool.lock:
                pool.refresh(Store(locations.data_dir))
                embed = model_embed([], settings.embed_model)
                if embed is not None:
                    pool.fill_vectors(embed, model_identity(settings.embed_model), budget=FILL_STEP)
                    done = pool.filled
    except Exception as exc:
        log_failure("server", f"write pool: {exc!r}")
    if done:
        _save_pool()  # once the fill is done: a save per step would rewrite the growing file each time
    return done


def _save_pool() -> None:
    try:
        from lore.curate.pool import save

        save()
    except Exception as exc:
        log_failure("server", f"write pool: {exc!r}")


def _same_dir(requested: Any, data_dir: str) -> bool:
    from pathlib import Path

    try:
        return str(Path(str(requested)).expanduser().resolve()) == data_dir
    except (OSError, RuntimeError, ValueError):
        return False
