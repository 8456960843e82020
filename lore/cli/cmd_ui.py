"""`lore ui`: a local, read-only web view of the memory."""

from __future__ import annotations

import contextlib

import typer

from lore.cli.base import app, state
from lore.paths import require_data_dir


@app.command()
def ui(
    ctx: typer.Context,
    port: int = typer.Option(0, "--port", min=0, max=65535, help="Port on 127.0.0.1 (default: a free one)."),
    open_browser: bool = typer.Option(False, "--open", help="Open the page in the default browser."),
) -> None:
    """Serve a read-only web view (search, timeline, records, graph, health) on 127.0.0.1.

    The first line of output is the URL, with its access token; Ctrl-C stops the server.
    """
    from lore.ui.memory import Memory
    from lore.ui.server import serve

    st = state(ctx)
    locations = st.locations
    require_data_dir(locations.data_dir)
    memory = Memory(locations, current_project=st.current_project(), settings=st.settings)
    # Ctrl-C (SIGINT) is how it stops, however it was started (serve's stop_on_sigint).
    with contextlib.suppress(KeyboardInterrupt):  # a Ctrl-C before the server's own handler is set
        serve(memory, port=port, open_browser=open_browser, stop_on_sigint=True)
    typer.echo("lore ui: stopped", err=True)
