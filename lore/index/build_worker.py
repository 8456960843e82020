"""``python -P -m lore.index.build_worker WORKDIR CHUNK [MODEL]``: a large build's embeddings, beside the builder.

The builder writes every text to embed to ``WORKDIR/texts.jsonl`` (one JSON string a
line) and goes on with the rest of the build (BM25, the table, the graph) while this
process embeds chunks of ``CHUNK`` texts from the front, with MODEL (``Settings.embed_model``;
none: the bundled one). Once done with the rest, the
builder embeds chunks from the back, so the two meet wherever the machine's load puts
them. Each chunk is claimed by creating ``claim-N`` (``O_EXCL``: one claimant) and this
process writes its vectors to ``vectors-N.npy`` (renamed into place when complete).
``embedding.json`` says at the end which model embedded them, or why none could.

Once the builder has written the new generation's docs, it names them in ``hook-files.json``
and this process writes the cold hook's files from them (``cold_vectors.write_hook_files``:
the passage tokens, 2 s of a 10,000-commit build and 11 s at 50,000, were the last part
of the build, alone on one core) while the builder embeds the chunks left.

Why a process: a thread beside the builder shares its GIL (the tokenizer releases it, but
folding case, building the id lists and gathering vectors do not): at 10k commits the
thread took 4.6 s against 2.6 s alone. A plain subprocess (rather than multiprocessing)
never re-imports the caller's ``__main__``, so builds work from any script.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

import orjson

# How long the worker waits for the builder's docs once it has embedded its share: the builder
# writes them before embedding the chunks left, so only a stalled builder is waited for this long.
HOOK_FILES_WAIT_S = 120.0


def main(argv: list[str]) -> int:
    import numpy as np

    from lore.index.build import claim, embed_texts

    workdir, size = Path(argv[0]), int(argv[1])
    model = argv[2] if len(argv) > 2 else None
    builder = os.getppid()
    texts = [orjson.loads(line) for line in (workdir / "texts.jsonl").read_bytes().splitlines()]
    identity, warning = None, None
    failed = False
    hook_seconds: float | None = None
    for chunk, start in enumerate(range(0, len(texts), size)):
        if hook_seconds is None and identity is not None:
            hook_seconds = _hook_files(workdir, model, identity)
        if not claim(workdir, chunk):
            break  # the builder works from the back: everything past here is its
        matrix, identity, warning = embed_texts(texts[start : start + size], model)
        if matrix is None:
            failed = True
            break  # the model cannot load: the builder finds out the same way
        partial = workdir / f"vectors-{chunk}.part.npy"
        np.save(partial, np.asarray(matrix, dtype=np.float32))
        partial.replace(workdir / f"vectors-{chunk}.npy")
    if not failed:
        if identity is None:  # the builder claimed every chunk before this process could
            from lore.embedder import model_identity, model_spec

            identity = model_identity(model_spec(model))
        end = time.monotonic() + HOOK_FILES_WAIT_S
        while hook_seconds is None and time.monotonic() < end and os.getppid() == builder:
            hook_seconds = _hook_files(workdir, model, identity)
            if hook_seconds is None:
                time.sleep(0.02)
    with contextlib.suppress(OSError):
        (workdir / "embedding.json").write_bytes(orjson.dumps({"identity": identity, "warning": warning,
                                                               "hook_files_seconds": hook_seconds}))  # fmt: skip
    return 0


def _hook_files(workdir: Path, model: str | None, identity: str) -> float | None:
    """Write the cold hook's files once the builder has named its docs (the seconds it took); None before."""
    from lore.index.build import HOOK_FILES

    try:
        order = orjson.loads((workdir / HOOK_FILES).read_bytes())
    except (OSError, ValueError):
        return None
    if not order.get("directory"):
        return 0.0  # the builder will name none
    from lore.index.cold_vectors import write_hook_files

    started = time.perf_counter()
    write_hook_files(Path(order["directory"]), Path(order["docs"]), model, identity)
    return time.perf_counter() - started


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
