"""The Claude Code prompt-submit hook: ``lore hook prompt``.

It runs on every prompt, so it must be fast, must never break the prompt and
must inject nothing rather than noise. Whatever happens it exits 0 and prints
either one valid hook JSON object or nothing; failures go to a log file.

Order of work: read stdin -> cheap refusals (disabled, trivial prompt) -> ask the
warm helper if one is running -> otherwise search in-process under a hard
deadline (lexical-only past the soft deadline, nothing past the hard one).
This module imports only the standard library until it has to search.
"""

from __future__ import annotations

import json
import re
import sys
import time

from lore.agent.log import log_failure
from lore.agent.prompt import cold_context_for_prompt, context_for_prompt
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


# The agents whose hook protocols lore speaks (lore.agent.agents installs the hooks).
AGENTS = ("claude-code", "codex", "gemini", "cursor")
# The prompt hook's event name in each agent's protocol.
# Cursor's prompt hook (beforeSubmitPrompt) cannot add context: it only ever continues.
PROMPT_EVENTS = {"claude-code": "UserPromptSubmit", "codex": "UserPromptSubmit", "gemini": "BeforeAgent"}
# Said at the start of every Cursor session, since its prompt hook cannot add context.
CURSOR_NOTE = ("lore memory: before designing or changing something, call the `context` tool of the `lore` MCP "
               "server with what you are about to do; `search` finds decisions, patterns and lessons.")  # fmt: skip


def agent_argument(args: list[str]) -> str:
    """``--agent NAME`` (or ``--agent=NAME``) from a hook's arguments; Claude Code by default.

    A hook never fails on its arguments (a non-zero exit can block the agent): an
    unknown agent is logged and answered in Claude Code's protocol.
    """
    agent = "claude-code"
    for index, arg in enumerate(args):
        if arg == "--agent" and index + 1 < len(args):
            agent = args[index + 1]
        elif arg.startswith("--agent="):
            agent = arg.split("=", 1)[1]
    if agent not in AGENTS:
        log_failure("UsageError", f"unknown agent {agent!r}; speaking Claude Code's hook protocol")
        return "claude-code"
    return agent


def prompt_output(agent: str, context: str) -> str:
    if agent == "cursor":
        return json.dumps({"continue": True})
    return hook_output(PROMPT_EVENTS.get(agent, "UserPromptSubmit"), context)


def event_cwd(event: dict[str, Any]) -> str | None:
    """The working directory of a hook event (Cursor sends its workspace roots instead)."""
    cwd = event.get("cwd")
    if isinstance(cwd, str) and cwd:
        return cwd
    roots = event.get("workspace_roots")
    if isinstance(roots, list) and roots and isinstance(roots[0], str):
        return roots[0]
    return None


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


def _in_process(prompt: str, cwd: str | None, budget: int, started: float, deadline: float, settings: Settings,
                locations: Any = None) -> str | None:  # fmt: skip
    """Search in a worker thread; give up (None) at the hard deadline."""
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
    soft = deadline - vector_cost_estimate(found[1].records)  # past this, skip the vector channels: lexical-only

    def work() -> None:
        try:
            session = SearchSession(locations, reader=IndexReader(*found))
            result["text"] = context_for_prompt(session, prompt, cwd, budget, soft, settings.hook_gap == "line",
                                                policy=settings.hook_refresh)  # fmt: skip
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
    return str(result.get("text") or "")


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


def run_prompt_hook(args: list[str], stdin: Any = None, stdout: Any = None) -> int:
    """Entry point for ``lore hook prompt``. Always returns 0."""
    stdin = stdin if stdin is not None else sys.stdin
    stdout = stdout if stdout is not None else sys.stdout
    started = time.monotonic()
    deadline = started + DEFAULT_DEADLINE_MS / 1000
    agent = agent_argument(args)
    spawn_for: Any = None
    try:
        if agent == "cursor":  # no context to add: say "continue" and nothing else
            stdout.write(prompt_output(agent, "") + "\n")
            stdout.flush()
            return 0
        settings = Settings.from_env()  # a bad value is logged below and the prompt goes through without context
        deadline = started + settings.hook_deadline_s
        if not settings.hook:
            return 0
        event = read_event(stdin)
        prompt = event.get("prompt")
        if not isinstance(prompt, str):
            raise ValueError("hook input has no 'prompt' string")
        prompt = user_prompt(prompt)
        session_id = event.get("session_id") if isinstance(event.get("session_id"), str) else None
        cwd = event_cwd(event)
        if session_opted_out(session_id, settings):
            return 0
        remember_last_prompt(session_id, prompt, settings)
        if is_trivial(prompt):
            return 0
        budget = settings.hook_budget
        if budget <= 0:
            return 0
        from lore.agent.client import ask_server
        from lore.paths import Locations

        locations = Locations.resolve(None, None, settings)
        # The resolved data dir: a helper serving another data dir (same index dir) declines.
        text = ask_server({"op": "context", "prompt": prompt, "cwd": cwd, "budget": budget, "gap_line": settings.hook_gap == "line",
                           "data_dir": str(locations.data_dir.resolve())}, deadline, locations.index_dir, settings)  # fmt: skip
        if text is None:
            spawn_for = locations  # a helper for the next prompt, once this one is answered
            # LORE_HOOK_COLD: a numpy-free lexical answer (lore.rank.cold), or the full pipeline, or nothing.
            text = cold_context_for_prompt(prompt, cwd, budget, locations, mode=settings.hook_cold,
                                           gap_line=settings.hook_gap == "line", deadline=deadline, log=log_failure)  # fmt: skip
            if text is None:
                text = _in_process(prompt, cwd, budget, started, deadline, settings, locations)
        if text and len(text) <= budget:
            stdout.write(prompt_output(agent, text) + "\n")
            stdout.flush()
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
    agent = agent_argument(args)
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
        note = CURSOR_NOTE if agent == "cursor" and len(CURSOR_NOTE) < budget else ""
        text = session_text(locations, project, event_cwd(event), budget - len(note) - 1 if note else budget, settings)
        text = "\n".join(part for part in (note, text) if part)
    except BaseException as exc:  # the session must start whatever happens
        if not isinstance(exc, KeyboardInterrupt):
            log_failure(type(exc).__name__, str(exc))
    finally:
        if agent == "cursor":
            stdout.write(json.dumps({"additional_context": text, "continue": True} if text else {"continue": True}) + "\n")
        elif text:
            stdout.write(hook_output("SessionStart", text) + "\n")
        stdout.flush()
    if spawn_for is not None and settings is not None:
        from lore.agent.client import SESSION_SETTLE_S

        start_helper(spawn_for, settings, SESSION_SETTLE_S)
    return 0


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
