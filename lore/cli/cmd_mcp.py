"""`lore mcp`: run the MCP server over stdio (needs the optional ``mcp`` extra)."""

from __future__ import annotations

import importlib.util

import typer

from lore.cli.base import app, state
from lore.errors import LoreError


@app.command("mcp")
def mcp(ctx: typer.Context) -> None:
    """Run the MCP server on stdin/stdout, for Claude Code and other MCP clients (see docs/mcp.md)."""
    if importlib.util.find_spec("mcp") is None:
        raise LoreError("the MCP server needs the mcp extra", hint="pip install 'lore[mcp]'")
    try:
        from lore.agent.mcp import serve
    except ImportError as error:  # an mcp too old for the server's API
        if not (error.name or "").startswith("mcp"):
            raise
        raise LoreError(
            f"the installed mcp package is not usable: {error}", hint="pip install -U 'lore[mcp]'"
        ) from error

    st = state(ctx)
    serve(st.locations, project=st.project, settings=st.settings)
