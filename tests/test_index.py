"""The derived index: incremental, crash-safe, self-healing, and in step with the files."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lore import analysis, capture
from lore.capture import WriteOptions
from lore.embedder import BUNDLED_MODEL_DIR, QueryEncoder, fold_title_case, get_embedder
from lore.index.manager import CURRENT, IndexManager
from lore.store import Store
from tests.conftest import resolve_locations

PLAIN = WriteOptions(check_duplicates=False)
ROOT = Path(__file__).resolve().parent.parent


def seed(data_dir: Path, n: int = 30) -> Store:
    store = Store(data_dir, actor="test")
    store.init()
    topics = ["postgres connection pooling", "redis cache eviction", "kafka consumer lag", "terraform state locking",
              "react native release train", "stripe webhook retries", "oauth token refresh", "ci cache warmup"]  # fmt: skip
    for i in range(n):
        capture.remember(store, f"Decision {i} about {topics[i % len(topics)]}", project="p",
                         rationale=f"Because of incident {i} involving {topics[(i + 3) % len(topics)]}", options=PLAIN)  # fmt: skip
    return store


def manager(data_dir: Path) -> IndexManager:
    return IndexManager(resolve_locations(data_dir))


def search_ids(mgr: IndexManager, text: str) -> list[str]:
    """Records the BM25 channel finds for a one-word query; the phrase matcher must find the same."""
    reader, _ = mgr.open(policy="ignore")
    ids = [reader.table.ids[row] for row, _ in reader.bm25.search(analysis.unique_terms(text), 100_000)]
    assert sorted(ids) == sorted(reader.phrases.matching([text]) or [])
    return ids


def test_full_build_then_up_to_date(data_dir: Path) -> None:
    seed(data_dir)
    mgr = manager(data_dir)
    report = mgr.build()
    assert (report.mode, report.records, report.embeddings) == ("full", 30, True)
    assert mgr.build().mode == "up-to-date"
    status = mgr.status()
    assert status.exists and not status.stale and status.meta.counts == {"decision": 30}
    reader, _ = mgr.open()
    assert reader.vectors.shape == (30, get_embedder().dim)
    assert len(reader.table) == 30


def test_incremental_add_edit_delete_touch_only_changed_records(data_dir: Path) -> None:
    store = seed(data_dir)
    mgr = manager(data_dir)
    mgr.build()
    before, _ = mgr.open()
    old_vectors = np.asarray(before.vectors, dtype=np.float32).copy()
    old_ids = list(before.table.ids)

    added = capture.remember(store, "Adopt pgbouncer transaction mode for billing", project="p", options=PLAIN).record
    report = mgr.build()
    assert (report.mode, report.added, report.updated, report.deleted) == ("incremental", 1, 0, 0)
    assert added.id in search_ids(mgr, "pgbouncer")
    after, _ = mgr.open()
    # untouched rows keep their vectors exactly
    for row, rid in enumerate(old_ids):
        assert np.array_equal(np.asarray(after.vectors[after.table.row(rid)], dtype=np.float32), old_vectors[row])

    capture.retract(store, added.id, "wrong service")
    report = mgr.build()
    assert (report.mode, report.updated) == ("incremental", 1)
    reader, _ = mgr.open()
    assert reader.table.statuses[reader.table.row(added.id)] == "retracted"

    store.delete(added.id)
    report = mgr.build()
    assert (report.mode, report.deleted) == ("incremental", 1)
    assert added.id not in search_ids(mgr, "pgbouncer")
    assert manager(data_dir).open()[0].table.row(added.id) is None


def test_search_refreshes_a_stale_index_before_answering(data_dir: Path, cli) -> None:
    store = seed(data_dir, 10)
    cli("index")
    record = capture.remember(store, "Quarantine flaky integration tests nightly", project="p", options=PLAIN).record
    out = orjson.loads(cli("search", "quarantine flaky tests", "--json").stdout)
    assert out["results"][0]["id"] == record.id
    store.delete(record.id)
    out = orjson.loads(cli("search", "quarantine flaky tests", "--json").stdout)
    assert record.id not in [r["id"] for r in out["results"]]


def test_model_change_re_embeds(data_dir: Path, tmp_path: Path, monkeypatch) -> None:
    seed(data_dir, 5)
    mgr = manager(data_dir)
    mgr.build()
    copy = tmp_path / "other-model"
    shutil.copytree(BUNDLED_MODEL_DIR, copy)
    monkeypatch.setenv("LORE_EMBED_MODEL", str(copy))
    get_embedder.cache_clear()
    mgr = manager(data_dir)  # the next process: settings are read once, where a command starts
    assert mgr.status().reason == "embedding model changed"
    report = mgr.build()
    assert report.mode == "full"
    assert mgr.status().meta.model.startswith(str(copy.resolve()))


def test_broken_model_keeps_lexical_search_working(data_dir: Path, tmp_path: Path, monkeypatch, cli) -> None:
    seed(data_dir, 5)
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "model.safetensors").write_bytes(b"not a model")
    (broken / "tokenizer.json").write_text("{}")
    monkeypatch.setenv("LORE_EMBED_MODEL", str(broken))
    get_embedder.cache_clear()
    result = cli("search", "redis cache eviction", "--json")
    assert result.exit_code == 0
    payload = orjson.loads(result.stdout)
    assert payload["results"] and "redis" in payload["results"][0]["title"].lower()
    assert any("lexical" in w for w in payload["warnings"])


def test_corrupt_or_partial_index_is_rebuilt_not_a_traceback(data_dir: Path, cli) -> None:
    seed(data_dir, 8)
    mgr = manager(data_dir)
    mgr.build()
    generation = mgr.current_dir()
    assert generation is not None
    (generation / "meta.json").write_text("{ truncated")
    assert mgr.read_meta() is None
    result = cli("search", "kafka consumer lag", "--json")
    assert result.exit_code == 0 and orjson.loads(result.stdout)["results"]
    generation = mgr.current_dir()
    for toc in (generation / "lexical").glob("*.toc"):
        toc.unlink()
    assert cli("search", "kafka consumer lag", "--json").exit_code == 0
    (mgr.index_dir / CURRENT).write_text("gen-does-not-exist")
    assert cli("index", "status", "--json").exit_code == 0
    assert cli("search", "kafka", "--json").exit_code == 0
    meta = orjson.loads((mgr.current_dir() / "meta.json").read_bytes())
    meta["format"] = 999
    (mgr.current_dir() / "meta.json").write_bytes(orjson.dumps(meta))
    assert "built index" in cli("index").stdout.lower()


BUILD = """
import sys
from lore.paths import Locations
from lore.settings import Settings
from lore.index.manager import IndexManager
IndexManager(Locations.resolve(sys.argv[1], sys.argv[2], Settings.from_env())).build(rebuild=True)
"""


def kill_builds(data_dir: Path, index_dir: Path, command: list[str], delays: tuple[float, ...], good: set[str]) -> None:
    """Start ``command DATA_DIR INDEX_DIR`` (a build) and SIGKILL it after each delay: the index stays usable and right."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for delay in delays:
        proc = subprocess.Popen([*command, str(data_dir), str(index_dir)], env=env)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        fresh = manager(data_dir)
        assert fresh.read_meta() is not None, f"unusable index after kill at {delay}s"
        assert set(search_ids(fresh, "postgres")) == good


@pytest.mark.slow
def test_killing_a_build_at_any_moment_leaves_a_usable_index(data_dir: Path, tmp_path: Path) -> None:
    seed(data_dir, 400)
    mgr = manager(data_dir)
    mgr.build()
    good = set(search_ids(mgr, "postgres"))
    script = tmp_path / "build.py"
    script.write_text(BUILD)
    kill_builds(data_dir, mgr.index_dir, [sys.executable, str(script)], (0.05, 0.3, 0.8, 1.5), good)
    assert manager(data_dir).build().mode in ("up-to-date", "incremental", "full")


@pytest.mark.slow
def test_concurrent_builds_do_not_corrupt(data_dir: Path, tmp_path: Path) -> None:
    seed(data_dir, 200)
    script = tmp_path / "build.py"
    script.write_text(BUILD)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    index_dir = manager(data_dir).index_dir
    procs = [subprocess.Popen([sys.executable, str(script), str(data_dir), str(index_dir)], env=env) for _ in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    mgr = manager(data_dir)
    assert mgr.status().stale is False
    assert len(mgr.open()[0].table) == 200
    generations = [p for p in index_dir.iterdir() if p.name.startswith("gen-")]
    assert generations == [mgr.current_dir()]


def test_fold_title_case_keeps_acronyms_and_identifiers() -> None:
    assert fold_title_case("Retry failed HTTP requests in PostgreSQL") == "retry failed HTTP requests in PostgreSQL"
    assert fold_title_case("Use getUserById, not BRCA1 or X") == "use getUserById, not BRCA1 or X"
    assert fold_title_case("RUN MIGRATIONS BEFORE THE DEPLOY") == "run migrations before the deploy"
    assert fold_title_case("HTTP") == "HTTP"  # one upper-case word is an acronym, not shouting


@given(st.text(alphabet=st.sampled_from(list("aAbBzZ19 _-.é")), max_size=40))
def test_fold_title_case_only_changes_case_and_is_idempotent(text: str) -> None:
    folded = fold_title_case(text)
    assert folded.lower() == text.lower()
    assert fold_title_case(folded) == folded


def test_the_bundled_model_matches_a_capitalised_title_to_a_lower_case_query() -> None:
    query, title, unrelated = get_embedder().encode(["retry logic", "Retry failed webhooks", "Store money as integers"])
    assert float(query @ title) > float(query @ unrelated) + 0.15


def test_query_encoder_matches_model2vec_exactly() -> None:
    texts = ["retry logic for payment calls", "", "Größe of the café ✓ naïve", "x" * 5000,
             "getUserById in lore/store/store.py", "exponential backoff with jitter"]  # fmt: skip
    light = QueryEncoder(BUNDLED_MODEL_DIR).encode(texts)
    full = get_embedder().encode(texts)
    assert light.shape == full.shape
    # model2vec averages in the model's float16; the light encoder in float32. They agree to float16 precision.
    assert np.allclose(light, full, atol=2e-3)
    cosines = (light * full.astype(np.float32)).sum(axis=1)
    nonzero = np.linalg.norm(full.astype(np.float32), axis=1) > 0
    assert np.all(cosines[nonzero] > 0.9999)
    assert np.array_equal(nonzero, np.linalg.norm(light, axis=1) > 0)


def test_index_status_cli(data_dir: Path, cli) -> None:
    seed(data_dir, 3)
    missing = cli("index", "status")
    assert missing.stdout.splitlines()[1] == "State: missing (no index yet); run `lore index`"
    assert cli("index").stdout.startswith("Built index of 3 records in ")
    assert cli("index").stdout == "Index is up to date (3 records)\n"
    status = orjson.loads(cli("index", "status", "--json").stdout)
    assert status["records"] == 3 and status["embeddings"] is True and status["stale"] is False
    assert status["model"].startswith("bundled@")


SEARCH_IMPORTS = """
import sys
from lore.__main__ import main
try:
    main(["search", "kafka consumer lag", "--json"])
except SystemExit:
    pass
heavy = sorted(m for m in ("whoosh", "yaml", "pydantic", "model2vec", "networkx", "lore.capture",
                           "lore.curate.lessons", "lore.store.store")
               # a module bound by lore.cli.base.lazy_module stays a _LazyModule until first used
               if m in sys.modules and type(sys.modules[m]).__name__ != "_LazyModule")
print("HEAVY", heavy)
"""


def test_search_on_a_fresh_index_skips_whoosh_the_store_and_the_write_path(data_dir: Path) -> None:
    # Each of these cost 10-130 ms of every `lore search`: whoosh is only opened for quoted
    # phrases, the store only when the index must be refreshed, typer must not pull pydantic.
    seed(data_dir, 10)
    manager(data_dir).build()
    env = {**os.environ, "LORE_DATA_DIR": str(data_dir)}
    out = subprocess.run([sys.executable, "-c", SEARCH_IMPORTS], capture_output=True, text=True, check=True, env=env)
    assert '"results"' in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "HEAVY []"


def test_the_first_records_after_an_empty_index_refresh_it(initialised: Path, cli) -> None:
    # A new user's first steps: init, search (indexes nothing), remember, search. The
    # incremental refresh read row 0 of the empty vector matrix and crashed.
    assert cli("search", "anything").exit_code == 0
    assert cli("remember", "Use uv for Python packaging", "-r", "Faster installs and a lockfile").exit_code == 0
    first = orjson.loads(cli("search", "python packaging", "--json").stdout)
    assert [r["title"] for r in first["results"]] == ["Use uv for Python packaging"]
    assert cli("remember", "Pin ruff in pre-commit", "-r", "The same lint everywhere").exit_code == 0
    second = orjson.loads(cli("search", "uv", "--json").stdout)
    assert second["results"][0]["title"] == "Use uv for Python packaging"
    assert second["evidence_gap"] is False  # an exact match in a two-record store is evidence
    status = orjson.loads(cli("index", "status", "--json").stdout)
    assert status["records"] == 2 and status["stale"] is False


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts /proc/self/fd")
def test_a_closed_reader_releases_its_memory_maps_without_garbage_collection(indexed: Path) -> None:
    """The warm helper closes the reader it replaces after every refresh: its descriptors must go at once.

    Before the fix the memory-mapped arrays stayed open until the cyclic collector ran
    (the table refers back to its reader): six descriptors per refresh in the helper.
    """
    import gc

    from lore.index.manager import IndexReader

    found = IndexManager(resolve_locations(indexed)).read_meta()
    assert found is not None
    gc.collect()
    gc.disable()
    try:
        before = len(os.listdir("/proc/self/fd"))
        reader = IndexReader(*found)
        reader.load()
        assert reader.has_vectors
        opened = len(os.listdir("/proc/self/fd"))
        assert opened > before  # the arrays are memory-mapped
        reader.close()
        assert len(os.listdir("/proc/self/fd")) == before
        assert reader.table.ids  # a part used after close is loaded again
        reader.close()
    finally:
        gc.enable()


def test_the_query_encoder_reads_the_median_token_length_only_for_a_text_that_could_need_the_cut() -> None:
    encoder = QueryEncoder(BUNDLED_MODEL_DIR)
    encoder.encode(["retry logic for payment calls", "a" * (encoder.max_length or 0)])
    assert encoder._median_token_length is None  # ~16 ms saved on every prompt and refresh
    encoder.encode(["x" * 5000])
    assert encoder._median_token_length == encoder.median_token_length > 0


def test_the_graph_file_lists_edges_in_networkx_order_without_networkx() -> None:
    """A build saves ``ordered_edges`` instead of building a NetworkX graph for it: same edges, same order."""
    import random

    from lore.index import graph as graph_index
    from lore.store.records import Record

    rng = random.Random(7)
    ids = [f"dec-{i:04x}" for i in range(60)]
    records = {}
    for rid in rng.sample(ids, len(ids)):  # records in an order of their own
        raw = {"id": rid, "decision": rid, "related_decisions": rng.sample([*ids, "dec-missing"], rng.randrange(4))}
        if rng.random() < 0.3:
            raw["superseded_by"] = rng.choice(ids)
        records[rid] = Record(kind="decision", id=rid, raw=raw)
    relations = ["relates_to", "supersedes", "contradicts"]
    explicit = [graph_index.GraphEdge(rng.choice([*ids, "dec-gone"]), rng.choice(ids), rng.choice(relations), rng.random())
                for _ in range(150)]  # fmt: skip
    expected = [(s, t, d["relation"], d["weight"], d["implicit"]) for s, t, d in graph_index.build(records, explicit).edges(data=True)]
    assert [tuple(e) for e in graph_index.ordered_edges(records, explicit)] == expected
    assert len(expected) > 100


EMBED_TEXTS = [f"Decision {i}: {topic} because of incident {i * 7}" for i, topic in
               enumerate(["retry payment calls", "Größe of the café", "getUserById in lore/store/store.py",
                          "exponential backoff with jitter", "x" * 700, ""] * 12)]  # fmt: skip


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Builds of any size share their embeddings with a worker process, 7 texts a chunk."""
    monkeypatch.setattr("lore.index.build.EMBED_PROCESS_THRESHOLD", 1)
    monkeypatch.setattr("lore.index.build.EMBED_CHUNK", 7)


def test_a_build_and_its_worker_share_the_chunks_and_get_the_vectors_of_one_process(small_chunks: None) -> None:
    from lore.index.build import EmbeddingJob, embed_texts

    expected, identity, _ = embed_texts(EMBED_TEXTS, None)
    job = EmbeddingJob(EMBED_TEXTS, None)
    assert job._process is not None
    matrix, got_identity, warning = job.result()
    assert matrix is not None and np.array_equal(matrix, expected)
    assert (got_identity, warning) == (identity, None)
    assert 1 <= job.chunks_here <= 11  # 11 chunks: this process takes at least the last one
    assert job._work is not None and not job._work.exists()


def test_chunks_a_worker_claimed_but_never_wrote_are_embedded_by_the_build(small_chunks: None) -> None:
    """A worker that dies (or cannot load the model) after claiming chunks costs time, never vectors."""
    from lore.index.build import EmbeddingJob, embed_texts

    job = EmbeddingJob(EMBED_TEXTS, None)
    job._process.kill()  # dead before or after claiming some chunks, with or without their vectors
    job._process.wait()
    for chunk in range(3):  # and claimed these without writing anything (its first act, were it alive)
        (job._work / f"claim-{chunk}").touch()  # type: ignore[operator]
    matrix, _, _ = job.result()
    assert matrix is not None and np.array_equal(matrix, embed_texts(EMBED_TEXTS, None)[0])


def test_the_worker_writes_the_cold_hooks_files_of_a_large_build_as_a_refresh_would(small_chunks: None, data_dir: Path) -> None:
    """The passage tokens and token cache come from the worker, beside the build, not after it: the same bytes."""
    from lore.index import cold_vectors

    seed(data_dir, 60)
    mgr = manager(data_dir)
    report = mgr.build()
    assert report.mode == "full" and report.timings.get("hook_files_in_worker") is not None
    directory, meta = mgr.read_meta()  # type: ignore[misc]
    written = {name: (directory / name).read_bytes() for name in (cold_vectors.PASSAGE_FILE, cold_vectors.CACHE_FILE)}
    for name in written:
        (directory / name).unlink()
    cold_vectors.prepare(directory, meta)
    assert {name: (directory / name).read_bytes() for name in written} == written
    assert cold_vectors.PassageTokens.load(directory / cold_vectors.PASSAGE_FILE, meta.model or "",
                                           directory / meta.files["docs"]) is not None  # fmt: skip


def test_a_build_whose_model_cannot_load_stops_its_worker_and_indexes_without_embeddings(
    small_chunks: None, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(data_dir, 40)
    monkeypatch.setenv("LORE_EMBED_MODEL", str(tmp_path / "no-such-model"))  # the worker inherits it
    mgr = manager(data_dir)
    report = mgr.build()
    assert report.mode == "full" and report.embeddings is False
    assert any("no-such-model" in w for w in report.warnings)
    directory = mgr.current_dir()
    assert directory is not None and not list(directory.glob(".embedding-*"))
    assert set(search_ids(mgr, "postgres"))  # lexical search still works


def test_a_build_that_fails_stops_its_worker(small_chunks: None, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lore.index import build

    seed(data_dir, 40)
    jobs: list[build.EmbeddingJob] = []
    original = build.EmbeddingJob.__init__

    def remember(self: build.EmbeddingJob, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)  # type: ignore[arg-type]
        jobs.append(self)

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(build.EmbeddingJob, "__init__", remember)
    monkeypatch.setattr(build.bm25, "save", broken)
    with pytest.raises(OSError, match="disk full"):
        manager(data_dir).build()
    assert len(jobs) == 1 and jobs[0]._process.poll() is not None  # killed, not left embedding
    assert jobs[0]._work is not None and not jobs[0]._work.exists()


BUILD_WITH_WORKER = """
import sys
import lore.index.build as build
from lore.paths import Locations
from lore.settings import Settings
from lore.index.manager import IndexManager
build.EMBED_PROCESS_THRESHOLD, build.EMBED_CHUNK = 1, 16
IndexManager(Locations.resolve(sys.argv[1], sys.argv[2], Settings.from_env())).build(rebuild=True)
"""


@pytest.mark.slow
def test_builds_with_embedding_workers_killed_or_racing_never_publish_a_wrong_generation(data_dir: Path, tmp_path: Path) -> None:
    """The worker writes only into its own temporary directory: killing the build leaves it to finish
    there (or not), and builders racing each other each have their own; the lock picks one generation."""
    seed(data_dir, 300)
    mgr = manager(data_dir)
    mgr.build()
    good = set(search_ids(mgr, "postgres"))
    vectors_before = np.asarray(mgr.open()[0].vectors).copy()
    script = tmp_path / "build.py"
    script.write_text(BUILD_WITH_WORKER)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    kill_builds(data_dir, mgr.index_dir, [sys.executable, "-P", str(script)], (0.3, 0.8, 1.5), good)
    procs = [subprocess.Popen([sys.executable, "-P", str(script), str(data_dir), str(mgr.index_dir)], env=env) for _ in range(3)]
    assert [p.wait(timeout=180) for p in procs] == [0, 0, 0]
    final = manager(data_dir)
    assert final.status().stale is False
    reader, _ = final.open()
    assert len(reader.table) == 300 and set(search_ids(final, "postgres")) == good
    assert np.array_equal(np.asarray(reader.vectors), vectors_before)  # the worker's chunks, in their rows
    assert [p for p in final.index_dir.iterdir() if p.name.startswith("gen-")] == [final.current_dir()]
    assert not list(final.current_dir().glob(".embedding-*"))  # type: ignore[union-attr]  # the workers' files went with them


BUILD_IMPORTS = """
import sys
from lore.__main__ import main
try:
    main(["index", "--rebuild"])
except SystemExit:
    pass
try:
    main(["search", '"webhook retries"', "--json"])  # a quoted phrase
except SystemExit:
    pass
print("IMPORTED", sorted(m for m in ("whoosh", "networkx", "model2vec") if m in sys.modules))
"""


def test_a_build_and_a_phrase_search_import_neither_whoosh_nor_networkx(data_dir: Path) -> None:
    # Whoosh's writer was most of every build (35 of 36 s at 10,866 records) and NetworkX's
    # import ~0.2 s of one; neither is needed to write the index or to match a phrase.
    seed(data_dir, 10)
    env = {**os.environ, "LORE_DATA_DIR": str(data_dir)}
    out = subprocess.run([sys.executable, "-c", BUILD_IMPORTS], capture_output=True, text=True, check=True, env=env)
    assert '"results"' in out.stdout and "webhook retries" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "IMPORTED []"
