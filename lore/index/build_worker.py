"""``python -m lore.index.build_worker WORKDIR [MODEL]``: the indexer's second process.

Large builds run this beside Whoosh so the two use two cores: it embeds
``WORKDIR/texts.jsonl`` into ``vectors.npy`` and analyses the title/body pairs
in ``fields.jsonl`` into a BM25 forward index (``forward.npz`` plus
``vocab.json``), with MODEL (the configured model; none: the bundled one). A plain subprocess (rather than multiprocessing) never
re-imports the caller's ``__main__``, so builds work from any script.
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson


def main(argv: list[str]) -> int:
    import numpy as np

    from lore.index import bm25
    from lore.index.build import embed_texts

    workdir = Path(argv[0])
    fields = [tuple(orjson.loads(line)) for line in (workdir / "fields.jsonl").read_bytes().splitlines()]
    forward = bm25.build_forward(fields)
    bm25.write_forward(forward, workdir / "vocab.json", workdir / "forward.npz")

    texts = [orjson.loads(line) for line in (workdir / "texts.jsonl").read_bytes().splitlines()]
    matrix, identity, warning = embed_texts(texts, argv[1] if len(argv) > 1 else None)
    if matrix is not None:
        np.save(workdir / "vectors.npy", np.asarray(matrix, dtype=np.float32))
    (workdir / "embedding.json").write_bytes(
        orjson.dumps({"identity": identity if matrix is not None else None, "warning": warning})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
