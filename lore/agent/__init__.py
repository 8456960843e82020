"""What agents talk to: the prompt and session hooks, the warm helper (client and daemon), the MCP server, and the installers."""
