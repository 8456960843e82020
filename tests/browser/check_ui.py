"""`lore ui` in a real headless Chromium, on the bundled demo data (a separate CI step, not a pytest module).

    python tests/browser/check_ui.py [--out DIR] [--chromium PATH]

Starts `lore ui` as a user would, drives Debian's Chromium over the DevTools
protocol (``--remote-debugging-pipe``: no driver, no second runtime, nothing
downloaded) and checks that:

* every page renders (HTTP 200, its main element laid out, lore's stylesheet
  applied, no script error and no console error such as a CSP violation);
* a search typed into the page's box and submitted with Enter lists the same
  ids, in the same order, as `lore search --json`;
* a record's graph draws the records NetworkX finds within one and two hops
  (plus the supersession chain), each box laid out;
* no request leaves 127.0.0.1: every request the page makes is recorded from
  the protocol's Network events, and Chromium's own traffic is sent to a
  recording proxy that refuses it (loopback bypasses that proxy);
* the data dir is byte for byte unchanged.

Screenshots of the main pages go to ``--out`` (``docs/ui`` holds the committed
ones). It exits 1 when a check fails or when Chromium is missing: in CI a
browser check that did not run is not a pass.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data"
QUERIES = ("why did we move off celery", "how do we retry failed stripe charges", "feature flags")
GRAPH_RECORD = "dec-d0a58788"  # backoff with jitter: supersedes two decisions, derived patterns, handoffs
CONTRADICTED = "dec-7a301322"  # managed stores only: contradicted twice, one of them superseded
WIDTH, HEIGHT = 1280, 860
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--hide-scrollbars", "--mute-audio",
    # Chromium's own calls home (network time, field trials, safe browsing, metrics): off. Two
    # remain whatever the flags (a component update check, accounts.google.com): a control
    # browser that never opens a lore page shows them, and only hosts beyond its are failures.
    "--disable-breakpad", "--disable-client-side-phishing-detection", "--disable-domain-reliability",
    "--disable-field-trial-config", "--metrics-recording-only", "--no-pings", "--no-default-browser-check",
    "--disable-component-extensions-with-background-pages", "--password-store=basic", "--use-mock-keychain",
    "--allow-browser-signin=false",
    "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter,Translate,AutofillServerCommunication,"
    "CertificateTransparencyComponentUpdater,SafeBrowsing",
    f"--window-size={WIDTH},{HEIGHT}",
]  # fmt: skip


class Failed(Exception):
    pass


# -- Chromium over the DevTools pipe ------------------------------------------------------------


class Chromium:
    """Chromium with ``--remote-debugging-pipe``: JSON messages ended by NUL on fds 3 (in) and 4 (out)."""

    def __init__(self, executable: str, profile: Path, proxy_port: int) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def plumbing() -> None:
            # In the child, the pipe ends go to the fds Chromium reads and writes. Copies first:
            # either end may itself be fd 3 or 4. (close_fds would close 3 and 4 after this runs.)
            reads, writes = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(reads, 3)
            os.dup2(writes, 4)

        args = [executable, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe",
                f"--proxy-server=http://127.0.0.1:{proxy_port}", "about:blank"]  # fmt: skip
        self.process = subprocess.Popen(args, close_fds=False, preexec_fn=plumbing,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._next_id = 0
        self._replies: dict[int, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = os.read(self._from_browser, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                with self._changed:
                    self.events.append({"method": "<closed>"})
                    self._changed.notify_all()
                return
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                with self._changed:
                    if "id" in message:
                        self._replies[message["id"]] = message
                    else:
                        self.events.append(message)
                    self._changed.notify_all()

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout: float = 60.0) -> dict[str, Any]:  # fmt: skip
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._next_id not in self._replies:
                if not self._changed.wait(max(0.0, deadline - time.monotonic())):
                    raise Failed(f"no answer to {method} within {timeout:.0f} s")
            reply = self._replies.pop(self._next_id)
        if "error" in reply:
            raise Failed(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_for(self, test: Callable[[dict[str, Any]], bool], start: int, timeout: float = 60.0) -> dict[str, Any]:
        """The first event from index ``start`` on that passes ``test``."""
        deadline = time.monotonic() + timeout
        seen = start
        with self._changed:
            while True:
                for event in self.events[seen:]:
                    if event.get("method") == "<closed>":
                        raise Failed("Chromium closed the DevTools pipe")
                    if test(event):
                        return event
                seen = len(self.events)
                if not self._changed.wait(max(0.0, deadline - time.monotonic())):
                    raise Failed("timed out waiting for the page")

    def close(self) -> None:
        with contextlib.suppress(Failed, OSError):
            self.send("Browser.close", timeout=10)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._to_browser, self._from_browser):
            with contextlib.suppress(OSError):
                os.close(fd)


class Page:
    def __init__(self, browser: Chromium) -> None:
        self.browser = browser
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride", {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1,
                                                          "mobile": False})  # fmt: skip
        self.scheme("light")

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.browser.send(method, params, session=self.session)

    def mine(self, event: dict[str, Any]) -> bool:
        return event.get("sessionId") == self.session

    def scheme(self, value: str) -> None:
        self.send("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": value}]})

    def _loaded(self, start: int, action: Callable[[], None]) -> int:
        """Run ``action`` and wait for the document it loads; returns that document's HTTP status."""
        action()
        self.browser.wait_for(lambda e: self.mine(e) and e.get("method") == "Page.loadEventFired", start)
        responses = [e for e in self.browser.events[start:] if self.mine(e) and e.get("method") == "Network.responseReceived"
                     and e["params"].get("type") == "Document"]  # fmt: skip
        if not responses:
            raise Failed("the page loaded without a document response")
        return int(responses[-1]["params"]["response"]["status"])

    def open(self, url: str) -> int:
        start = len(self.browser.events)
        return self._loaded(start, lambda: self.send("Page.navigate", {"url": url}))

    def evaluate(self, expression: str) -> Any:
        reply = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in reply:
            raise Failed(f"script failed: {reply['exceptionDetails'].get('text')}: {expression[:80]}")
        return reply["result"].get("value")

    def type_and_enter(self, selector: str, text: str) -> int:
        self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        self.send("Input.insertText", {"text": text})
        start = len(self.browser.events)

        def enter() -> None:
            key = {"key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13, "nativeVirtualKeyCode": 13}
            self.send("Input.dispatchKeyEvent", {"type": "keyDown", "text": "\r", **key})
            self.send("Input.dispatchKeyEvent", {"type": "keyUp", **key})

        return self._loaded(start, enter)

    def screenshot(self, path: Path, *, full_height: int | None = None) -> None:
        """A PNG of the viewport, or of the page's first ``full_height`` pixels."""
        if full_height:
            height = min(full_height, int(self.evaluate("document.documentElement.scrollHeight")))
            self.send("Emulation.setDeviceMetricsOverride", {"width": WIDTH, "height": height, "deviceScaleFactor": 1,
                                                              "mobile": False})  # fmt: skip
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))
        if full_height:
            self.send("Emulation.setDeviceMetricsOverride", {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1,
                                                              "mobile": False})  # fmt: skip


# -- a proxy that records and refuses -----------------------------------------------------------


class RecordingProxy:
    """Where Chromium sends every request that is not for loopback: each one is written down and refused."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(16)
        self.port = self.socket.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            with connection:
                connection.settimeout(5)
                with contextlib.suppress(OSError):
                    head = connection.recv(4096).split(b"\r\n", 1)[0].decode(errors="replace")
                    self.seen.append(head or "(empty request)")
                    connection.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    @property
    def hosts(self) -> set[str]:
        """Each request's host: ``CONNECT host:443`` or ``GET http://host/...``."""
        found = set()
        for line in self.seen:
            parts = line.split()
            target = parts[1] if len(parts) > 1 else line
            host = urlsplit(target).hostname if "://" in target else target.rsplit(":", 1)[0]
            found.add(host or target)
        return found

    def close(self) -> None:
        self.socket.close()


# -- the checks ---------------------------------------------------------------------------------


def fingerprint(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}  # fmt: skip


@contextlib.contextmanager
def lore_ui(env: dict[str, str], index_dir: Path) -> Iterator[tuple[str, float]]:
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "lore", "--data-dir", str(DEMO), "--index-dir", str(index_dir), "ui"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)  # fmt: skip
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        elapsed = time.perf_counter() - started
        if not re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[\w-]+", url):
            raise Failed(f"lore ui printed {url!r} first, not its URL; stderr: {process.stderr.read() if process.stderr else ''}")
        yield url, elapsed
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def lore_search_ids(env: dict[str, str], index_dir: Path, query: str) -> list[str]:
    result = subprocess.run([sys.executable, "-m", "lore", "--data-dir", str(DEMO), "--index-dir", str(index_dir),
                             "search", query, "--json"], capture_output=True, text=True, env=env, cwd=ROOT, check=False)  # fmt: skip
    if result.returncode != 0:
        raise Failed(f"lore search failed: {result.stderr}")
    return [hit["id"] for hit in json.loads(result.stdout)["results"]]


def expected_graph_nodes(record_id: str, depth: int) -> set[str]:
    """NetworkX's ego graph over lore's own graph of the demo data, plus the supersession chain."""
    import networkx as nx

    from lore.index import graph
    from lore.store import Store

    snapshot = Store(DEMO).load()
    built = graph.build(snapshot.records, graph.explicit_edges(snapshot.edges))
    nodes = set(nx.ego_graph(built.to_undirected(as_view=True), record_id, radius=depth).nodes)
    supersedes = nx.DiGraph([(s, t) for s, t, key in built.edges(keys=True) if key == "supersedes"])
    if record_id in supersedes:
        nodes |= nx.descendants(supersedes, record_id) | nx.ancestors(supersedes, record_id)
    return nodes


PAGE_CHECK = """(() => {
  const main = document.querySelector(%s);
  const box = main ? main.getBoundingClientRect() : null;
  return {title: document.title, found: !!main, width: box ? box.width : 0, height: box ? box.height : 0,
          font: getComputedStyle(document.body).fontFamily, logo: !!document.querySelector("header.top .logo")};
})()"""


def run(out: Path, executable: str) -> tuple[list[str], list[str]]:
    passed: list[str] = []
    failed: list[str] = []

    def check(name: str, ok: bool, detail: str = "") -> None:
        (passed if ok else failed).append(name)
        print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f": {detail}" if detail and not ok else ""), flush=True)

    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="lore-ui-check-"))
    env = {**os.environ, "LORE_STATE_DIR": str(work / "state"), "LORE_CACHE_DIR": str(work / "cache"),
           "LORE_INDEX_REFRESH": "refresh"}  # fmt: skip
    env.pop("LORE_LLM_CMD", None)
    index_dir = work / "index"
    before = fingerprint(DEMO)
    # Build the index first, so the page and the CLI read the same one and the server starts cold.
    subprocess.run([sys.executable, "-m", "lore", "--data-dir", str(DEMO), "--index-dir", str(index_dir), "index"],
                   env=env, cwd=ROOT, check=True, capture_output=True)  # fmt: skip
    proxy = RecordingProxy()
    control_proxy = RecordingProxy()
    browser = control = None
    try:
        with lore_ui(env, index_dir) as (url, startup):
            print(f"lore ui printed its URL after {startup:.2f} s", flush=True)
            # The control: the same browser, flags and run time, on about:blank only.
            control = Chromium(executable, work / "control-profile", control_proxy.port)
            origin = "{0.scheme}://{0.netloc}".format(urlsplit(url))
            token = url.split("token=", 1)[1]
            browser = Chromium(executable, work / "profile", proxy.port)
            page = Page(browser)
            events_from = len(browser.events)

            def at(path: str, **query: str) -> str:
                return f"{origin}{path}?{urlencode({**query, 'token': token})}"

            shots = [
                ("home", at("/"), "section.hero", None),
                ("timeline", at("/timeline"), "svg.timeline", 1000),
                ("record", at(f"/record/{GRAPH_RECORD}"), "dl.fields", 1300),
                ("graph", at(f"/graph/{CONTRADICTED}"), "svg.graph", 780),
                ("stats", at("/stats"), "section.doctor", 1000),
            ]
            for name, address, selector, full in shots:
                status = page.open(address)
                facts = page.evaluate(PAGE_CHECK % json.dumps(selector))
                check(f"{name} page renders", status == 200 and facts["found"] and facts["width"] > 300
                      and facts["height"] > 20 and facts["logo"] and "system-ui" in facts["font"]
                      and facts["title"].endswith("· lore"), f"status {status}, {facts}")  # fmt: skip
                page.screenshot(out / f"{name}.png", full_height=full)

            # Search as a person would: type into the box, press Enter.
            for number, query in enumerate(QUERIES):
                page.open(at("/search"))
                status = page.type_and_enter("#q", query)
                shown = page.evaluate("[...document.querySelectorAll('li.hit')].map(li => li.dataset.id)")
                location = page.evaluate("location.pathname + location.search")
                expected = lore_search_ids(env, index_dir, query)
                check(f"search {query!r} lists lore search --json's ids in order",
                      status == 200 and location.startswith("/search?q=") and bool(shown) and shown == expected,
                      f"page {shown} vs CLI {expected}")  # fmt: skip
                if number == 0:
                    page.screenshot(out / "search.png", full_height=1100)
                    opened = page.evaluate("(() => { const d = document.querySelector('li.hit details.why'); d.open = true;"
                                           " return d.querySelector('table.explain').getBoundingClientRect().height; })()")
                    check("a hit's explain breakdown opens", opened > 40, f"height {opened}")

            for record, depth in ((GRAPH_RECORD, 1), (GRAPH_RECORD, 2), (CONTRADICTED, 1)):
                page.open(at(f"/graph/{record}", depth=str(depth)))
                drawn = page.evaluate("[...document.querySelectorAll('svg.graph .node')].map(n => n.dataset.id)")
                laid_out = page.evaluate("[...document.querySelectorAll('svg.graph .node')].every(n => n.getBBox().width > 100)")
                expected_nodes = expected_graph_nodes(record, depth)
                check(f"graph of {record} at depth {depth} draws NetworkX's nodes",
                      set(drawn) == expected_nodes and len(drawn) == len(expected_nodes) and laid_out,
                      f"drawn {sorted(drawn)} vs {sorted(expected_nodes)}")  # fmt: skip
            edges = page.evaluate("[...document.querySelectorAll('svg.graph g.edge')].map(e => e.dataset.relation)")
            flagged = page.evaluate("[...document.querySelectorAll('svg.graph .node.contradicted')].map(n => n.dataset.id)")
            check("graph edges carry their relation; contradictions are marked",
                  {"supersedes", "contradicts"} <= set(edges) and CONTRADICTED in flagged, f"{edges} {flagged}")

            # The dark theme, from the same stylesheet.
            page.scheme("dark")
            page.open(at(f"/graph/{GRAPH_RECORD}"))
            background = page.evaluate("getComputedStyle(document.body).backgroundColor")
            check("prefers-color-scheme: dark gives a dark page", background == "rgb(17, 18, 20)", background)
            page.screenshot(out / "graph-dark.png")
            page.scheme("light")

            problems = [e for e in browser.events[events_from:] if page.mine(e) and (
                e.get("method") == "Runtime.exceptionThrown"
                or (e.get("method") == "Log.entryAdded" and e["params"]["entry"].get("level") == "error")
                or (e.get("method") == "Runtime.consoleAPICalled" and e["params"].get("type") == "error"))]  # fmt: skip
            check("no script error, no console error (CSP violations included)", not problems,
                  json.dumps(problems[:3])[:600])  # fmt: skip
            requested = [e["params"]["request"]["url"] for e in browser.events
                         if e.get("method") == "Network.requestWillBeSent"]  # fmt: skip
            off_host = [u for u in requested if not (u.startswith(origin + "/") or u.startswith(("data:", "about:")))]
            check(f"all {len(requested)} page requests went to {origin}", bool(requested) and not off_host, str(off_host[:5]))
            own = control_proxy.hosts
            print(f"Chromium's own traffic (the control browser, no page): {sorted(own) or 'none'}", flush=True)
            caused = proxy.hosts - own
            check("nothing past loopback beyond Chromium's own traffic (recording proxy)", not caused,
                  f"{sorted(caused)}: {[line for line in proxy.seen if any(h in line for h in caused)][:5]}")
    except Failed as error:
        check("browser session", False, str(error))
    finally:
        for running in (browser, control):
            if running is not None:
                running.close()
        proxy.close()
        control_proxy.close()
        shutil.rmtree(work, ignore_errors=True)
    check("the data dir is unchanged", fingerprint(DEMO) == before)
    return passed, failed


def default_chromium() -> str:
    """Debian's Chromium binary itself. Its launcher, /usr/bin/chromium, exports Google API keys and
    turns on remote extension updates (/etc/chromium.d): with them the browser calls
    accounts.google.com and update.googleapis.com on its own, whatever the page does."""
    binary = Path("/usr/lib/chromium/chromium")
    return str(binary) if binary.exists() else shutil.which("chromium") or "/usr/bin/chromium"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "lore-ui-screens",
                        help="where the screenshots go (docs/ui holds the committed ones)")
    parser.add_argument("--chromium", default=default_chromium(),
                        help="the browser binary (default: Debian's, without its launcher script)")
    args = parser.parse_args()
    if not Path(args.chromium).exists():
        print(f"check_ui: Chromium not found at {args.chromium}; install Debian's chromium (see .ci/run)", file=sys.stderr)
        print("0 passed, 1 failed")
        return 1
    passed, failed = run(args.out, args.chromium)
    print(f"screenshots in {args.out}")
    print(f"{len(passed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
