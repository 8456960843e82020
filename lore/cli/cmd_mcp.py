"""`lore mcp`: run the MCP server over stdio (needs the optional ``mcp`` extra)."""

from __future__ import annotations

import typer

from lore.cli.base import app, state


@app.command("mcp")
def mcp(ctx: typer.Context) -> None:
    """Run the MCP server on stdin/stdout, for Claude Code and other MCP clients (see docs/mcp.md)."""
    from lore.agent.mcp_start import require_sdk, serve

    require_sdk()
    st = state(ctx)
    serve(st.locations, project=st.given_project, settings=st.settings)
