"""`lore mcp`'s start: the handshake is answered while the MCP SDK loads.

Importing the MCP SDK takes 1-1.5 s on a small machine (pydantic builds the protocol's
models), while clients give a server about a second: Codex waits 1 s for optional
servers before a session's first step goes on without their tools. So the SDK loads on
a thread and, meanwhile, the two requests every client sends first, ``initialize`` and
``tools/list``, are answered with what the same SDK answered to the same request before.
Those answers live in the cache dir (``mcp-handshake.json``) under a key naming lore's
server code, the installed SDK and pydantic, and Python; ``initialize``'s by the
protocol version the client asked for (the SDK's answer depends on nothing else),
``tools/list``'s by the version negotiated. Every other message waits for the SDK.

The SDK still serves the whole connection: once loaded, it is given every line the
client sent, in order, so its state (the negotiated version, the client's capabilities)
is what it would have been; its replies to the requests already answered are dropped,
after a comparison with what was sent (a difference, which the key should make
impossible, replaces the remembered answer and is reported on stderr). A request with
no remembered answer (the first start after installing or upgrading lore or the SDK, a
protocol version not seen before) waits for the SDK, whose answer is then remembered.
``lore hook install`` remembers the answers for every version the SDK speaks.

No SDK import here (nor anything heavy): this module loads in milliseconds.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from lore.errors import LoreError

if TYPE_CHECKING:
    from lore.paths import Directories, Locations
    from lore.settings import Settings

CACHE_FILE = "mcp-handshake.json"
ANSWERED_EARLY = ("initialize", "tools/list")
# The packages whose installed files decide the SDK's answers.
SDK_PACKAGES = ("mcp", "mcp_types", "pydantic", "pydantic_core")

_READY = object()  # put in the line queue by the loader thread: the SDK is loaded (or failed to)


def cache_path(settings: Directories) -> Path:
    """Where the answers are remembered: the cache dir of ``settings``."""
    from lore.paths import cache_dir

    return cache_dir(settings) / CACHE_FILE


def cache_key() -> str:
    """What the SDK's handshake answers depend on: lore's server code, the installed SDK and pydantic, Python."""
    import importlib.util

    from lore import __version__
    from lore.paths import sha1

    digest = sha1()
    digest.update(f"{__version__}\0{sys.version}\0".encode())
    here = Path(__file__).resolve().parent
    for source in (here / "mcp.py", here.parent / "store" / "records.py"):  # the tools, their kinds and relations
        digest.update(source.read_bytes())
    for package in SDK_PACKAGES:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        origin = spec.origin if spec is not None else None
        if origin:  # a reinstall or an upgrade rewrites it
            stat = os.stat(origin)
            digest.update(f"{package}\0{origin}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
        else:
            digest.update(f"{package}\0-\0".encode())
    return digest.hexdigest()


class Handshakes:
    """The SDK's remembered answers: ``initialize`` by requested version, ``tools/list`` by negotiated version."""

    def __init__(self, path: Path | None, key: str) -> None:
        self.path = path
        self.key = key
        self.answers: dict[str, dict[str, dict[str, Any]]] = {method: {} for method in ANSWERED_EARLY}
        self.changed = False

    @classmethod
    def load(cls, path: Path, key: str | None = None) -> Handshakes:
        """The answers stored in ``path`` under ``key`` (none when the file is missing, unreadable or for another key)."""
        cache = cls(path, cache_key() if key is None else key)
        cache._merge(cache._stored())
        cache.changed = False
        return cache

    def _stored(self) -> dict[str, Any]:
        if self.path is None:
            return {}
        try:
            stored = orjson.loads(self.path.read_bytes())
        except (OSError, ValueError):
            return {}
        if not isinstance(stored, dict) or stored.get("key") != self.key or not isinstance(stored.get("answers"), dict):
            return {}
        return stored["answers"]

    def _merge(self, stored: dict[str, Any]) -> None:
        for method, answers in self.answers.items():
            found = stored.get(method)
            if isinstance(found, dict):
                for version, result in found.items():
                    if isinstance(version, str) and isinstance(result, dict) and version not in answers:
                        answers[version] = result

    def get(self, method: str, version: str) -> dict[str, Any] | None:
        return self.answers[method].get(version)

    def put(self, method: str, version: str, result: dict[str, Any] | None) -> None:
        """Remember (or, with None, forget) an answer of the SDK's."""
        answers = self.answers[method]
        if result is None:
            self.changed |= answers.pop(version, None) is not None
        elif answers.get(version) != result:
            answers[version] = result
            self.changed = True

    def save(self) -> None:
        """Write the file if anything changed (keeping what another `lore mcp` added meanwhile); never raises."""
        if not self.changed or self.path is None:
            return
        from lore.store.fileio import atomic_write

        self._merge(self._stored())
        try:
            atomic_write(self.path, orjson.dumps({"key": self.key, "answers": self.answers}))
        except OSError as error:
            _warn(f"cannot write {self.path}: {error}")
        self.changed = False


def _request(line: bytes) -> tuple[bytes, str, Any] | None:
    """A JSON-RPC request as (the id's JSON, method, params); None for anything else."""
    try:
        message = orjson.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    ident, method = message.get("id"), message.get("method")
    if isinstance(ident, bool) or not isinstance(ident, (str, int)) or not isinstance(method, str):
        return None
    return orjson.dumps(ident), method, message.get("params")


def _well_formed_initialize(params: Any) -> bool:
    """The fields the SDK requires of ``initialize`` (anything odder is left for the SDK to answer)."""
    if not isinstance(params, dict) or not isinstance(params.get("protocolVersion"), str):
        return False
    info = params.get("clientInfo")
    return (isinstance(params.get("capabilities"), dict) and isinstance(info, dict)
            and isinstance(info.get("name"), str) and isinstance(info.get("version"), str))  # fmt: skip


class Handshake:
    """One client connection's early answers, and what the SDK's own replies teach the cache."""

    def __init__(self, cache: Handshakes, send: Callable[[bytes], None]) -> None:
        self.cache = cache
        self.send = send
        self.version: str | None = None  # negotiated (by an early answer or the SDK's)
        self.initialize_seen = False
        self.answered: dict[bytes, tuple[str, str, dict[str, Any]]] = {}  # id -> (method, version, result sent)
        self.watched: dict[bytes, tuple[str, str]] = {}  # id -> (method, version): the SDK answers, we remember

    def client_line(self, line: bytes, *, answer: bool) -> None:
        """A line from the client; with ``answer``, reply at once to what the cache can answer."""
        request = _request(line)
        if request is None:
            return
        ident, method, params = request
        if method == "initialize":
            if self.initialize_seen or not _well_formed_initialize(params):
                return
            self.initialize_seen = True
            version = params["protocolVersion"]
        elif method == "tools/list":
            if self.version is None or (isinstance(params, dict) and set(params) - {"_meta"}):
                return  # before the handshake, or a page cursor: the SDK's to answer
            version = self.version
        else:
            return
        if ident in self.answered or ident in self.watched:
            return  # an id reused while the SDK's reply is pending: leave it all to the SDK
        result = self.cache.get(method, version) if answer else None
        if result is None:
            self.watched[ident] = (method, version)
            return
        self.answered[ident] = (method, version, result)
        if method == "initialize":
            negotiated = result.get("protocolVersion")
            self.version = negotiated if isinstance(negotiated, str) else None
        self.send(b'{"jsonrpc":"2.0","id":' + ident + b',"result":' + orjson.dumps(result) + b"}\n")

    def server_line(self, data: bytes) -> bytes | None:
        """A message from the SDK: None when it replies to a request already answered, else ``data``."""
        if not self.answered and not self.watched:
            return data
        try:
            message = orjson.loads(data)
        except ValueError:
            return data
        if not isinstance(message, dict) or "method" in message or "id" not in message:
            return data
        ident = orjson.dumps(message["id"])
        result = message.get("result")
        result = result if isinstance(result, dict) else None
        if ident in self.answered:
            method, version, sent = self.answered.pop(ident)
            if result != sent:
                _warn(f"the remembered answer to {method} (protocol {version}) sent early was not the MCP SDK's; "
                      "the SDK's replaces it")  # fmt: skip
                self.cache.put(method, version, result)
                self.cache.save()
            return None
        if ident in self.watched:
            method, version = self.watched.pop(ident)
            if method == "initialize" and result is not None:
                negotiated = result.get("protocolVersion")
                self.version = negotiated if isinstance(negotiated, str) else None
            if result is not None:
                self.cache.put(method, version, result)
                self.cache.save()
        return data


def _warn(message: str) -> None:
    try:
        sys.stderr.write(f"lore mcp: warning: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def require_sdk() -> None:
    """A LoreError naming the extra when the MCP SDK is not installed (found without importing it)."""
    import importlib.util

    if importlib.util.find_spec("mcp") is None:
        raise LoreError("the MCP server needs the mcp extra", hint="pip install 'lore[mcp]'")


def load_sdk() -> Any:
    """lore's MCP server module (the only one importing the SDK); a LoreError when the SDK is unusable."""
    require_sdk()
    try:
        from lore.agent import mcp
    except ImportError as error:  # an mcp too old for the server's API
        if not (error.name or "").startswith("mcp"):
            raise
        raise LoreError(
            f"the installed mcp package is not usable: {error}", hint="pip install -U 'lore[mcp]'"
        ) from error
    return mcp


def _claim_stdio() -> tuple[int, int]:
    """The wire's own descriptors; fd 0 then reads /dev/null and fd 1 writes to stderr.

    Nothing a tool body, a library or a child process prints can reach the protocol
    stream (the SDK 2.x's stdio transport does the same for its own run).
    """
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return wire_in, wire_out


def _read_lines(fd: int, lines: queue.Queue[object]) -> None:
    """Each line of ``fd`` into ``lines``, then b"" at the end of input."""
    pending = b""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:
            chunk = b""
        if not chunk:
            break
        *complete, pending = (pending + chunk).split(b"\n")
        for line in complete:
            lines.put(line + b"\n")
    if pending:
        lines.put(pending)
    lines.put(b"")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def serve(locations: Locations, *, settings: Settings, project: str | None = None, cwd: Path | None = None) -> None:
    """Run `lore mcp` on this process's stdin/stdout until the client closes stdin (or a signal ends it).

    Raises the LoreError of an SDK that is missing or unusable (then nothing more is answered).
    """
    if not locations.data_dir.is_dir():
        _warn(f"data directory {locations.data_dir} does not exist; create it with `lore init`")

    def load() -> tuple[Any, Any]:
        sdk = load_sdk()
        return sdk, sdk.prepare(locations, project=project, cwd=cwd, settings=settings)

    wire_in, wire_out = _claim_stdio()
    serve_wire(wire_in, wire_out, load, cache_path(settings), signals=True)


def serve_wire(wire_in: int, wire_out: int, load: Callable[[], tuple[Any, Any]], cache: Path, *,
               signals: bool = False) -> None:  # fmt: skip
    """Serve one connection on two descriptors: early answers from the cache while ``load`` runs on a thread.

    ``load`` returns lore's SDK module and its ``Prepared`` server; ``cache`` is the file of
    remembered answers (``cache_path``); ``signals`` installs
    the server's SIGINT/SIGTERM handling once loaded (the main thread only).
    """
    lines: queue.Queue[object] = queue.Queue()
    threading.Thread(target=_read_lines, args=(wire_in, lines), name="lore-mcp-stdin", daemon=True).start()
    write_lock = threading.Lock()

    def send(data: bytes) -> None:
        with write_lock:
            _write_all(wire_out, data)

    handshake = Handshake(Handshakes.load(cache), send)
    loaded: list[Any] = []

    def load_in_background() -> None:
        try:
            loaded.append(load())
        except BaseException as error:  # handed to the serving thread, which raises it
            loaded.append(error)
        lines.put(_READY)

    threading.Thread(target=load_in_background, name="lore-mcp-load", daemon=True).start()
    early: list[bytes] = []
    while True:
        item = lines.get()
        if item is _READY:
            break
        assert isinstance(item, bytes)
        early.append(item)
        if item:
            handshake.client_line(item, answer=True)
    if isinstance(loaded[0], BaseException):
        raise loaded[0]
    sdk, prepared = loaded[0]

    def read_line() -> str | None:
        if early:
            line = early.pop(0)
        else:
            item = lines.get()
            assert isinstance(item, bytes)
            line = item
            if line:
                handshake.client_line(line, answer=False)
        return line.decode("utf-8", errors="replace") if line else None

    def write_line(text: str) -> None:
        data = handshake.server_line(text.encode())
        if data is not None:
            send(data)

    if signals:
        sdk.exit_on_signals(prepared.lore)
    try:
        sdk.run_lines(prepared.server, read_line, write_line)
    finally:
        sdk.save_pools()


def remember_handshakes(locations: Locations, *, settings: Settings) -> list[str]:
    """Ask the SDK the handshake of every protocol version it negotiates and remember its answers.

    Returns the versions remembered. Imports the SDK (a second or so); the next
    `lore mcp` then answers ``initialize`` and ``tools/list`` before its SDK has loaded.
    """
    sdk = load_sdk()
    prepared = sdk.prepare(locations, settings=settings)
    cache = Handshakes.load(cache_path(settings))
    done: list[str] = []
    for version in sdk.handshake_versions():
        replied = threading.Event()
        handshake = Handshake(cache, lambda data: None)
        # (wait for the SDK's reply first?, the line): the end of input only once tools/list is answered.
        steps: list[tuple[bool, dict[str, Any] | None]] = [
            (False, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                     "params": {"protocolVersion": version, "capabilities": {},
                                "clientInfo": {"name": "lore", "version": "0"}}}),
            (True, {"jsonrpc": "2.0", "method": "notifications/initialized"}),
            (False, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            (True, None),
        ]  # fmt: skip

        def read_line(steps: list[tuple[bool, dict[str, Any] | None]] = steps, handshake: Handshake = handshake,
                      replied: threading.Event = replied) -> str | None:  # fmt: skip
            if not steps:
                return None
            wait, message = steps.pop(0)
            if wait:
                replied.wait(30)
                replied.clear()
            if message is None:
                return None
            line = orjson.dumps(message) + b"\n"
            handshake.client_line(line, answer=False)
            return line.decode()

        def write_line(text: str, handshake: Handshake = handshake, replied: threading.Event = replied) -> None:
            handshake.server_line(text.encode())
            replied.set()

        sdk.run_lines(prepared.server, read_line, write_line)
        if cache.get("initialize", version) is not None:
            done.append(version)
    return done
