"""A scripted stand-in for the OpenAI Responses API, on 127.0.0.1, for the Codex CLI test.

``POST /v1/responses`` answers a server-sent event stream as the real API does
and as Codex parses it: ``response.created``, one ``response.output_item.added``
/ ``response.output_item.done`` pair per output item (an assistant ``message``
with ``output_text``, or a ``function_call``), a ``response.output_text.delta``
for the text, then ``response.completed`` with the response id and usage (Codex
treats a stream that closes without ``response.completed`` as an error). A
request without ``"stream": true`` gets the same response as one JSON object.
Any other path is a 404. Every POST body is recorded, and the path of every GET
(``gets``; Codex 0.169 sends none to a custom provider). ``script(body) -> Reply
| None`` decides each answer: text, a ``function_call`` (with the ``namespace``
Codex gives MCP tools) or a client-executed ``tool_search_call``. Standard
library only.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fake_http import FakeServer, Handler, Recorded

__all__ = ["DEFAULT_TEXT", "FakeOpenAI", "Recorded", "Reply", "function_outputs", "request_text"]

DEFAULT_TEXT = "OK from the fake OpenAI."


@dataclass
class Reply:
    """One model turn: text, or a function call (``function_name`` with ``function_args``)."""

    text: str = DEFAULT_TEXT
    function_name: str | None = None
    function_args: dict[str, Any] = field(default_factory=dict)
    namespace: str | None = None  # a namespaced tool's namespace, as Codex declares MCP tools
    tool_search: str | None = None  # a client-executed ``tool_search_call`` with this query


def request_text(body: dict[str, Any]) -> str:
    """What a request shows the model (instructions and input items), as one string."""
    return json.dumps({"instructions": body.get("instructions"), "input": body.get("input")}, ensure_ascii=False)


def function_outputs(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``function_call_output`` items of a request's input (the tool results sent back)."""
    return [item for item in body.get("input") or []
            if isinstance(item, dict) and item.get("type") in ("function_call_output", "custom_tool_call_output")]  # fmt: skip


class FakeOpenAI(FakeServer):
    name = "fake-openai"

    def __init__(self, script: Callable[[dict[str, Any]], Reply | None] | None = None, model: str = "gpt-fake") -> None:
        super().__init__()
        self.script = script
        self.model = model
        self.ids = itertools.count(1)
        self.gets: list[str] = []

    def responses(self) -> list[Recorded]:
        return self.recorded(lambda path: path.split("?")[0].endswith("/responses"))

    def is_streamed(self, path: str, body: dict[str, Any]) -> bool:
        return bool(body.get("stream"))

    def not_found(self, path: str) -> dict[str, Any]:
        with self.lock:
            self.gets.append(path)
        return {"error": {"message": f"no route {path}", "type": "invalid_request_error", "code": "not_found"}}

    def answer(self, handler: Handler, path: str, body: dict[str, Any]) -> None:
        if not path.endswith("/responses"):
            handler.send_json(404, {"error": {"message": f"no route {path}", "type": "invalid_request_error"}})
            return
        number = next(self.ids)
        reply = (self.script(body) if self.script else None) or Reply()
        item = _item(reply, number)
        response = {"id": f"resp_fake_{number}", "object": "response", "created_at": 0, "status": "completed",
                    "model": body.get("model") or self.model, "output": [item],
                    "usage": {"input_tokens": max(1, len(request_text(body)) // 4), "output_tokens": 5,
                              "total_tokens": max(1, len(request_text(body)) // 4) + 5,
                              "input_tokens_details": {"cached_tokens": 0},
                              "output_tokens_details": {"reasoning_tokens": 0}}}  # fmt: skip
        if not self.is_streamed(path, body):
            handler.send_json(200, response)
            return
        created = {**response, "status": "in_progress", "output": [], "usage": None}
        events: list[dict[str, Any]] = [{"type": "response.created", "response": created},
                                        {"type": "response.output_item.added", "output_index": 0, "item": item}]  # fmt: skip
        if item["type"] == "message":
            events.append({"type": "response.output_text.delta", "output_index": 0, "content_index": 0,
                           "item_id": item["id"], "delta": reply.text})  # fmt: skip
        events += [{"type": "response.output_item.done", "output_index": 0, "item": item},
                   {"type": "response.completed", "response": response}]  # fmt: skip
        handler.start_events()
        for sequence, event in enumerate(events):
            event["sequence_number"] = sequence
            handler.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
        handler.wfile.flush()


def _item(reply: Reply, number: int) -> dict[str, Any]:
    if reply.tool_search is not None:
        return {"type": "tool_search_call", "id": f"ts_fake_{number}", "call_id": f"call_fake_{number}",
                "status": "completed", "execution": "client", "arguments": {"query": reply.tool_search, "limit": 8}}  # fmt: skip
    if reply.function_name:
        item: dict[str, Any] = {"type": "function_call", "id": f"fc_fake_{number}", "call_id": f"call_fake_{number}",
                                "name": reply.function_name, "arguments": json.dumps(reply.function_args),
                                "status": "completed"}  # fmt: skip
        if reply.namespace:
            item["namespace"] = reply.namespace
        return item
    return {"type": "message", "id": f"msg_fake_{number}", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": reply.text, "annotations": []}]}  # fmt: skip
