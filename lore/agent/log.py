"""The agent surfaces' failure log (``hook.log`` in the cache dir): the hooks and the helper never raise at their caller."""

from __future__ import annotations

import contextlib
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

# The cache dir, once the entry point has read the settings (``use_cache_dir``).
_cache: list[Path] = []


def use_cache_dir(cache: Path) -> None:
    """Log into ``cache`` (the cache dir of the entry point's settings) from now on."""
    _cache[:] = [cache]


def _cache_dir() -> Path:
    """The cache dir: the entry point's, else placed by the two variables alone, read here and not through
    ``Settings.from_env``: a bad value of another setting is itself what gets logged."""
    if _cache:
        return _cache[0]
    import os

    from lore.paths import cache_dir

    class CacheOnly:  # lore.paths.Directories, of which cache_dir reads these two
        cache_dir = os.environ.get("LORE_CACHE_DIR", "").strip() or None
        xdg_cache_home = os.environ.get("XDG_CACHE_HOME", "").strip() or None

    return cache_dir(CacheOnly())  # type: ignore[arg-type]


def log_failure(kind: str, message: str) -> None:
    """One line per failure in the cache dir; never raises."""
    try:
        path = _cache_dir() / "hook.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        line = f"{stamp} {kind}: {' '.join(str(message).split())[:500]}\n"
        with path.open("a", encoding="utf-8") as handle:
            handle.write(line)
    except Exception:
        pass


# The hook's own record of what it handed, one JSON line per prompt (never the prompt's text):
# `lore doctor` and `lore bench` summarise it. Rotated to ``.1`` past this size.
PROMPT_LOG = "hook-prompts.jsonl"
PROMPT_LOG_BYTES = 1_000_000


def log_prompt(route: str, handed: object) -> None:
    """One line for one prompt: the tier chosen, the characters added, the ids handed; never raises.

    ``route``: ``trivial`` (never searched), ``warm`` (the helper answered), ``cold`` or ``process``.
    """
    try:
        ids = tuple(getattr(handed, "ids", ()))
        pointers = tuple(getattr(handed, "pointers", ()))
        full = [i for i in ids if i not in pointers]
        tier = "full" if full else "pointer" if pointers else "none"
        _append({"ts": round(time.time(), 3), "route": route, "tier": tier, "chars": len(getattr(handed, "text", "")),
                 "full": full, "pointers": list(pointers)})  # fmt: skip
    except Exception:
        pass


def log_opened(record_id: str, via: str) -> None:
    """A record opened in full (``lore show``, MCP ``show``): counted against the pointers handed before it."""
    with contextlib.suppress(Exception):
        _append({"ts": round(time.time(), 3), "opened": record_id, "via": via})


def _append(entry: dict[str, object]) -> None:
    import json
    import os

    path = _cache_dir() / PROMPT_LOG
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if path.stat().st_size > PROMPT_LOG_BYTES:
            os.replace(path, path.with_name(PROMPT_LOG + ".1"))
    except FileNotFoundError:
        pass
    with path.open("a", encoding="utf-8") as handle:  # one short write: lines from concurrent hooks stay whole
        handle.write(json.dumps(entry) + "\n")


SUMMARY_DAYS = 7.0


def prompt_summary(cache: Path, days: float = SUMMARY_DAYS, now: float | None = None) -> dict[str, object]:
    """What the prompt hook handed over the last ``days``: prompts per tier, characters per prompt,
    and how many of the pointers it handed were opened afterwards (``lore show``, MCP ``show``)."""
    import json

    now = time.time() if now is None else now
    since = now - days * 86400
    tiers = {"full": 0, "pointer": 0, "none": 0, "trivial": 0}
    chars = 0
    pointed: dict[str, float] = {}
    opened: set[str] = set()
    for name in (PROMPT_LOG + ".1", PROMPT_LOG):
        try:
            lines = (cache / name).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                entry = json.loads(line)
                stamp = float(entry["ts"])
            except (ValueError, KeyError, TypeError):
                continue  # a torn or foreign line says nothing
            if stamp < since:
                continue
            if "opened" in entry:
                if str(entry["opened"]) in pointed:
                    opened.add(str(entry["opened"]))
                continue
            tier = "trivial" if entry.get("route") == "trivial" else str(entry.get("tier", "none"))
            tiers[tier if tier in tiers else "none"] += 1
            chars += int(entry.get("chars") or 0)
            for rid in entry.get("pointers") or []:
                pointed.setdefault(str(rid), stamp)
    prompts = sum(tiers.values())
    return {"days": days, "prompts": prompts, "tiers": tiers,
            "shares": {k: round(v / prompts, 3) if prompts else 0.0 for k, v in tiers.items()},
            "chars_per_prompt": round(chars / prompts, 1) if prompts else 0.0,
            "pointers_handed": len(pointed), "pointers_opened": len(opened)}  # fmt: skip


def summary_line(summary: dict[str, object]) -> str:
    """``prompt_summary`` in one line, as ``lore doctor`` and ``lore bench`` print it."""
    prompts = int(summary["prompts"])  # type: ignore[call-overload]
    if not prompts:
        return f"Prompt hook, last {summary['days']:g} days: no prompts logged"
    shares: dict[str, float] = summary["shares"]  # type: ignore[assignment]
    return (f"Prompt hook, last {summary['days']:g} days: {prompts} prompts; full items {shares['full']:.0%}, "
            f"pointers only {shares['pointer']:.0%}, nothing {shares['none']:.0%}, trivial {shares['trivial']:.0%}; "
            f"{summary['chars_per_prompt']:.0f} characters per prompt; "
            f"pointers opened later {summary['pointers_opened']} of {summary['pointers_handed']}")
