"""Agent integration commands (registered in a later step)."""
