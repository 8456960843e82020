"""End to end with the real OpenAI Codex CLI: `lore hook install --agent codex` as a user runs it.

Run by ``.ci/run`` as its own step, after e2e/gemini_cli.py; it FAILS, never skips,
when npm or the CLI is unavailable. It ``npm install``s a pinned ``@openai/codex``
into a temporary prefix (or ``$LORE_E2E_NPM_PREFIX_CODEX``), serves a scripted
OpenAI Responses API on 127.0.0.1 (``fake_openai.FakeOpenAI``), writes the user's
own ``config.toml`` (a custom model provider pointing at the fake, update checks,
analytics, telemetry, plugins and web search off), lets ``lore hook install
--agent codex`` add lore's hooks (``hooks.json``) and MCP server, trusts the hooks
the way a user does (see ``trust_hooks``) and runs ``codex exec`` (every run with
``--strict-config``, so a key Codex does not know fails the run). It checks that:

* untrusted, lore's hooks do not run (lore does not trust them itself); trusted,
  they do;
* the UserPromptSubmit hook's ``<lore-memory>`` block with the matching record
  reaches the request sent to the model, and the SessionStart block (the handoff)
  too;
* a scripted ``tool_search_call`` finds lore's MCP tools (Codex defers MCP tools
  behind its tool search) and a scripted ``function_call`` of lore's ``search`` is
  answered by a ``function_call_output`` holding lore's result, read from the
  store the hooks use (the MCP server gets a minimal environment from Codex);
* a trivial prompt gets no block; a corrupt index or a missing data dir never
  block the prompt;
* the user's own config.toml settings survived the install.

Usage: ``python e2e/codex_cli.py [--keep]`` from the project's virtualenv.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import tomllib
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
from fake_openai import DEFAULT_TEXT, FakeOpenAI, Recorded, Reply, function_outputs, request_text

CODEX_VERSION = "0.169.0"
PACKAGE = f"@openai/codex@{CODEX_VERSION}"
RUN_TIMEOUT_S = 180
# A model Codex knows (its bundled catalog): with it Codex offers MCP tools through
# its client-side tool search, as in a real session; an unknown name gets fallback
# metadata and no MCP tools at all.
MODEL = "gpt-5.5"
PROVIDER = "fake"
KEY_ENV = "FAKE_OPENAI_API_KEY"
SEARCH_NAMESPACE = "mcp__lore"
# What the user has in config.toml before lore is installed. The provider's
# base_url is filled in with the fake's port. No mcp_optional_startup_grace_ms: Codex
# waits its default 1 s for optional MCP servers, and `lore mcp` answers the handshake
# within it (the install remembered the MCP SDK's answers), so the first step of each
# run has lore's tools.
USER_CONFIG = """# my Codex settings
model = "{model}"
model_provider = "{provider}"
check_for_update_on_startup = false
web_search = "disabled"

[model_providers.{provider}]
name = "Local fake Responses API"
base_url = "{base_url}"
wire_api = "responses"
env_key = "{key_env}"

[analytics]
enabled = false

[otel]
exporter = "none"
log_user_prompt = false

[features]
plugins = false
"""
OFFLINE_SIGNS = ("error sending request for url", "Could not resolve host", "failed to lookup address",
                 "dns error")  # fmt: skip
CODEX_ENV = {KEY_ENV: "fake", "NO_COLOR": "1", "RUST_LOG": "warn"}


class CodexRun(Run):
    def __init__(self, root: Path, codex: Path) -> None:
        self.codex_home = root / "home" / ".codex"
        super().__init__(root, {**CODEX_ENV, "CODEX_HOME": str(self.codex_home)})
        self.codex = codex

    def codex_exec(self, prompt: str, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], float]:
        started = time.time()
        done = subprocess.run([str(self.codex), "exec", "--strict-config", "--skip-git-repo-check", "--color", "never",
                               prompt], cwd=self.work, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S, env={**self.base_env, **(env or {})})  # fmt: skip
        return done, started


def main_request(api: FakeOpenAI, prompt: str) -> Recorded:
    matching = [r for r in api.responses() if prompt in request_text(r.body)]
    check(matching, f"no request to the model carried the prompt {prompt[:40]!r} (saw {len(api.responses())})")
    return matching[0]


def input_types(body: dict[str, Any]) -> list[str]:
    return [str(item.get("type")) for item in body.get("input") or [] if isinstance(item, dict)]


def found_tools(body: dict[str, Any]) -> list[str]:
    """``namespace.name`` of every tool a ``tool_search_output`` in the request made available."""
    names = []
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("type") == "tool_search_output":
            for tool in item.get("tools") or []:
                inner = tool.get("tools") if tool.get("type") == "namespace" else [tool]
                names += [f"{tool.get('name')}.{t.get('name')}" for t in inner or []]
    return names


def script(body: dict[str, Any]) -> Reply | None:
    """TOOLCHECK turns: search the deferred tools, call lore's search, then answer."""
    text = request_text(body)
    if TOOL_PROMPT not in text:
        return None
    if function_outputs(body):
        return Reply(text="Lore says: PgBouncer in transaction mode.")
    if f"{SEARCH_NAMESPACE}.search" in found_tools(body):
        return Reply(function_name="search", namespace=SEARCH_NAMESPACE,
                     function_args={"query": "Postgres connection pooling PgBouncer"})  # fmt: skip
    if "tool_search_output" in input_types(body):
        return Reply(text="NO LORE TOOLS FOUND")
    return Reply(tool_search="lore memory search decisions")


def write_user_config(run: CodexRun, api: FakeOpenAI) -> str:
    text = USER_CONFIG.format(model=MODEL, provider=PROVIDER, base_url=f"{api.url}/v1", key_env=KEY_ENV)
    run.codex_home.mkdir(parents=True, exist_ok=True)
    (run.codex_home / "config.toml").write_text(text)
    return text


def install(run: CodexRun, user_config: str) -> str:
    out = run.lore_cli("hook", "install", "--agent", "codex")
    hooks = json.loads((run.codex_home / "hooks.json").read_text())["hooks"]
    check(set(hooks) == {"UserPromptSubmit", "SessionStart", "PreCompact", "Stop"}, f"hooks not installed: {hooks}")
    config = tomllib.loads((run.codex_home / "config.toml").read_text())
    lore = config.get("mcp_servers", {}).get("lore", {})
    check(lore.get("args") == ["mcp"] and "LORE_DATA_DIR" in lore.get("env_vars", []),
          f"MCP server not registered as expected: {lore}")  # fmt: skip
    before = tomllib.loads(user_config)
    check(all(config.get(key) == value for key, value in before.items()), "the user's own settings changed")
    check((run.codex_home / "config.toml").read_text().startswith(user_config), "the user's config.toml was rewritten")
    check("hooks" not in config, "lore marked its own hooks trusted")
    return f"{len(out.splitlines())} lines from lore hook install --agent codex; the user's config.toml kept as written"


class AppServer:
    """``codex app-server`` over stdio (JSON-RPC, one message per line), as an IDE drives Codex."""

    def __init__(self, run: CodexRun) -> None:
        self.process = subprocess.Popen([str(run.codex), "app-server"], cwd=run.work, env=run.base_env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        text=True)  # fmt: skip
        self.ids = 0

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.ids += 1
        self.process.stdin.write(json.dumps({"id": self.ids, "method": method, "params": params}) + "\n")
        self.process.stdin.flush()
        while line := self.process.stdout.readline():
            message = json.loads(line)
            if message.get("id") == self.ids:
                if "error" in message:
                    raise Failed(f"app-server {method}: {message['error']}")
                result: dict[str, Any] = message["result"]
                return result
        raise Failed(f"codex app-server closed during {method}")

    def __enter__(self) -> AppServer:
        self.call("initialize", {"clientInfo": {"name": "lore-e2e", "version": "0"}})
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"method": "initialized"}) + "\n")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            self.process.wait(timeout=10)


def lore_hooks(server: AppServer, run: CodexRun) -> list[dict[str, Any]]:
    listed = server.call("hooks/list", {"cwds": [str(run.work)]})["data"][0]
    check(not listed["errors"] and not listed["warnings"], f"Codex rejected hooks.json: {listed}")
    return [hook for hook in listed["hooks"] if " hook " in hook.get("command", "") and "--agent codex" in hook["command"]]


def trust_hooks(run: CodexRun) -> str:
    """What the user does in Codex's /hooks panel, through the same API: trust each of lore's hooks.

    Codex keeps the trust in config.toml as ``[hooks.state."<key>"] trusted_hash``,
    the hash Codex computed of the hook it listed; the TUI's /hooks and an IDE write
    it through ``config/batchWrite``. Codex itself lists the hooks and computes
    the hashes here; nothing is guessed.
    """
    with AppServer(run) as server:
        hooks = lore_hooks(server, run)
        events = sorted(hook["eventName"] for hook in hooks)
        check(events == ["preCompact", "sessionStart", "stop", "userPromptSubmit"], f"Codex lists lore's hooks as {events}")
        check({hook["trustStatus"] for hook in hooks} == {"untrusted"}, "lore's hooks were trusted before the user did")
        timeouts = {hook["eventName"]: hook["timeoutSec"] for hook in hooks}
        check(timeouts["userPromptSubmit"] == 5, f"the prompt hook's timeout was read as {timeouts}")
        state = {hook["key"]: {"trusted_hash": hook["currentHash"]} for hook in hooks}
        server.call("config/batchWrite", {"edits": [{"keyPath": "hooks.state", "mergeStrategy": "upsert", "value": state}]})
        after = lore_hooks(server, run)
        check({hook["trustStatus"] for hook in after} == {"trusted"}, f"still not trusted: {after}")
    return f"Codex lists {len(hooks)} lore hooks ({', '.join(events)}), timeouts {timeouts}; trusted them"


def scenarios(run: CodexRun, api: FakeOpenAI, ids: dict[str, str]) -> None:
    agent = Agent("codex", run, lambda prompt, env: run.codex_exec(prompt, env=env), api.reset,
                  lambda prompt: main_request(api, prompt), request_text, DEFAULT_TEXT)  # fmt: skip

    def untrusted_hooks_do_not_run() -> str:
        done, request, _ = agent.asked(PROMPT)
        text = request_text(request.body)
        check("lore-memory" not in text, "an untrusted hook's context reached the model")
        check("hook: UserPromptSubmit" not in done.stderr, "Codex ran an untrusted hook")
        # The machine may have no network: a request Codex tried beyond the fake shows up in its log.
        tried = [line for line in done.stderr.splitlines() if any(s in line for s in OFFLINE_SIGNS)]
        check(not tried, f"Codex tried to reach the network: {tried[:3]}")
        return "answered; no hook ran, nothing injected; no request beyond 127.0.0.1 in Codex's log"

    def prompt_gets_context() -> str:
        done, request, _ = agent.asked(PROMPT)
        check("hook: UserPromptSubmit Completed" in done.stderr, f"the prompt hook did not run: {done.stderr[-600:]}")
        text = request_text(request.body)
        check("<lore-memory" in text and PROMPT_BLOCK in text, "the UserPromptSubmit block is not in the request")
        check(ids["decision"] in text, "the matching record is not in it")
        check(request.streamed, "the request was not streamed")
        return f"{ids['decision']} in the request ({len(text):,} chars sent)"

    def function_call_gets_lore_results() -> str:
        api.reset()
        done, _ = run.codex_exec(TOOL_PROMPT)
        check(done.returncode == 0, f"codex exited {done.returncode}: {done.stderr[-800:]}")
        found = [name for r in api.responses() for name in found_tools(r.body)]
        check(f"{SEARCH_NAMESPACE}.search" in found, f"tool search did not find lore's search (found {found[:12]})")
        outputs = [o for r in api.responses() for o in function_outputs(r.body)]
        check(outputs, f"no function_call_output reached the model; stdout {done.stdout[-300:]!r}")
        payload = json.dumps(outputs[-1], ensure_ascii=False)
        check(ids["decision"] in payload and "PgBouncer" in payload, f"lore's result is not in it: {payload[:400]}")
        check("Lore says" in done.stdout, f"the final turn did not happen: {done.stdout[-300:]!r}")
        run.figures["mcp search function_call_output chars"] = len(payload)
        return f"function_call_output holds {ids['decision']} ({len(payload):,} chars)"

    run.step("untrusted hooks do not run", untrusted_hooks_do_not_run)
    run.step("the user trusts lore's hooks (Codex's hooks/list + config/batchWrite)", lambda: trust_hooks(run))
    # A helper is usually warm by the time a person types (a session start spawned it):
    # start it the way `lore server start` does, so the checks below do not depend on
    # whether a cold prompt hook fits its 400 ms deadline on a busy CI machine.
    run.lore_cli("server", "start")
    run.step("UserPromptSubmit block reaches the model", prompt_gets_context)
    run.step("SessionStart context arrives", lambda: session_start_arrives(agent))
    run.step("function_call of lore's search gets lore's results", function_call_gets_lore_results)
    run.step("trivial prompt gets nothing", lambda: trivial_prompt_gets_nothing(agent))
    run.step("missing data dir never blocks", lambda: missing_data_dir_never_blocks(agent))
    run.step("corrupt index never blocks", lambda: corrupt_index_never_blocks(agent))
    demo_prompts_inject_answers(agent)  # the README's question and others, over the demo store
    gets = sorted(set(api.gets))
    if gets:
        run.figures["GET paths asked of the fake"] = gets


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    options = parser.parse_args()

    def start(root: Path, prefix: Path) -> CodexRun:
        return CodexRun(root, npm_install(prefix, PACKAGE, "codex", CODEX_VERSION))

    def body(run: CodexRun) -> None:
        ids = run.seed()
        with FakeOpenAI(script, model=MODEL) as api:
            user_config = write_user_config(run, api)
            print(f"PASS  set-up: {install(run, user_config)}", flush=True)
            scenarios(run, api, ids)
        if run.figures:
            print("figures:", json.dumps(run.figures), flush=True)

    return run_e2e("codex", "LORE_E2E_NPM_PREFIX_CODEX", start, body, options.keep)


if __name__ == "__main__":
    os.environ.setdefault("NO_COLOR", "1")
    raise SystemExit(main())
