"""Candidates from the model behind ``LORE_LLM_CMD``: one call per chunk of a session, never per tool call.

The session's new lines are cut into chunks of at most ``CHUNK_CHARS`` characters
(what the user and the agent said, each tool call as one line and its result's
first lines). Each chunk is one prompt asking for JSON in lore's record schema::

    {"records": [{"kind": "decision", "decision": "...", "rationale": "..."},
                 {"kind": "lesson", "rule": "...", "situation": "...", "fix": "..."},
                 {"kind": "pattern", "name": "...", "problem": "...", "solution": "..."}]}

Every item is validated field by field; an answer that is not that JSON, or an item
that does not validate, is logged and skipped, never stored. ``LORE_CAPTURE_LLM_BUDGET``
(default 20,000) caps the tokens (prompt and answer, estimated at 4 characters a token)
spent on one session across all its captures; chunks past it are not sent.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from lore.sessions.heuristics import Candidate, error_lines
from lore.sessions.transcript import Chunk

if TYPE_CHECKING:
    from lore.settings import Settings

METHOD = "llm"
CHUNK_CHARS = 12_000
CHARS_PER_TOKEN = 4
MAX_FIELD = 2_000
_FIELDS = {
    "decision": (("decision",), ("rationale",)),
    "lesson": (("rule",), ("situation", "fix", "error_pattern")),
    "pattern": (("name",), ("problem", "solution", "context")),
}
PROMPT = """You read part of a coding session between a developer and an AI agent. Extract only what a careful
engineer would want remembered in the team's memory: decisions that were made (with their reason),
lessons learned (a rule that prevents a mistake seen here) and reusable patterns. Ignore plans,
questions, chit-chat and anything not clearly stated. Never copy secrets, tokens or passwords.
Answer with JSON only, exactly this shape (an empty list when there is nothing):
{"records": [{"kind": "decision", "decision": "...", "rationale": "..."},
             {"kind": "lesson", "rule": "...", "situation": "...", "fix": "..."},
             {"kind": "pattern", "name": "...", "problem": "...", "solution": "..."}]}

SESSION (lines %d-%d):
%s
"""




def session_lines(chunk: Chunk) -> list[tuple[int, str]]:
    """The chunk as (line, text) entries in transcript order."""
    entries: list[tuple[int, str]] = [(u.line, f"{u.role.upper()}: {u.text}") for u in chunk.utterances]
    for call in chunk.calls:
        entry = f"TOOL {call.name}: {call.command.splitlines()[0][:300] if call.command else ''}"
        if call.result is not None:
            state = "FAILED" if call.is_error or (call.exit_code or 0) != 0 else "ok"
            entry += f" -> {state}: " + " | ".join(error_lines(call.result, 2))
        entries.append((call.line, entry))
    entries.sort(key=lambda e: e[0])
    return entries


def chunks(chunk: Chunk, size: int = CHUNK_CHARS) -> list[tuple[int, int, str]]:
    out: list[tuple[int, int, str]] = []
    current: list[tuple[int, str]] = []
    used = 0
    for line, text in session_lines(chunk):
        text = text[:size]
        if current and used + len(text) > size:
            out.append((current[0][0], current[-1][0], "\n".join(t for _, t in current)))
            current, used = [], 0
        current.append((line, text))
        used += len(text) + 1
    if current:
        out.append((current[0][0], current[-1][0], "\n".join(t for _, t in current)))
    return out


def validate(item: Any) -> tuple[str, dict[str, str]] | str:
    """``(kind, fields)`` for a valid item, else why it is not."""
    if not isinstance(item, dict):
        return "an item is not an object"
    kind = item.get("kind")
    if kind not in _FIELDS:
        return f"unknown kind {kind!r}"
    required, optional = _FIELDS[kind]
    fields: dict[str, str] = {}
    for name in (*required, *optional):
        value = item.get(name)
        if value is None or value == "":
            if name in required:
                return f"{kind} without {name!r}"
            continue
        if not isinstance(value, str):
            return f"{kind} field {name!r} is not a string"
        value = " ".join(value.split())
        if len(value) > MAX_FIELD:
            return f"{kind} field {name!r} is longer than {MAX_FIELD} characters"
        if name in required and len(value) < 8:
            return f"{kind} field {name!r} is too short"
        fields[name] = value
    return str(kind), fields


def parse(answer: str) -> list[Any] | str:
    text = answer.strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        return f"the answer is not JSON ({error.msg})"
    if not isinstance(value, dict) or not isinstance(value.get("records"), list):
        return "the answer has no \"records\" list"
    return list(value["records"])


def extract(chunk: Chunk, settings: Settings, *, spent: int = 0) -> tuple[list[Candidate], int, list[str]]:
    """Candidates from the model for ``chunk``; the tokens used; what went wrong (logged, not raised)."""
    from lore import llm

    budget = settings.capture_llm_budget
    found: list[Candidate] = []
    logs: list[str] = []
    used = 0
    for first, last, text in chunks(chunk):
        prompt = PROMPT % (first, last, text)
        cost = len(prompt) // CHARS_PER_TOKEN
        if spent + used + cost > budget:
            logs.append(f"{chunk.path}:{first}-{last}: not sent to the model: the session's budget of "
                        f"{budget} tokens (LORE_CAPTURE_LLM_BUDGET) is spent")  # fmt: skip
            break
        reply = llm.ask(prompt, settings.capture_llm_timeout_s, settings.llm_cmd)
        used += cost + len(reply.text or "") // CHARS_PER_TOKEN
        if reply.text is None:
            logs.append(f"{chunk.path}:{first}-{last}: the model gave no answer: {reply.failure}")
            continue
        items = parse(reply.text)
        if isinstance(items, str):
            logs.append(f"{chunk.path}:{first}-{last}: answer skipped: {items}")
            continue
        for index, item in enumerate(items):
            checked = validate(item)
            if isinstance(checked, str):
                logs.append(f"{chunk.path}:{first}-{last}: record {index + 1} skipped: {checked}")
                continue
            kind, fields = checked
            main = fields[_FIELDS[kind][0][0]]
            if kind == "lesson":
                fields.setdefault("situation", "stated in a session")
            text_of = " ".join(fields.values())
            found.append(Candidate(kind, dict(fields), text_of if kind != "decision" else main, (first, last), METHOD))
    return found, used, logs
