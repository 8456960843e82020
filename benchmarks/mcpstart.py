"""`lore mcp`'s start, whole process: spawn to the ``initialize`` reply, to ``tools/list``'s, to the SDK's first.

Clients wait a limited time for a server to start (Codex: 1 s for optional servers,
``mcp_optional_startup_grace_ms``). Each round spawns, interleaved so background load
spreads over them alike: ``python -c pass`` (spawn to exit: the floor), ``lore mcp``
with the handshake answers remembered (every start but the first after an install or
upgrade), and ``lore mcp`` with an empty cache dir (that first start: the MCP SDK
answers once loaded). The harness is the stdio client: it writes ``initialize`` at
spawn, ``notifications/initialized`` and ``tools/list`` on the reply, then ``ping``,
which only the loaded SDK answers; then it ends the server with SIGTERM.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from benchmarks import compile_bytecode
from lore.measure import lore_command, summary

Progress = Callable[[str], None]
REPLY_TIMEOUT_S = 60.0
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "lore-bench", "version": "1"}}}  # fmt: skip


def _quiet(message: str) -> None:
    return None


class _Client:
    """A raw line client on a spawned server's pipes."""

    def __init__(self, command: list[str], env: Mapping[str, str], cwd: Path) -> None:
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, env=dict(env), cwd=cwd)  # fmt: skip
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin, self.stdout = self.process.stdin, self.process.stdout
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.stdout, selectors.EVENT_READ)
        self.pending = b""

    def send(self, *messages: dict[str, Any]) -> None:
        self.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        self.stdin.flush()

    def reply(self, ident: int) -> dict[str, Any]:
        end = time.monotonic() + REPLY_TIMEOUT_S
        while True:
            while b"\n" in self.pending:
                line, self.pending = self.pending.split(b"\n", 1)
                message = json.loads(line)
                if message.get("id") == ident and "method" not in message:
                    return dict(message)
            if not self.selector.select(timeout=max(0.0, end - time.monotonic())):
                raise TimeoutError(f"no reply to request {ident} within {REPLY_TIMEOUT_S} s")
            chunk = os.read(self.stdout.fileno(), 1 << 16)
            if not chunk:
                raise EOFError(f"the server closed stdout before replying to request {ident}")
            self.pending += chunk

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.selector.close()
        self.stdin.close()
        self.stdout.close()


def start_once(command: list[str], env: Mapping[str, str], cwd: Path) -> dict[str, float]:
    """Milliseconds from spawn to each reply: initialize, tools/list and the SDK's first (ping)."""
    started = time.perf_counter()
    client = _Client(command, env, cwd)
    try:
        client.send(INITIALIZE)
        client.reply(1)
        got = {"initialize": (time.perf_counter() - started) * 1000}
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"},
                    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})  # fmt: skip
        tools = client.reply(2)
        got["tools/list"] = (time.perf_counter() - started) * 1000
        got["tools"] = len(tools.get("result", {}).get("tools", []))
        client.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
        client.reply(3)
        got["sdk loaded (ping)"] = (time.perf_counter() - started) * 1000
        return got
    finally:
        client.close()


def measure(data_dir: Path, work: Path, *, runs: int, progress: Progress = _quiet) -> dict[str, Any]:
    """p50/p95 per command and reply over ``runs`` rounds (after a warm-up round that fills the cache)."""
    cwd, cache = work / "mcp-start-cwd", work / "mcp-start-cache"
    cwd.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("LORE_LLM_CMD", "LORE_HOOK", "LORE_SERVER")}
    env.update(LORE_DATA_DIR=str(data_dir), LORE_INDEX_DIR=str(work / "mcp-start-index"),
               LORE_STATE_DIR=str(work / "mcp-start-state"), LORE_CACHE_DIR=str(cache), LORE_SERVER="off",
               PYTHONDONTWRITEBYTECODE="1")  # fmt: skip
    compile_bytecode()
    command = [*lore_command(), "mcp"]
    floor: list[float] = []
    times: dict[str, dict[str, list[float]]] = {"lore mcp": {}, "lore mcp (first start: nothing remembered)": {}}
    tools: set[float] = set()
    for i in range(runs + 1):  # round 0 is the warm-up: it remembers the handshake
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=env, cwd=cwd, check=True)
        elapsed = (time.perf_counter() - started) * 1000
        warm = start_once(command, env, cwd)
        cold_cache = work / f"mcp-start-cold-{i}"
        cold = start_once(command, {**env, "LORE_CACHE_DIR": str(cold_cache)}, cwd)
        if i == 0:
            continue
        floor.append(elapsed)
        for name, got in (("lore mcp", warm), ("lore mcp (first start: nothing remembered)", cold)):
            tools.add(got.pop("tools"))
            for reply, ms in got.items():
                times[name].setdefault(reply, []).append(ms)
        progress(f"mcp start: round {i}/{runs}")
    base = statistics.median(floor)
    result: dict[str, Any] = {"runs": runs, "python -c pass": summary(floor), "tools listed": sorted(tools),
                              "commands": {}}  # fmt: skip
    for name, replies in times.items():
        result["commands"][name] = {}
        for reply, values in replies.items():
            figures: dict[str, Any] = summary(values)
            figures["ratio_to_python_floor"] = round(figures["p50"] / base, 2) if base else None
            result["commands"][name][reply] = figures
    return result
