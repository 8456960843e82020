"""Search commands (registered in a later step)."""
