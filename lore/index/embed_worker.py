"""``python -m lore.index.embed_worker TEXTS.jsonl OUT.npy``: embed texts in a separate process.

The indexer runs this beside Whoosh on large builds so the two use two cores.
A plain subprocess (rather than multiprocessing) never re-imports the caller's
``__main__``, so builds work from any script.
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson


def main(argv: list[str]) -> int:
    import numpy as np

    from lore.index.manager import IndexManager

    source, target = Path(argv[0]), Path(argv[1])
    texts = [orjson.loads(line) for line in source.read_bytes().splitlines()]
    matrix, identity, warning = IndexManager._embed_texts(texts)
    if matrix is None:
        target.with_suffix(".json").write_bytes(orjson.dumps({"identity": None, "warning": warning}))
        return 0
    np.save(target, np.asarray(matrix, dtype=np.float32))
    target.with_suffix(".json").write_bytes(orjson.dumps({"identity": identity, "warning": warning}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
