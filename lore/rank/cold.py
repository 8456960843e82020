"""The prompt hook's light path: the pipeline over the cold reader, BM25 reranked by vectors, without numpy.

When no warm helper answers a prompt, loading numpy and the query encoder's
tokenizer alone would cost more than the whole cold hook may take (docs/search.md,
"The prompt hook's cold path"). This path opens the index with ``lore.index.cold``'s
``ColdReader`` (pure Python, bit-identical BM25 scores) and runs ``pipeline.run``
itself with ``channels=RERANKED``: the reader selects the pipeline's sparse
retrieval backend (``lore.rank.retrieval.Sparse``: BM25, then the vector channel
over BM25's candidates, or BM25 alone for an index without vectors it can read),
and every other step (the row filter: active records only, candidates are never
injected; fusion; the scoring stages; the evidence gap; graph expansion) is the
pipeline's one code path. The injection decision and the block
(``context.block_for``, a later layer than this one) follow in
``lore.agent.prompt.cold_context_for_prompt``. Quotes are a hint here as on every
prompt path; the backend declines (and the whole pipeline answers) a phrase filter
(``phrases="filter"``, which needs term positions) and a prompt with fewer than
three BM25 candidates: a young store is judged by the whole pipeline.

``LORE_HOOK_COLD`` chooses what a cold hook does: ``light`` (this path, the
default; ``lexical``, its name while it ran BM25 alone, still means it), ``full``
(the whole pipeline in process: vectors too, within the hook's deadline), ``off``
(inject nothing until the helper runs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from lore.rank.pipeline import SearchOptions, SearchResponse, run
from lore.rank.retrieval import MIN_CANDIDATES, Declined

if TYPE_CHECKING:
    from lore.index.cold import ColdReader
    from lore.paths import Locations

__all__ = ["BM25_ONLY", "MIN_CANDIDATES", "RERANKED", "Declined", "hook_options", "open_reader", "run_cold"]

BM25_ONLY = ("bm25",)
# BM25, then the vector channel over BM25's candidates only (``retrieval.Sparse.vectors``: pure Python).
RERANKED = ("bm25", "vector")


def run_cold(reader: ColdReader, query: str, opts: SearchOptions, *,
             access: Mapping[str, tuple[int, float]] | None = None) -> SearchResponse:  # fmt: skip
    """``pipeline.run(reader, query, opts)`` with ``opts.channels`` ``BM25_ONLY`` or ``RERANKED`` over the cold reader: no numpy.

    Raises ``Declined`` for a phrase filter or fewer than three BM25 candidates (the
    whole pipeline answers those), and ``ValueError`` for options this path does not
    serve (another channel, adaptive weights, diversity).
    """
    if tuple(opts.channels) not in (BM25_ONLY, RERANKED) or opts.adaptive or opts.diversity:
        raise ValueError("the cold path serves BM25, alone or reranked by the vector channel")
    return run(reader, query, opts, encode=None, access=access)


def open_reader(locations: Locations) -> ColdReader:
    """The live generation for ``locations``' data dir, every file checked; ``FileNotFoundError`` or ``ValueError``."""
    from lore.index.cold import ColdReader
    from lore.index.layout import DAMAGED, GenerationMeta, current_dir

    if not locations.data_dir.is_dir():
        raise FileNotFoundError(f"data dir {locations.data_dir} does not exist")
    directory = current_dir(locations.index_dir)
    if directory is None:
        raise FileNotFoundError(f"no usable index in {locations.index_dir}; run `lore index`")
    meta = GenerationMeta.read(directory)
    if (directory / DAMAGED).exists():
        raise FileNotFoundError(f"the index in {directory} is marked damaged; run `lore index`")
    if meta.data_dir != str(locations.data_dir.resolve()):
        raise FileNotFoundError(f"the index in {locations.index_dir} was built for another data dir "
                                f"({meta.data_dir}); run `lore index`")  # fmt: skip
    reader = ColdReader(directory, meta)
    reader.load()
    return reader


def hook_options(project: str | None, now: float, *, deadline: float | None = None,
                 channels: tuple[str, ...] = BM25_ONLY) -> SearchOptions:  # fmt: skip
    """The prompt hook's search options, for the light path (``RERANKED`` or ``BM25_ONLY``) and the in-process pipeline."""
    return SearchOptions(limit=5, current_project=project, graph_depth=1, now=now, deadline=deadline, channels=channels)
