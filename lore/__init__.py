"""lore: a memory that compounds, for software engineers and their coding agents."""

__version__ = "0.1.0"
