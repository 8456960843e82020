"""The HTTP side of `lore ui`: 127.0.0.1 only, GET and HEAD only, an access token on every request.

The token travels as the ``token`` query parameter of every URL (the one
printed at start-up carries it). Without it, or with another, a request gets
403 and a page with no link and nothing from the store. Any other method gets
405: the view never writes. Every response forbids loading anything from
another origin (Content-Security-Policy), so a page cannot reach the network
even if a stored text tried to.
"""

from __future__ import annotations

import errno
import hmac
import secrets
import sys
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import IO, Any
from urllib.parse import parse_qs, unquote, urlsplit

from lore.errors import LoreError, NotFoundError, UsageError
from lore.ui import pages
from lore.ui.memory import Memory

HOST = "127.0.0.1"
STATIC_TYPES = {"lore.css": "text/css; charset=utf-8", "lore.js": "text/javascript; charset=utf-8"}
CSP = ("default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; form-action 'self'; "
       "base-uri 'none'; frame-ancestors 'none'")  # fmt: skip
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Resource-Policy": "same-origin",
}
READ_METHODS = "GET, HEAD"


def load_static() -> dict[str, bytes]:
    folder = resources.files("lore.ui") / "static"
    return {name: (folder / name).read_bytes() for name in STATIC_TYPES}


class UiServer(ThreadingHTTPServer):
    daemon_threads = True
    # A second `lore ui --port P` must fail to bind, not share the port.
    allow_reuse_address = False

    def __init__(self, memory: Memory, port: int, token: str | None = None) -> None:
        self.memory = memory
        self.token = token or secrets.token_urlsafe(24)
        self.static = load_static()
        try:
            super().__init__((HOST, port), Handler)
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise UsageError(f"port {port} on {HOST} is already in use",
                                 hint="choose another --port, or leave it out for a free one") from error  # fmt: skip
            raise UsageError(f"cannot listen on {HOST}:{port}: {error.strerror or error}") from error

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/?token={self.token}"


class Handler(BaseHTTPRequestHandler):
    server: UiServer
    server_version = "lore-ui"
    sys_version = ""
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a request log would only repeat the token."""

    # -- methods -------------------------------------------------------------------------
    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def _refuse_write(self) -> None:
        # The request's body is never read: close the connection rather than parse it as the next request.
        self.close_connection = True
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, "text/plain; charset=utf-8",
                   b"lore ui is read-only: only GET and HEAD are answered.\n",
                   extra={"Allow": READ_METHODS, "Connection": "close"})  # fmt: skip

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = _refuse_write

    # -- routing ---------------------------------------------------------------------------
    def _answer(self, *, head: bool) -> None:
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        if not self._host_allowed():
            self._page(HTTPStatus.FORBIDDEN, pages.error_page(None, 403, "This address is not lore ui's."), head)
            return
        given = query.get("token", "")
        if not hmac.compare_digest(given.encode(), self.server.token.encode()):
            message = "An access token is required." if not given else "This access token is not valid."
            self._page(HTTPStatus.FORBIDDEN, pages.error_page(None, 403, message,
                       "Open the URL that `lore ui` printed; it carries the token."), head)  # fmt: skip
            return
        urls = pages.Urls(self.server.token)
        path = parts.path
        try:
            if path.startswith("/static/"):
                self._static(unquote(path[len("/static/"):]), head)
                return
            render = self._route(path, query, urls)
            if render is None:
                self._page(HTTPStatus.NOT_FOUND, pages.error_page(urls, 404, "There is no such page."), head)
                return
            self._page(HTTPStatus.OK, render(), head)
        except NotFoundError as error:
            self._page(HTTPStatus.NOT_FOUND, pages.error_page(urls, 404, error.message, error.hint), head)
        except UsageError as error:
            self._page(HTTPStatus.BAD_REQUEST, pages.error_page(urls, 400, error.message, error.hint), head)
        except LoreError as error:
            self._page(HTTPStatus.INTERNAL_SERVER_ERROR, pages.error_page(urls, 500, error.message, error.hint), head)
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as error:  # a bug in lore: one line on stderr, a plain answer, the server lives on
            print(f"lore ui: unexpected {type(error).__name__}: {error}", file=sys.stderr, flush=True)
            self._send(HTTPStatus.INTERNAL_SERVER_ERROR, "text/plain; charset=utf-8",
                       f"unexpected {type(error).__name__}: this is a bug in lore\n".encode(), head=head)  # fmt: skip

    def _route(self, path: str, query: dict[str, str], urls: pages.Urls) -> Callable[[], str] | None:
        memory = self.server.memory
        if path == "/":
            return lambda: pages.home_page(memory, urls)
        if path == "/search":
            return lambda: pages.search_page(memory, urls, query)
        if path == "/timeline":
            return lambda: pages.timeline_page(memory, urls, query)
        if path == "/stats":
            return lambda: pages.stats_page(memory, urls)
        for prefix in ("/record/", "/graph/"):
            if path.startswith(prefix) and len(path) > len(prefix):
                record_id = unquote(path[len(prefix):])
                if prefix == "/record/":
                    return lambda: pages.record_page(memory, urls, record_id)
                depth = _depth(query.get("depth", "1"))
                return lambda: pages.graph_page(memory, urls, record_id, depth)
        return None

    def _static(self, name: str, head: bool) -> None:
        body = self.server.static.get(name)
        if body is None:
            self._page(HTTPStatus.NOT_FOUND, pages.error_page(pages.Urls(self.server.token), 404, "No such file."), head)
            return
        self._send(HTTPStatus.OK, STATIC_TYPES[name], body, head=head, extra={"Cache-Control": "private, max-age=3600"})

    def _host_allowed(self) -> bool:
        # DNS rebinding: a page on another site that resolves its name to 127.0.0.1 sends its own Host.
        host = self.headers.get("Host", "")
        return host in (f"{HOST}:{self.server.port}", f"localhost:{self.server.port}")

    # -- responses ---------------------------------------------------------------------------
    def _page(self, status: HTTPStatus, html: str, head: bool) -> None:
        self._send(status, "text/html; charset=utf-8", html.encode(), head=head)

    def _send(self, status: HTTPStatus, content_type: str, body: bytes, *, head: bool = False,
              extra: dict[str, str] | None = None) -> None:  # fmt: skip
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        headers = {"Cache-Control": "no-store", **SECURITY_HEADERS, **(extra or {})}
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if not head:
            self.wfile.write(body)


def _depth(value: str) -> int:
    try:
        depth = int(value)
    except ValueError as error:
        raise UsageError(f"depth {value!r} is not a number", hint="use depth=1, 2 or 3") from error
    if depth not in pages.GRAPH_DEPTHS:
        raise UsageError(f"depth {depth} is out of range", hint="use depth=1, 2 or 3")
    return depth


def serve(memory: Memory, *, port: int = 0, open_browser: bool = False, out: IO[str] = sys.stdout,
          ready: Callable[[UiServer], None] | None = None, stop_on_sigint: bool = False) -> None:  # fmt: skip
    """Listen, print the URL (first line, flushed), warm the index in the background, serve until interrupted.

    ``stop_on_sigint`` (the main thread only): SIGINT stops the server, however the process was started (a
    background job of a non-interactive shell inherits it ignored). The handler asks the server to shut down
    from another thread instead of raising KeyboardInterrupt: raised inside a write to stderr, that left the
    stream's buffer mid-write and the next write failed ("reentrant call"), exit 70 instead of 0.
    """
    server = UiServer(memory, port)
    if stop_on_sigint:
        import signal

        # A shutdown asked before serve_forever starts is honoured when it does.
        signal.signal(signal.SIGINT, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    try:
        print(server.url, file=out, flush=True)
        print(f"lore ui: serving {memory.locations.data_dir} read-only on {HOST}:{server.port}; Ctrl-C stops it",
              file=sys.stderr, flush=True)  # fmt: skip
        threading.Thread(target=_warm, args=(memory,), name="lore-ui-warm", daemon=True).start()
        if open_browser:
            import webbrowser

            threading.Thread(target=webbrowser.open, args=(server.url,), name="lore-ui-open", daemon=True).start()
        if ready is not None:
            ready(server)
        server.serve_forever()
    finally:
        server.server_close()


def _warm(memory: Memory) -> None:
    """Read the store and open the index ahead of the first page; a problem shows on the page that needs it."""
    try:
        memory.loaded()
        memory.warm()
    except Exception:  # reported by the request that needs the index, with its message
        pass
