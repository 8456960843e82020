"""The MCP server end to end: the SDK's own client starts `python -m lore mcp` over stdio."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters, stdio_client

from lore import capture
from lore.context import FENCE_OPEN, GAP_LINE
from lore.store import Store
from tests.conftest import resolve_locations

PROJECT_ROOT = Path(__file__).resolve().parent.parent
READ_TOOLS = {"search", "context", "show", "graph_neighbors"}
WRITE_TOOLS = {"remember", "learn", "handoff", "link", "inbox"}
CALL_TIMEOUT_S = 60


def seed(data_dir: Path) -> dict[str, str]:
    store = Store(data_dir, actor="test")
    store.init()
    pool = capture.remember(
        store, "Use PgBouncer in transaction mode for Postgres connection pooling", project="acme-api",
        rationale="asyncpg exhausted the RDS connection limit under load", alternatives=["Bigger RDS instance"],
        tags=["postgres"],
    ).record  # fmt: skip
    retry = capture.remember(
        store, "Retry payment provider calls with exponential backoff", project="billing",
        rationale="The provider returns 503 during deploys", tags=["payments"],
    ).record  # fmt: skip
    jitter = capture.learn(
        store, "Backoff with full jitter", project="billing", context="Calls to flaky upstream services",
        solution="sleep(random.uniform(0, min(cap, base * 2**attempt)))",
    ).record  # fmt: skip
    store.link(jitter.id, retry.id, "derived_from")
    store.link(retry.id, pool.id, "relates_to")
    return {"pool": pool.id, "retry": retry.id, "jitter": jitter.id}


def server_params(**extra_env: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k != "LORE_ACTOR"}  # let the server name its own channel
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
    env.update(extra_env)
    return StdioServerParameters(command=sys.executable, args=["-m", "lore", "mcp"], env=env, cwd=os.getcwd())


def with_session(body: Callable[[ClientSession], Awaitable[None]]) -> list[Exception]:
    """Run ``body`` against a fresh server; return the transport errors seen (a stray stdout line is one)."""
    problems: list[Exception] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            problems.append(message)

    async def main() -> None:
        with anyio.fail_after(CALL_TIMEOUT_S):
            # errlog at call time: the SDK binds its default when first imported, maybe under a CliRunner.
            async with stdio_client(server_params(), errlog=sys.stderr) as (read, write), \
                    ClientSession(read, write, message_handler=on_message) as session:  # fmt: skip
                await session.initialize()
                await body(session)

    anyio.run(main)
    return problems


async def call(session: ClientSession, name: str, /, **arguments: Any) -> dict[str, Any]:
    """The tool result as wire JSON (camelCase keys, whichever SDK major version is installed)."""
    result = await session.call_tool(name, arguments)
    data = result.model_dump(mode="json", by_alias=True)
    data["text"] = "\n".join(
        block.get("text", "") for block in data["content"] if block.get("type") == "text"
    )
    data["isError"] = bool(data.get("isError"))
    return data


def check_listing(listed: dict[str, dict[str, Any]]) -> None:
    assert set(listed) == READ_TOOLS | WRITE_TOOLS
    for name, tool in listed.items():
        assert len(tool["description"]) > 60, name
        assert tool["annotations"]["readOnlyHint"] is (name in READ_TOOLS), name
    expected = {
        "search": ({"query"}, {"limit", "type", "project", "verbose"}),
        "context": ({"query"}, {"budget_tokens", "max_items", "verbose"}),
        "show": ({"id"}, set()),
        "remember": (
            {"decision"},
            {"rationale", "alternatives", "tags", "importance", "confidence", "project", "verbose"},
        ),
        "learn": ({"name"}, {"context", "problem", "solution", "category", "tags", "project", "verbose"}),
        "handoff": ({"text"}, {"next_steps", "blockers", "questions", "project", "verbose"}),
        "link": ({"from_id", "to_id", "relation"}, set()),
        "graph_neighbors": ({"id"}, {"depth", "verbose"}),
        "inbox": (set(), {"action", "ids", "verbose"}),
    }
    for name, (required, optional) in expected.items():
        schema = listed[name]["inputSchema"]
        assert set(schema["properties"]) == required | optional, name
        assert set(schema.get("required", [])) == required, name
    assert listed["search"]["inputSchema"]["properties"]["limit"]["type"] == "integer"
    assert listed["search"]["inputSchema"]["properties"]["limit"]["default"] == 10
    assert "supersedes" in listed["link"]["inputSchema"]["properties"]["relation"]["enum"]
    assert listed["context"]["inputSchema"]["properties"]["budget_tokens"]["default"] == 500


async def read_calls(session: ClientSession, ids: dict[str, str], out: dict[str, dict[str, Any]]) -> None:
    out["search"] = await call(session, "search", query="PgBouncer transaction mode connection pooling")
    out["search_verbose"] = await call(
        session, "search", query="PgBouncer transaction mode connection pooling", verbose=True
    )
    out["filtered"] = await call(session, "search", query="backoff", type="pattern", limit=5)
    out["bad_type"] = await call(session, "search", query="backoff", type="spaceship")
    out["gap"] = await call(session, "search", query="zyxxqv wuggle frobnicator")
    out["empty"] = await call(session, "search", query="  ")
    out["empty_context"] = await call(session, "context", query="")
    out["context"] = await call(
        session, "context", query="Postgres connection pooling with PgBouncer", budget_tokens=300
    )
    out["show"] = await call(session, "show", id=ids["retry"])
    out["show_prefix"] = await call(session, "show", id=ids["pool"][:8])
    out["show_missing"] = await call(session, "show", id="dec-00000000")
    out["neighbors"] = await call(session, "graph_neighbors", id=ids["jitter"])
    out["neighbors2"] = await call(session, "graph_neighbors", id=ids["jitter"], depth=2)
    out["neighbors2_verbose"] = await call(session, "graph_neighbors", id=ids["jitter"], depth=2, verbose=True)
    out["neighbors_missing"] = await call(session, "graph_neighbors", id="pat-nope-nope")


def check_reads(out: dict[str, dict[str, Any]], ids: dict[str, str]) -> None:
    search = out["search"]
    assert not search["isError"]
    first = search["text"].splitlines()[0]
    assert first.startswith(ids["pool"]) and "decision" in first and "PgBouncer" in first
    # By default the structured content is small: what a model needs to pick what to read next.
    brief = search["structuredContent"]
    assert set(brief) == {"results", "evidence_gap"} and brief["evidence_gap"] is False
    top = brief["results"][0]
    assert top["id"] == ids["pool"] and top["type"] == "decision" and top["project"] == "acme-api"
    assert set(top) <= {"id", "type", "title", "project", "age", "score", "snippet"}
    assert {"id", "type", "title", "age", "score"} <= set(top)
    assert "asyncpg" in top["snippet"]  # the rationale, on one line
    verbose = out["search_verbose"]["structuredContent"]
    assert verbose["results"][0]["id"] == ids["pool"] and "components" in verbose["results"][0]
    assert verbose["schema_version"] == 2

    assert not out["filtered"]["isError"]
    hit_lines = [line for line in out["filtered"]["text"].splitlines() if line.startswith(("dec-", "pat-"))]
    assert hit_lines and all(line.startswith("pat-") for line in hit_lines)

    assert out["bad_type"]["isError"]
    assert "unknown record type 'spaceship'" in out["bad_type"]["text"]

    assert not out["gap"]["isError"]
    assert GAP_LINE in out["gap"]["text"]
    for empty in (out["empty"], out["empty_context"]):
        assert empty["isError"] and "the query is empty" in empty["text"]

    context = out["context"]
    assert not context["isError"]
    assert context["text"].startswith(FENCE_OPEN)
    # Claude Code shows the model the structured content instead of the text: it holds the block.
    assert context["structuredContent"]["context"] == context["text"]
    assert ids["pool"] in context["structuredContent"]["ids"]
    assert ids["pool"] in context["text"]
    assert len(context["text"]) <= 300 * 4

    shown = json.loads(out["show"]["text"])
    assert shown["id"] == ids["retry"] and shown["type"] == "decision"
    assert shown["record"]["rationale"] == "The provider returns 503 during deploys"
    assert {(link["from"], link["to"], link["relation"]) for link in shown["links"]} == {
        (ids["jitter"], ids["retry"], "derived_from"),
        (ids["retry"], ids["pool"], "relates_to"),
    }
    assert json.loads(out["show_prefix"]["text"])["id"] == ids["pool"]
    assert out["show_missing"]["isError"]
    assert "no record with id 'dec-00000000'" in out["show_missing"]["text"]

    one_hop = out["neighbors"]["text"]
    assert ids["retry"] in one_hop and "derived_from" in one_hop and ids["pool"] not in one_hop
    two_hops = out["neighbors2"]
    assert ids["retry"] in two_hops["text"] and ids["pool"] in two_hops["text"]
    assert f"{ids['jitter']} -derived_from-> {ids['retry']} -relates_to-> {ids['pool']}" in two_hops["text"]
    by_id = {n["id"]: n for n in two_hops["structuredContent"]["neighbors"]}
    assert by_id[ids["pool"]]["hops"] == 2 and "relations" not in by_id[ids["pool"]]
    assert by_id[ids["retry"]]["type"] == "decision"
    by_id = {n["id"]: n for n in out["neighbors2_verbose"]["structuredContent"]["neighbors"]}
    assert by_id[ids["pool"]]["relations"] == ["derived_from", "relates_to"]
    assert out["neighbors_missing"]["isError"]


async def write_calls(session: ClientSession, ids: dict[str, str], out: dict[str, dict[str, Any]]) -> None:
    out["remember"] = await call(
        session, "remember", decision="Store money as integer cents, never floats",
        rationale="Float rounding broke invoice totals", alternatives=["Decimal columns"], tags=["billing"],
        importance=4,
    )  # fmt: skip
    out["found"] = await call(session, "search", query="integer cents money floats")
    out["duplicate"] = await call(
        session, "remember", decision="Use PgBouncer in transaction mode for Postgres connection pooling"
    )
    out["bad_importance"] = await call(session, "remember", decision="Something else entirely", importance=9)
    out["learn"] = await call(
        session, "learn", name="Idempotency keys on payment requests", context="Retried POSTs",
        solution="Send a UUID Idempotency-Key header", project="billing", tags=["payments"],
    )  # fmt: skip
    out["handoff"] = await call(
        session, "handoff", text="Invoice PDFs render; emails not wired", next_steps=["Hook up SES"],
        blockers=["Waiting on DKIM"], questions=["Which sender domain?"],
    )  # fmt: skip
    new_id = out["remember"]["text"].split()[2].rstrip(":")
    out["link"] = await call(session, "link", from_id=new_id, to_id=ids["pool"], relation="relates_to")
    out["bad_relation"] = await call(session, "link", from_id=new_id, to_id=ids["pool"], relation="befriends")
    out["self_link"] = await call(session, "link", from_id=new_id, to_id=new_id, relation="relates_to")
    out["link_missing"] = await call(
        session, "link", from_id=new_id, to_id="dec-00000000", relation="affects"
    )
    out["shown"] = await call(session, "show", id=new_id)


def check_writes(out: dict[str, dict[str, Any]], ids: dict[str, str], data_dir: Path) -> None:
    remembered = out["remember"]
    assert not remembered["isError"], remembered["text"]
    assert remembered["text"].startswith("Remembered decision dec-")
    assert set(remembered["structuredContent"]) == {"id", "type", "title", "project", "created"}
    new_id = remembered["text"].split()[2].rstrip(":")
    assert out["found"]["text"].splitlines()[0].startswith(new_id)  # the index refreshed after the write

    duplicate = out["duplicate"]
    assert duplicate["isError"]
    assert "duplicate" in duplicate["text"] and ids["pool"] in duplicate["text"]

    assert out["bad_importance"]["isError"]

    learned = out["learn"]
    assert not learned["isError"], learned["text"]
    assert learned["text"].startswith("Learned pattern pat-")
    handed = out["handoff"]
    assert not handed["isError"], handed["text"]

    assert not out["link"]["isError"], out["link"]["text"]
    assert out["link"]["text"] == f"Linked {new_id} -relates_to-> {ids['pool']}"
    for name in ("bad_relation", "self_link", "link_missing"):
        assert out[name]["isError"], name
    assert "dec-00000000" in out["link_missing"]["text"]
    shown = json.loads(out["shown"]["text"])
    assert shown["record"]["alternatives"] == ["Decimal columns"]
    assert shown["record"]["importance"] == 4
    assert {"from": new_id, "to": ids["pool"], "relation": "relates_to", "weight": 1.0} in shown["links"]

    # Written exactly like the CLI: the same files, the project detected from the server's
    # working directory (the fixture's acme-api), the audit log naming the mcp channel.
    snapshot = Store(data_dir).load()
    assert snapshot.records[new_id].project == "acme-api"
    assert snapshot.records[new_id].tags == ["billing"]
    handoffs = snapshot.of_kind("handoff")
    assert len(handoffs) == 1 and handoffs[0].project == "acme-api"
    assert handoffs[0].handoff_list("blockers") == ["Waiting on DKIM"]
    patterns = [r for r in snapshot.of_kind("pattern") if r.title.startswith("Idempotency")]
    assert patterns and patterns[0].project == "billing"
    audit = [json.loads(line) for line in (data_dir / "audit" / "log.jsonl").read_text().splitlines() if line]
    mcp_entries = [e for e in audit if e["actor"].startswith("mcp:")]
    assert {e["op"] for e in mcp_entries} >= {"retain", "link"}
    assert {e["id"] for e in mcp_entries} >= {new_id, handoffs[0].id}


def test_mcp_server_end_to_end(data_dir: Path) -> None:
    """One server process for the lot (starting one costs seconds): list, read, write, errors."""
    ids = seed(data_dir)
    listed: dict[str, dict[str, Any]] = {}
    reads: dict[str, dict[str, Any]] = {}
    writes: dict[str, dict[str, Any]] = {}

    async def body(session: ClientSession) -> None:
        for tool in (await session.list_tools()).tools:
            listed[tool.name] = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
        await read_calls(session, ids, reads)
        await write_calls(session, ids, writes)

    problems = with_session(body)
    assert problems == []  # every stdout line was a protocol message
    check_listing(listed)
    check_reads(reads, ids)
    check_writes(writes, ids, data_dir)


def test_missing_extra_is_a_clear_error(cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else real(name, *a)
    )
    result = cli("mcp")
    assert result.exit_code == 1
    assert "the MCP server needs the mcp extra" in result.stderr
    assert "pip install 'lore[mcp]'" in result.stderr


def test_search_at_its_defaults_hands_the_model_about_2_kb_for_10_hits(data_dir: Path) -> None:
    """Long records, long titles: the default structured content and text stay within 2,000 characters.

    In-process through the SDK server's own call path (the stdio transport is covered above).
    """
    from lore.agent.mcp import LoreMCP, build_server

    store = Store(data_dir, actor="test")
    store.init()
    words = ["postgres", "pooling", "retry", "backoff", "jitter", "cache", "redis", "kafka", "queue", "worker", "deploy", "canary", "rollback", "schema", "migration", "index", "vacuum", "lock", "timeout", "circuit", "breaker", "idempotency", "billing", "invoice"]  # fmt: skip
    for i in range(30):
        title = "Use " + " ".join(words[(i + k) % len(words)] for k in range(16)) + f" in service {i}"
        rationale = " ".join(words[(i * 7 + k) % len(words)] for k in range(120))
        capture.remember(store, title, project="payments-platform", rationale=rationale,
                         options=capture.WriteOptions(check_duplicates=False))  # fmt: skip
    server = build_server(LoreMCP(resolve_locations(data_dir)))
    got: dict[str, Any] = {}

    async def main() -> None:
        got["brief"] = await server.call_tool("search", {"query": "postgres pooling retry backoff timeout"})
        got["verbose"] = await server.call_tool("search", {"query": "postgres pooling retry backoff timeout",
                                                           "verbose": True})  # fmt: skip

    anyio.run(main)
    brief = got["brief"].model_dump(mode="json", by_alias=True, exclude_none=True)
    verbose = got["verbose"].model_dump(mode="json", by_alias=True, exclude_none=True)
    assert len(brief["structuredContent"]["results"]) == 10
    structured = json.dumps(brief["structuredContent"], ensure_ascii=False, separators=(",", ":"))
    assert len(structured) <= 2000
    assert len(brief["content"][0]["text"]) <= 2000
    assert all(hit.get("snippet") for hit in brief["structuredContent"]["results"])
    full = json.dumps(verbose["structuredContent"], ensure_ascii=False, separators=(",", ":"))
    assert len(full) > 3 * len(structured)  # what verbose adds: full texts, score components


def test_mcp_exits_cleanly_on_sigint_once_serving(data_dir: Path) -> None:
    """A real `lore mcp` process, initialised by a client, exits 0 promptly on SIGINT, no traceback.

    (SIGTERM takes the same handler; the next test sends it while the server is still starting.)
    """
    import signal
    import subprocess
    import time

    seed(data_dir)
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip
    params = server_params()
    for signum in (signal.SIGINT,):
        process = subprocess.Popen([params.command, *params.args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, env=params.env, cwd=params.cwd)  # fmt: skip
        try:
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(json.dumps(initialize).encode() + b"\n")
            process.stdin.flush()
            assert json.loads(process.stdout.readline())["id"] == 1  # serving, stdin still open
            sent = time.monotonic()
            process.send_signal(signum)
            code = process.wait(timeout=10)
            elapsed = time.monotonic() - sent
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        stderr = process.stderr.read().decode() if process.stderr else ""
        assert code == 0, (signum, code, stderr)
        assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
        assert elapsed < 5, elapsed


@pytest.mark.parametrize("signum", [2, 15])  # SIGINT, SIGTERM
def test_mcp_exits_cleanly_on_a_signal_while_still_starting(data_dir: Path, signum: int) -> None:
    """Clients give up on a slow start with SIGINT: importing the MCP SDK takes seconds on a busy machine.

    The signal is sent as soon as `lore mcp` catches SIGTERM (its first act, before it
    imports the CLI and the SDK), read from /proc: no sleep decides the moment. Before
    the fix the server caught SIGTERM only once it had started (the SDK loaded).
    """
    import signal
    import subprocess
    import time

    if not Path("/proc/self/status").exists():
        pytest.skip("reads /proc/<pid>/status")
    params = server_params()
    process = subprocess.Popen([params.command, *params.args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=params.env, cwd=params.cwd)  # fmt: skip
    try:
        end = time.monotonic() + 30
        while time.monotonic() < end:
            status = Path(f"/proc/{process.pid}/status").read_text()
            caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
            if caught & (1 << (signal.SIGTERM - 1)):
                break
            time.sleep(0.002)
        # Still starting: the MCP SDK (pydantic's compiled core) is not loaded yet.
        assert "pydantic_core" not in Path(f"/proc/{process.pid}/maps").read_text()
        process.send_signal(signum)
        code = process.wait(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stderr = process.stderr.read().decode() if process.stderr else ""
    assert code == 0, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
