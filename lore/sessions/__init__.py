"""Session capture: candidate records proposed from agent session transcripts.

``transcript`` reads a Claude Code transcript incrementally, ``heuristics`` and
``llm_extract`` propose candidates, ``state`` remembers how far each session was
read, ``pipeline`` scrubs, de-duplicates and stores them as candidates with their
provenance, ``background`` hands a capture to a detached process (the hooks), and
``claude_code`` finds transcripts and Claude Code's memory files for ``lore import``.
"""
