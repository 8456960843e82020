"""What the scripted fake model APIs share: a recording HTTP server on 127.0.0.1.

``FakeServer`` runs a ``ThreadingHTTPServer`` on a free loopback port in a daemon
thread (``with Fake(...) as api: api.url``), records every POST body as a
``Recorded`` and hands it to the subclass's ``answer(handler, path, body)``. The
fakes themselves (``fake_anthropic``, ``fake_gemini``) only speak their API's
shapes. Standard library only.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass
class Recorded:
    path: str
    body: dict[str, Any]
    streamed: bool
    at: float


class Handler(BaseHTTPRequestHandler):
    """Reads and records each POST, then lets the server's ``answer`` reply; GET and HEAD get its 404."""

    protocol_version = "HTTP/1.1"
    fake: FakeServer  # set on the subclass each server makes

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def start_events(self, headers: dict[str, str] | None = None) -> None:
        """The head of a server-sent event stream (the connection closes after it)."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True

    def do_GET(self) -> None:
        self.send_json(404, self.fake.not_found(self.path))

    do_HEAD = do_GET

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_unparsed": raw.decode(errors="replace")}
        path = self.path.split("?")[0]
        with self.fake.lock:
            self.fake.requests.append(Recorded(self.path, body, self.fake.is_streamed(self.path, body), time.time()))
        self.fake.answer(self, path, body)


class FakeServer:
    """Subclasses define ``answer``, ``is_streamed`` and ``not_found``."""

    name = "fake-api"

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.lock = threading.Lock()
        handler = type("BoundHandler", (Handler,), {"fake": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name=self.name, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"  # host is a str for an AF_INET server (typeshed allows bytes)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def recorded(self, matches: Any) -> list[Recorded]:
        """The recorded requests whose path ``matches(path)``, oldest first."""
        with self.lock:
            return [r for r in self.requests if matches(r.path)]

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()

    def is_streamed(self, path: str, body: dict[str, Any]) -> bool:
        raise NotImplementedError

    def not_found(self, path: str) -> dict[str, Any]:
        raise NotImplementedError

    def answer(self, handler: Handler, path: str, body: dict[str, Any]) -> None:
        raise NotImplementedError
