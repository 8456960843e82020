"""The prompt's context block: the one function the in-process hook and the warm helper share.

Both the hook (``lore.agent.hook``) and the helper daemon (``lore.agent.daemon``)
import this module; it imports neither. Its own imports are the standard library
until it is called.
"""

from __future__ import annotations

import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def context_for_prompt(session: Any, prompt: str, cwd: str | None, budget: int, soft_deadline: float | None,
                       gap_line: bool = False, policy: str = "ignore") -> str:  # fmt: skip
    """The fenced context block for a prompt: shared by the in-process path and the warm helper."""
    from lore.context import assemble
    from lore.project import detect_project
    from lore.rank.cold import hook_options
    from lore.rank.pipeline import CHANNELS
    from lore.search import search

    project = detect_project(cwd) if cwd else None
    options = hook_options(project, time.time(), deadline=soft_deadline, channels=CHANNELS)
    response = search(session, prompt, options, policy=prompt_policy(policy), use_llm=False)
    block = assemble(response, budget_chars=budget, max_items=5, fmt="compact", fenced=True, gap_line=gap_line)
    return block.text


def prompt_policy(policy: str) -> str:
    """The staleness policy on the prompt path: ``ignore`` (default) or ``warn``, never ``refresh``.

    A refresh can take seconds (a full rebuild, minutes): inside the hook's deadline it
    would cost the prompt its context, and the build would be cut off when the hook
    exits, so ``LORE_HOOK_REFRESH=refresh`` answers from the index as it is, like ``warn``.
    The next ordinary command (``lore search``, ``lore index``) or the warm helper refreshes.
    """
    return "warn" if policy == "refresh" else policy


