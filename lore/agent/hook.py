"""The Claude Code prompt-submit hook: ``lore hook prompt``.

It runs on every prompt, so it must be fast, must never break the prompt and
must inject nothing rather than noise. Whatever happens it exits 0 and prints
either one valid hook JSON object or nothing; failures go to a log file.

Order of work: read stdin -> cheap refusals (disabled, trivial prompt) -> ask the
warm helper if one is running -> otherwise the light path without numpy
(``LORE_HOOK_COLD``, ``lore.rank.cold``), or the whole pipeline in process under a hard
deadline (BM25 alone past the soft deadline, nothing past the hard one).
This module imports only the standard library until it has to search.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from typing import NamedTuple  # loaded with lore.settings anyway

from lore.agent.log import log_failure, log_prompt
from lore.agent.prompt import NOTHING, Handed, cold_context_for_prompt, context_for_prompt
from lore.settings import DEFAULT_HOOK_BUDGET, DEFAULT_HOOK_DEADLINE_MS, Settings

# Importing typing costs ~5-25 ms; the hook only needs it for the type checker.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

DEFAULT_BUDGET = DEFAULT_HOOK_BUDGET
DEFAULT_DEADLINE_MS = DEFAULT_HOOK_DEADLINE_MS
MAX_STDIN = 1 << 20
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_'\-]+|\d+[A-Za-z]+[A-Za-z0-9]*")
_TRIVIAL_WORDS = frozenset(
    ["a", "an", "the", "and", "or", "but", "to", "of", "in", "on", "at", "for", "with", "is", "are", "was", "were", "be", "it", "this", "that", "these", "those", "i", "you", "we", "he", "she", "they", "me", "my", "your", "our", "please", "thanks", "thank", "ok", "okay", "yes", "no", "yep", "nope", "sure", "hi", "hello", "hey", "go", "do", "continue", "proceed", "again", "more", "next", "lgtm", "ship", "fine", "good", "great", "cool", "nice", "done"]
)


def hook_output(event: str, context: str) -> str:
    return json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}}, ensure_ascii=False)


class Protocol(NamedTuple):
    """How lore's hooks read one agent's events and answer in its hook protocol.

    The install side (files, hooks, MCP entry) of the same agent is its entry in
    ``lore.agent.agents.REGISTRY``; this half stays here, a ``NamedTuple`` of plain
    values, because every prompt imports this module and a dataclass costs the hook
    ~14 ms (tests/test_layout.py).

    prompt_event: the ``hookEventName`` the prompt block is announced under; None
        when the agent's prompt hook cannot add context (Cursor), and then
        ``prompt_passthrough`` is printed at once instead.
    shape: how context is printed (``SHAPES``): Claude Code's ``hookSpecificOutput``,
        Cursor's ``additional_context`` or Antigravity's ``injectSteps``.
    session_note: a line that starts every session-start block (Cursor's pointer to
        the MCP tools, since no prompt hook can bring memory there).
    stop_output: what the stop hooks print (Cursor expects a JSON object from every hook).
    turns: where the user's prompt comes from: ``event`` (its ``prompt`` field) or
        ``transcript``: Antigravity's only pre-model event fires before every model
        call of the agent loop and carries no prompt, so lore reads the user's last
        input from the conversation's transcript and answers once per user turn, the
        first turn with the session-start block too (``new_turn``).
    """

    name: str
    prompt_event: str | None = "UserPromptSubmit"
    shape: str = "hook-specific"
    session_note: str = ""
    stop_output: str | None = None
    prompt_passthrough: str | None = None
    turns: str = "event"


# Said at the start of every Cursor session, since its prompt hook cannot add context.
CURSOR_NOTE = ("lore memory: before designing or changing something, call the `context` tool of the `lore` MCP "
               "server with what you are about to do; `search` finds decisions, patterns and lessons.")  # fmt: skip

# The agents whose hook protocols lore speaks, in the order `--agent` lists them.
PROTOCOLS: dict[str, Protocol] = {
    "claude-code": Protocol("claude-code"),
    "codex": Protocol("codex"),
    "gemini": Protocol("gemini", prompt_event="BeforeAgent"),
    # Cursor's prompt hook (beforeSubmitPrompt) can only let a prompt through or stop it.
    "cursor": Protocol("cursor", prompt_event=None, shape="cursor", session_note=CURSOR_NOTE, stop_output="{}",
                       prompt_passthrough=json.dumps({"continue": True})),
    # Antigravity CLI (agy): no prompt-submit event; PreInvocation runs before every model call.
    "antigravity": Protocol("antigravity", prompt_event="PreInvocation", shape="inject-steps", turns="transcript"),
    # OpenCode: lore's plugin (lore.agent.opencode) runs the hooks from its chat.message hook.
    "opencode": Protocol("opencode", prompt_event="chat.message"),
}  # fmt: skip
AGENTS = tuple(PROTOCOLS)


def _hook_specific(event: str, blocks: list[str]) -> str | None:
    return hook_output(event, "\n".join(blocks)) if blocks else None


def _cursor(event: str, blocks: list[str]) -> str | None:
    """Cursor expects a JSON object from every hook, context or not."""
    text = "\n".join(blocks)
    return json.dumps({"additional_context": text, "continue": True} if text else {"continue": True})


def _inject_steps(event: str, blocks: list[str]) -> str | None:
    """Antigravity's PreInvocation answer: steps handed to the model call about to run.

    ``ephemeralMessage``, not ``userMessage``: the text is reference data from lore,
    not something the person typed, and it serves the model call that plans the turn
    without being written into the conversation as the user's words.
    """
    return json.dumps({"injectSteps": [{"ephemeralMessage": block} for block in blocks]},
                      ensure_ascii=False) if blocks else None  # fmt: skip


# shape -> (event name, blocks of context) -> the line printed on stdout (None: print nothing).
SHAPES = {"hook-specific": _hook_specific, "cursor": _cursor, "inject-steps": _inject_steps}


def answer(protocol: Protocol, event: str, blocks: list[str]) -> str | None:
    """The hook's stdout line for ``blocks`` of context in ``protocol`` (None: print nothing)."""
    return SHAPES[protocol.shape](event, [block for block in blocks if block])


def agent_protocol(args: list[str]) -> Protocol:
    """The protocol named by ``--agent NAME`` (or ``--agent=NAME``) in a hook's arguments; Claude Code's by default.

    A hook never fails on its arguments (a non-zero exit can block the agent): an
    unknown agent is logged and answered in Claude Code's protocol.
    """
    agent = "claude-code"
    for index, arg in enumerate(args):
        if arg == "--agent" and index + 1 < len(args):
            agent = args[index + 1]
        elif arg.startswith("--agent="):
            agent = arg.split("=", 1)[1]
    if agent not in PROTOCOLS:
        log_failure("UsageError", f"unknown agent {agent!r}; speaking Claude Code's hook protocol")
        return PROTOCOLS["claude-code"]
    return PROTOCOLS[agent]


def agent_argument(args: list[str]) -> str:
    """The agent named in a hook's arguments (``agent_protocol``'s name)."""
    return agent_protocol(args).name


def event_cwd(event: dict[str, Any]) -> str | None:
    """The working directory of a hook event.

    ``cwd`` (Claude Code, Codex, Gemini); Cursor sends its workspace roots
    (``workspace_roots``) instead, Antigravity its ``workspacePaths``.
    """
    cwd = event.get("cwd")
    if isinstance(cwd, str) and cwd:
        return cwd
    for key in ("workspace_roots", "workspacePaths"):
        roots = event.get(key)
        if isinstance(roots, list) and roots and isinstance(roots[0], str) and roots[0]:
            return roots[0]
    return None


def event_session_id(event: dict[str, Any]) -> str | None:
    """The session a hook event belongs to (``session_id``; Antigravity's ``conversationId``), if it names one."""
    for key in ("session_id", "conversationId"):
        session_id = event.get(key)
        if isinstance(session_id, str) and session_id:
            return session_id
    return None


# --------------------------------------------------------------------------- Antigravity's user turns

# How far back from its end the transcript is searched for the user's last input: a turn
# whose tool output since then is larger than this gets nothing more (it got its block).
TRANSCRIPT_SCAN_BYTES = 8 << 20
_SCAN_CHUNK = 64 << 10


def last_user_input(path: str) -> tuple[str, str] | None:
    """The last user input in an Antigravity transcript and a key naming that turn; None if none is found.

    The transcript is JSON lines; the user's inputs are ``{"type": "USER_INPUT",
    "content": ...}`` (as observed by others; Antigravity does not document the
    format, see docs/agents.md). Read backwards in chunks, so a long conversation
    costs only its tail. The key is the line's byte offset and checksum: the same
    turn gives the same key at every model call, a new input a new one.
    """
    import zlib

    with open(path, "rb") as handle:
        position = end = handle.seek(0, 2)
        pending = b""  # the head of a line that started in an earlier chunk
        while position > 0 and end - position < TRANSCRIPT_SCAN_BYTES:
            step = min(_SCAN_CHUNK, position, TRANSCRIPT_SCAN_BYTES - (end - position))
            position -= step
            handle.seek(position)
            data = handle.read(step) + pending
            cut = data.find(b"\n") + 1 if position > 0 else 0
            if position > 0 and cut == 0:
                pending = data
                continue
            pending, complete, offset = data[:cut], data[cut:], position + cut
            stop = len(complete)
            while stop > 0:
                start = complete.rfind(b"\n", 0, stop - 1) + 1
                line = complete[start:stop]
                if b"USER_INPUT" in line:
                    found = _user_input(line)
                    if found is not None:
                        return found, f"{offset + start}:{zlib.crc32(line.strip())}"
                stop = start
    return None


def _user_input(line: bytes) -> str | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None  # a line still being written, or not JSON
    if not isinstance(record, dict) or record.get("type") != "USER_INPUT":
        return None
    content = record.get("content", record.get("text"))
    return content if isinstance(content, str) else None


def new_turn(event: dict[str, Any], settings: Settings) -> tuple[str, bool] | None:
    """For a pre-model event (Antigravity's PreInvocation): the user's prompt if this call starts a new turn.

    Returns (prompt, first turn of the conversation) at the first model call of a
    user turn, None at the others (the turn got its answer) or when no user input
    is found. The last turn answered is kept per conversation in the state dir
    (``turns/``), replaced atomically; a turn that cannot be recorded gets nothing,
    so a broken state dir never injects at every model call.
    """
    transcript = event.get("transcriptPath")
    if not isinstance(transcript, str) or not transcript:
        raise ValueError("hook input has no 'transcriptPath' string")
    found = last_user_input(transcript)
    if found is None:
        log_failure("no-user-input", f"no user input found in {transcript}; injected nothing")
        return None
    prompt, key = found
    from lore.paths import safe_name, state_dir

    path = state_dir(settings) / "turns" / safe_name(event_session_id(event) or transcript)
    try:
        previous: str | None = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        previous = None
    if previous == key:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.write_text(key, encoding="utf-8")
    os.replace(partial, path)
    return prompt, previous is None


# Gemini CLI hands hook context to the model as <hook_context>...</hook_context> and, in
# non-interactive mode, prepends the session-start context to the prompt that BeforeAgent
# then receives: the hook must search the user's words, not its own earlier output.
_HOOK_CONTEXT = re.compile(r"<hook_context>.*?</hook_context>\s*", re.DOTALL)


def user_prompt(prompt: str) -> str:
    """The prompt without context an agent wrapped into it (Gemini's ``<hook_context>`` blocks)."""
    return _HOOK_CONTEXT.sub("", prompt) if "<hook_context>" in prompt else prompt


def content_word_count(prompt: str) -> int:
    return sum(1 for w in _WORD.findall(prompt) if w.lower() not in _TRIVIAL_WORDS)


def is_trivial(prompt: str) -> bool:
    stripped = prompt.strip()
    return not stripped or stripped.startswith("/") or content_word_count(stripped) < 3


def session_opted_out(session_id: str | None, settings: Settings) -> bool:
    return session_id is not None and opt_out_path(session_id, settings).exists()


def read_event(stream: Any) -> dict[str, Any]:
    raw = stream.buffer.read(MAX_STDIN + 1) if hasattr(stream, "buffer") else stream.read(MAX_STDIN + 1)
    if isinstance(raw, bytes):
        if len(raw) > MAX_STDIN:
            raise ValueError("hook input larger than 1 MB")
        raw = raw.decode("utf-8")
    elif len(raw) > MAX_STDIN:
        raise ValueError("hook input larger than 1 MB")
    event = json.loads(raw)
    if not isinstance(event, dict):
        raise ValueError("hook input is not a JSON object")
    return event


def remember_last_prompt(session_id: str | None, prompt: str, settings: Settings) -> None:
    """Keep the session's last prompt (scrubbed, short) for an optional handoff stub (``LORE_HOOK_HANDOFF=on``)."""
    if not session_id or not settings.hook_handoff:
        return
    try:
        from lore.paths import safe_name, state_dir
        from lore.scrub import scrub

        path = state_dir(settings) / "sessions" / (safe_name(session_id) + ".json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"prompt": scrub(" ".join(prompt.split())[:300]).text, "ts": time.time()}))
    except Exception as exc:
        log_failure("last-prompt", repr(exc))


def _reply_answer(reply: dict[str, Any] | None) -> Handed | None:
    """The helper's block, its ids and pointers; None when no helper answered (or its reply is not one)."""
    if reply is None or not isinstance(reply.get("text"), str):
        return None
    ids, pointers = reply.get("ids"), reply.get("pointers")
    return Handed(reply["text"], tuple(str(i) for i in ids) if isinstance(ids, list) else (),
                  tuple(str(i) for i in pointers) if isinstance(pointers, list) else ())  # fmt: skip


# Memories handed earlier in a session, so that the next prompts do not hand them again:
# the agent has them in its context already. One small file per session under the state dir:
# {"full": [...], "pointers": [...]} (a plain list, as older versions wrote it, is full items).
INJECTED_KEEP = 200  # ids remembered per session and tier, newest last


def _injected_path(session_id: str, settings: Settings) -> Path:
    from lore.paths import safe_name, state_dir

    return state_dir(settings) / "injected" / (safe_name(session_id) + ".json")


def injected_before(session_id: str | None, settings: Settings) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The ids this session's earlier prompts handed in full, and as pointers (none without a session id or a readable file)."""
    if not session_id:
        return (), ()
    try:
        held = json.loads(_injected_path(session_id, settings).read_bytes())
    except (OSError, ValueError):
        return (), ()
    if isinstance(held, list):
        return tuple(str(i) for i in held), ()
    if not isinstance(held, dict):
        return (), ()
    full, pointers = held.get("full"), held.get("pointers")
    return (tuple(str(i) for i in full) if isinstance(full, list) else (),
            tuple(str(i) for i in pointers) if isinstance(pointers, list) else ())  # fmt: skip


def remember_injected(session_id: str | None, before: tuple[tuple[str, ...], tuple[str, ...]], handed: Handed,
                      settings: Settings) -> None:  # fmt: skip
    """Add what ``handed`` gave to the session's memories (atomically: a torn file would only forget them)."""
    if not session_id or not handed.ids:
        return
    import os

    full = [i for i in handed.ids if i not in handed.pointers]
    try:
        path = _injected_path(session_id, settings)
        path.parent.mkdir(parents=True, exist_ok=True)
        kept = {"full": list(dict.fromkeys([*before[0], *full]))[-INJECTED_KEEP:],
                "pointers": list(dict.fromkeys([*before[1], *handed.pointers]))[-INJECTED_KEEP:]}  # fmt: skip
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        temporary.write_text(json.dumps(kept))
        os.replace(temporary, path)
    except OSError as exc:
        log_failure("injected", repr(exc))


def forget_injected(session_id: str | None, settings: Settings) -> None:
    """The agent compacted its context (PreCompact): what it was handed is gone, so it may be handed again."""
    if not session_id:
        return
    try:
        _injected_path(session_id, settings).unlink(missing_ok=True)
    except OSError as exc:
        log_failure("injected", repr(exc))


def _in_process(prompt: str, cwd: str | None, budget: int, started: float, deadline: float, settings: Settings,
                locations: Any = None, seen: tuple[str, ...] = (), pointed: tuple[str, ...] = ()) -> Handed | None:  # fmt: skip
    """Search in a worker thread: the block and its ids; give up (None) at the hard deadline."""
    from lore.index.manager import IndexManager, IndexReader
    from lore.paths import Locations
    from lore.search import SearchSession

    locations = locations or Locations.resolve(None, None, settings)
    if not locations.data_dir.is_dir():
        raise FileNotFoundError(f"data dir {locations.data_dir} does not exist")
    # Checked here rather than left to SearchSession.open, which would build a
    # missing index: the hook must never start a build on the prompt path.
    found = IndexManager(locations).read_meta()
    if found is None:
        raise FileNotFoundError(f"no usable index in {locations.index_dir}; run `lore index`")
    if found[1].data_dir != str(locations.data_dir.resolve()):
        raise FileNotFoundError(f"the index in {locations.index_dir} was built for another data dir "
                                f"({found[1].data_dir}); run `lore index`")  # fmt: skip
    result: dict[str, Any] = {}
    total = deadline - started
    soft = deadline - vector_cost_estimate(found[1].records)  # past this, skip the vector channels: BM25 alone

    def work() -> None:
        try:
            session = SearchSession(locations, reader=IndexReader(*found))
            result["answer"] = context_for_prompt(session, prompt, cwd, budget, soft, settings.hook_gap == "line",
                                                  policy=settings.hook_refresh, seen=seen, pointed=pointed)  # fmt: skip
        except BaseException as exc:
            result["error"] = exc

    import threading

    worker = threading.Thread(target=work, name="lore-hook", daemon=True)
    worker.start()
    worker.join(max(0.0, deadline - time.monotonic()))
    if worker.is_alive():
        log_failure("deadline", f"no result within {total * 1000:.0f} ms; injected nothing")
        return None
    if "error" in result:
        raise result["error"]
    answer: Handed = result.get("answer") or NOTHING
    return answer


# A cold process loads the query encoder (the 1.8 MB LLaMA tokenizer and 16 MB of
# weights: 95-135 ms here), scores every record up to twice and still has to fuse,
# rank and render.
ENCODER_LOAD_S = 0.14
VECTOR_SECONDS_PER_RECORD = 0.5e-6
FINISH_S = 0.04


def vector_cost_estimate(records: int) -> float:
    """Seconds the vector channels and the rest of a cold search still need once BM25 is done.

    The hook starts them only if they fit before its hard deadline; otherwise it
    answers from BM25 alone rather than running out of time and injecting nothing.
    """
    return ENCODER_LOAD_S + records * VECTOR_SECONDS_PER_RECORD + FINISH_S


def _first_turn_block(cwd: str | None, budget: int, settings: Settings) -> str:
    """The session-start block for an agent without a session-start event (Antigravity); "" if it fails (logged)."""
    try:
        from lore.paths import Locations

        return session_text(Locations.resolve(None, None, settings), None, cwd, budget, settings)
    except Exception as exc:  # the prompt's own block may still come
        log_failure(type(exc).__name__, f"session block: {exc}")
        return ""


def run_prompt_hook(args: list[str], stdin: Any = None, stdout: Any = None) -> int:
    """Entry point for ``lore hook prompt``. Always returns 0.

    Long because: one guarded sequence (any failure lets the prompt through without context,
    and a helper is spawned only once the answer is out), with the warm, cold and in-process
    routes in the order the deadline tries them.
    """
    stdin = stdin if stdin is not None else sys.stdin
    stdout = stdout if stdout is not None else sys.stdout
    started = time.monotonic()
    deadline = started + DEFAULT_DEADLINE_MS / 1000
    protocol = agent_protocol(args)
    spawn_for: Any = None
    try:
        if protocol.prompt_passthrough is not None:  # no context to add: say so and nothing else
            stdout.write(protocol.prompt_passthrough + "\n")
            stdout.flush()
            return 0
        settings = Settings.from_env()  # a bad value is logged below and the prompt goes through without context
        deadline = started + settings.hook_deadline_s
        if not settings.hook:
            return 0
        event = read_event(stdin)
        first_turn = False
        prompt: object = event.get("prompt")
        if protocol.turns == "transcript":
            turn = new_turn(event, settings)
            if turn is None:  # another model call of a turn already answered
                return 0
            prompt, first_turn = turn
        if not isinstance(prompt, str):
            raise ValueError("hook input has no 'prompt' string")
        prompt = user_prompt(prompt)
        trivial = is_trivial(prompt)
        if trivial and not first_turn and not settings.hook_handoff and answer(protocol, protocol.prompt_event or "", []) is None:
            return 0  # nothing to search, add or record: out before any file is opened or module imported
        session_id = event_session_id(event)
        cwd = event_cwd(event)
        if session_opted_out(session_id, settings):
            return 0
        remember_last_prompt(session_id, prompt, settings)
        budget = settings.hook_budget
        blocks: list[str] = []
        handed = NOTHING
        before: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
        route = "trivial"
        if first_turn and budget > 0:  # no session-start event: the conversation's first turn brings its block
            blocks.append(_first_turn_block(cwd, budget, settings))
        if not trivial and budget > 0:
            from lore.agent.client import ask_server_reply
            from lore.paths import Locations

            locations = Locations.resolve(None, None, settings)
            before = injected_before(session_id, settings)
            # The resolved data dir: a helper serving another data dir (same index dir) declines.
            reply = ask_server_reply({"op": "context", "prompt": prompt, "cwd": cwd, "budget": budget,
                                      "gap_line": settings.hook_gap == "line", "seen": list(before[0]),
                                      "pointed": list(before[1]), "data_dir": str(locations.data_dir.resolve())},
                                     deadline, locations.index_dir, settings)  # fmt: skip
            found = _reply_answer(reply)
            route = "warm"
            if found is None:
                spawn_for = locations  # a helper for the next prompt, once this one is answered
                route = "cold"
                # LORE_HOOK_COLD: the numpy-free light path (lore.rank.cold), or the full pipeline, or nothing.
                found = cold_context_for_prompt(prompt, cwd, budget, locations, mode=settings.hook_cold, seen=before[0],
                                                pointed=before[1], gap_line=settings.hook_gap == "line",
                                                deadline=deadline, log=log_failure)  # fmt: skip
                if found is None:
                    route = "process"
                    found = _in_process(prompt, cwd, budget, started, deadline, settings, locations, *before)
            handed = found if found is not None else NOTHING
            if handed.text and len(handed.text) <= budget:
                blocks.append(handed.text)
            else:
                handed = NOTHING
        line = answer(protocol, protocol.prompt_event or "", blocks)
        if line is not None:
            stdout.write(line + "\n")
            stdout.flush()
            remember_injected(session_id, before, handed, settings)
        log_prompt(route, handed)
    except BaseException as exc:  # the prompt must go through whatever happens
        if isinstance(exc, KeyboardInterrupt):
            return 0
        log_failure(type(exc).__name__, str(exc))
    if spawn_for is not None:
        # Last, after the answer is out: the new interpreter's start-up shares no CPU with this prompt.
        start_helper(spawn_for, settings)
    return 0


def run_session_start_hook(args: list[str], stdin: Any = None, stdout: Any = None, locations: Any = None,
                           project: str | None = None) -> int:  # fmt: skip
    """Entry point for ``lore hook session-start``: print the session context, start the warm helper. Always 0.

    The helper is spawned last, once the context is written: a ``posix_spawn`` (about
    a millisecond), and the new interpreter's start-up then shares no CPU with this
    hook. The helper waits for this hook to exit, then ``SESSION_SETTLE_S``, before
    it warms up, and is ready about 1.3 s after the session started.
    """
    stdin = stdin if stdin is not None else sys.stdin
    stdout = stdout if stdout is not None else sys.stdout
    protocol = agent_protocol(args)
    text = ""
    spawn_for: Any = None
    settings: Settings | None = None
    try:
        event = read_event(stdin)
        settings = Settings.from_env()  # a bad value is logged below and the session starts without context
        if not settings.hook:
            return 0
        from lore.paths import Locations

        locations = spawn_for = locations or Locations.resolve(None, None, settings)
        budget = settings.hook_budget
        note = protocol.session_note if len(protocol.session_note) < budget else ""
        text = session_text(locations, project, event_cwd(event), budget - len(note) - 1 if note else budget, settings)
        text = "\n".join(part for part in (note, text) if part)
    except BaseException as exc:  # the session must start whatever happens
        if not isinstance(exc, KeyboardInterrupt):
            log_failure(type(exc).__name__, str(exc))
    finally:
        line = answer(protocol, "SessionStart", [text])
        if line is not None:
            stdout.write(line + "\n")
        stdout.flush()
    if spawn_for is not None and settings is not None:
        from lore.agent.client import SESSION_SETTLE_S

        start_helper(spawn_for, settings, SESSION_SETTLE_S)
    if settings is not None:
        prune_session_state(settings)
    return 0


# Per-session state (the memories a session was handed, Antigravity's last answered turn) is
# useless once the session is over; a session start (once per session, after its answer is
# out) removes the files untouched for this long, so they never pile up.
SESSION_STATE_KEEP_S = 14 * 86400


def prune_session_state(settings: Settings, now: float | None = None) -> int:
    """Remove per-session state files older than ``SESSION_STATE_KEEP_S``; how many went (never raises)."""
    removed = 0
    try:
        from lore.paths import state_dir

        cutoff = (now if now is not None else time.time()) - SESSION_STATE_KEEP_S
        for folder in ("injected", "turns"):
            directory = state_dir(settings) / folder
            if not directory.is_dir():
                continue
            for path in directory.iterdir():
                try:
                    if path.is_file() and path.stat().st_mtime < cutoff:
                        path.unlink()
                        removed += 1
                except OSError:
                    continue
    except Exception as exc:
        log_failure("prune", repr(exc))
    return removed


SESSION_ASK_S = 0.5


def session_text(locations: Any, project: str | None, cwd: str | None, budget: int, settings: Settings) -> str:
    """The session-start block: from a running helper when there is one (no store imports), else in process."""
    from lore.agent.client import ask_server

    asked = ask_server({"op": "session", "cwd": cwd, "project": project, "budget": budget,
                        "data_dir": str(locations.data_dir.resolve())},
                       time.monotonic() + SESSION_ASK_S, locations.index_dir, settings)  # fmt: skip
    if asked is not None:
        return asked
    from lore.agent.session import session_start_text
    from lore.project import detect_project

    return session_start_text(locations, project or detect_project(cwd), budget)  # -P wins over the event's cwd


def start_helper(locations: Any, settings: Settings, settle_s: float = 0.0) -> None:
    """Start the warm helper in the background when none runs (``lore.agent.client.ensure_started``); never raises."""
    try:
        from lore.agent.client import ensure_started

        ensure_started(locations.index_dir, locations.data_dir, settings, settle_s)
    except Exception as exc:
        log_failure("server-start", repr(exc))


def opt_out_path(session_id: str, settings: Settings) -> Path:
    from lore.paths import safe_name, state_dir

    return state_dir(settings) / "hook-off" / safe_name(session_id)
