"""Index commands (registered in a later step)."""
