"""Rich terminal rendering of search results: the only module that imports rich."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Mapping
from typing import Any

from lore.rank.pipeline import SearchResponse
from lore.render.text import age, one_line, shorten

GAP_LINE = "[EVIDENCE GAP: no reliable memory for this query]"
KIND_STYLE = {
    "decision": "cyan", "pattern": "green", "lesson": "green", "anti_pattern": "red",
    "handoff": "magenta", "failure": "yellow", "observation": "blue",
}  # fmt: skip


def console(stderr: bool = False, *, file: Any = None, tty: bool | None = None,
            environ: dict[str, str] | None = None) -> Any:
    """A rich console for stdout (or stderr); ``file``, ``tty`` and ``environ`` let the warm helper
    render into a buffer exactly what the asking ``lore`` process would have printed itself."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # Rich would exit 1 here. Let the error reach the CLI's command group,
            # the one place that turns a closed pipe into a quiet exit 0.
            raise BrokenPipeError

    # Piped output keeps each line whole (grep, head, less -S); a terminal wraps to its width.
    if tty is None:
        tty = (sys.stderr if stderr else sys.stdout).isatty()
    if file is None:
        return _Console(stderr=stderr, highlight=False, soft_wrap=not tty, width=None if tty else 100)
    width = None
    if tty and environ is not None and environ.get("LORE_TERMINAL_WIDTH", "").isdigit():
        width = int(environ["LORE_TERMINAL_WIDTH"])
    return _Console(file=file, highlight=False, soft_wrap=not tty, width=width if tty else 100,
                    force_terminal=tty, _environ=environ)  # fmt: skip


def consoles(terminal: Mapping[str, str] | None) -> tuple[Any, Any]:
    """The stdout and stderr consoles a command renders with: None, None for this process's own terminal; for a
    terminal described by its environment (``Lore.terminal``: the warm helper running a command for a ``lore``
    process), consoles writing to the current ``sys.stdout``/``sys.stderr`` as that terminal would show it."""
    if terminal is None:
        return None, None
    environ = dict(terminal)
    return (console(file=sys.stdout, tty=sys.stdout.isatty(), environ=environ),
            console(stderr=True, file=sys.stderr, tty=sys.stderr.isatty(), environ=environ))  # fmt: skip


def _snippet(content: str, terms: set[str], width: int = 220) -> str:
    # Fields and list items sit on lines of their own: keep them apart on the one line.
    text = " · ".join(one_line(line) for line in content.splitlines() if line.strip())
    lowered = text.lower()
    first = min((lowered.find(t) for t in terms if t and lowered.find(t) >= 0), default=-1)
    start = 0
    if first > 80:
        # Some context before the first match, starting at a word: never half a word.
        space = text.find(" ", first - 60, first)
        start = space + 1 if space >= 0 else first
    piece = text[start:]
    snippet = shorten(piece, width) or piece[:width]
    return ("…" if start else "") + snippet


def _score(score: float) -> str:
    # A weak hit above the noise floor is not "0.000": say how small it is.
    return f"{score:.3f}" if score >= 0.0005 else "<0.001"


def _highlight(text: str, terms: set[str]) -> Any:
    from rich.text import Text

    rendered = Text(text)
    for term in sorted(terms, key=len, reverse=True):
        if len(term) >= 3:
            rendered.highlight_regex(re.compile(r"(?i)\b" + re.escape(term) + r"\w*"), style="bold underline")
    return rendered


def render_search(response: SearchResponse, *, explain: bool = False, now: float | None = None,
                  out: Any = None, err: Any = None) -> None:
    from datetime import UTC, datetime

    from rich.text import Text

    from lore.analysis import terms as query_terms
    from lore.rank.query import content_words

    out = out if out is not None else console()
    now_dt = datetime.fromtimestamp(now if now is not None else time.time(), UTC)
    for warning in response.warnings:
        (err if err is not None else console(stderr=True)).print(f"Warning: {warning}", markup=False)
    if response.gap.gap:
        out.print(GAP_LINE, style="bold yellow", markup=False)
    if not response.hits:
        out.print("No results.", markup=False)
        return
    terms = set(content_words(response.query)) | set(query_terms(response.query))
    for number, hit in enumerate(response.hits, start=1):
        moment = datetime.fromtimestamp(hit.time, UTC) if hit.time is not None else None
        kind = hit.kind.replace("_", "-")
        head = Text(f"{number:>2}. ")
        head.append(f"[{kind}]", style=KIND_STYLE.get(hit.kind, ""))
        head.append(f" {hit.id}", style="bold")
        head.append(f"  {hit.project or '-'}  {age(moment, now_dt)}  score {_score(hit.score)}", style="dim")
        if hit.status != "active":
            head.append(f"  [{hit.status}]", style="red")
        if hit.represents > 1:
            head.append(f"  (+{hit.represents - 1} near-identical)", style="dim")
        out.print(head)
        out.print(Text("    ").append(_highlight(one_line(hit.title), terms)))
        body = hit.content[len(hit.title):].strip()
        if body:
            snippet = _highlight(_snippet(body, terms), terms)
            snippet.stylize("dim")
            out.print(Text("    ").append(snippet))
        for path in hit.path:
            out.print(Text(f"    via {path}", style="italic"))
        for note in hit.notes:
            out.print(Text(f"    ! {note}", style="yellow"))
        if explain:
            _explain(out, hit, response.weights)
    if explain:
        gap = response.gap.figures()
        out.print(Text(
            f"intent {response.intent.intent} (sim {response.intent.similarity:.2f}{', fallback' if response.intent.fallback else ''}) · "
            f"{response.fusion} fusion, weights {', '.join(f'{k} {v:.2f}' for k, v in response.weights.items())} · "
            f"gap z {gap['z_score']} cos {gap['top_cosine']} coverage {gap['term_coverage']} agree {gap['channels_agreeing']} ({gap['reason']})",
            style="dim",
        ))  # fmt: skip
        out.print(Text("timings ms: " + ", ".join(f"{k} {v:.1f}" for k, v in response.timings_ms.items()), style="dim"))


def _explain(out: Any, hit: Any, weights: dict[str, float]) -> None:
    from rich.text import Text

    parts = []
    for channel in ("bm25", "vector", "hyde", "graph"):
        score = hit.channel_scores.get(channel)
        if channel in hit.ranks or score is not None:
            rank = f"#{hit.ranks[channel]}" if channel in hit.ranks else "#-"
            shown = f" s={score:.3f}" if score is not None else ""
            parts.append(f"{channel} {rank}{shown} +{hit.contributions.get(channel, 0.0):.4f}")
        else:
            parts.append(f"{channel} -")
    out.print(Text("    channels: " + " · ".join(parts), style="dim"))
    factors = " × ".join(f"{name} {value:.3f}" for name, value in hit.factors.items())
    out.print(Text(f"    score = relevance {hit.relevance:.3f} (fused {hit.fused:.4f}) × {factors} = {hit.score:.3f}", style="dim"))
    if hit.score_rank is not None:
        # Why a hit can sit above a higher score: MMR trades score for novelty.
        similar = "" if hit.max_similarity is None else f", cosine {hit.max_similarity:.2f} to the closest hit above"
        out.print(Text(f"    diversity: #{hit.score_rank} by score{similar}", style="dim"))
