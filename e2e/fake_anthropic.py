"""A scripted stand-in for the Anthropic Messages API, on 127.0.0.1, for end-to-end tests of real agent CLIs.

It answers ``POST /v1/messages`` in both forms the API has: a JSON message, or
(when the request says ``"stream": true``) the server-sent event stream
(``message_start``, ``content_block_start``/``delta``/``stop``, ``message_delta``,
``message_stop``). ``POST /v1/messages/count_tokens`` gets a token count; any
other path a 404. Every request body is recorded, so a test can read exactly
what the CLI sent to the model.

What it answers is scripted by the test: ``script(body) -> Reply | None``; by
default every request gets a short text reply. Standard library only.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fake_http import FakeServer, Handler, Recorded

__all__ = ["DEFAULT_TEXT", "FakeAnthropic", "Recorded", "Reply", "last_user_text", "request_text"]

DEFAULT_TEXT = "OK from the fake model."


@dataclass
class Reply:
    """One assistant turn: text, or a tool call (``tool_name`` with ``tool_input``).

    A tool call may be preceded by a text block (``preface``), as a real model's
    "Let me run the tests." before its ``tool_use``.
    """

    text: str = DEFAULT_TEXT
    tool_name: str | None = None
    tool_input: dict[str, Any] = field(default_factory=dict)
    preface: str = ""
    # For a streamed request: send message_start, then an SSE error event and close,
    # as the API does when a stream breaks (a client may retry without streaming).
    break_stream: bool = False


Script = Callable[[dict[str, Any]], Reply | None]


def request_text(body: dict[str, Any]) -> str:
    """Everything a request shows the model (system prompt and messages), as one string."""
    return json.dumps({"system": body.get("system"), "messages": body.get("messages")}, ensure_ascii=False)


def last_user_text(body: dict[str, Any]) -> str:
    """The text blocks of the last user message (tool results included, as JSON)."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        return json.dumps(content, ensure_ascii=False)
    return ""


class FakeAnthropic(FakeServer):
    """``with FakeAnthropic(script) as api: ... api.url ... api.messages()``."""

    name = "fake-anthropic"

    def __init__(self, script: Script | None = None) -> None:
        super().__init__()
        self.script = script
        self.ids = itertools.count(1)

    def messages(self) -> list[Recorded]:
        return self.recorded(lambda path: path.split("?")[0] == "/v1/messages")

    def is_streamed(self, path: str, body: dict[str, Any]) -> bool:
        return bool(body.get("stream"))

    def not_found(self, path: str) -> dict[str, Any]:
        return {"type": "error", "error": {"type": "not_found_error", "message": path}}

    def _reply_for(self, body: dict[str, Any]) -> Reply:
        reply = self.script(body) if self.script is not None else None
        return reply if reply is not None else Reply()

    def answer(self, handler: Handler, path: str, body: dict[str, Any]) -> None:
        request_id = {"request-id": f"req_fake_{next(self.ids)}"}
        if path == "/v1/messages/count_tokens":
            handler.send_json(200, {"input_tokens": max(1, len(request_text(body)) // 4)}, request_id)
            return
        if path != "/v1/messages":
            handler.send_json(404, self.not_found(handler.path), request_id)
            return
        reply = self._reply_for(body)
        message_id = f"msg_fake_{next(self.ids)}"
        model = str(body.get("model") or "claude-fake")
        if not self.is_streamed(path, body):
            handler.send_json(200, _message(reply, message_id, model), request_id)
            return
        handler.start_events({"cache-control": "no-cache", **request_id})
        events = _events(reply, message_id, model)
        if reply.break_stream:
            events = [events[0], ("error", {"type": "error", "error": {"type": "overloaded_error",
                                                                         "message": "Overloaded (scripted)"}})]  # fmt: skip
        for event, data in events:
            handler.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
            handler.wfile.flush()


def _usage() -> dict[str, int]:
    return {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


def _message(reply: Reply, message_id: str, model: str) -> dict[str, Any]:
    if reply.tool_name:
        content: list[dict[str, Any]] = [{"type": "text", "text": reply.preface}] if reply.preface else []
        content.append({"type": "tool_use", "id": f"toolu_{message_id}", "name": reply.tool_name,
                        "input": reply.tool_input})  # fmt: skip
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": reply.text}]
        stop = "end_turn"
    return {"id": message_id, "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": stop, "stop_sequence": None, "usage": _usage()}  # fmt: skip


def _text_events(text: str, index: int) -> list[tuple[str, dict[str, Any]]]:
    events: list[tuple[str, dict[str, Any]]] = [("content_block_start", {"type": "content_block_start", "index": index,
                                                                         "content_block": {"type": "text", "text": ""}})]  # fmt: skip
    for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
        events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                               "delta": {"type": "text_delta", "text": piece}}))  # fmt: skip
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


def _events(reply: Reply, message_id: str, model: str) -> list[tuple[str, dict[str, Any]]]:
    start: dict[str, Any] = {"id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
             "stop_reason": None, "stop_sequence": None, "usage": _usage()}  # fmt: skip
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
    if reply.tool_name:
        index = 0
        if reply.preface:
            events += _text_events(reply.preface, 0)
            index = 1
        block = {"type": "tool_use", "id": f"toolu_{message_id}", "name": reply.tool_name, "input": {}}
        arguments = json.dumps(reply.tool_input)
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": block}))
        for piece in (arguments[: len(arguments) // 2], arguments[len(arguments) // 2 :]):
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                   "delta": {"type": "input_json_delta", "partial_json": piece}}))  # fmt: skip
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        stop = "tool_use"
    else:
        events += _text_events(reply.text, 0)
        stop = "end_turn"
    events.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 5}}))  # fmt: skip
    events.append(("message_stop", {"type": "message_stop"}))
    return events
