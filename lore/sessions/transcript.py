"""Read a Claude Code session transcript (JSON Lines) from where the last read stopped.

Claude Code writes one JSON object per line under ``~/.claude/projects/<slug>/<session>.jsonl``.
The lines capture cares about::

    {"type": "user", "sessionId": ..., "cwd": ..., "message": {"role": "user", "content": "text" | [blocks]}}
    {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": ...},
                                      {"type": "tool_use", "id": ..., "name": "Bash", "input": {...}}]}}
    {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": ..., "content": ...,
                                              "is_error": true}]}, "toolUseResult": ...}

Every other line type (summary, system, attachment, api-request, queue-operation, ...)
is read past. A line that is not JSON is skipped with a warning naming file and line;
a line still being written (no final newline yet) is left for the next read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

# What Claude Code puts into a user message that the user did not type.
_NOT_TYPED = re.compile(r"^\s*(?:<command-name>|<command-message>|<local-command-|<bash-input>|<bash-stdout>|"
                        r"<bash-stderr>|Caveat: |\[Request interrupted)")  # fmt: skip
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
_EXIT_CODE = re.compile(r"^(?:Error: )?Exit code (\d+)\s*$", re.MULTILINE)


@dataclass
class ToolCall:
    """A tool call and, once its result is read, how it went."""

    id: str
    name: str
    input: dict[str, Any]
    line: int
    result: str | None = None
    is_error: bool = False
    result_line: int | None = None
    exit_code: int | None = None

    @property
    def command(self) -> str:
        """What was run or touched, as one line: a Bash command, else the file or pattern the tool was given."""
        value = self.input.get("command")
        if isinstance(value, str) and value.strip():
            return value.strip()
        for key in ("file_path", "notebook_path", "path", "pattern", "url", "query"):
            value = self.input.get(key)
            if isinstance(value, str) and value.strip():
                return f"{self.name} {value.strip()}"
        return self.name

    def to_state(self) -> dict[str, Any]:
        """What the per-session state keeps of a call still waiting for its result (its text scrubbed)."""
        from lore.scrub import scrub

        kept = {k: scrub(v).text for k, v in self.input.items() if isinstance(v, str) and k != "content"}
        return {"id": self.id, "name": self.name, "input": kept, "line": self.line}


@dataclass
class Utterance:
    role: str  # "user" or "assistant"
    text: str
    line: int


@dataclass
class Chunk:
    """What one read found: the new lines ``first_line..last_line`` (1-based) of ``path``."""

    path: Path
    session_id: str
    cwd: str | None = None
    first_line: int = 0
    last_line: int = 0
    end_offset: int = 0
    calls: list[ToolCall] = field(default_factory=list)
    utterances: list[Utterance] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    timestamps: dict[int, str] = field(default_factory=dict)  # line -> ISO time

    def time_at(self, line: int) -> str | None:
        """The time of ``line`` or of the nearest line before it that has one."""
        known = [n for n in self.timestamps if n <= line]
        return self.timestamps[max(known)] if known else None

    @property
    def empty(self) -> bool:
        return self.last_line < self.first_line


def _block_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, str):
                parts.append(block)
        return "\n".join(parts)
    return ""


def typed_text(text: str) -> str:
    """A user message without the reminders and command echoes Claude Code adds to it."""
    if _NOT_TYPED.match(text):
        return ""
    return _REMINDER.sub("", text).strip() if "<system-reminder>" in text else text.strip()


def exit_code_of(text: str) -> int | None:
    match = _EXIT_CODE.search(text[:200])
    return int(match.group(1)) if match else None


def read_new(path: Path, *, start_line: int = 0, start_offset: int = 0,
             pending: dict[str, dict[str, Any]] | None = None, session_id: str | None = None) -> Chunk:  # fmt: skip
    """The complete lines after byte ``start_offset`` (line ``start_line`` was the last read).

    ``pending``: tool calls read before whose results had not arrived (by id); their
    results, when they come now, complete them. The caller keeps the returned chunk's
    unanswered calls for the next read (``Chunk.calls`` with ``result is None``).
    """
    with path.open("rb") as handle:
        size = handle.seek(0, 2)
        if start_offset > size:  # rewritten or truncated: read it again from the start
            start_line, start_offset = 0, 0
        handle.seek(start_offset)
        data = handle.read()
    complete = data[: data.rfind(b"\n") + 1]
    chunk = Chunk(path=path, session_id=session_id or path.stem, first_line=start_line + 1, last_line=start_line,
                  end_offset=start_offset + len(complete))  # fmt: skip
    by_id: dict[str, ToolCall] = {}
    for key, value in (pending or {}).items():
        try:
            by_id[key] = ToolCall(id=key, name=str(value["name"]), input=dict(value.get("input") or {}), line=int(value["line"]))
        except (KeyError, TypeError, ValueError):
            continue
    carried = set(by_id)
    number = start_line
    for raw_line in complete.split(b"\n")[:-1]:
        number += 1
        chunk.last_line = number
        if not raw_line.strip():
            continue
        try:
            item = orjson.loads(raw_line)
        except orjson.JSONDecodeError as error:
            chunk.warnings.append(f"{path}:{number}: skipped, not valid JSON ({str(error).split(':')[0]})")
            continue
        if not isinstance(item, dict):
            chunk.warnings.append(f"{path}:{number}: skipped, not a JSON object")
            continue
        _take(item, number, chunk, by_id)
    # Calls carried over whose results came now are reported with the rest; those still open stay pending.
    answered_old = [c for key, c in by_id.items() if key in carried and c.result is not None]
    chunk.calls = sorted(answered_old, key=lambda c: c.line) + chunk.calls
    chunk.calls.extend(c for key, c in by_id.items() if key in carried and c.result is None)
    return chunk


def _take(item: dict[str, Any], number: int, chunk: Chunk, by_id: dict[str, ToolCall]) -> None:
    kind = item.get("type")
    if kind not in ("user", "assistant"):
        return
    if isinstance(item.get("sessionId"), str) and item["sessionId"]:
        chunk.session_id = item["sessionId"]
    if isinstance(item.get("cwd"), str) and item["cwd"] and chunk.cwd is None:
        chunk.cwd = item["cwd"]
    if isinstance(item.get("timestamp"), str):
        chunk.timestamps[number] = item["timestamp"]
    message = item.get("message")
    if not isinstance(message, dict):
        return
    content = message.get("content")
    sidechain = bool(item.get("isSidechain"))
    if kind == "user":
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    _result(block, item, number, by_id)
        if item.get("isMeta") or sidechain:
            return
        if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            return
        text = typed_text(_block_text(content))
        if text:
            chunk.utterances.append(Utterance("user", text, number))
        return
    if not isinstance(content, list):
        return
    texts = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "tool_use" and isinstance(block.get("id"), str):
            call = ToolCall(id=block["id"], name=str(block.get("name") or "?"),
                            input=block["input"] if isinstance(block.get("input"), dict) else {}, line=number)  # fmt: skip
            by_id[call.id] = call
            chunk.calls.append(call)
    if texts and not sidechain:
        chunk.utterances.append(Utterance("assistant", "\n".join(texts).strip(), number))


def _result(block: dict[str, Any], item: dict[str, Any], number: int, by_id: dict[str, ToolCall]) -> None:
    call = by_id.get(str(block.get("tool_use_id")))
    if call is None or call.result is not None:
        return
    text = _block_text(block.get("content"))
    extra = item.get("toolUseResult")
    if not text and isinstance(extra, dict):
        text = "\n".join(str(extra.get(k) or "") for k in ("stdout", "stderr")).strip()
    call.result = text
    call.is_error = block.get("is_error") is True
    call.result_line = number
    call.exit_code = exit_code_of(text)
