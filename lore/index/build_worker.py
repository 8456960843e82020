"""``python -P -m lore.index.build_worker WORKDIR CHUNK [MODEL]``: a large build's embeddings, beside the builder.

The builder writes every text to embed to ``WORKDIR/texts.jsonl`` (one JSON string a
line) and goes on with the rest of the build (BM25, the table, the graph) while this
process embeds chunks of ``CHUNK`` texts from the front, with MODEL (``Settings.embed_model``;
none: the bundled one). Once done with the rest, the
builder embeds chunks from the back, so the two meet wherever the machine's load puts
them. Each chunk is claimed by creating ``claim-N`` (``O_EXCL``: one claimant) and this
process writes its vectors to ``vectors-N.npy`` (renamed into place when complete).
``embedding.json`` says at the end which model embedded them, or why none could.

Why a process: a thread beside the builder shares its GIL (the tokenizer releases it, but
folding case, building the id lists and gathering vectors do not): at 10k commits the
thread took 4.6 s against 2.6 s alone. A plain subprocess (rather than multiprocessing)
never re-imports the caller's ``__main__``, so builds work from any script.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import orjson


def main(argv: list[str]) -> int:
    import numpy as np

    from lore.index.build import claim, embed_texts

    workdir, size = Path(argv[0]), int(argv[1])
    model = argv[2] if len(argv) > 2 else None
    texts = [orjson.loads(line) for line in (workdir / "texts.jsonl").read_bytes().splitlines()]
    identity, warning = None, None
    for chunk, start in enumerate(range(0, len(texts), size)):
        if not claim(workdir, chunk):
            break  # the builder works from the back: everything past here is its
        matrix, identity, warning = embed_texts(texts[start : start + size], model)
        if matrix is None:
            break  # the model cannot load: the builder finds out the same way
        partial = workdir / f"vectors-{chunk}.part.npy"
        np.save(partial, np.asarray(matrix, dtype=np.float32))
        partial.replace(workdir / f"vectors-{chunk}.npy")
    with contextlib.suppress(OSError):
        (workdir / "embedding.json").write_bytes(orjson.dumps({"identity": identity, "warning": warning}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
