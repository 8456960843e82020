"""The delta segment: appended records are indexed without rewriting the base, and rank as a rebuild would."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson

from lore import capture
from lore.capture import WriteOptions
from lore.index.manager import IndexManager
from lore.paths import Locations
from lore.rank.pipeline import SearchOptions
from lore.search import SearchSession, search
from lore.settings import Settings
from lore.store import Store
from lore.store.layout import DECISIONS
from tests.conftest import resolve_locations

PLAIN = WriteOptions(check_duplicates=False)
TOPICS = ["postgres connection pooling", "redis cache eviction", "kafka consumer lag", "terraform state locking",
          "stripe webhook retries", "oauth token refresh", "ci cache warmup", "pgbouncer transaction mode"]  # fmt: skip
QUERIES = ["postgres pooling", "cache", "kafka lag incident", "why pgbouncer", "token refresh retries", "terraform",
           "webhook", "incident 7", "eviction policy for redis", "ci warmup cache", "new decision about queues"]  # fmt: skip
NOW = 2_000_000_000.0


def seed(data_dir: Path, n: int) -> Store:
    store = Store(data_dir, actor="test")
    store.init()
    for i in range(n):
        capture.remember(store, f"Decision {i} about {TOPICS[i % len(TOPICS)]}", project="p",
                         rationale=f"Because of incident {i} involving {TOPICS[(i + 3) % len(TOPICS)]}", options=PLAIN)  # fmt: skip
    return store


def ranked(locations: Locations, query: str) -> list[tuple[str, float]]:
    session = SearchSession(locations)
    response = search(session, query, SearchOptions(now=NOW, limit=20), policy="ignore", log_access=False,
                      use_llm=False)  # fmt: skip
    if session.reader is not None:
        session.reader.close()
    return [(hit.id, hit.score) for hit in response.hits]


def test_appended_records_rank_exactly_as_in_a_full_rebuild(data_dir: Path, tmp_path: Path) -> None:
    store = seed(data_dir, 40)
    mgr = IndexManager(resolve_locations(data_dir))
    assert mgr.build().mode == "full"
    base_files = {k: v for k, v in mgr.read_meta()[1].files.items()}  # type: ignore[index]

    for i in range(40, 46):  # new records...
        capture.remember(store, f"New decision {i} about queues and {TOPICS[i % len(TOPICS)]}", project="p",
                         rationale=f"Because of incident {i}", options=PLAIN)  # fmt: skip
        report = mgr.build()
        assert (report.mode, report.delta, report.added) == ("incremental", True, 1)
    # ...and a newer version of an indexed one, appended as the original Lore did (later lines win)
    decisions = data_dir / DECISIONS
    first = orjson.loads(decisions.read_bytes().splitlines()[0])
    first["decision"] = "Decision 0 now says: pgbouncer transaction mode for postgres pooling"
    with decisions.open("ab") as handle:
        handle.write(orjson.dumps(first) + b"\n")
    report = mgr.build()
    assert (report.mode, report.delta, report.added, report.updated) == ("incremental", True, 0, 1)
    # ...and one more new record over a delta that retires a base row
    capture.remember(store, "New decision 46 about queues after the retired row", project="p",
                     rationale="Because of incident 46", options=PLAIN)  # fmt: skip
    report = mgr.build()
    assert (report.mode, report.delta, report.added) == ("incremental", True, 1)

    found = mgr.read_meta()
    assert found is not None
    files = found[1].files
    assert all(files[k] == v for k, v in base_files.items() if k in ("table", "vectors", "bm25_rows", "docs"))
    assert "delta_table" in files and found[1].records == 47

    rebuilt = resolve_locations(data_dir, tmp_path / "rebuilt-index")
    assert IndexManager(rebuilt).build(rebuild=True).mode == "full"
    delta_locations = resolve_locations(data_dir)
    # The channels themselves, row by row: BM25 bit for bit, cosines to float32 precision.
    from lore.analysis import unique_terms

    delta_reader, _ = mgr.open(policy="ignore")
    full_reader, _ = IndexManager(rebuilt).open(policy="ignore")
    assert sorted(delta_reader.table.ids) == sorted(full_reader.table.ids)
    order = [full_reader.table.row(rid) for rid in delta_reader.table.ids]
    for query in QUERIES:
        terms = unique_terms(query)
        assert np.array_equal(delta_reader.bm25.scores(terms), full_reader.bm25.scores(terms)[order]), query
        assert delta_reader.bm25.idf_of(terms) == full_reader.bm25.idf_of(terms)
    probe = np.asarray(full_reader.vectors[5], dtype=np.float32)
    assert np.allclose(delta_reader.vectors @ probe, (full_reader.vectors @ probe)[order], atol=1e-6)
    assert np.array_equal(delta_reader.vectors[[0, 46]], np.asarray(full_reader.vectors[[order[0], order[46]]]))
    assert delta_reader.table.doc(delta_reader.table.row(first["id"]))["title"].startswith("Decision 0 now says")
    delta_reader.close()
    full_reader.close()
    for query in QUERIES:
        got, want = ranked(delta_locations, query), ranked(rebuilt, query)
        assert [i for i, _ in got] == [i for i, _ in want], query
        # Float32 matrix-vector products round a row alike only up to the BLAS kernel: 1e-8 apart seen.
        assert np.allclose([s for _, s in got], [s for _, s in want], rtol=0, atol=1e-6), query



def test_an_edit_in_place_folds_the_delta_back_into_the_base(data_dir: Path) -> None:
    store = seed(data_dir, 12)
    mgr = IndexManager(resolve_locations(data_dir))
    mgr.build()
    added = capture.remember(store, "Adopt pgbouncer transaction mode", project="p", options=PLAIN).record
    assert mgr.build().delta
    capture.retract(store, added.id, "wrong service")  # rewrites its line: not an append
    report = mgr.build()
    assert report.mode == "incremental" and not report.delta and report.updated == 1
    meta = mgr.read_meta()[1]  # type: ignore[index]
    assert "delta_table" not in meta.files and meta.records == 13
    assert mgr.staleness(meta) is None


def test_a_damaged_delta_file_is_detected_and_rebuilt(data_dir: Path, cli) -> None:
    store = seed(data_dir, 12)
    mgr = IndexManager(resolve_locations(data_dir))
    mgr.build()
    capture.remember(store, "Adopt pgbouncer transaction mode", project="p", options=PLAIN)
    assert mgr.build().delta
    directory, meta = mgr.read_meta()  # type: ignore[misc]
    (directory / meta.files["delta_bm25_forward"]).write_bytes(b"not an npz file, same size?")
    result = cli("search", "pgbouncer", "--json")
    assert result.exit_code == 0
    assert "pgbouncer" in result.stdout.lower()
    rebuilt = mgr.read_meta()
    assert rebuilt is not None and "delta_table" not in rebuilt[1].files


def test_each_append_leaves_only_its_own_and_the_previous_revisions_delta_files(data_dir: Path) -> None:
    # Before, every appended record left six delta files behind until the next fold.
    store = seed(data_dir, 12)
    mgr = IndexManager(resolve_locations(data_dir))
    mgr.build()
    previous = None
    for i in range(5):
        capture.remember(store, f"Adopt pgbouncer transaction mode {i}", project="p", options=PLAIN)
        assert mgr.build().delta
        directory, meta = mgr.read_meta()  # type: ignore[misc]
        wanted = {n for n in meta.files.values() if n.startswith("delta-")}
        if previous is not None:
            wanted |= {n for n in previous.files.values() if n.startswith("delta-")}
        assert {p.name for p in directory.glob("delta-*")} == wanted
        previous = meta
    assert mgr.check(directory, meta) is None
    assert meta.records == 17


PHRASES = ["transaction mode", "pgbouncer transaction mode", "incident 7", "redis cache", "cache redis",
           "connection pooling", "zeppelin transaction", "decision about", "the decision", "queues and kafka"]  # fmt: skip


def phrase_matches(locations: Locations) -> dict[str, list[str]]:
    mgr = IndexManager(locations)
    reader, _ = mgr.open(policy="ignore")
    try:
        return {phrase: sorted(reader.phrases.matching([phrase]) or []) for phrase in PHRASES}
    finally:
        reader.close()


def test_quoted_phrases_match_the_same_records_over_a_delta_a_refresh_and_a_rebuild(data_dir: Path, tmp_path: Path) -> None:
    """Phrases are matched on the term sequence of each segment; a base plus a delta must agree with a rebuild."""
    store = seed(data_dir, 24)
    mgr = IndexManager(resolve_locations(data_dir))
    mgr.build()
    zeppelin = capture.remember(store, "Adopt zeppelin transaction mode", project="p", rationale="queues and kafka lag",
                                options=PLAIN).record  # fmt: skip
    decisions = data_dir / DECISIONS
    first = orjson.loads(decisions.read_bytes().splitlines()[0])
    first["decision"] = "Decision 0 now says: redis cache for pgbouncer transaction mode"  # retires a base row
    with decisions.open("ab") as handle:
        handle.write(orjson.dumps(first) + b"\n")
    assert mgr.build().delta
    over_delta = phrase_matches(resolve_locations(data_dir))
    rebuilt = resolve_locations(data_dir, tmp_path / "rebuilt-index")
    IndexManager(rebuilt).build(rebuild=True)
    assert over_delta == phrase_matches(rebuilt)
    assert over_delta["zeppelin transaction"] == [zeppelin.id]  # a delta row
    assert first["id"] in over_delta["pgbouncer transaction mode"]  # its newer version, in the delta
    assert first["id"] not in over_delta["connection pooling"]  # its retired base row no longer matches
    assert over_delta["redis cache"] and over_delta["cache redis"] != over_delta["redis cache"]  # order matters
    assert over_delta["the decision"] == over_delta["decision about"]  # stopwords do not count
    assert zeppelin.id in over_delta["queues and kafka"]  # a phrase in the body
    # An incremental refresh (a rewritten line: the full refresh path) agrees too.
    lines = decisions.read_bytes().splitlines()
    decisions.write_bytes(b"\n".join(lines[1:]) + b"\n")
    report = mgr.build()
    assert (report.mode, report.delta) == ("incremental", False)
    IndexManager(rebuilt).build(rebuild=True)
    assert phrase_matches(resolve_locations(data_dir)) == phrase_matches(rebuilt)


def test_a_delta_refresh_writes_the_same_files_from_the_checked_reader_as_from_the_files(data_dir: Path) -> None:
    """The manager hands ``delta.append`` the reader its check loaded; what it writes must not depend on that."""
    from lore.index import delta
    from lore.index.reader import IndexReader

    store = seed(data_dir, 20)
    mgr = IndexManager(resolve_locations(data_dir))
    mgr.build()
    capture.remember(store, "Adopt zeppelin transaction mode", project="p", options=PLAIN)
    assert mgr.build().delta
    decisions = data_dir / DECISIONS
    second = orjson.loads(decisions.read_bytes().splitlines()[1])
    second["decision"] = "Decision 1 now says: zeppelin for redis"
    with decisions.open("ab") as handle:
        handle.write(orjson.dumps(second) + b"\n")
    assert mgr.build().delta  # the delta now retires base row 1
    capture.remember(store, "Adopt zeppelin session mode", project="p", options=PLAIN)
    sixth = orjson.loads(decisions.read_bytes().splitlines()[5])  # base row 5: after the retired row 1
    sixth["decision"] = "Decision 5 now says: zeppelin for kafka"
    with decisions.open("ab") as handle:
        handle.write(orjson.dumps(sixth) + b"\n")
    directory, meta = mgr.read_meta()  # type: ignore[misc]
    assert orjson.loads((directory / meta.files["delta_dead"]).read_bytes()) == [1]

    reader = IndexReader(directory, meta)
    reader.load(deep=True)  # before either run, every part the second run may reuse
    written = {}
    for use_reader in (False, True):
        result = delta.append(data_dir, directory, meta, reader if use_reader else None)
        assert result is not None
        new_meta, report = result
        names = {k: v for k, v in new_meta.files.items() if k.startswith("delta_")}
        contents = {k: (directory / v).read_bytes() for k, v in names.items()}
        written[use_reader] = (contents, new_meta.counts, new_meta.sources, new_meta.digests, report.added, report.records)
    reader.close()
    assert written[True] == written[False]
    assert written[True][1] == {"decision": 22} and written[True][4] == 1
    assert orjson.loads(written[True][0]["delta_dead"]) == [1, 5]


def test_lines_inserted_before_the_last_indexed_ones_take_the_delta_path(data_dir: Path, tmp_path: Path) -> None:
    # What `lore sync` makes of a clone's unpushed records when the remote moved on: the remote's new
    # lines go in before them (a rebase). The index holds the clone's records already.
    store = seed(data_dir, 40)
    mgr = IndexManager(resolve_locations(data_dir))
    assert mgr.build().mode == "full"
    decisions = data_dir / DECISIONS
    lines = decisions.read_bytes().splitlines(keepends=True)
    pulled = [orjson.dumps({**orjson.loads(lines[0]), "id": f"dec-0000aa{n:02x}", "decision": f"Pulled decision {n} about kafka consumer lag"}) + b"\n"
              for n in range(3)]  # fmt: skip
    decisions.write_bytes(b"".join(lines[:37] + pulled + lines[37:]))
    report = mgr.build()
    assert (report.mode, report.delta, report.added) == ("incremental", True, 3)
    # The moved lines named by an inserted one (an edit of a moved record): not this shape, a full refresh.
    moved = orjson.loads(lines[39])
    edited = orjson.dumps({**moved, "decision": "Moved decision, edited elsewhere"}) + b"\n"
    now = decisions.read_bytes().splitlines(keepends=True)
    decisions.write_bytes(b"".join([*now[:-1], edited, *now[-1:]]))
    report = mgr.build()
    assert report.mode == "incremental" and not report.delta
    rebuilt = resolve_locations(data_dir, tmp_path / "rebuilt-index")
    IndexManager(rebuilt).build(rebuild=True)
    for query in QUERIES:
        assert [i for i, _ in ranked(resolve_locations(data_dir), query)] == [i for i, _ in ranked(rebuilt, query)], query
    del store


def test_cosines_of_several_queries_are_each_querys_cosines_on_a_plain_and_a_stacked_matrix() -> None:
    from lore.index.vectors import StackedMatrix, cosines, cosines_of

    rng = np.random.default_rng(7)
    base = rng.standard_normal((2500, 16)).astype(np.float32)  # more rows than one block
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    delta = rng.standard_normal((5, 16)).astype(np.float32)
    queries = rng.standard_normal((3, 16)).astype(np.float32)
    keep = np.flatnonzero(np.arange(2500) % 4 != 1)  # rows retired by an edit
    for matrix in (base, StackedMatrix(base, keep, delta)):
        together = cosines_of(matrix, queries)  # type: ignore[arg-type]
        assert len(together) == 3 and all(c.shape == (matrix.shape[0],) and c.dtype == np.float32 for c in together)
        for query, column in zip(queries, together, strict=True):
            assert np.array_equal(column, cosines(matrix, query))  # type: ignore[arg-type]


def test_a_row_mask_is_one_bool_per_row_from_a_list_or_bytes_and_the_readers_own_rows_are_converted_once(
    data_dir: Path,
) -> None:
    store = Store(data_dir, actor="test")
    store.init()
    plain = WriteOptions(check_duplicates=False)
    first = capture.remember(store, "Pin the Postgres minor version in CI", project="acme-api", options=plain)
    capture.remember(store, "Retry webhooks with backoff", project="acme-api", options=plain)
    capture.retract(store, first.record.id, "superseded by the platform team's policy")
    locations = Locations.resolve(data_dir, None, Settings.from_env())
    IndexManager(locations).build()
    reader = SearchSession(locations).open("ignore")
    assert reader.row_mask(b"\x01\x00\x01").tolist() == [True, False, True]  # bytes were once read as one scalar
    assert reader.row_mask([False, True]).tolist() == [False, True]
    active = reader.active_rows
    assert reader.row_mask(active).tolist() == [bool(ok) for ok in active] and sum(active) == 1
    assert reader.row_mask(active) is reader.row_mask(active)
