"""A scripted stand-in for the Gemini API (generativelanguage v1beta), on 127.0.0.1, for the Gemini CLI test.

``POST /v1beta/models/<model>:streamGenerateContent?alt=sse`` answers server-sent
events (one ``data:`` line per GenerateContentResponse), ``:generateContent`` one
JSON response, ``:countTokens`` a count; anything else a 404. Every request body
is recorded. ``script(body) -> Reply | None`` decides each answer: text, or a
``functionCall``. Standard library only.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_TEXT = "OK from the fake Gemini."


@dataclass
class Reply:
    text: str = DEFAULT_TEXT
    function_name: str | None = None
    function_args: dict[str, Any] = field(default_factory=dict)


@dataclass
class Recorded:
    path: str
    body: dict[str, Any]
    streamed: bool
    at: float


def request_text(body: dict[str, Any]) -> str:
    return json.dumps({"systemInstruction": body.get("systemInstruction"), "contents": body.get("contents")},
                      ensure_ascii=False)  # fmt: skip


def last_user_text(body: dict[str, Any]) -> str:
    for content in reversed(body.get("contents") or []):
        if content.get("role", "user") == "user":
            return json.dumps(content.get("parts"), ensure_ascii=False)
    return ""


class FakeGemini:
    def __init__(self, script: Callable[[dict[str, Any]], Reply | None] | None = None) -> None:
        self.script = script
        self.requests: list[Recorded] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="fake-gemini", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeGemini:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def generations(self) -> list[Recorded]:
        with self.lock:
            return [r for r in self.requests if "GenerateContent" in r.path or "generateContent" in r.path]

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._json(404, {"error": {"code": 404, "message": self.path, "status": "NOT_FOUND"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_unparsed": raw.decode(errors="replace")}
                streamed = ":streamGenerateContent" in self.path
                with fake.lock:
                    fake.requests.append(Recorded(self.path, body, streamed, time.time()))
                if ":countTokens" in self.path:
                    self._json(200, {"totalTokens": max(1, len(request_text(body)) // 4)})
                    return
                if ":generateContent" not in self.path and not streamed:
                    self._json(404, {"error": {"code": 404, "message": self.path, "status": "NOT_FOUND"}})
                    return
                reply = (fake.script(body) if fake.script else None) or Reply()
                payload = _response(reply)
                if not streamed:
                    self._json(200, payload)
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\r\n\r\n")
                self.wfile.flush()
                self.close_connection = True

        return Handler


def _response(reply: Reply) -> dict[str, Any]:
    if reply.function_name:
        part: dict[str, Any] = {"functionCall": {"name": reply.function_name, "args": reply.function_args}}
    else:
        part = {"text": reply.text}
    return {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
            "modelVersion": "gemini-fake"}  # fmt: skip
