"""lore's OpenCode plugin: the JavaScript file ``lore hook install --agent opencode`` writes, and reads back.

OpenCode has no command hooks; it loads JavaScript plugins from
``~/.config/opencode/plugins/`` (``$XDG_CONFIG_HOME``) and a project's
``.opencode/plugins/`` (opencode.ai/docs/plugins). A plugin's ``chat.message``
hook gets the user's message and its parts before they are saved and sent to the
model (``@opencode-ai/plugin``, ``Hooks["chat.message"]``); lore's pushes its
context there as *synthetic* text parts, after the user's text, which OpenCode
sends to the model and keeps in the session without showing them as typed by the
user. The plugin only runs lore's own hooks (``lore hook prompt --agent opencode``
and, for the first prompt of a session in this OpenCode process, ``lore hook
session-start``), so what is searched, the budget, the deadline and the opt-outs
are lore's, as for every other agent.

It never blocks the prompt: lore is given ``TIMEOUT_MS`` (killed past it); a
missing ``lore``, a non-zero exit, output that is not lore's hook JSON, or any
exception leaves the message as it was. It imports only Node built-ins (OpenCode
runs plugins on Bun), so it needs no ``npm install``.
"""

from __future__ import annotations

import json
import re
import shlex

MARKER = "// written by `lore hook install --agent opencode`; `lore hook uninstall --agent opencode` removes it"

# How long the plugin waits for each lore hook: the prompt hook answers within its own deadline
# (LORE_HOOK_DEADLINE_MS, 400 ms) plus an interpreter start; this is the bound if lore hangs.
TIMEOUT_MS = 5000

_COMMAND = re.compile(r"^const LORE = (\[.*\])$", re.MULTILINE)

TEMPLATE = """{marker}
// lore for OpenCode: every prompt gets the team's relevant memories (`lore hook prompt`), the
// first prompt of a session its handoff and lessons (`lore hook session-start`), as synthetic
// text parts after the user's text. docs/agents.md in lore says what it does and why.
import {{ spawn }} from "node:child_process"
import {{ randomBytes }} from "node:crypto"

const LORE = {command}
const TIMEOUT_MS = {timeout}

// Run one lore hook with its JSON on stdin; its additionalContext, or "" whatever goes wrong.
function lore(subcommand, payload) {{
  return new Promise((resolve) => {{
    let out = ""
    let child
    try {{
      child = spawn(LORE[0], [...LORE.slice(1), "hook", subcommand, "--agent", "opencode"], {{
        stdio: ["pipe", "pipe", "ignore"],
      }})
    }} catch {{
      return resolve("")
    }}
    const timer = setTimeout(() => {{
      child.kill("SIGKILL")
      resolve("")
    }}, TIMEOUT_MS)
    child.on("error", () => {{
      clearTimeout(timer)
      resolve("")
    }})
    child.stdout.on("data", (chunk) => {{
      out += chunk
    }})
    child.on("close", (code) => {{
      clearTimeout(timer)
      try {{
        const context = code === 0 && out.trim() ? JSON.parse(out).hookSpecificOutput?.additionalContext : ""
        resolve(typeof context === "string" ? context : "")
      }} catch {{
        resolve("")
      }}
    }})
    child.stdin.on("error", () => {{}})
    child.stdin.end(JSON.stringify(payload))
  }})
}}

// `opencode run "a question"` sends each argument that holds a space wrapped in double quotes
// (inner ones escaped); lore's query syntax would read the whole prompt as one phrase.
function unquoted(text) {{
  const quoted = /^"((?:[^"\\\\]|\\\\.)*)"$/s.exec(text.trim())
  return quoted ? quoted[1].replace(/\\\\"/g, '"') : text
}}

// A part id in OpenCode's own form ("prt_", 6 bytes of time and counter in hex, 14 base62
// characters): ids sort by time, so lore's parts come after the user's text.
let lastTime = 0
let counter = 0
function partID() {{
  const now = Date.now()
  if (now !== lastTime) {{
    lastTime = now
    counter = 0
  }}
  counter++
  const value = BigInt(now) * 4096n + BigInt(counter)
  let hex = ""
  for (let i = 0; i < 6; i++) hex += Number((value >> BigInt(40 - 8 * i)) & 0xffn).toString(16).padStart(2, "0")
  const chars = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
  let tail = ""
  for (const byte of randomBytes(14)) tail += chars[byte % 62]
  return "prt_" + hex + tail
}}

// Installed both for the user and in a project, the plugin is loaded twice and both copies see
// each message: the first one to see it serves it (message ids, shared by every copy in the process).
const handled = (globalThis.__loreMemoryMessages ??= new Set())

export const LoreMemory = async ({{ directory }}) => {{
  const started = new Set()
  return {{
    "chat.message": async (input, output) => {{
      try {{
        if (handled.has(output.message.id)) return
        handled.add(output.message.id)
        if (handled.size > 1000) handled.delete(handled.values().next().value)
        const prompt = unquoted(
          output.parts
            .filter((part) => part.type === "text" && !part.synthetic && typeof part.text === "string")
            .map((part) => part.text)
            .join("\\n"),
        )
        const first = !started.has(input.sessionID)
        started.add(input.sessionID)
        const event = {{ session_id: input.sessionID, cwd: directory }}
        const [session, context] = await Promise.all([
          first ? lore("session-start", {{ ...event, hook_event_name: "SessionStart", source: "startup" }}) : "",
          prompt.trim() ? lore("prompt", {{ ...event, hook_event_name: "chat.message", prompt }}) : "",
        ])
        for (const text of [session, context]) {{
          if (!text) continue
          output.parts.push({{
            id: partID(),
            sessionID: output.message.sessionID,
            messageID: output.message.id,
            type: "text",
            text,
            synthetic: true,
          }})
        }}
      }} catch {{
        // the prompt goes through without lore's context
      }}
    }},
  }}
}}
"""


def render(command_prefix: str) -> str:
    """The plugin for ``command_prefix`` (the ``lore`` the hooks run: an absolute path, or ``lore`` on PATH)."""
    return TEMPLATE.format(marker=MARKER, command=json.dumps(shlex.split(command_prefix)), timeout=TIMEOUT_MS)


def command(text: str) -> str | None:
    """The lore command a plugin of lore's runs (``LORE`` joined), None if it names none."""
    found = _COMMAND.search(text)
    if found is None:
        return None
    try:
        words = json.loads(found.group(1))
    except ValueError:
        return None
    if not isinstance(words, list) or not words or not all(isinstance(word, str) for word in words):
        return None
    return shlex.join([*words, "hook", "prompt", "--agent", "opencode"])
