"""`lore mcp`'s start: the handshake answered from the SDK's remembered answers while the SDK loads.

The wire tests run the real server (the real SDK) on pipes in this process; the loader
waits on an event, so "before the SDK has loaded" is a fact of the test, not a race.
Nor is "the SDK has replied": the SDK (2.x) cancels the requests still in flight when
its input ends, so a test closes stdin only once the SDK's replies it depends on have
gone through lore's handshake (``Wire.wait_sdk_reply``).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

from lore.agent.mcp_start import Handshake, Handshakes, cache_key, cache_path

VERSION = "2025-06-18"


def line(message: dict[str, Any]) -> bytes:
    return orjson.dumps(message) + b"\n"


def initialize(ident: int = 1, version: str = VERSION) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def tools_list(ident: int = 2) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/list"}


# -- the handshake logic, without the SDK ----------------------------------------------------------


def test_answers_only_what_is_remembered_and_drops_the_sdks_second_reply(tmp_path: Path) -> None:
    cache = Handshakes(tmp_path / "h.json", "k")
    init_result = {"protocolVersion": VERSION, "capabilities": {"tools": {}}, "serverInfo": {"name": "lore"}}
    cache.put("initialize", VERSION, init_result)
    sent: list[bytes] = []
    handshake = Handshake(cache, sent.append)

    handshake.client_line(line(tools_list(0)), answer=True)  # before initialize: the SDK's to answer
    handshake.client_line(line(initialize()), answer=True)
    handshake.client_line(line(INITIALIZED), answer=True)
    handshake.client_line(line(tools_list()), answer=True)  # not remembered: waits for the SDK
    assert [orjson.loads(s) for s in sent] == [{"jsonrpc": "2.0", "id": 1, "result": init_result}]

    # The SDK's replies: the one to initialize is dropped, the others pass and teach the cache.
    tools_result = {"tools": [{"name": "search", "inputSchema": {"type": "object"}}]}
    assert handshake.server_line(line({"jsonrpc": "2.0", "id": 1, "result": init_result})) is None
    assert handshake.server_line(line({"jsonrpc": "2.0", "id": 0, "error": {"code": -32602, "message": "x"}}))
    assert handshake.server_line(line({"jsonrpc": "2.0", "id": 2, "result": tools_result}))
    assert Handshakes.load(tmp_path / "h.json", "k").get("tools/list", VERSION) == tools_result
    assert Handshakes.load(tmp_path / "h.json", "another key").get("tools/list", VERSION) is None

    # A second connection answers both at once.
    sent.clear()
    again = Handshake(Handshakes.load(tmp_path / "h.json", "k"), sent.append)
    for message in (initialize(7), INITIALIZED, tools_list(8)):
        again.client_line(line(message), answer=True)
    assert [orjson.loads(s)["id"] for s in sent] == [7, 8]
    assert orjson.loads(sent[1])["result"] == tools_result


def test_odd_requests_are_left_to_the_sdk(tmp_path: Path) -> None:
    cache = Handshakes(tmp_path / "h.json", "k")
    cache.put("initialize", VERSION, {"protocolVersion": VERSION})
    cache.put("tools/list", VERSION, {"tools": []})
    sent: list[bytes] = []
    handshake = Handshake(cache, sent.append)
    no_client_info = initialize()
    del no_client_info["params"]["clientInfo"]
    for raw in (b"not json\n", line(no_client_info), line({**initialize(), "jsonrpc": "1.0"}),
                line({**initialize(), "id": None})):  # fmt: skip
        handshake.client_line(raw, answer=True)
    assert sent == []
    handshake.client_line(line(initialize(3)), answer=True)
    handshake.client_line(line({**tools_list(4), "params": {"cursor": "next"}}), answer=True)  # a page: the SDK's
    handshake.client_line(line(initialize(5)), answer=True)  # a second initialize: the SDK's
    assert [orjson.loads(s)["id"] for s in sent] == [3]


def test_an_answer_the_sdk_contradicts_is_replaced_and_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = Handshakes(tmp_path / "h.json", "k")
    cache.put("initialize", VERSION, {"protocolVersion": VERSION, "instructions": "stale"})
    sent: list[bytes] = []
    handshake = Handshake(cache, sent.append)
    handshake.client_line(line(initialize()), answer=True)
    fresh = {"protocolVersion": VERSION, "instructions": "fresh"}
    assert handshake.server_line(line({"jsonrpc": "2.0", "id": 1, "result": fresh})) is None
    assert "the SDK's replaces it" in capsys.readouterr().err
    assert Handshakes.load(tmp_path / "h.json", "k").get("initialize", VERSION) == fresh


def test_the_key_names_the_servers_code_and_the_installed_sdk() -> None:
    assert cache_key() == cache_key()
    assert len(cache_key()) == 40
    assert cache_path().name == "mcp-handshake.json"


# -- the real server on pipes ----------------------------------------------------------------------


class Wire:
    """serve_wire on a thread with pipes for stdin and stdout; the SDK loads only when ``release`` is set."""

    def __init__(self, data_dir: Path, *, gated: bool) -> None:
        from lore.agent.mcp_start import load_sdk, serve_wire
        from lore.paths import Locations

        self.release = threading.Event()
        if not gated:
            self.release.set()
        client_in, self.server_in = os.pipe()
        self.server_out, client_out = os.pipe()
        self.to_server = os.fdopen(self.server_in, "wb", buffering=0)
        self.from_server = os.fdopen(self.server_out, "rb")
        self.loaded = threading.Event()
        self.sdk_replies: list[Any] = []  # ids of the SDK's replies, once lore's handshake has seen them
        self.sdk_replied = threading.Condition()
        locations = Locations.resolve(data_dir)
        wire = self

        class Watched:
            """The real SDK module; run_lines also notes the id of each SDK reply (dropped ones too)."""

            def __init__(self, sdk: Any) -> None:
                self.sdk = sdk

            def __getattr__(self, name: str) -> Any:
                return getattr(self.sdk, name)

            def run_lines(self, server: Any, read_line: Any, write_line: Any) -> None:
                def write_and_note(text: str) -> None:
                    write_line(text)  # lore's handshake: drops, compares, remembers, forwards
                    message = orjson.loads(text)
                    with wire.sdk_replied:
                        wire.sdk_replies.append(message.get("id"))
                        wire.sdk_replied.notify_all()

                self.sdk.run_lines(server, read_line, write_and_note)

        def load() -> tuple[Any, Any]:
            self.release.wait(60)
            sdk = load_sdk()
            prepared = sdk.prepare(locations)
            self.loaded.set()
            return Watched(sdk), prepared

        self.errors: list[BaseException] = []

        def run() -> None:
            try:
                serve_wire(client_in, client_out, load)
            except BaseException as error:  # reported by the test
                self.errors.append(error)
            finally:
                os.close(client_in)
                os.close(client_out)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def send(self, *messages: dict[str, Any]) -> None:
        self.to_server.write(b"".join(line(m) for m in messages))

    def reply(self) -> dict[str, Any]:
        got = self.from_server.readline()
        assert got, "the server closed stdout"
        return dict(orjson.loads(got))

    def wait_sdk_reply(self, ident: int) -> None:
        """Until the SDK has replied to request ``ident`` and lore's handshake has dealt with the reply."""
        self.release.set()
        with self.sdk_replied:
            assert self.sdk_replied.wait_for(lambda: ident in self.sdk_replies, 60), self.sdk_replies

    def finish(self) -> bytes:
        """Close the server's stdin; what it wrote after, once it has exited."""
        self.release.set()
        self.to_server.close()
        self.thread.join(60)
        assert not self.thread.is_alive() and not self.errors, self.errors
        rest = self.from_server.read()
        self.from_server.close()
        return rest


@pytest.fixture
def remembered(data_dir: Path) -> Handshakes:
    pytest.importorskip("mcp")
    from lore import capture
    from lore.agent.mcp_start import remember_handshakes
    from lore.paths import Locations
    from lore.store import Store

    store = Store(data_dir, actor="test")
    store.init()
    capture.remember(store, "Use PgBouncer in transaction mode for Postgres pooling", project="acme-api")
    versions = remember_handshakes(Locations.resolve(data_dir))
    assert VERSION in versions and "2024-11-05" in versions
    cache = Handshakes.load()
    assert cache.get("initialize", VERSION) is not None and cache.get("tools/list", VERSION) is not None
    return cache


def test_the_handshake_is_answered_before_the_sdk_loads_and_the_sdk_serves_the_rest(remembered: Handshakes,
                                                                                   data_dir: Path) -> None:  # fmt: skip
    wire = Wire(data_dir, gated=True)
    wire.send(initialize())
    first = wire.reply()
    assert first == {"jsonrpc": "2.0", "id": 1, "result": remembered.get("initialize", VERSION)}
    wire.send(INITIALIZED, tools_list())
    listed = wire.reply()
    assert listed["id"] == 2 and listed["result"] == remembered.get("tools/list", VERSION)
    assert {tool["name"] for tool in listed["result"]["tools"]} >= {"search", "context", "remember"}
    assert not wire.loaded.is_set()  # both answered while the SDK waits to load

    wire.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "search", "arguments": {"query": "PgBouncer pooling"}}})  # fmt: skip
    wire.release.set()
    called = wire.reply()  # the next line is this reply: the SDK's own replies to 1 and 2 were dropped
    assert called["id"] == 3 and not called["result"].get("isError")
    assert "PgBouncer" in called["result"]["content"][0]["text"]
    assert wire.finish() == b""


def test_a_first_start_waits_for_the_sdk_and_remembers_its_answers(data_dir: Path) -> None:
    pytest.importorskip("mcp")
    assert not cache_path().exists()
    wire = Wire(data_dir, gated=False)
    wire.send(initialize())
    first = wire.reply()
    wire.send(INITIALIZED, tools_list())
    listed = wire.reply()
    assert wire.finish() == b""
    cache = Handshakes.load()
    assert cache.get("initialize", VERSION) == first["result"]
    assert cache.get("tools/list", first["result"]["protocolVersion"]) == listed["result"]


def test_a_stale_answer_is_replaced_by_the_sdks(remembered: Handshakes, data_dir: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    right = remembered.get("tools/list", VERSION)
    remembered.put("tools/list", VERSION, {"tools": []})
    remembered.save()
    wire = Wire(data_dir, gated=True)
    wire.send(initialize(), INITIALIZED, tools_list())
    assert wire.reply()["id"] == 1
    assert wire.reply() == {"jsonrpc": "2.0", "id": 2, "result": {"tools": []}}
    # The end of input cancels what the SDK has not answered yet: close stdin only after its reply to 2.
    wire.wait_sdk_reply(2)
    assert wire.finish() == b""
    assert "the remembered answer to tools/list (protocol 2025-06-18)" in capsys.readouterr().err
    assert Handshakes.load().get("tools/list", VERSION) == right


def test_the_sdk_client_accepts_a_remembered_handshake(remembered: Handshakes) -> None:
    """A real `lore mcp` process, its handshake answered from the cache, through the SDK's own client."""
    from tests.test_mcp import check_listing, with_session

    listed: dict[str, dict[str, Any]] = {}
    found: list[str] = []

    async def body(session: Any) -> None:
        for tool in (await session.list_tools()).tools:
            listed[tool.name] = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
        result = await session.call_tool("search", {"query": "PgBouncer pooling"})
        found.append(json.dumps(result.model_dump(mode="json", by_alias=True)))

    assert with_session(body) == []
    check_listing(listed)
    assert "PgBouncer" in found[0]
