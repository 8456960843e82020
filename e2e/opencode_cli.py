"""End to end with the real OpenCode CLI: `lore hook install --agent opencode` as a user runs it.

Run by ``.ci/run`` as its own step, after e2e/codex_cli.py; it FAILS, never skips,
when npm, the CLI or strace is unavailable. It ``npm install``s a pinned
``opencode-ai`` into a temporary prefix (or ``$LORE_E2E_NPM_PREFIX_OPENCODE``),
serves a scripted Anthropic Messages API on 127.0.0.1 (``fake_anthropic``) behind
a custom provider in the user's own ``opencode.json`` (with autoupdate and sharing
off), lets ``lore hook install --agent opencode`` add lore's plugin
(``plugins/lore.js``) and MCP server (``mcp.lore``) and runs ``opencode run``. It
checks that:

* the plugin's context (the prompt hook's ``<lore-memory>`` block with the matching
  record) reaches the request sent to the model, after the user's text, and the
  session-start block (the handoff) too;
* a scripted ``tool_use`` of lore's ``search`` MCP tool (``lore_search``) is
  answered by a ``tool_result`` holding lore's result, read from the store the
  hooks use;
* a trivial prompt gets no block; a corrupt index, a missing data dir or a
  ``lore`` that is gone never block the prompt;
* nothing leaves the machine: under ``strace``, every connection OpenCode opens
  is to 127.0.0.1 (no models.dev, update or share request, no DNS look-up);
* the user's own settings survived the install.

OpenCode starts without the internet with ``OPENCODE_DISABLE_MODELS_FETCH=1``
(else it looks models.opencode.ai up on every start), ``OPENCODE_DISABLE_AUTOUPDATE=1``
and ``"autoupdate": false`` / ``"share": "disabled"`` in its config; and it
``npm install``s ``@opencode-ai/plugin`` into its config directory in the background
at every start until that succeeds, which the test points at the fake API
(``npm_config_registry``, where it fails harmlessly): lore's plugin imports nothing
from npm.

Usage: ``python e2e/opencode_cli.py [--keep]`` from the project's virtualenv.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    PROMPT,
    PROMPT_BLOCK,
    TOOL_PROMPT,
    Agent,
    Failed,
    Run,
    check,
    corrupt_index_never_blocks,
    demo_prompts_inject_answers,
    missing_data_dir_never_blocks,
    npm_install,
    run_e2e,
    session_start_arrives,
    trivial_prompt_gets_nothing,
)
from fake_anthropic import DEFAULT_TEXT, FakeAnthropic, Recorded, Reply, last_user_text, request_text

OPENCODE_VERSION = "1.18.33"
PACKAGE = f"opencode-ai@{OPENCODE_VERSION}"
RUN_TIMEOUT_S = 240
SEARCH_TOOL = "lore_search"  # OpenCode names an MCP tool <server>_<tool>
OPENCODE_ENV = {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_SHARE": "1",
                "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "NO_COLOR": "1"}  # fmt: skip


def user_config(api_url: str) -> dict[str, Any]:
    """The user's own opencode.json: the fake model as a custom provider, updates and sharing off."""
    return {
        "$schema": "https://opencode.ai/config.json", "autoupdate": False, "share": "disabled",
        "model": "fake/claude-fake",
        "provider": {"fake": {"npm": "@ai-sdk/anthropic", "name": "Fake Anthropic",
                              "options": {"baseURL": api_url + "/v1", "apiKey": "fake"},
                              "models": {"claude-fake": {"name": "Claude Fake", "tool_call": True,
                                                         "limit": {"context": 200000, "output": 8192}}}}},
    }  # fmt: skip


class OpenCodeRun(Run):
    def __init__(self, root: Path, opencode: Path) -> None:
        super().__init__(root, OPENCODE_ENV)
        self.opencode = opencode
        self.config_dir = self.home / ".config" / "opencode"

    def opencode_run(self, api: FakeAnthropic, prompt: str, env: dict[str, str] | None = None,
                     wrap: list[str] | None = None) -> tuple[subprocess.CompletedProcess[str], float]:  # fmt: skip
        started = time.time()
        # OpenCode's background `npm install @opencode-ai/plugin` goes to the fake API (a 404), not the registry.
        done = subprocess.run([*(wrap or []), str(self.opencode), "run", prompt], cwd=self.work, capture_output=True,
                              text=True, timeout=RUN_TIMEOUT_S,
                              env={**self.base_env, "npm_config_registry": api.url + "/npm/", **(env or {})})  # fmt: skip
        return done, started


def main_requests(api: FakeAnthropic) -> list[Recorded]:
    """The agent's requests (those that offer tools), not the title generator's."""
    return [r for r in api.messages() if r.body.get("tools")]


def main_request(api: FakeAnthropic, prompt: str) -> Recorded:
    matching = [r for r in main_requests(api) if prompt in request_text(r.body)]
    check(matching, f"no request to the model carried the prompt {prompt[:40]!r} (saw {len(api.messages())})")
    return matching[0]


def script(body: dict[str, Any]) -> Reply | None:
    text = request_text(body)
    if "TOOLCHECK" in text and "tool_result" in last_user_text(body):
        return Reply(text="Lore says: PgBouncer in transaction mode.")
    if TOOL_PROMPT in text and body.get("tools"):
        return Reply(tool_name=SEARCH_TOOL, tool_input={"query": "Postgres connection pooling PgBouncer"})
    return None


def install(run: OpenCodeRun, api: FakeAnthropic) -> str:
    config_path = run.config_dir / "opencode.json"
    config_path.parent.mkdir(parents=True, exist_ok=True)
    own = user_config(api.url)
    config_path.write_text(json.dumps(own, indent=2) + "\n")
    out = run.lore_cli("hook", "install", "--agent", "opencode")
    config = json.loads(config_path.read_text())
    check(config["mcp"]["lore"]["command"][1:] == ["mcp"], f"MCP server not registered: {config.get('mcp')}")
    check(all(config[key] == value for key, value in own.items()), "the user's own settings changed")
    plugin = run.config_dir / "plugins" / "lore.js"
    check(plugin.exists() and "lore hook install --agent opencode" in plugin.read_text(), "the plugin is not written")
    return f"{len(out.splitlines())} lines from lore hook install --agent opencode; the user's settings kept"


def user_message(body: dict[str, Any], prompt: str) -> list[str]:
    """The text blocks of the user message that carries ``prompt``, in order."""
    for message in body.get("messages") or []:
        content = message.get("content")
        blocks = [c.get("text", "") for c in content if isinstance(c, dict) and c.get("type") == "text"] \
            if isinstance(content, list) else [str(content)]  # fmt: skip
        if message.get("role") == "user" and any(prompt in block for block in blocks):
            return blocks
    return []


def connections(trace: Path) -> list[str]:
    """``address:port`` of every internet-family connect() in an strace log."""
    found = []
    for line in trace.read_text(errors="replace").splitlines():
        if "connect(" not in line or "AF_INET" not in line:
            continue
        port = re.search(r"sin6?_port=htons\((\d+)\)", line)
        address = re.search(r'inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)"', line)
        if port and address:
            found.append(f"{address.group(1) or address.group(2)}:{port.group(1)}")
    return found


def scenarios(run: OpenCodeRun, api: FakeAnthropic, ids: dict[str, str]) -> None:
    agent = Agent("opencode", run, lambda prompt, env: run.opencode_run(api, prompt, env), api.reset,
                  lambda prompt: main_request(api, prompt), request_text, DEFAULT_TEXT)  # fmt: skip

    def prompt_gets_context() -> str:
        request = agent.asked(PROMPT).request
        blocks = user_message(request.body, PROMPT)
        check(blocks and PROMPT in blocks[0], f"the user's text is not first in its message: {blocks[:1]!r}")
        ours = [block for block in blocks[1:] if PROMPT_BLOCK in block]
        check(ours and "<lore-memory" in ours[0], "the plugin's prompt block is not in the user's message")
        check(ids["decision"] in ours[0], "the matching record is not in it")
        run.figures["prompt block chars"] = len(ours[0])
        return f"{ids['decision']} in a part after the prompt ({len(ours[0]):,} chars); {len(blocks)} text parts"

    def tool_use_gets_lore_results() -> str:
        done, _ = agent.ask(TOOL_PROMPT, None)
        check(done.returncode == 0, f"opencode exited {done.returncode}: {done.stderr[-800:]}")
        offered = sorted({t.get("name") for r in main_requests(api) for t in r.body.get("tools") or []})
        check(SEARCH_TOOL in offered, f"{SEARCH_TOOL} was not offered to the model (tools: {offered[:30]})")
        results = [block for r in api.messages() for m in r.body.get("messages") or [] if m.get("role") == "user"
                   for block in (m.get("content") if isinstance(m.get("content"), list) else [])
                   if isinstance(block, dict) and block.get("type") == "tool_result"]  # fmt: skip
        check(results, f"no tool_result reached the model; stdout {done.stdout[-300:]!r}")
        payload = json.dumps(results[-1], ensure_ascii=False)
        check(ids["decision"] in payload and "PgBouncer" in payload, f"lore's result is not in it: {payload[:300]}")
        check("Lore says" in done.stdout, f"the final turn did not happen: {done.stdout[-300:]!r}")
        run.figures["mcp search tool_result chars"] = len(payload)
        return f"tool_result holds {ids['decision']} ({len(payload):,} chars), from the store the hooks use"

    def missing_lore_never_blocks() -> str:
        plugin = run.config_dir / "plugins" / "lore.js"
        kept = plugin.read_text()
        plugin.write_text(re.sub(r"^const LORE = .*$", 'const LORE = ["/nonexistent/bin/lore"]', kept, flags=re.M))
        try:
            request = agent.asked(PROMPT).request
        finally:
            plugin.write_text(kept)
        check("lore-memory" not in request_text(request.body), "context arrived without a lore to run")
        return "answered; nothing injected"

    def nothing_leaves_the_machine() -> str:
        strace = shutil.which("strace")
        if strace is None:
            raise Failed("strace is not installed: the offline check cannot run (CI installs it)")
        trace = run.root / "opencode.strace"
        api.reset()
        done, _ = run.opencode_run(api, PROMPT, wrap=[strace, "-f", "-qq", "-e", "trace=connect", "-o", str(trace)])
        check(done.returncode == 0 and DEFAULT_TEXT in done.stdout, f"opencode under strace: {done.stderr[-500:]}")
        seen = connections(trace)
        away = [address for address in seen if not address.startswith(("127.0.0.1:", "::1:"))]
        check(not away, f"connections that leave the machine: {sorted(set(away))}")
        check(seen, "strace saw no connection at all (not even to the fake API): the check proves nothing")
        return f"{len(seen)} connections, all to 127.0.0.1 (the fake API and its npm stand-in)"

    # A helper is usually warm by the time a person types (a session start spawned it):
    # start it the way `lore server start` does, so the checks below do not depend on
    # whether a cold prompt hook fits its 400 ms deadline on a busy CI machine.
    run.lore_cli("server", "start")
    run.step("chat.message block reaches the model", prompt_gets_context)
    run.step("session-start context arrives", lambda: session_start_arrives(agent))
    run.step("tool_use of lore's search gets lore's results", tool_use_gets_lore_results)
    run.step("trivial prompt gets nothing", lambda: trivial_prompt_gets_nothing(agent))
    run.step("nothing leaves the machine", nothing_leaves_the_machine)
    run.step("a lore that is gone never blocks", missing_lore_never_blocks)
    run.step("missing data dir never blocks", lambda: missing_data_dir_never_blocks(agent))
    run.step("corrupt index never blocks", lambda: corrupt_index_never_blocks(agent))
    demo_prompts_inject_answers(agent)  # the README's question and others, over the demo store


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    options = parser.parse_args()

    def start(root: Path, prefix: Path) -> OpenCodeRun:
        # The package's postinstall puts the platform's binary in place: scripts must run.
        return OpenCodeRun(root, npm_install(prefix, PACKAGE, "opencode", OPENCODE_VERSION))

    def body(run: OpenCodeRun) -> None:
        ids = run.seed()
        with FakeAnthropic(script) as api:
            print(f"PASS  set-up: {install(run, api)}", flush=True)
            scenarios(run, api, ids)
        if run.figures:
            print("figures:", json.dumps(run.figures), flush=True)

    return run_e2e("opencode", "LORE_E2E_NPM_PREFIX_OPENCODE", start, body, options.keep)


if __name__ == "__main__":
    raise SystemExit(main())
