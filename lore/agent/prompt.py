"""The prompt's context block: the function the in-process hook and the warm helper share, and the cold path's.

Both the hook (``lore.agent.hook``) and the helper daemon (``lore.agent.daemon``)
import this module; it imports neither. Its own imports are the standard library
until it is called.
"""

from __future__ import annotations

import time
from typing import NamedTuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from lore.paths import Locations


class Handed(NamedTuple):
    """What one prompt's block hands the agent: its text, every id in it, and those handed as pointers."""

    text: str
    ids: tuple[str, ...] = ()
    pointers: tuple[str, ...] = ()

    @property
    def tier(self) -> str:
        """``full``, ``pointer`` or ``none`` (``lore.rank.inject.Decision.tier``)."""
        return "full" if set(self.ids) - set(self.pointers) else "pointer" if self.pointers else "none"


NOTHING = Handed("")


def _handed(block: Any) -> Handed:
    return Handed(block.text, tuple(i.id for i in block.items), tuple(i.id for i in block.items if i.tier == "pointer"))


def context_for_prompt(session: Any, prompt: str, cwd: str | None, budget: int, soft_deadline: float | None,
                       gap_line: bool = False, policy: str = "ignore", seen: tuple[str, ...] = (),
                       pointed: tuple[str, ...] = ()) -> Handed:  # fmt: skip
    """The fenced context block for a prompt and the ids it holds: shared by the in-process path and the warm helper.

    ``seen``: the ids handed in full earlier in the same session (the injection decision
    does not hand them again unless one is now clearly the best answer); ``pointed``:
    those handed as pointers (not pointed to again).
    """
    from lore.context import HOOK, context_for
    from lore.project import detect_project
    from lore.rank.cold import hook_options
    from lore.rank.pipeline import CHANNELS

    project = detect_project(cwd) if cwd else None
    options = hook_options(project, time.time(), deadline=soft_deadline, channels=CHANNELS)
    block = context_for(session, prompt, options, HOOK._replace(budget_chars=budget, gap_line=gap_line),
                        project=project, seen=seen, pointed=pointed, policy=prompt_policy(policy), use_llm=False)  # fmt: skip
    return _handed(block)


def prompt_policy(policy: str) -> str:
    """The staleness policy on the prompt path: ``ignore`` (default) or ``warn``, never ``refresh``.

    A refresh can take seconds (a full rebuild, minutes): inside the hook's deadline it
    would cost the prompt its context, and the build would be cut off when the hook
    exits, so ``LORE_HOOK_REFRESH=refresh`` answers from the index as it is, like ``warn``.
    The next ordinary command (``lore search``, ``lore index``) or the warm helper refreshes.
    """
    return "warn" if policy == "refresh" else policy


def cold_context_for_prompt(prompt: str, cwd: str | None, budget: int, locations: Locations, *,
                            mode: str = "light", gap_line: bool = False, seen: tuple[str, ...] = (),
                            pointed: tuple[str, ...] = (), deadline: float | None = None,
                            log: Callable[[str, str], None] | None = None) -> Handed | None:  # fmt: skip
    """The hook's block for ``prompt`` from the light path (``lore.rank.cold``), and its ids; None: the full pipeline answers.

    ``NOTHING`` when there is nothing to inject (the injection decision says no,
    ``LORE_HOOK_COLD=off``, or the hard ``deadline`` passed). Errors propagate: the
    hook logs them and injects nothing.
    """
    if mode == "off":
        return NOTHING
    if mode == "full":
        return None
    from lore.context import HOOK, block_for
    from lore.project import detect_project
    from lore.rank import access as access_log
    from lore.rank import null
    from lore.rank.cold import RERANKED, Declined, hook_options, open_reader, run_cold
    from lore.rank.query import scrub_query

    reader = open_reader(locations)
    try:
        scrubbed = scrub_query(prompt)
        now = time.time()
        project = detect_project(cwd) if cwd else None
        options = hook_options(project, now, channels=RERANKED)
        stats = access_log.load_stats(locations.access_log)
        try:
            response = run_cold(reader, scrubbed.text, options, access=stats)
        except Declined:
            return None
        access_log.log_response(locations.access_log, response, stats, now)
        block = block_for(response, HOOK._replace(budget_chars=budget, gap_line=gap_line), project=project, seen=seen,
                          pointed=pointed, null=null.load(reader.directory))  # fmt: skip
        if deadline is not None and time.monotonic() > deadline:
            if log is not None:
                log("deadline", "light cold answer past the hook's deadline; injected nothing")
            return NOTHING
        return _handed(block)
    finally:
        reader.close()
