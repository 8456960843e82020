"""`lore ui`: a real server on 127.0.0.1, fetched with urllib (the browser check is tests/browser/check_ui.py)."""

from __future__ import annotations

import hashlib
import os
import re
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlencode

import orjson
import pytest

from lore import capture
from lore.capture import WriteOptions
from lore.index.manager import IndexManager
from lore.paths import Locations
from lore.store import Store
from lore.ui.html import Markup, esc, tag
from lore.ui.memory import Memory
from lore.ui.server import UiServer
from tests.conftest import resolve_locations

PROJECT = "acme-api"
XSS_TITLE = 'Escape <script>alert("lore-xss")</script> in stored titles'
XSS_BODY = '"><img src=x onerror=alert(1)> and </textarea><svg onload=alert(2)>'


@dataclass
class Ui:
    server: UiServer
    base: str
    token: str
    locations: Locations
    ids: dict[str, str]

    def url(self, path: str, token: str | None = "default") -> str:
        given = self.token if token == "default" else token
        if given is None:
            return self.base + path
        return self.base + path + ("&" if "?" in path else "?") + urlencode({"token": given})

    def get(self, path: str, token: str | None = "default", method: str = "GET",
            headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:  # fmt: skip
        request = urllib.request.Request(self.url(path, token), method=method, headers=headers or {},
                                         data=b"x=1" if method in ("POST", "PUT", "PATCH") else None)  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, dict(response.headers), response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read().decode()


def _serve(memory: Memory) -> tuple[UiServer, threading.Thread]:
    server = UiServer(memory, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ui]:
    """A small memory with a supersession chain, a contradiction, a derived pattern, and hostile text; indexed."""
    root = tmp_path_factory.mktemp("ui")
    locations = resolve_locations(root / "data", root / "index")
    store = Store(locations.data_dir, actor="test")
    store.init()
    plain = WriteOptions(check_duplicates=False)

    def decision(text: str, rationale: str) -> str:
        return capture.remember(store, text, project=PROJECT, rationale=rationale, options=plain).record.id

    ids = {
        "oldest": decision("Surface payment provider errors straight to the caller", "v0 kept the client in charge of retries"),
        "older": decision("Retry failed charges once after two seconds", "a fixed delay was simple to reason about"),
        "centre": decision("Wrap payment-provider calls in exponential backoff with full jitter",
                           "A Stripe degradation turned synchronized retries into a thundering herd"),
        "against": decision("Never retry payment calls from the server",
                            "the mobile client owns retries and sends an idempotency key"),
        "far": capture.observe(store, "Jittered retries halved the 503 rate during the June incident",
                               project=PROJECT, options=plain).record.id,
        "xss": decision(XSS_TITLE, XSS_BODY),
    }
    ids["pattern"] = capture.learn(store, "Full-jitter backoff for outbound calls", project=PROJECT, origin=ids["centre"],
                                   solution="sleep(random.uniform(0, min(cap, base * 2**n)))", options=plain).record.id
    for text in ("Use PgBouncer transaction pooling for billing Postgres", "Pin the Stripe API version per request",
                 "Keep invoices immutable once finalised", "Cache exchange rates for an hour"):
        decision(text, "filler so that ranking has something to rank")
    capture.supersede(store, ids["oldest"], ids["older"])
    capture.supersede(store, ids["older"], ids["centre"])
    store.link(ids["against"], ids["centre"], "contradicts")
    store.link(ids["far"], ids["pattern"], "relates_to")
    IndexManager(locations).build()
    server, thread = _serve(Memory(locations, current_project=PROJECT))
    try:
        yield Ui(server, f"http://127.0.0.1:{server.port}", server.token, locations, ids)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)


def pages(ui: Ui) -> list[str]:
    centre = quote(ui.ids["centre"])
    return ["/", "/search?q=payment+retries", "/search", f"/record/{centre}", f"/graph/{centre}",
            f"/graph/{centre}?depth=2", "/timeline", f"/timeline?project={PROJECT}&type=decision", "/stats",
            "/static/lore.css", "/static/lore.js"]  # fmt: skip


def node_ids(page: str) -> list[str]:
    svg = page[page.index("<svg class=\"graph"):page.index("</svg>", page.index("<svg class=\"graph"))]
    return re.findall(r'<a [^>]*class="node[^"]*"[^>]*data-id="([^"]+)"', svg)


def hit_ids(page: str) -> list[str]:
    return re.findall(r'<li class="hit" data-id="([^"]+)"', page)


def test_the_server_listens_on_loopback_only(ui: Ui) -> None:
    assert ui.server.server_address[0] == "127.0.0.1"
    assert ui.server.url.startswith(f"http://127.0.0.1:{ui.server.port}/?token=")


def test_every_page_answers_with_the_token(ui: Ui) -> None:
    for path in pages(ui):
        status, headers, body = ui.get(path)
        assert status == 200, (path, body[:300])
        assert body
        if path.startswith("/static/"):
            assert headers["Content-Type"].startswith(("text/css", "text/javascript"))
        else:
            assert headers["Content-Type"] == "text/html; charset=utf-8"
            assert body.startswith("<!doctype html>")
            # Every link and form inside the page carries the token on.
            assert f"token={ui.token}" in body and 'name="token" value="' + ui.token + '"' in body
        assert "default-src 'none'" in headers["Content-Security-Policy"]
        head_status, head_headers, head_body = ui.get(path, method="HEAD")
        assert (head_status, head_body) == (200, "")
        if "q=" not in path:  # a search page holds its own timings, which differ from one run to the next
            assert head_headers["Content-Length"] == str(len(body.encode()))


def test_without_the_token_every_page_is_refused(ui: Ui) -> None:
    for path in pages(ui):
        for token in (None, "", "not-the-token", ui.token[:-1]):
            status, _, body = ui.get(path, token=token)
            assert status == 403, (path, token)
            assert "Wrap payment-provider" not in body and "lore.css" not in body and "token=" not in body


def test_another_host_name_is_refused(ui: Ui) -> None:
    # DNS rebinding: a web page whose name resolves to 127.0.0.1 sends its own Host header.
    status, _, _ = ui.get("/", headers={"Host": f"attacker.example:{ui.server.port}"})
    assert status == 403
    assert ui.get("/", headers={"Host": f"localhost:{ui.server.port}"})[0] == 200


def test_unknown_pages_records_and_depths(ui: Ui) -> None:
    assert ui.get("/nothing-here")[0] == 404
    assert ui.get("/static/secrets.txt")[0] == 404
    assert ui.get("/static/../pyproject.toml")[0] == 404
    status, _, body = ui.get("/record/dec-00000000")
    assert status == 404 and "no record with id" in body
    status, _, body = ui.get(f"/graph/{ui.ids['centre']}?depth=9")
    assert status == 400 and "depth 9 is out of range" in body
    assert ui.get(f"/graph/{ui.ids['centre']}?depth=two")[0] == 400


def test_stored_text_is_escaped_everywhere(ui: Ui) -> None:
    xss = ui.ids["xss"]
    for path in (f"/record/{xss}", f"/graph/{xss}", "/search?q=escape+stored+titles", "/timeline", "/",
                 f"/search?q={quote(XSS_TITLE)}"):  # fmt: skip
        status, _, body = ui.get(path)
        assert status == 200, path
        assert "<script>alert" not in body and "<img src=x" not in body and "<svg onload" not in body, path
        assert "</textarea><svg" not in body
        # The only script is lore's own, loaded from the package.
        assert body.count("<script") == 1 and '<script src="/static/lore.js?token=' in body
    record_page = ui.get(f"/record/{xss}")[2]
    assert "&lt;script&gt;alert(&quot;lore-xss&quot;)&lt;/script&gt;" in record_page
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in record_page
    # The query typed in the box comes back escaped too, in the input's value and the title.
    search_page = ui.get("/search?q=" + quote('"><script>alert(3)</script>'))[2]
    assert "<script>alert(3)" not in search_page


def test_the_html_builder_escapes_text_and_attributes() -> None:
    assert tag("p", "<b>&") == "<p>&lt;b&gt;&amp;</p>"
    assert tag("a", "x", href='" onmouseover="alert(1)') == '<a href="&quot; onmouseover=&quot;alert(1)">x</a>'
    assert tag("p", tag("b", "bold")) == "<p><b>bold</b></p>"  # Markup from tag() passes through
    assert esc("\x1b[31mred\x1b[0m") == "red"  # ANSI sequences are stripped as in the terminal
    assert esc(Markup("<i>kept</i>")) == "<i>kept</i>"
    assert tag("input", disabled=True, hidden=False, value=None) == "<input disabled>"


@pytest.mark.parametrize(("query", "params", "flags"), [
    ("payment retries with backoff", {}, []),
    ("why did we stop retrying charges", {"type": "decision"}, ["--type", "decision"]),
    ("surface provider errors to the caller", {"all": "1"}, ["--all"]),
    ("Postgres connection pooling", {"project": PROJECT}, ["--project", PROJECT]),
])  # fmt: skip
def test_search_returns_the_ids_and_order_of_lore_search_json(ui: Ui, cli, query: str, params: dict[str, str],
                                                              flags: list[str]) -> None:  # fmt: skip
    status, _, page = ui.get("/search?" + urlencode({"q": query, **params}))
    assert status == 200
    result = cli("--data-dir", str(ui.locations.data_dir), "--index-dir", str(ui.locations.index_dir), "-P", PROJECT,
                 "search", query, "--json", *flags)  # fmt: skip
    assert result.exit_code == 0, result.stderr
    expected = orjson.loads(result.stdout)
    assert hit_ids(page) == [hit["id"] for hit in expected["results"]]
    assert hit_ids(page)  # every query above finds something
    # The --explain breakdown: each hit's channel ranks and final score, as the JSON gives them.
    for hit in expected["results"]:
        item = page[page.index(f'data-id="{hit["id"]}"'):]
        item = item[: item.index("</li>")]
        assert f"score {hit['score']:.3f}" in item or (hit["score"] < 0.0005 and "score &lt;0.001" in item)
        for channel, rank in hit["components"]["ranks"].items():
            shown = re.search(rf"<th>{channel}</th><td>#{rank}</td><td>[^<]*</td><td>\+([0-9.]+)</td>", item)
            assert shown, (channel, rank)
            assert abs(float(shown.group(1)) - hit["components"]["contributions"].get(channel, 0.0)) < 1e-4
        for factor, value in hit["components"]["factors"].items():
            assert f"<th>{factor}</th><td>× {value:.3f}</td>" in item


def test_search_marks_an_evidence_gap(ui: Ui) -> None:
    page = ui.get("/search?q=" + quote("kubernetes helm chart quantum zebra"))[2]
    assert "EVIDENCE GAP" in page


def test_a_record_graph_has_the_expected_nodes(ui: Ui) -> None:
    import networkx as nx

    from lore.index import graph

    ids = ui.ids
    page = ui.get(f"/graph/{ids['centre']}")[2]
    drawn = node_ids(page)
    # One hop: what it superseded (and, following the chain, what that superseded), the record
    # contradicting it, and the pattern derived from it (an edge implied by the pattern's origin).
    expected = {ids["centre"], ids["older"], ids["oldest"], ids["against"], ids["pattern"]}
    assert set(drawn) == expected and len(drawn) == len(expected)
    assert set(node_ids(ui.get(f"/graph/{ids['centre']}?depth=2")[2])) == expected | {ids["far"]}
    # The same sets from NetworkX over the index's own graph (ego graphs, plus the supersession chain).
    snapshot = Store(ui.locations.data_dir).load()
    built = graph.build(snapshot.records, graph.explicit_edges(snapshot.edges)).to_undirected(as_view=True)
    for depth in (1, 2, 3):
        ego = set(nx.ego_graph(built, ids["centre"], radius=depth).nodes)
        chain = {ids["centre"], ids["older"], ids["oldest"]}
        assert set(node_ids(ui.get(f"/graph/{ids['centre']}?depth={depth}")[2])) == ego | chain
    # Typed, coloured edges; the contradiction and the superseded records stand out.
    assert re.search(rf'class="edge r-contradicts"[^>]*data-from="{ids["against"]}" data-to="{ids["centre"]}"', page)
    assert re.search(rf'class="edge r-supersedes"[^>]*data-from="{ids["centre"]}" data-to="{ids["older"]}"', page)
    assert re.search(rf'class="edge r-derived_from implicit"[^>]*data-from="{ids["pattern"]}"', page)
    assert re.search(rf'class="node k-decision s-active centre contradicted"[^>]*data-id="{ids["centre"]}"', page)
    assert re.search(rf'class="node k-decision s-superseded"[^>]*data-id="{ids["oldest"]}"', page)
    # A record with no links says so instead of drawing a lone box.
    lone = ui.get(f"/record/{ids['xss']}")[2]
    assert "No records are linked to this one." in lone


def test_a_record_page_shows_fields_provenance_audit_and_links(ui: Ui) -> None:
    ids = ui.ids
    page = ui.get(f"/record/{ids['centre']}")[2]
    assert "thundering herd" in page  # the rationale field
    assert "journal/data/decisions.jsonl:3" in page  # provenance: file and line
    assert '<dt>written by</dt><dd>test<span class="muted"> (audit log)</span>' in page
    audit_rows = re.findall(r"<tr><td>\d+</td><td>[^<]+</td><td><code>(\w+)</code>", page)
    # Its own write, its supersedes edge, and the contradicts edge that points at it.
    assert audit_rows[0] == "retain" and audit_rows.count("link") == 2, audit_rows
    links = re.findall(r'class="link" data-relation="(\w+)" data-other="([^"]+)" data-direction="(\w+)"', page)
    assert ("supersedes", ids["older"], "out") in links
    assert ("contradicts", ids["against"], "in") in links
    assert ("derived_from", ids["pattern"], "in") in links
    older = ui.get(f"/record/{ids['older']}")[2]
    assert "Superseded by" in older and f"/record/{ids['centre']}?token=" in older


def test_stats_show_counts_and_doctor_findings(ui: Ui, cli) -> None:
    page = ui.get("/stats")[2]
    stats = orjson.loads(cli("--data-dir", str(ui.locations.data_dir), "stats", "--json").stdout)
    assert f"Records by type ({stats['records']})" in page
    assert 'data-ok="yes"' in page and "No problems found" in page


def _fingerprint(directory: Path) -> dict[str, tuple[str, int]]:
    return {str(p.relative_to(directory)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(directory.rglob("*")) if p.is_file()}  # fmt: skip


def test_the_view_is_read_only(ui: Ui) -> None:
    before = _fingerprint(ui.locations.data_dir)
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        for path in ("/", f"/record/{ui.ids['centre']}", "/search?q=x"):
            status, headers, _ = ui.get(path, method=method)
            assert status == 405 and headers["Allow"] == "GET, HEAD", (method, path)
    for path in pages(ui):
        assert ui.get(path)[0] == 200
    assert _fingerprint(ui.locations.data_dir) == before


def test_the_view_follows_the_files(initialised: Path) -> None:
    """A record written while the server runs shows on the next page (no restart, no index needed)."""
    store = Store(initialised, actor="test")
    server, thread = _serve(Memory(resolve_locations(initialised), current_project=PROJECT))
    try:
        ui = Ui(server, f"http://127.0.0.1:{server.port}", server.token, resolve_locations(initialised), {})
        assert "Adopt structured logging" not in ui.get("/timeline")[2]
        record = capture.remember(store, "Adopt structured logging everywhere", project=PROJECT,
                                  options=WriteOptions(check_duplicates=False)).record  # fmt: skip
        assert "Adopt structured logging" in ui.get("/timeline")[2]
        assert ui.get(f"/record/{record.id}")[0] == 200
        # Six characters of an id are enough, as on the command line.
        assert ui.get(f"/record/{record.id[:8]}")[0] == 200
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)


def test_lore_ui_prints_its_url_first_and_serves_until_interrupted(initialised: Path, tmp_path: Path) -> None:
    import signal

    # PYTHONFAULTHANDLER: if it ever fails to stop, SIGABRT below makes it print every thread's stack.
    process = subprocess.Popen([sys.executable, "-m", "lore", "--data-dir", str(initialised), "--index-dir",
                                str(tmp_path / "index"), "ui"], env={**os.environ, "PYTHONFAULTHANDLER": "1"},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert process.stdout is not None
        first = process.stdout.readline().strip()
        match = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]{20,})", first)
        assert match, first
        port, token = int(match.group(1)), match.group(2)
        ui = Ui(None, f"http://127.0.0.1:{port}", token, resolve_locations(initialised), {})  # type: ignore[arg-type]
        assert ui.get("/")[0] == 200
        assert ui.get("/", token=None)[0] == 403
        assert ui.get("/", method="POST")[0] == 405
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:  # say where it hangs
            process.send_signal(signal.SIGABRT)
            process.wait(timeout=30)
            raise AssertionError("lore ui did not stop on SIGINT:\n" + (process.stderr.read() if process.stderr else "")) from None
        assert process.returncode == 0
        assert "stopped" in process.stderr.read() if process.stderr else False
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_lore_ui_stops_on_sigint_even_when_started_with_it_ignored(initialised: Path, tmp_path: Path) -> None:
    import signal

    # As a background job of a non-interactive shell starts: SIGINT ignored, inherited across exec.
    process = subprocess.Popen([sys.executable, "-P", "-m", "lore", "--data-dir", str(initialised), "--index-dir",
                                str(tmp_path / "index"), "ui"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))  # fmt: skip
    try:
        assert process.stdout is not None and process.stdout.readline().startswith("http://127.0.0.1:")
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=60)
        err = process.stderr.read() if process.stderr else ""
        assert code == 0 and "stopped" in err, err
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_port_in_use_is_a_clear_error(initialised: Path, cli) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli("ui", "--port", str(port))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: port {port} on 127.0.0.1 is already in use")


def test_a_missing_data_dir_is_an_error_before_serving(tmp_path: Path, cli) -> None:
    result = cli("--data-dir", str(tmp_path / "nope"), "ui")
    assert result.exit_code == 1 and "does not exist" in result.stderr


def test_open_hands_the_url_to_the_browser(initialised: Path, tmp_path: Path) -> None:
    """--open: the default browser ($BROWSER here, a script that writes down what it was given) gets the URL."""
    import os
    import signal
    import time

    given = tmp_path / "opened.txt"
    browser = tmp_path / "browser.py"
    browser.write_text(f"import sys; open({str(given)!r}, 'w').write(sys.argv[1])\n")
    env = {**os.environ, "BROWSER": f"{sys.executable} {browser} %s"}
    process = subprocess.Popen([sys.executable, "-m", "lore", "--data-dir", str(initialised), "--index-dir",
                                str(tmp_path / "index"), "ui", "--open"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)  # fmt: skip
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        deadline = time.monotonic() + 60
        while not (given.exists() and given.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert given.read_text() == url
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_a_large_timeline_draws_a_dot_per_month_not_per_record() -> None:
    from datetime import UTC, datetime, timedelta

    from lore.store.records import Record
    from lore.ui.svg import DOTS_LIMIT, timeline_svg

    start = datetime(2025, 1, 1, tzinfo=UTC)
    records = [Record("decision", f"dec-{n:08x}", {"decision": f"choice {n}", "project": "big",
                                                   "timestamp": (start + timedelta(hours=2 * n)).strftime("%Y-%m-%dT%H:%M:%SZ")})
               for n in range(DOTS_LIMIT + 500)]  # fmt: skip
    svg = timeline_svg(records, ["big"], lambda rid: f"/record/{rid}", lambda lane: "/timeline",
                       lambda lane, kind: f"/timeline?project={lane}&type={kind}")  # fmt: skip
    counts = [int(c) for c in re.findall(r'data-count="(\d+)"', svg)]
    assert sum(counts) == DOTS_LIMIT + 500 and len(counts) == 10  # 3,500 two-hourly records: January to October
    assert "data-id=" not in svg and len(svg) < 20_000
    few = timeline_svg(records[:20], ["big"], lambda rid: f"/record/{rid}", lambda lane: "/timeline",
                       lambda lane, kind: "/timeline")  # fmt: skip
    assert len(re.findall(r'data-id="dec-', few)) == 20
