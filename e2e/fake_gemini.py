"""A scripted stand-in for the Gemini API (generativelanguage v1beta), on 127.0.0.1, for the Gemini CLI test.

``POST /v1beta/models/<model>:streamGenerateContent?alt=sse`` answers server-sent
events (one ``data:`` line per GenerateContentResponse), ``:generateContent`` one
JSON response, ``:countTokens`` a count; anything else a 404. Every request body
is recorded. ``script(body) -> Reply | None`` decides each answer: text, or a
``functionCall``. Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fake_http import FakeServer, Handler, Recorded

__all__ = ["DEFAULT_TEXT", "FakeGemini", "Recorded", "Reply", "last_user_text", "request_text"]

DEFAULT_TEXT = "OK from the fake Gemini."


@dataclass
class Reply:
    text: str = DEFAULT_TEXT
    function_name: str | None = None
    function_args: dict[str, Any] = field(default_factory=dict)


def request_text(body: dict[str, Any]) -> str:
    return json.dumps({"systemInstruction": body.get("systemInstruction"), "contents": body.get("contents")},
                      ensure_ascii=False)  # fmt: skip


def last_user_text(body: dict[str, Any]) -> str:
    for content in reversed(body.get("contents") or []):
        if content.get("role", "user") == "user":
            return json.dumps(content.get("parts"), ensure_ascii=False)
    return ""


class FakeGemini(FakeServer):
    name = "fake-gemini"

    def __init__(self, script: Callable[[dict[str, Any]], Reply | None] | None = None) -> None:
        super().__init__()
        self.script = script

    def generations(self) -> list[Recorded]:
        return self.recorded(lambda path: "GenerateContent" in path or "generateContent" in path)

    def is_streamed(self, path: str, body: dict[str, Any]) -> bool:
        return ":streamGenerateContent" in path

    def not_found(self, path: str) -> dict[str, Any]:
        return {"error": {"code": 404, "message": path, "status": "NOT_FOUND"}}

    def answer(self, handler: Handler, path: str, body: dict[str, Any]) -> None:
        streamed = self.is_streamed(path, body)
        if ":countTokens" in path:
            handler.send_json(200, {"totalTokens": max(1, len(request_text(body)) // 4)})
            return
        if ":generateContent" not in path and not streamed:
            handler.send_json(404, self.not_found(handler.path))
            return
        payload = _response((self.script(body) if self.script else None) or Reply())
        if not streamed:
            handler.send_json(200, payload)
            return
        handler.start_events()
        handler.wfile.write(b"data: " + json.dumps(payload).encode() + b"\r\n\r\n")
        handler.wfile.flush()


def _response(reply: Reply) -> dict[str, Any]:
    if reply.function_name:
        part: dict[str, Any] = {"functionCall": {"name": reply.function_name, "args": reply.function_args}}
    else:
        part = {"text": reply.text}
    return {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
            "modelVersion": "gemini-fake"}  # fmt: skip
