"""The on-disk layout of the derived index, and ``GenerationMeta``, its commit point.

Layout of the index dir::

    CURRENT                 names the live generation (atomically replaced)
    gen-<id>/meta.json      the commit point: manifest, model, file names, counts
    gen-<id>/bm25-*-N.*     BM25F impact index (the lexical channel), its forward counts and
                            each record's terms in order (quoted phrases)
    gen-<id>/vectors-N.npy  embeddings (row i = table row i)
    gen-<id>/table-N.bin    records table columns (lore.index.columns); docs-N.jsonl holds the texts
    gen-<id>/graph-N.json   typed-edge adjacency
    gen-<id>/DAMAGED        written when a reader found a file unreadable: rebuild
    .build.lock             one builder at a time

Nothing here imports numpy: the prompt hook reads the layout.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any, NamedTuple

FORMAT_VERSION = 12  # 12: the table as typed columns (11: no Whoosh; 10: impacts per query)
CURRENT = "CURRENT"
META = "meta.json"
LOCK = ".build.lock"
DAMAGED = "DAMAGED"


class MetaError(ValueError):
    """A ``meta.json`` that is not a generation's meta of this format (the field at fault is named)."""


def _check(value: Any, kinds: type | tuple[type, ...], name: str, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if isinstance(value, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,)):
        raise MetaError(f"meta.json: {name} has the wrong type (bool)")
    if not isinstance(value, kinds):
        raise MetaError(f"meta.json: {name} has the wrong type ({type(value).__name__})")
    return value


class GenerationMeta(NamedTuple):
    """What ``meta.json`` records about one generation (and revision) of the index.

    Replacing ``meta.json`` atomically is the commit of a build or a refresh:
    every file it names (``files``) and every size it records (``sizes``) belong
    to that revision. ``sources``/``digests`` are the data dir's manifest at the
    time (``freshness`` compares them with the files). ``damaged`` is never
    stored: a reader sets it on its own copy when a file turned out unreadable.
    A NamedTuple, not a dataclass: the cold prompt hook reads it and imports no dataclasses.
    """

    data_dir: str
    built_at: str
    updated_at: str
    revision: int
    model: str | None
    model_spec: str | None
    embeddings: bool
    counts: dict[str, int]
    files: dict[str, str]
    sizes: dict[str, int]
    sources: dict[str, list[int]]
    digests: dict[str, str]
    # The configured model (its identity) when the index was built; None in indexes from
    # before it was recorded. Without embeddings, only a change of it makes re-embedding worth trying.
    model_wanted: str | None = None
    model_error: str | None = None
    lore_version: str = ""
    format: int = FORMAT_VERSION
    damaged: str | None = None

    @property
    def records(self) -> int:
        return sum(self.counts.values())

    @property
    def stamp(self) -> tuple[int, str]:
        """What tells two revisions of one generation apart."""
        return self.revision, self.updated_at

    def with_damage(self, message: str) -> GenerationMeta:
        return self._replace(damaged=message)

    def to_json(self) -> bytes:
        data = self._asdict()
        data.pop("damaged")
        if data["model_wanted"] is None:
            data.pop("model_wanted")
        return json.dumps(data, indent=2).encode()

    @classmethod
    def from_json(cls, content: bytes) -> GenerationMeta:
        """Parse and validate ``meta.json``; ``MetaError`` names what is wrong (another format included)."""
        try:
            data = json.loads(content)
        except ValueError as exc:
            raise MetaError(f"meta.json: not JSON ({exc})") from exc
        if not isinstance(data, dict):
            raise MetaError("meta.json: not an object")
        if data.get("format") != FORMAT_VERSION:
            raise MetaError(f"meta.json: format {data.get('format')!r}, not {FORMAT_VERSION}")
        try:
            counts = _check(data["counts"], dict, "counts")
            files = _check(data["files"], dict, "files")
            sizes = _check(data["sizes"], dict, "sizes")
            sources = _check(data["sources"], dict, "sources")
            digests = _check(data["digests"], dict, "digests")
            meta = cls(
                data_dir=_check(data["data_dir"], str, "data_dir"),
                built_at=_check(data["built_at"], str, "built_at"),
                updated_at=_check(data["updated_at"], str, "updated_at"),
                revision=_check(data["revision"], int, "revision"),
                model=_check(data.get("model"), str, "model", optional=True),
                model_spec=_check(data.get("model_spec"), str, "model_spec", optional=True),
                embeddings=_check(data["embeddings"], bool, "embeddings"),
                counts={str(k): _check(v, int, f"counts.{k}") for k, v in counts.items()},
                files={str(k): _check(v, str, f"files.{k}") for k, v in files.items()},
                sizes={str(k): _check(v, int, f"sizes.{k}") for k, v in sizes.items()},
                sources={str(k): _check(v, list, f"sources.{k}") for k, v in sources.items()},
                digests={str(k): _check(v, str, f"digests.{k}") for k, v in digests.items()},
                model_wanted=_check(data.get("model_wanted"), str, "model_wanted", optional=True),
                model_error=_check(data.get("model_error"), str, "model_error", optional=True),
                lore_version=str(data.get("lore_version", "")),
            )
        except KeyError as exc:
            raise MetaError(f"meta.json: {exc.args[0]} is missing") from exc
        for name in meta.files.values():
            if "/" in name or name.startswith("."):
                raise MetaError(f"meta.json: file name {name!r} is not inside the generation")
        return meta

    @classmethod
    def read(cls, directory: Path) -> GenerationMeta:
        """The meta of the generation in ``directory``; OSError or ``MetaError``."""
        return cls.from_json((directory / META).read_bytes())


def file_names(revision: int) -> dict[str, str]:
    """The files of one revision of a generation (BM25's included)."""
    from lore.index import bm25

    return {
        "table": f"table-{revision}.bin",
        "docs": f"docs-{revision}.jsonl",
        "graph": f"graph-{revision}.json",
        "vectors": f"vectors-{revision}.npy",
        **bm25.file_names(revision),
    }


def current_dir(index_dir: Path) -> Path | None:
    """The live generation's directory, as ``CURRENT`` names it (None if there is none)."""
    try:
        name = (index_dir / CURRENT).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not name.startswith("gen-") or "/" in name:
        return None
    path = index_dir / name
    return path if path.is_dir() else None


def still_live(directory: Path, meta: GenerationMeta) -> bool:
    """Whether ``directory`` is still the live generation, at the revision ``meta`` describes."""
    try:
        live = (directory.parent / CURRENT).read_text(encoding="utf-8").strip()
        on_disk = json.loads((directory / META).read_bytes())
    except (OSError, ValueError):
        return False
    return (live == directory.name and isinstance(on_disk, dict)
            and (on_disk.get("revision"), on_disk.get("updated_at")) == meta.stamp)  # fmt: skip


def file_sizes(directory: Path, names: dict[str, str]) -> dict[str, int]:
    """Every file of a generation and its size, for ``IndexReader.load``."""
    return {name: (directory / name).stat().st_size for name in names.values()}


def file_digest(path: Path) -> str:
    import hashlib  # the build's: OpenSSL's binding cost the cold hook ~3 ms to import

    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:24]


def tree_size(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += (Path(root) / name).stat().st_size
    return total
