"""Candidates without any model: failed tool calls (and their fixes), stated decisions and lessons,
and what a session touched.

The rules were chosen on the development transcripts in ``tests/data/transcripts-dev/``
(never on the labelled test set); docs/capture.md lists them.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from lore.sessions.transcript import Chunk, ToolCall, Utterance

METHOD = "heuristic"
LINE_LIMIT = 200
SENTENCE_LIMIT = 400

# Results that say the agent or the user stopped the call, not that the work failed.
_NOISE = ("doesn't want to proceed", "tool use was rejected", "Request interrupted", "File has not been read yet",
          "has been modified since read", "requested permissions", "Permission to use")  # fmt: skip
# Output of a command that failed even though its exit code was hidden (a pipe into tail, `|| true`).
_TEXTUAL_ERROR = re.compile(r"^(?:Traceback \(most recent call last\)|fatal: |npm ERR!|FAILED \S+::)|: command not found$",
                            re.MULTILINE)  # fmt: skip
_EXCEPTION = re.compile(r"\b([A-Z][A-Za-z0-9_]*(?:Error|Exception|Failure|Conflict))\b")
_KEY_LINE = re.compile(r"error|exception|fatal|failed|failure|denied|not found|no such|rejected|conflict|cannot|"
                       r"can't|refused|invalid|unknown|missing|undefined|assert", re.IGNORECASE)  # fmt: skip
_TAGS = re.compile(r"</?tool_use_error>")
_EDIT_TOOLS = ("Edit", "MultiEdit", "Write", "NotebookEdit")
_READ_TOOLS = ("Read",)
_TRIVIAL_PROGRAMS = frozenset(("ls", "cat", "head", "tail", "pwd", "echo", "grep", "rg", "find", "wc", "which", "cd",
                               "tree", "less", "file", "stat", "true", "date", "whoami", "env"))  # fmt: skip


@dataclass
class Candidate:
    """A record capture proposes: its kind, its fields, and where in the transcript it came from."""

    kind: str  # failure, decision, lesson, pattern or observation
    fields: dict[str, Any]
    text: str  # the main text: what duplicates and earlier rejections are judged on
    lines: tuple[int, int]
    method: str = METHOD
    notes: list[str] = field(default_factory=list)


# -- failures --------------------------------------------------------------------------------------
def failed(call: ToolCall) -> bool:
    if call.result is None:
        return False
    if any(noise in call.result for noise in _NOISE):
        return False
    if call.is_error or (call.exit_code is not None and call.exit_code != 0):
        return True
    return call.name == "Bash" and bool(_TEXTUAL_ERROR.search(call.result))


def program(command: str) -> str:
    """The program a shell command runs (after ``cd x &&`` and ``VAR=value`` prefixes), with its subcommand."""
    line = command.strip().split("\n", 1)[0]
    for part in re.split(r"&&|;|\|\|", line):
        try:
            words = shlex.split(part)
        except ValueError:
            words = part.split()
        while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
            words = words[1:]
        if not words or words[0] == "cd":
            continue
        head = os.path.basename(words[0])
        if head in ("sudo", "time", "uv", "poetry", "npx") and len(words) > 1:
            words = words[1:]
            head = os.path.basename(words[0])
        second = words[1] if len(words) > 1 and re.match(r"^[a-z][a-z0-9_-]*$", words[1]) else ""
        if head.startswith("python") and len(words) > 2 and words[1] == "-m":
            second = f"-m {words[2]}"
        return f"{head} {second}".strip()
    return line.split(" ", 1)[0] if line else ""


def _words(text: str) -> set[str]:
    return {w for w in re.split(r"[\s'\"`=(),;:]+", text.lower()) if w}


def _similar(a: ToolCall, b: ToolCall) -> bool:
    if a.name != b.name:
        return False
    if a.name in _EDIT_TOOLS or a.name in _READ_TOOLS:
        return a.input.get("file_path") == b.input.get("file_path")
    if a.name == "Bash":
        if program(a.command) == program(b.command) and program(a.command):
            return True
        wa, wb = _words(a.command), _words(b.command)
        return bool(wa and wb) and len(wa & wb) / len(wa | wb) >= 0.5
    return a.command == b.command


def error_lines(text: str, limit: int = 3) -> list[str]:
    """The lines of an error worth keeping: those that name the error, else the first ones."""
    lines = [ln.strip() for ln in _TAGS.sub("", text).splitlines()]
    lines = [ln for ln in lines if ln and not re.match(r"^(?:Error: )?Exit code \d+$", ln)]
    keyed = [ln for ln in lines if _KEY_LINE.search(ln) and not ln.startswith(("File \"", "Traceback"))]
    chosen: list[str] = []
    for line in (keyed[:limit - 1] + keyed[-1:]) if keyed else lines[:limit]:
        if line not in chosen:
            chosen.append(line)
    return [_cut(ln, LINE_LIMIT) for ln in chosen[:limit]]


def error_type(call: ToolCall) -> str:
    text = call.result or ""
    found = _EXCEPTION.findall(text)
    if found:
        return found[-1]
    name = program(call.command) if call.name == "Bash" else call.name
    if call.exit_code:
        return f"{name} exit {call.exit_code}"
    if re.search(r"^fatal: ", text, re.MULTILINE):
        return f"{name} fatal"
    return f"{name} error"


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _fix(calls: list[ToolCall], index: int) -> tuple[str | None, int | None]:
    """What changed before a later call of the same tool on a similar command succeeded."""
    bad = calls[index]
    for later in calls[index + 1 :]:
        if not _similar(bad, later) or later.result is None or failed(later):
            continue
        between = calls[index + 1 : calls.index(later)]
        edited = []
        for call in between:
            path = call.input.get("file_path")
            if call.name in _EDIT_TOOLS and isinstance(path, str) and not failed(call):
                name = os.path.basename(path)
                if name not in edited:
                    edited.append(name)
        after = f" after editing {', '.join(edited[:5])}" if edited else ""
        if bad.name == "Bash":
            if later.command != bad.command:
                return f"`{_cut(later.command, LINE_LIMIT)}` succeeded{after}", later.result_line
            return f"the same command succeeded{after or ' on a later try'}", later.result_line
        if bad.name in _EDIT_TOOLS:
            changed = sorted(k for k in set(bad.input) | set(later.input) if bad.input.get(k) != later.input.get(k))
            return f"the {bad.name} succeeded with a different {', '.join(changed) or 'input'}{after}", later.result_line
        return f"a later {bad.name} call succeeded{after}", later.result_line
    return None, None


def failures(calls: list[ToolCall], cwd: str | None = None) -> list[Candidate]:
    found: list[Candidate] = []
    seen: set[tuple[str, str, str]] = set()
    for index, call in enumerate(calls):
        if not failed(call):
            continue
        lines = error_lines(call.result or "")
        kind = error_type(call)
        command = _cut(call.command.split("\n", 1)[0], LINE_LIMIT)
        path = call.input.get("file_path")
        if call.name != "Bash" and isinstance(path, str) and cwd:
            command = command.replace(path, _relative(path, cwd))
        key = (call.name, command, lines[0] if lines else "")
        if key in seen:  # the same failure again: one record
            continue
        seen.add(key)
        exit_note = f" (exit {call.exit_code})" if call.exit_code else ""
        what = f"`{command}`" if call.name == "Bash" else command
        message = "\n".join([f"{what} failed{exit_note}", *lines])
        fix, fix_line = _fix(calls, index)
        fields: dict[str, Any] = {"error_type": kind, "error_message": message, "tool": call.name, "command": command}
        if fix:
            fields["fix"] = fix
            message += f"\nFix: {fix}"
        last = max(x for x in (call.line, call.result_line or call.line, fix_line or call.line))
        found.append(Candidate("failure", fields, message, (call.line, last)))
    return found


# -- stated decisions and lessons ------------------------------------------------------------------
_STRONG_DECISION = [re.compile(p, re.IGNORECASE) for p in (
    r"^(?:final\s+|architecture\s+|design\s+)?decision\s*(?:made)?\s*[:\-–—]\s*(?P<body>.{8,})",
    r"^decided\s*:\s*(?P<body>.{8,})",
    r"\bwe(?:'ve|\s+have)?\s+(?:just\s+|finally\s+|now\s+)?(?:decided|agreed|settled on|opted)\b(?P<body>.{6,})",
    r"\bwe(?:'ve|\s+have)?\s+(?:chosen|picked)\b(?P<body>.{6,})",
    r"\bwe\s+chose\b(?P<body>.{6,})",
    r"\bthe decision (?:is|was)\b(?P<body>.{6,})",
    r"\b(?:let's|let us|lets)\s+(?:switch|go with|stick with|standardi[sz]e on|move over to|migrate)\b(?P<body>.{4,})",
    r"\bwe(?:'re|\s+are|'ll|\s+will)\s+(?:switching|going with|go with|standardi[sz]ing on|sticking with|migrating)\b(?P<body>.{4,})",
    r"\bwe\s+(?:switched|moved|migrated)\s+(?:to|from|over)\b(?P<body>.{4,})",
)]  # fmt: skip
_USER_DECISION = [re.compile(p, re.IGNORECASE) for p in (
    r"^i(?:'ve|\s+have)?\s+(?:decided|chosen|settled on)\b(?P<body>.{6,})",
)]  # fmt: skip
# Plans rather than decisions unless a reason or an alternative is given with them.
_WEAK_DECISION = re.compile(r"\b(?:let's|let us|we'll|we will|we should)\s+(?:use|drop|replace|adopt|move to|keep)\b"
                            r"(?P<body>.{4,})", re.IGNORECASE)  # fmt: skip
_REASON = re.compile(r"\b(?:because|since|instead of|rather than|as it|so that|due to)\b", re.IGNORECASE)
_LESSON = [re.compile(p, re.IGNORECASE) for p in (
    r"^(?:lessons?(?:\s+learned)?|note to self|takeaway|key takeaway|til|gotcha|rule of thumb|pitfall)\s*[:\-–—]\s*(?P<body>.{8,})",
    r"\b(?:lessons? learned|note to self|the lesson(?: here)? is|the takeaway is|key takeaway)\s*[:,\-–—]?\s*(?P<body>.{8,})",
    r"(?:^|[.;]\s+|\bplease\s+|\band\s+)remember(?:\s+that|:)\s*(?P<body>.{8,})",
    r"\b(?:going forward|from now on|in (?:the )?future|next time|in this (?:repo|project|codebase))\s*,?\s*"
    r"(?:we\s+|you\s+|i\s+)?(?:should\s+|must\s+|need to\s+)?(?P<body>(?:always|never|make sure|don't|do not|avoid)\b.{6,})",
    r"^(?P<body>(?:always|never)\s+\w+.{6,}\b(?:before|after|when|unless|otherwise|or else|first)\b.*)",
)]  # fmt: skip
_NOT_STATED = re.compile(r"\?\s*$|^(?:if|should|could|would|shall|whether|maybe|perhaps|do you|did you|can you|"
                         r"are you|what|why|how|which)\b", re.IGNORECASE)  # fmt: skip
_NEGATED = re.compile(r"\b(?:not|n't|never|yet to|undecided|no longer sure)\b[^.]{0,20}\b(?:decid|chose|choos|switch|agree)",
                      re.IGNORECASE)  # fmt: skip
_MARKUP = re.compile(r"\*\*|__|`|^#+\s*|^\s*(?:[-*+>]|\d+[.)])\s+")
_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(`*])")


def sentences(text: str) -> list[str]:
    out: list[str] = []
    in_code = False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        clean = _MARKUP.sub("", line.strip()).strip()
        clean = _MARKUP.sub("", clean).strip()
        if clean:
            out.extend(s.strip() for s in _SPLIT.split(clean) if s.strip())
    return out


def _split_reason(sentence: str) -> tuple[str, str | None]:
    match = re.search(r"\s*(?:,\s*)?\b(because|since|as it|due to)\b\s*", sentence, re.IGNORECASE)
    if match and match.start() > 8:
        return sentence[: match.start()].rstrip(" ,;:-"), sentence[match.end() :].rstrip(" .") or None
    return sentence, None


def _content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9][a-z0-9_.-]{2,}", text.lower())} - _STOP


_STOP = frozenset(["the", "and", "that", "this", "with", "for", "from", "are", "was", "were", "will", "have", "has", "use", "using", "because", "since", "into", "our", "your", "its", "it's", "not", "but", "all", "any", "can", "should", "would", "could", "then", "than", "them", "they", "their", "there", "here", "what", "when", "decided", "decision", "lesson", "learned", "remember", "always", "never", "let's", "we've", "we'll"])  # fmt: skip


def statement_kind(utterance: Utterance, sentence: str) -> str | None:
    """``decision``, ``lesson`` or None for one sentence of what the user or the agent said."""
    if len(sentence) < 12 or _NOT_STATED.search(sentence):
        return None
    if any(p.search(sentence) for p in _LESSON):
        return "lesson"
    if _NEGATED.search(sentence):
        return None
    if any(p.search(sentence) for p in _STRONG_DECISION):
        return "decision"
    if utterance.role == "user" and any(p.search(sentence) for p in _USER_DECISION):
        return "decision"
    if _WEAK_DECISION.search(sentence) and _REASON.search(sentence):
        return "decision"
    return None


def statements(utterances: list[Utterance]) -> list[Candidate]:
    found: list[Candidate] = []
    kept: list[tuple[str, set[str]]] = []
    for utterance in utterances:
        for sentence in sentences(utterance.text):
            kind = statement_kind(utterance, sentence)
            if kind is None:
                continue
            sentence = _cut(sentence, SENTENCE_LIMIT)
            words = _content_words(sentence)
            # The agent repeating what the user just said (or itself) is one statement, the first.
            if any(k == kind and words and len(words & w) / len(words | w) >= 0.5 for k, w in kept):
                continue
            kept.append((kind, words))
            span = (utterance.line, utterance.line)
            if kind == "decision":
                decision, reason = _split_reason(_strip_label(sentence))
                fields: dict[str, Any] = {"decision": decision, "rationale": reason or ""}
                found.append(Candidate("decision", fields, sentence, span))
            else:
                rule = _strip_label(_from_lesson_cue(sentence))
                found.append(Candidate("lesson", {"rule": rule, "situation": f"stated by the {utterance.role}"},
                                       sentence, span))  # fmt: skip
    return found


def _from_lesson_cue(sentence: str) -> str:
    """The sentence from its lesson cue on: "Great. remember that X" is the rule "remember that X"."""
    starts = [m.start() for p in _LESSON if (m := p.search(sentence))]
    start = min(starts) if starts else 0
    return sentence[start:].lstrip(" .;,:-") or sentence


def _strip_label(sentence: str) -> str:
    stripped = re.sub(r"^(?:final\s+|architecture\s+|design\s+)?(?:decision|decided|lessons?(?:\s+learned)?|note to self|"
                      r"takeaway|key takeaway|til|gotcha|rule of thumb|pitfall)\s*[:\-–—]\s*", "", sentence,
                      flags=re.IGNORECASE)  # fmt: skip
    return stripped[:1].upper() + stripped[1:] if stripped else sentence


# -- what the session touched ----------------------------------------------------------------------
@dataclass
class Touched:
    """Files edited and read and commands run, accumulated over a session's reads."""

    edited: list[str] = field(default_factory=list)
    read: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    failures: int = 0
    first_line: int = 0
    last_line: int = 0

    def add(self, calls: list[ToolCall], cwd: str | None) -> bool:
        before = (len(self.edited), len(self.read), len(self.commands), self.failures)
        for call in calls:
            if call.result is None:
                continue
            bad = failed(call)
            self.failures += bad
            path = call.input.get("file_path") or call.input.get("notebook_path")
            if isinstance(path, str) and path and not bad:
                name = _relative(path, cwd)
                target = self.edited if call.name in _EDIT_TOOLS else self.read if call.name in _READ_TOOLS else None
                if target is not None and name not in target and name not in self.edited:
                    target.append(name)
                    if target is self.edited and name in self.read:
                        self.read.remove(name)
            if call.name == "Bash":
                command = _cut(scrubbed(call.command.split("\n", 1)[0]), 120)
                if command not in self.commands:
                    self.commands.append(command)
            self.first_line = self.first_line or call.line
            self.last_line = max(self.last_line, call.result_line or call.line)
        return (len(self.edited), len(self.read), len(self.commands), self.failures) != before

    @property
    def worth_keeping(self) -> bool:
        """A session that changed files, hit failures or ran real work (not only reading around)."""
        real = [c for c in self.commands if program(c).split(" ")[0] not in _TRIVIAL_PROGRAMS]
        return bool(self.edited) or self.failures > 0 or len(real) >= 3

    def text(self, session_id: str, project: str) -> str:
        parts = [f"Session {session_id[:8]} in {project}"]
        if self.edited:
            parts.append("edited " + ", ".join(self.edited[:15]) + (" …" if len(self.edited) > 15 else ""))
        if self.read:
            parts.append("read " + ", ".join(self.read[:10]) + (" …" if len(self.read) > 10 else ""))
        if self.commands:
            shown = "; ".join(f"`{c}`" for c in self.commands[:10])
            parts.append(f"ran {len(self.commands)} command(s): {shown}" + (" …" if len(self.commands) > 10 else ""))
        if self.failures:
            parts.append(f"{self.failures} failed tool call(s)")
        return "; ".join(parts)

    def to_state(self) -> dict[str, Any]:
        return {"edited": self.edited, "read": self.read, "commands": self.commands, "failures": self.failures,
                "first_line": self.first_line, "last_line": self.last_line}  # fmt: skip

    @classmethod
    def from_state(cls, value: Any) -> Touched:
        if not isinstance(value, dict):
            return cls()
        def strings(key: str) -> list[str]:
            return [v for v in value.get(key) or [] if isinstance(v, str)]

        def number(key: str) -> int:
            found = value.get(key)
            return found if isinstance(found, int) and not isinstance(found, bool) else 0

        return cls(strings("edited"), strings("read"), strings("commands"), number("failures"), number("first_line"),
                   number("last_line"))  # fmt: skip


def scrubbed(text: str) -> str:
    """``text`` through the secret scrubber: what the state file keeps is scrubbed like the records."""
    from lore.scrub import scrub

    return scrub(text).text


def _relative(path: str, cwd: str | None) -> str:
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path


def extract(chunk: Chunk) -> list[Candidate]:
    """Failures and stated decisions and lessons of one chunk (the observation is the caller's: it spans reads)."""
    return failures([c for c in chunk.calls if c.result is not None], chunk.cwd) + statements(chunk.utterances)
