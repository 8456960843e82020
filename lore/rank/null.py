"""A store's null evidence: what the prompt hook's search finds for prompts the store cannot answer.

Measured once per index generation by the warm helper, after it has warmed up and
before it serves (80 searches: about 0.8 s at 10,000 records, which no build and no
prompt waits for), and kept beside the index as ``null-evidence-2.json``; the injection
decision (``lore.rank.inject``) reads it to put a hit's evidence on the store's own
scale. Until then (a generation no helper has loaded yet) it uses
``inject.DEFAULT_NULL``. The file is derived and disposable like the rest of the index.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from lore.rank import inject

# Named for the evidence it holds: a generation measured by a lore whose evidence differed
# (before "passage") is measured again rather than read on the wrong scale.
FILE = "null-evidence-2.json"


# What ``load`` read, by file, with the file's identity then (the warm helper asks on every prompt:
# a stat rather than a read and a parse).
_LOADED: dict[Path, tuple[tuple[int, int, int], inject.NullEvidence]] = {}


def load(directory: Path | None) -> inject.NullEvidence:
    """The generation's null evidence; the default when it was never measured or cannot be read."""
    if directory is None:
        return inject.DEFAULT_NULL
    path = directory / FILE
    try:
        stat = path.stat()
        key = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        cached = _LOADED.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        found = inject.NullEvidence.from_json(json.loads(path.read_bytes()))
    except (OSError, ValueError, TypeError, IndexError, KeyError):
        return inject.DEFAULT_NULL
    if len(_LOADED) > 8:  # a helper outlives many generations
        _LOADED.clear()
    _LOADED[path] = (key, found)
    return found


# Below this many records a store's null says little (most null prompts match no word of it,
# so its spread is near 0 and any match looks extreme): such a store keeps the default.
MIN_RECORDS = inject.YOUNG_STORE_RECORDS


def measure(session: Any, now: float | None = None) -> inject.NullEvidence:
    """Run the hook's search (whole pipeline, and BM25 alone as the cold path) over ``inject.NULL_PROMPTS``.

    ``session`` is a ``lore.search.SearchSession`` (its ``search`` runs the search service).

    A store of fewer than ``MIN_RECORDS`` records gets ``inject.DEFAULT_NULL``.
    """
    import statistics  # here: the cold hook imports this module, and statistics costs it ~4 ms

    from lore import analysis
    from lore.rank.cold import hook_options
    from lore.rank.pipeline import CHANNELS

    if len(session.open("ignore").table) < MIN_RECORDS:
        return inject.DEFAULT_NULL
    moment = now if now is not None else time.time()
    parts: dict[str, dict[str, list[float]]] = {"warm": {}, "cold": {}}
    for prompt in inject.NULL_PROMPTS:
        terms = analysis.unique_terms(prompt)
        for part, channels in (("warm", CHANNELS), ("cold", ("bm25",))):
            # Through the session (``lore.search.SearchSession.search``): the search service is a layer below this one.
            response = session.search(prompt, hook_options(None, moment, channels=channels), policy="ignore",
                                      log_access=False, use_llm=False)  # fmt: skip
            if not response.hits:
                continue
            top = response.hits[0]
            cosine = top.channel_scores.get("vector", 0.0) if "vector" in response.channels_used else None
            raw = inject.raw_evidence(terms, response.term_idf, top.title, top.content, cosine, top.passage_cosine)
            for name, value in raw.items():
                parts[part].setdefault(name, []).append(value)

    def summary(values: dict[str, list[float]], default: inject.Null) -> dict[str, tuple[float, float]]:
        out = dict(default)
        for name, found in values.items():
            if len(found) >= 10:  # fewer: a young store; its spread says nothing yet
                out[name] = (statistics.fmean(found), statistics.pstdev(found) or 1.0)
        return out

    return inject.NullEvidence(summary(parts["warm"], inject.DEFAULT_NULL.warm), summary(parts["cold"], inject.DEFAULT_NULL.cold))


def ensure(session: Any, now: float | None = None) -> bool:
    """Measure and store the null evidence of the session's generation if it has none; True if it wrote one."""
    from lore.index.layout import current_dir
    from lore.store.fileio import atomic_write

    # Measured already: known from the live generation's directory alone, before opening the index
    # (its table, postings, vectors and the model: seconds at 50,000 records, on every no-op `lore index`).
    live = current_dir(session.locations.index_dir)
    if live is not None and (live / FILE).exists():
        return False
    reader = session.open("ignore")
    path = reader.directory / FILE
    if path.exists():
        return False
    from lore.index.reader import IndexDamagedError

    # A racing build may publish a newer generation and remove this one meanwhile: then nothing is
    # measured or written, and its directory is not made again.
    try:
        evidence = measure(session, now)
        atomic_write(path, json.dumps(evidence.to_json(), indent=1).encode(), make_parent=False)
    except (FileNotFoundError, IndexDamagedError):
        return False
    return True
