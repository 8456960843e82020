"""The decisions a new decision is checked against, kept current without reading the whole store.

`lore remember` at 10,000 decisions took ~1.5 s as a process, nearly all of it in the
duplicate check: it parsed and validated the whole store (0.13 s), tokenised every active
decision for its shortlist (0.57 s) and loaded model2vec (0.44 s; the check now uses the
index's light encoder, ``write_check.model_embed``). Of the decisions it does not keep, the
check needs only their word sets and token counts (for the shortlist and for the BM25
statistics every kept record is scored with); of the at most ``dedup.EMBED_CANDIDATES`` it
keeps, the records. A ``DecisionPool`` holds just that: per decision, its distinct term
ids, token count, status and the byte range of its line in decisions.jsonl, read again by
offset for the records kept. Its answers are those of ``dedup.find_duplicate`` over a
fresh ``Store.load()`` (tests/test_write_pool.py).

Kept current with the rules of the index's delta segments (lore/index/delta.py): every
record file's size, mtime and inode are compared; whole lines appended to decisions.jsonl
behind an unchanged prefix (read and hashed) are parsed alone, admitted as ``Store.load``
admits them; a change to a file read after decisions.jsonl recomputes which decision ids
such a file holds (a later file wins an id in ``Store.load``); anything else builds the
pool again from a whole load. ``Store.add`` in the same process (under the data-dir lock)
takes the ids in decisions.jsonl from a current pool (``ids_if_current``: its uniqueness
check otherwise reads the whole file, 20-40 ms at 10,000 decisions) and tells it what it
appended (``appended``): nothing is hashed again then.

A long-lived process (the warm helper, the MCP server, a ``Lore``) keeps its pool in
memory (``pool_for``); a CLI process loads it from a cache file (``cache_path``) and saves
it after its write (``lore.capture.WriteOptions.save_pool``), so the next process finds it current.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from lore.store.fileio import replace_derived
from lore.store.layout import DECISIONS, GRAPH, jsonl_files, jsonl_kind, source_files
from lore.store.readers import appended_records
from lore.store.records import Record

if TYPE_CHECKING:
    from lore.curate.dedup import Embed, Match
    from lore.curate.text_vectors import Key, TextVectors
    from lore.store.store import Store

# The cache file's layout; a file of another format is no cache.
FORMAT = 3
# The kinds of the files ``Store.load`` reads after decisions.jsonl: one holding a decision's id wins it.
LATER_KINDS = ("failure", "observation", "pattern", "lesson", "anti_pattern", "handoff")
# Those files, by the rule that keeps their ids: the JSONL ones follow appended lines like
# decisions.jsonl (an agent's captures append observations between two decisions); patterns.yaml
# and the session files are read again when one changes (``Store.load`` of their kinds).
_OTHER_KINDS = ("pattern", "lesson", "anti_pattern", "handoff")


def _is_decisions(name: str) -> bool:
    """Whether record file ``name`` (relative) holds decisions: decisions.jsonl or one of its month shards."""
    return jsonl_kind(name) == "decision"


def _later_kind(name: str) -> str | None:
    """The kind of a JSONL file read after the decisions (failures, observations, signals, their shards), or None."""
    kind = jsonl_kind(name)
    return kind if kind is not None and kind != "decision" else None
# Texts embedded (~1 KB a vector), and records prepared for comparison (their texts and
# tokens: a few KB each), that a pool keeps in a long-lived process.
KEPT = 4096
KEPT_PREPARED = 1024
# The cache file's arrays, after its JSON header, in this order.
_ARRAYS = (("starts", "<i8"), ("ends", "<i8"), ("lengths", "<i8"), ("active", "u1"), ("file", "<i4"),
           ("offsets", "<i8"), ("flat", "<i4"))  # fmt: skip


def cache_path(data_dir: Path, directory: Path) -> Path:
    """Where CLI processes keep the pool of ``data_dir`` between runs, in ``directory``
    (``lore.paths.write_check_dir``: derived, disposable)."""
    from lore.paths import sha1

    resolved = data_dir.resolve()
    name = f"{resolved.name or 'root'}-{sha1(str(resolved).encode()).hexdigest()[:12]}.pool"
    return directory / name


def _manifest(data_dir: Path) -> dict[str, list[int]]:
    """Each record file's [size, mtime_ns, inode] (not graph.json: the check reads no edges)."""
    manifest: dict[str, list[int]] = {}
    for path in source_files(data_dir):
        relative = str(path.relative_to(data_dir))
        if relative == str(GRAPH):
            continue
        with contextlib.suppress(OSError):
            stat = path.stat()
            manifest[relative] = [stat.st_size, stat.st_mtime_ns, stat.st_ino]
    return manifest


def _chained(view: memoryview, bounds: list[int], digest: bytes = b"", start: int = 0) -> bytes:
    """SHA-256 over ``view`` chunk by chunk (``bounds``: each chunk's end), each step hashing the last digest first.

    A chain, not one digest of the file: a pool that appended a line extends it without
    reading the file again (a SHA-256 in progress cannot be kept in a cache file).
    """
    for end in bounds:
        step = hashlib.sha256(digest)
        step.update(view[start:end])
        digest, start = step.digest(), end
    return digest


class DecisionPool:
    """The decisions of one data dir as the write check sees them (see the module's doc)."""

    def __init__(self, data_dir: Path, cache_file: Path | None = None) -> None:
        self.data_dir = data_dir.resolve()
        self.cache_file = cache_file  # where ``save`` keeps it between processes (None: nowhere)
        self.file = self.data_dir / DECISIONS  # names the decisions in messages (a sharded store's are in its shards)
        self.lock = threading.RLock()  # the MCP server may run two tool calls at once
        self.builds = 0  # whole loads so far (the tests check that an append needs none)
        self.later_reads = 0  # whole reads of failures, observations and signals (likewise)
        self.encoded = 0  # texts this pool encoded (the tests check that a saved vector is read, not encoded)
        # The vectors of its decisions' texts on disk (``lore.curate.text_vectors``), for a pool with a cache
        # file: kept across ``_clear``, as they are by text, not by entry.
        self._text_vectors: TextVectors | None = None
        self._model: str | None = None  # the spec of the model of ``_text_vectors`` (for a fill process)
        self._fill_elsewhere = False  # ``save`` starts a fill process (``text_vectors.spawn_fill``)
        self._clear()

    def _clear(self) -> None:
        self.built = False
        self.saved = True  # nothing worth saving
        self.manifest: dict[str, list[int]] = {}
        # Per JSONL file read (decisions and the later ones): the hash chain's chunk ends and digest.
        self.chains: dict[str, tuple[list[int], bytes]] = {}
        # One entry per decision line read; a line a later one replaced stays, never live again.
        self.ids: list[str] = []
        self.files: list[str] = []  # the decision files entries were read from (relative), by ``entry_file``
        self.entry_file: list[int] = []
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.active: list[bool] = []
        self.lengths: list[int] = []
        self.live: list[bool] = []  # current, active and not won by a later file
        self.position: dict[str, int] = {}  # id -> its current entry
        # Each entry's distinct term ids, ascending: the first ``len(offsets) - 1`` end to end
        # in ``flat``, the rest (appended since) one array each.
        self.flat = np.zeros(0, dtype=np.int32)
        self.offsets = np.zeros(1, dtype=np.int64)
        self.extra: list[np.ndarray] = []
        self.vocab: dict[str, int] = {}
        self.df = np.zeros(0, dtype=np.int64)  # over the live entries
        self.count = 0
        self.total = 0  # tokens over the live entries
        self.later_ids: set[str] = set()  # ids the files after decisions.jsonl hold: the next two
        self.later_jsonl: set[str] = set()  # ids valid in failures, observations and signals
        self.later_other: set[str] = set()  # ids of the records patterns.yaml and the session files hold
        self.file_ids: set[str] = set()  # what Store.add's uniqueness check finds in the decision files
        self._owner: np.ndarray | None = None
        self._live: np.ndarray | None = None  # ``live`` as an array, while it holds
        self._prepared_of: dict[int, Any] = {}  # entry -> dedup._Prepared (at most KEPT_PREPARED)
        self._embed: Embed | None = None
        self._vectors: dict[str, np.ndarray] = {}  # text -> its vector by ``_embed`` (at most KEPT)
        # The texts of the decisions taken in since loaded (a build: all), whose vectors the files may lack.
        self._pending: list[str] = []
        self._live_keys: set[Key] | None = None  # after a fill of every decision: their texts' keys
        self._filling_all = False  # ``_pending`` holds every decision's texts, for a new main file

    # -- what the check reads --------------------------------------------------------
    @property
    def present(self) -> int:
        """How many decisions a whole load returns, active or not."""
        return len(self.position) - len(self.later_ids.intersection(self.position))

    def find_duplicate(self, kind: str, raw: dict[str, Any], embed: Embed | None, limit: int,
                       identity: str | None = None, model: str | None = None) -> tuple[Match | None, list[Match]] | None:  # fmt: skip
        """``dedup.find_duplicate`` over the live decisions; None when a line moved under the pool (refresh, ask again).

        ``identity``: ``embed``'s model (``lore.embedder.model_identity``; ``model``, its spec); with it, a
        pool with a cache file reads its decisions' vectors from disk, filled first where missing
        (``fill_vectors``).
        """
        from lore.curate import dedup

        if not self.count:
            return None, []
        new = dedup._Prepared.of(kind, raw)
        keep = [e for e, live in enumerate(self.live) if live] if self.count <= limit else self.shortlist(new.full_tokens, limit)
        records = self.records(keep)
        if records is None:
            return None
        pool = [self._prepared(entry, record) for entry, record in zip(keep, records, strict=True)]
        # The statistics ``Bm25Stats.build`` would count over every live decision and the new
        # one, for the terms the comparisons look up (a dict of a few hundred, not the vocabulary).
        terms = {t for item in (new, *pool) for toks in (item.primary_tokens, item.full_tokens, item.core_tokens) for t in toks}
        fresh = frozenset(new.full_tokens)
        df = {t: (int(self.df[self.vocab[t]]) if t in self.vocab else 0) + (t in fresh) for t in terms}
        stats = dedup.Bm25Stats(doc_count=self.count + 1, avg_len=(self.total + len(new.full_tokens)) / (self.count + 1),
                                df={t: n for t, n in df.items() if n})  # fmt: skip
        if embed is None:
            return dedup.judge(new, pool, stats, None)
        self._model = model
        vectors = self.fill_vectors(embed, identity)
        cached = self._cached(embed, vectors)
        if vectors is not None and not pool:
            cached([new.primary, new.full])  # kept for the next writes, as when the check embeds them itself
        found = dedup.judge(new, pool, stats, cached)
        if vectors is not None and not vectors.complete and not self._filling_all:
            self.fill_vectors(embed, identity)  # a row failed its check when read (encoded instead): a new file
        return found

    def fill_vectors(self, embed: Embed, identity: str | None, budget: int | None = None,
                     inline: bool = False) -> TextVectors | None:  # fmt: skip
        """Encode the texts of the decisions taken in whose vectors the files lack; all of them when there is no
        whole main file (a first build, another model, a damaged file). The files of ``identity``, or None
        (no cache file or no identity: vectors are then kept in memory only, as they were).

        All of them, past ``text_vectors.INLINE_FILL`` texts and unless ``inline``: left to a detached
        process that ``save`` starts (none while one runs); the write encodes what it compares.
        ``budget``: encode at most that many texts now (the warm helper fills between requests);
        ``filled`` tells whether any are left.
        """
        if self.cache_file is None or identity is None:
            self._pending = []
            return None
        from lore.curate import text_vectors
        from lore.curate.text_vectors import TextVectors, text_key

        if self._text_vectors is None or self._text_vectors.identity != identity:
            self._text_vectors, self._filling_all = TextVectors(self.cache_file, identity), False
        vectors = self._text_vectors
        vectors.reopen()
        if not vectors.complete and not self._filling_all and budget is None and not inline \
                and 2 * self.count > text_vectors.INLINE_FILL:
            self._pending, self._fill_elsewhere = [], True  # ``save`` starts the process, once the cache is written
            self.saved = False
            return vectors
        if not vectors.complete and not self._filling_all:
            from lore.curate.dedup import _join, compared_text

            records = self.records([e for e, live in enumerate(self.live) if live])
            if records is None:
                return vectors  # a line moved: the caller reads the store again
            texts: list[str] = []
            for record in records:
                primary, secondary = compared_text("decision", record.raw)
                texts += (primary, _join(primary, secondary))
            self._pending, self._filling_all = list(dict.fromkeys(texts)), True
            self._live_keys = {text_key(text) for text in self._pending}
        pending = list(dict.fromkeys(self._pending))
        keys = [text_key(text) for text in pending]
        missing = [i for i, kept in enumerate(vectors.has(keys).tolist()) if not kept]
        if budget is not None and len(missing) > budget:
            done = missing[budget - 1] + 1 if budget > 0 else 0
            missing = missing[:budget]
        else:
            done = len(pending)
        for first in range(0, len(missing), 4096):  # the index's chunk (lore.index.build.embed_texts)
            chunk = missing[first : first + 4096]
            vectors.add([keys[i] for i in chunk], np.asarray(embed([pending[i] for i in chunk]), dtype=np.float32))
            self.encoded += len(chunk)
            self.saved = False
        self._pending = pending[done:]
        if not self._pending and self._filling_all:
            vectors.rewrite_main, self._filling_all = True, False
            self.saved = False
        return vectors

    @property
    def live_keys(self) -> set[Key] | None:
        """After a fill of every decision: the keys of their texts (what a new main file keeps)."""
        return self._live_keys

    @property
    def filled(self) -> bool:
        """No decision's texts are waiting for ``fill_vectors``."""
        return not self._pending

    def _prepared(self, entry: int, record: Record) -> Any:
        """``dedup._Prepared.of(record)``, kept for the entry (its texts tokenised and hashed once per process)."""
        from lore.curate import dedup

        found = self._prepared_of.get(entry)
        if found is None or found.record is None or found.record.raw != record.raw:
            found = self._prepared_of[entry] = dedup._Prepared.of(record.kind, record.raw, record)
            if len(self._prepared_of) > KEPT_PREPARED:
                del self._prepared_of[next(iter(self._prepared_of))]
        return found

    def _cached(self, embed: Embed, vectors: TextVectors | None = None) -> Embed:
        """``embed``, with the vectors of texts it embedded before kept (a text's vector depends on it alone),
        read from ``vectors`` (the files) before encoding, and what it encodes added to them.

        A long-lived process (the warm helper) embeds the same records for many writes: the
        Rust tokenizer took ~10 ms for the ~100 texts of one check at 10,000 decisions.
        """
        if embed != self._embed:
            self._embed, self._vectors = embed, {}

        def cached(texts: list[str]) -> np.ndarray:
            missing = [text for text in dict.fromkeys(texts) if text not in self._vectors]
            if missing and vectors is not None:
                from lore.curate.text_vectors import text_key

                for text, vector in zip(missing, vectors.get([text_key(text) for text in missing]), strict=True):
                    if vector is not None:
                        self._vectors[text] = vector
                missing = [text for text in missing if text not in self._vectors]
            if missing:
                encoded = np.asarray(embed(missing), dtype=np.float32)
                self.encoded += len(missing)
                self._vectors.update(zip(missing, encoded, strict=True))
                if vectors is not None:
                    from lore.curate.text_vectors import text_key

                    vectors.add([text_key(text) for text in missing], encoded)
                    self.saved = False
                for old in list(self._vectors)[: max(0, len(self._vectors) - KEPT)]:
                    del self._vectors[old]
            return np.stack([self._vectors[text] for text in texts]) if texts else np.zeros((0, 0), dtype=np.float32)

        return cached

    def shortlist(self, query: list[str], limit: int) -> list[int]:
        """``dedup.shortlist`` over the live entries in numpy: the ``limit`` closest by idf-weighted Jaccard.

        The same formula over the same statistics; the sums come out in another order (as
        they do between two runs of ``dedup.shortlist``, which sums over a set), so a score
        may differ in its last bit.
        """
        flat, owner = self._csr()
        n = self.count + 1
        terms = set(query)
        known = np.fromiter((self.vocab[t] for t in terms if t in self.vocab), dtype=np.int64)
        df = self.df[: len(self.vocab)].astype(np.float64)
        df[known] += 1.0
        idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5))
        unseen = sum(1 for t in terms if t not in self.vocab)
        query_mass = float(idf[known].sum()) + unseen * float(np.log(1.0 + (n - 1.0 + 0.5) / 1.5))
        in_query = np.zeros(len(self.vocab), dtype=bool)
        in_query[known] = True
        weights = idf[flat]
        size = len(self.ids)
        hits = np.flatnonzero(in_query[flat])
        shared = np.bincount(owner[hits], weights=weights[hits], minlength=size)
        candidates = np.flatnonzero(self._live_array() & (shared > 0))
        if not len(candidates):
            return []
        # Each entry's idf mass, summed over its slice of ``flat`` (an entry without terms gets a
        # stray value, and is no candidate: it shares no term).
        mass = np.add.reduceat(np.append(weights, 0.0), self.offsets[:-1])[candidates]
        union = query_mass + mass - shared[candidates]
        scores = np.divide(shared[candidates], union, out=np.ones(len(candidates)), where=union > 0)
        chosen = np.lexsort((candidates, -scores))[:limit]
        return sorted(int(candidates[i]) for i in chosen)

    def records(self, entries: list[int]) -> list[Record] | None:
        """The records of ``entries``, read from decisions.jsonl by offset; None if a line is not what the pool read."""
        found: dict[int, Record] = {}
        by_file: dict[int, list[int]] = {}
        for entry in entries:
            by_file.setdefault(self.entry_file[entry], []).append(entry)
        try:
            for index, group in by_file.items():
                path = self.data_dir / self.files[index]
                with path.open("rb") as handle:
                    for entry in group:
                        handle.seek(self.starts[entry])
                        raw = orjson.loads(handle.read(self.ends[entry] - self.starts[entry]).strip())
                        if not isinstance(raw, dict) or raw.get("id") != self.ids[entry]:
                            return None
                        found[entry] = Record(kind="decision", id=self.ids[entry], raw=raw, source=path)
        except (OSError, orjson.JSONDecodeError):
            return None
        return [found[entry] for entry in entries]

    def ids_if_current(self) -> set[str] | None:
        """The ids in the decision files if the pool has read all of them, whole lines; else None (``Store.add`` reads them)."""
        if not self.built:
            return None
        names = {str(path.relative_to(self.data_dir)) for path in jsonl_files(self.data_dir, DECISIONS)}
        if names != {name for name in self.manifest if _is_decisions(name)}:
            return None
        for name in names:
            try:
                stat = (self.data_dir / name).stat()
            except OSError:
                return None
            if self.manifest.get(name) != [stat.st_size, stat.st_mtime_ns, stat.st_ino] or not self._whole_lines(name):
                return None
        return self.file_ids

    def _whole_lines(self, name: str) -> bool:
        size = self.manifest[name][0]
        if not size:
            return True
        try:
            with (self.data_dir / name).open("rb") as handle:
                handle.seek(size - 1)
                return handle.read(1) == b"\n"
        except OSError:
            return False

    def _file_index(self, name: str) -> int:
        if name not in self.files:
            self.files.append(name)
        return self.files.index(name)

    # -- keeping it current ----------------------------------------------------------
    def refresh(self, store: Store) -> None:
        """Bring the pool up to date with the files (a few stat calls when nothing changed)."""
        current = _manifest(self.data_dir)
        if self.built and current == self.manifest:
            return
        if not (self.built and self._follow(store, current)):
            self._build(store)

    def appended(self, path: Path | None = None) -> None:
        """``Store.add`` appended to decision file ``path`` (default decisions.jsonl; a month shard when sharded)
        under the data-dir lock, after ``ids_if_current``: read it."""
        path = self.file if path is None else path.resolve()
        name = str(path.relative_to(self.data_dir))
        old_size = self.manifest[name][0] if name in self.manifest else 0  # a new month's shard: read from its start
        try:
            with path.open("rb") as handle:
                stat = os.fstat(handle.fileno())
                handle.seek(old_size)
                tail = handle.read()
        except OSError:
            tail, stat = b"", None
        found = appended_records(path, "decision", tail, 0) if tail.endswith(b"\n") else None
        if found is None or stat is None or stat.st_size != old_size + len(tail) or (
                name not in self.files and any(record.id in self.position for _, _, record in found)):  # fmt: skip
            self.built = False  # read everything again next time
            return
        self._take(found, tail, old_size, self._file_index(name))
        bounds, digest = self.chains.get(name, ([], b""))
        self.chains[name] = ([*bounds, stat.st_size], _chained(memoryview(tail), [len(tail)], digest))
        self.manifest[name] = [stat.st_size, stat.st_mtime_ns, stat.st_ino]
        self.saved = False

    def _follow(self, store: Store, current: dict[str, list[int]]) -> bool:
        """Take in what changed since the pool read the files; False when only a whole read will do."""
        changed = {name for name in current.keys() | self.manifest.keys() if current.get(name) != self.manifest.get(name)}
        grown: dict[str, tuple[bytes, int]] = {}
        for name in sorted(n for n in changed if jsonl_kind(n) is not None):
            found = self._grown(name, current.get(name))
            if found is not None:
                grown[name] = found
            elif _is_decisions(name):
                return False
        # The decision files that grew, in load order (a month's new shard after the others).
        decision_names = [str(p.relative_to(self.data_dir)) for p in jsonl_files(self.data_dir, DECISIONS)]
        decisions: list[tuple[str, list[tuple[int, int, Record]]]] = []
        for name in (n for n in decision_names if n in grown):
            data, size = grown[name]
            parsed = appended_records(self.data_dir / name, "decision", data, size)
            if parsed is None:
                return False  # a line Store.load would warn about
            index = self.files.index(name) if name in self.files else None
            if any(self.position.get(r.id) is not None and self.entry_file[self.position[r.id]] != index
                   for _, _, r in parsed):  # fmt: skip
                return False  # an id another decision file holds: which one wins is the load order's, read it all
            decisions.append((name, parsed))
        appended_ids: set[str] | None = set()
        for name in set(grown) - set(decision_names):
            data, size = grown[name]
            parsed = appended_records(self.data_dir / name, _later_kind(name) or "observation", data, size)
            if parsed is None or appended_ids is None:
                appended_ids = None
                continue
            appended_ids.update(record.id for _, _, record in parsed)
        if any(_later_kind(name) is not None and name not in grown for name in changed):
            appended_ids = None  # rewritten, new or gone: read them all again
        # Nothing is changed before this point: a False above leaves the pool as it was.
        for name, parsed in decisions:
            self._take(parsed, grown[name][0], 0, self._file_index(name))
        for name, (data, _) in grown.items():
            self.chains[name] = ([len(data)], _chained(memoryview(data), [len(data)]))
            self.manifest[name] = [len(data), *current[name][1:]]  # stamped with the mtime from before the read
        if appended_ids is None:
            self._read_later_jsonl(current)
        else:
            self.later_jsonl |= appended_ids
        if any(jsonl_kind(name) is None for name in changed):
            self.later_other = set(store.load(kinds=_OTHER_KINDS).records)
        self._set_later_ids(self.later_jsonl | self.later_other)
        for name in (n for n in changed if jsonl_kind(n) is None):
            if name in current:
                self.manifest[name] = current[name]
            else:
                self.manifest.pop(name, None)
        self.saved = False
        return True

    def _grown(self, name: str, stamp: list[int] | None) -> tuple[bytes, int] | None:
        """JSONL file ``name`` up to its last whole line, and the size the pool had read of it, when lines were only
        appended behind what it read (its hash chain checked); else None."""
        old = self.manifest.get(name)
        if stamp is not None and old is None and _is_decisions(name):
            old = [0, 0, stamp[2]]  # a new month's shard: all of it is appended
            self.chains.setdefault(name, ([], b""))
        if stamp is None or old is None or stamp[2] != old[2] or stamp[0] < old[0] or name not in self.chains:
            return None  # gone, new, replaced (an atomic rewrite) or shorter
        try:
            content = (self.data_dir / name).read_bytes()
        except OSError:
            return None
        size = old[0]
        if len(content) < size or (size and content[size - 1 : size] != b"\n"):
            return None  # not whole lines appended to what the pool read
        bounds, digest = self.chains[name]
        if _chained(memoryview(content), bounds) != digest:
            return None  # something before the old end changed
        return content[: content.rfind(b"\n") + 1], size  # a line being written right now is read next time

    def _read_later_jsonl(self, current: dict[str, list[int]]) -> None:
        """The ids valid in failures, observations and signals (``Store.load``'s rule), their chains and stamps."""
        from lore.store.readers import FileRead, parse_jsonl
        from lore.store.store import skips
        from lore.store.validate import check_record

        self.later_reads += 1
        ids: set[str] = set()
        names = {n for n in (*current, *self.chains, *self.manifest) if _later_kind(n) is not None}
        for name in sorted(names):
            kind = _later_kind(name) or "observation"
            self.chains.pop(name, None)
            if name not in current:
                self.manifest.pop(name, None)
                continue
            path = self.data_dir / name
            try:
                content = path.read_bytes()
            except OSError:
                self.manifest.pop(name, None)
                continue
            end = content.rfind(b"\n") + 1  # a line being written right now is read next time
            self.chains[name] = ([end], _chained(memoryview(content), [end]))
            self.manifest[name] = [end, *current[name][1:]]
            for _, raw in parse_jsonl(FileRead(path), content[:end]).items:
                record_id = raw.get("id")
                if isinstance(record_id, str) and record_id.strip() and not skips(check_record(kind, raw)):
                    ids.add(record_id)
        self.later_jsonl = ids

    def _take(self, found: list[tuple[int, int, Record]], data: bytes, base: int, file_index: int) -> None:
        from lore.store.store import _ID_FIELD

        for start, end, record in found:
            self._add_entry(record, start + base, end + base, file_index)
        if found:
            self.file_ids.update(match.decode() for match in _ID_FIELD.findall(data, found[0][0]))

    def _add_entry(self, record: Record, start: int, end: int, file_index: int) -> None:
        from lore.curate.dedup import _join, compared_text
        from lore.curate.similarity import tokens as analysed

        previous = self.position.get(record.id)
        if previous is not None:
            self._set_live(previous, False)
        primary, secondary = compared_text("decision", record.raw)
        full = _join(primary, secondary)
        tokens = analysed(full)
        if self.cache_file is not None and record.active:
            self._pending += (primary, full)  # the texts the check embeds of it (its core is its primary text)
        entry = len(self.ids)
        self.ids.append(record.id)
        self.entry_file.append(file_index)
        self.starts.append(start)
        self.ends.append(end)
        self.active.append(record.active)
        self.lengths.append(len(tokens))
        self.live.append(False)
        self.extra.append(np.asarray(sorted({self._term(token) for token in tokens}), dtype=np.int32))
        self.position[record.id] = entry
        self._set_live(entry, record.active and record.id not in self.later_ids)

    def _term(self, token: str) -> int:
        row = self.vocab.get(token)
        if row is None:
            row = self.vocab[token] = len(self.vocab)
            if row >= len(self.df):
                self.df = np.concatenate([self.df, np.zeros(max(1024, len(self.df)), dtype=np.int64)])
        return row

    def _terms_of(self, entry: int) -> np.ndarray:
        base = len(self.offsets) - 1
        if entry < base:
            return self.flat[self.offsets[entry] : self.offsets[entry + 1]]
        return self.extra[entry - base]

    def _live_array(self) -> np.ndarray:
        if self._live is None or len(self._live) != len(self.live):
            self._live = np.asarray(self.live, dtype=bool)
        return self._live

    def _set_live(self, entry: int, live: bool) -> None:
        if self.live[entry] == live:
            return
        self.live[entry] = live
        self._live = None
        sign = 1 if live else -1
        self.df[self._terms_of(entry)] += sign
        self.count += sign
        self.total += sign * self.lengths[entry]

    def _set_later_ids(self, later: set[str]) -> None:
        changed = later.symmetric_difference(self.later_ids)
        self.later_ids = later
        for record_id in changed:
            entry = self.position.get(record_id)
            if entry is not None:
                self._set_live(entry, self.active[entry] and record_id not in later)

    def _csr(self) -> tuple[np.ndarray, np.ndarray]:
        """Every entry's term ids end to end, and the entry each belongs to."""
        if self.extra:
            sizes = np.fromiter((len(t) for t in self.extra), dtype=np.int64, count=len(self.extra))
            first = len(self.offsets) - 1
            self.flat = np.concatenate([self.flat, *self.extra])
            self.offsets = np.concatenate([self.offsets, self.offsets[-1] + np.cumsum(sizes)])
            if self._owner is not None:  # extended, not rebuilt: a write appends one entry
                self._owner = np.concatenate([self._owner, np.repeat(np.arange(first, first + len(sizes)), sizes)])
            self.extra = []
        if self._owner is None:
            self._owner = np.repeat(np.arange(len(self.offsets) - 1, dtype=np.int64), np.diff(self.offsets))
        return self.flat, self._owner

    def _build(self, store: Store) -> None:
        """Read the whole store (what the check did on every write before the pool existed)."""
        from lore.store.store import _ID_FIELD

        for _ in range(3):  # a file that changed during the reads: read them again
            before = _manifest(self.data_dir)
            snapshot = store.load(kinds=("decision", *LATER_KINDS))
            contents: dict[str, bytes] = {}
            for path in jsonl_files(self.data_dir, DECISIONS):
                with contextlib.suppress(FileNotFoundError):
                    contents[str(path.relative_to(self.data_dir))] = path.read_bytes()
            if _manifest(self.data_dir) == before:
                break
        self._clear()
        self.builds += 1
        self.manifest = {name: stamp for name, stamp in before.items() if _later_kind(name) is None}
        self._read_later_jsonl(before)
        # Records of these kinds come from patterns.yaml and the session files alone.
        self.later_other = {rid for rid, record in snapshot.records.items() if record.kind in _OTHER_KINDS}
        self.later_ids = self.later_jsonl | self.later_other
        self.files = list(contents)
        newlines = {name: np.flatnonzero(np.frombuffer(content, dtype=np.uint8) == 10) for name, content in contents.items()}
        for record in snapshot.of_kind("decision"):
            name = str(record.source.relative_to(store.data_dir)) if record.source is not None else str(DECISIONS)
            index, content, breaks = self.files.index(name), contents[name], newlines[name]
            line = record.line or 1
            start = 0 if line == 1 else int(breaks[line - 2]) + 1
            end = int(breaks[line - 1]) if line - 1 < len(breaks) else len(content)
            self._add_entry(record, start, end, index)
        self._csr()
        # Only whole lines: Store.add takes these ids only from a pool that ends on a whole line.
        self.file_ids = {match.decode() for content in contents.values()
                         for match in _ID_FIELD.findall(content, 0, content.rfind(b"\n") + 1)}  # fmt: skip
        for name, content in contents.items():
            if name in before:
                self.chains[name] = ([len(content)], _chained(memoryview(content), [len(content)]))
                self.manifest[name] = [len(content), *before[name][1:]]
        self.built, self.saved = True, False

    # -- the cache file ----------------------------------------------------------------
    def save(self, path: Path) -> None:
        """Write the pool for the next process: atomically, no fsync (it is derived, and checked on load)."""
        flat, owner = self._csr()
        keep = np.fromiter((self.position[rid] == entry for entry, rid in enumerate(self.ids)), dtype=bool,
                           count=len(self.ids))  # dead entries go  # fmt: skip
        sizes = np.diff(self.offsets)[keep]
        arrays = {
            "starts": np.asarray(self.starts, dtype=np.int64)[keep], "ends": np.asarray(self.ends, dtype=np.int64)[keep],
            "lengths": np.asarray(self.lengths, dtype=np.int64)[keep], "active": np.asarray(self.active, dtype=bool)[keep],
            "file": np.asarray(self.entry_file, dtype=np.int32)[keep],
            "offsets": np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]),
            "flat": flat if keep.all() else flat[keep[owner]],
        }  # fmt: skip
        ids = self.ids if keep.all() else [rid for rid, kept in zip(self.ids, keep, strict=True) if kept]
        header = {"format": FORMAT, "data_dir": str(self.data_dir), "manifest": self.manifest,
                  "chains": {name: [bounds, digest.hex()] for name, (bounds, digest) in self.chains.items()},
                  "ids": ids, "files": self.files, "vocab": list(self.vocab), "later_jsonl": list(self.later_jsonl),
                  "later_other": list(self.later_other), "file_ids": list(self.file_ids),
                  "sizes": [len(arrays[name]) for name, _ in _ARRAYS]}  # fmt: skip
        body = orjson.dumps(header)
        parts = [len(body).to_bytes(8, "little"), body]
        parts.extend(np.asarray(arrays[name]).astype(dtype).tobytes() for name, dtype in _ARRAYS)
        if not replace_derived(path, parts):
            return
        if self._text_vectors is not None:
            self._text_vectors.save(self._live_keys)
            self._live_keys = None
            if self._fill_elsewhere and self.cache_file is not None and path == self.cache_file:
                from lore.curate.text_vectors import fill_lock, spawn_fill

                self._fill_elsewhere = False
                spawn_fill(self.data_dir, self.cache_file, self._model, fill_lock(self._text_vectors))
        self.saved = True

    def load(self, path: Path) -> bool:
        """Take the pool saved in ``path``; False (the pool left empty) when there is none usable."""
        try:
            data = path.read_bytes()
            size = int.from_bytes(data[:8], "little")
            header = orjson.loads(data[8 : 8 + size])
            if header.get("format") != FORMAT or header.get("data_dir") != str(self.data_dir):
                return False
            arrays: dict[str, np.ndarray] = {}
            at = 8 + size
            for (name, dtype), count in zip(_ARRAYS, header["sizes"], strict=True):
                arrays[name] = np.frombuffer(data, dtype=dtype, count=count, offset=at)
                at += arrays[name].nbytes
            ids = header["ids"]
            if at != len(data) or not all(len(arrays[n]) == len(ids) for n in ("starts", "ends", "lengths", "active", "file")):
                return False
            if len(arrays["offsets"]) != len(ids) + 1 or int(arrays["offsets"][-1]) != len(arrays["flat"]):
                return False
            if len(arrays["file"]) and not 0 <= int(arrays["file"].min()) <= int(arrays["file"].max()) < len(header["files"]):
                return False
        except (OSError, ValueError, KeyError, TypeError):
            return False
        self._clear()
        self.ids, self.vocab = ids, dict(zip(header["vocab"], range(len(header["vocab"])), strict=True))
        self.starts, self.ends = arrays["starts"].tolist(), arrays["ends"].tolist()
        self.files, self.entry_file = list(header["files"]), arrays["file"].tolist()
        self.lengths, self.active = arrays["lengths"].tolist(), arrays["active"].astype(bool).tolist()
        self.flat, self.offsets = arrays["flat"].astype(np.int32), arrays["offsets"].astype(np.int64)
        self.position = dict(zip(ids, range(len(ids)), strict=True))
        self.later_jsonl, self.later_other = set(header["later_jsonl"]), set(header["later_other"])
        self.later_ids, self.file_ids = self.later_jsonl | self.later_other, set(header["file_ids"])
        self.manifest = header["manifest"]
        self.chains = {name: (bounds, bytes.fromhex(digest)) for name, (bounds, digest) in header["chains"].items()}
        self.live = [active and rid not in self.later_ids for rid, active in zip(ids, self.active, strict=True)]
        flat, owner = self._csr()
        live = np.asarray(self.live, dtype=bool)
        self.df = np.zeros(max(1024, len(self.vocab)), dtype=np.int64)
        counts = np.bincount(flat[live[owner]], minlength=len(self.vocab))
        self.df[: len(counts)] = counts
        self.count = int(live.sum())
        self.total = int(np.asarray(self.lengths, dtype=np.int64)[live].sum())
        self.built = True
        return True


_POOLS: dict[Path, DecisionPool] = {}
_POOLS_GUARD = threading.Lock()


def pool_for(data_dir: Path, cache_dir: Path | None) -> DecisionPool:
    """This process's pool for ``data_dir``: kept in memory, loaded on first use from its cache file in
    ``cache_dir`` (``lore.paths.write_check_dir``; None: no cache file, the pool is built from the store).

    Process-wide (``_POOLS``), not a field of a ``Store`` or ``Lore``, on purpose: a pool is this
    process's view of a file on disk, and a long-lived process (the warm helper, the MCP server)
    builds a new ``Store`` and ``Lore`` for every command, which must all find the one view (a
    second would be built from a whole read of the store, 1-2 s at 10,000 decisions, and the two
    would drift apart). Its state is the file's, checked against the file before each use.
    """
    from lore.store.store import watch

    key = data_dir.resolve()
    with _POOLS_GUARD:
        pool = _POOLS.get(key)
        if pool is None:
            pool = _POOLS[key] = DecisionPool(key, cache_path(key, cache_dir) if cache_dir is not None else None)
            if pool.cache_file is not None:
                pool.load(pool.cache_file)
            watch(key / DECISIONS, pool)  # the decision files' key, sharded or not (Store._watcher)
    return pool


def save(data_dir: Path | None = None) -> None:
    """Save the pools (of ``data_dir``, or all) that changed since they were loaded or saved."""
    for key, pool in list(_POOLS.items()):
        if (data_dir is None or key == data_dir.resolve()) and pool.built and not pool.saved and pool.cache_file:
            with pool.lock:
                pool.save(pool.cache_file)
