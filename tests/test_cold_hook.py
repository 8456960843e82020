"""The prompt hook's light path (BM25 alone here): numpy's BM25 scores without numpy, the pipeline's answer, nothing on damage."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from lore import capture
from lore.agent.prompt import cold_context_for_prompt
from lore.analysis import unique_terms
from lore.capture import WriteOptions
from lore.index.cold import ColdReader
from lore.index.manager import IndexManager, IndexReader
from lore.paths import Locations
from lore.rank import cold
from lore.rank.pipeline import run
from lore.store import Store
from lore.store.layout import DECISIONS
from tests.conftest import resolve_locations

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PLAIN = WriteOptions(check_duplicates=False)
NOW = 2_000_000_000.0
EXTRA = ["why pgbouncer", "postgres connection pooling", "kafka consumer lag incident", "webhook retries stripe",
         "cache", "a word nobody wrote: zyzzogeton", "exponentail backoff", "builtin/fetch.c", "the and of"]  # fmt: skip


def demo_questions() -> list[str]:
    from benchmarks.sets import demo

    evalset = demo(PROJECT_ROOT / "data")
    questions = [text for split in ("dev", "test") for part in (evalset.answerable(split), evalset.unanswerable(split))
                 for text in part.values()]  # fmt: skip
    return [*questions, *EXTRA]


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[IndexReader, ColdReader]]:
    """The bundled demo data, indexed once for the module: the numpy reader and the cold one."""
    locations = resolve_locations(PROJECT_ROOT / "data", tmp_path_factory.mktemp("demo") / "index")
    manager = IndexManager(locations)
    manager.build()
    found = manager.read_meta()
    assert found is not None
    numpy_reader, cold_reader = IndexReader(*found), ColdReader(*found)
    cold_reader.load()
    yield numpy_reader, cold_reader
    numpy_reader.close()
    cold_reader.close()


@pytest.fixture
def delta_store(data_dir: Path) -> Locations:
    """A store whose index has a delta segment: appended records and a newer version of a base record."""
    store = Store(data_dir, actor="test")
    store.init()
    topics = ["postgres connection pooling", "redis cache eviction", "kafka consumer lag", "stripe webhook retries"]
    for i in range(40):
        capture.remember(store, f"Decision {i} about {topics[i % 4]}", project="p",
                         rationale=f"Because of incident {i} involving {topics[(i + 1) % 4]}", options=PLAIN)  # fmt: skip
    locations = resolve_locations(data_dir)
    manager = IndexManager(locations)
    assert manager.build().mode == "full"
    for i in range(40, 44):
        capture.remember(store, f"New decision {i} about queues and {topics[i % 4]}", project="p",
                         rationale=f"Because of incident {i}", options=PLAIN)  # fmt: skip
    decisions = data_dir / DECISIONS
    first = orjson.loads(decisions.read_bytes().splitlines()[0])
    first["decision"] = "Decision 0 now says: pgbouncer transaction mode for postgres pooling"
    with decisions.open("ab") as handle:
        handle.write(orjson.dumps(first) + b"\n")
    report = manager.build()
    assert (report.mode, report.delta) == ("incremental", True)
    found = manager.read_meta()
    assert found is not None and "delta_table" in found[1].files
    return locations


def readers(locations: Locations) -> tuple[IndexReader, ColdReader]:
    found = IndexManager(locations).read_meta()
    assert found is not None
    cold_reader = ColdReader(*found)
    cold_reader.load()
    return IndexReader(*found), cold_reader


def assert_same_channel(numpy_reader: IndexReader, cold_reader: ColdReader, queries: list[str]) -> None:
    assert cold_reader.bm25.average == numpy_reader.bm25.average
    compared = 0
    for query in queries:
        terms = unique_terms(query)
        dense = numpy_reader.bm25.scores(terms)
        sparse = cold_reader.bm25.scores(terms)
        assert sorted(sparse) == [int(row) for row in (dense > 0).nonzero()[0]], query
        for row, score in sparse.items():
            assert score == float(dense[row]), (query, row)  # bit for bit: the same operations in the same order
        compared += len(sparse)
        assert cold_reader.bm25.idf_of(terms) == numpy_reader.bm25.idf_of(terms), query
        rows = sorted(sparse)[:40]
        assert cold_reader.bm25.coverage(terms, rows) == pytest.approx(list(numpy_reader.bm25.coverage(terms, rows)), rel=1e-9)
        for term in terms:
            assert cold_reader.bm25.document_frequency(term) == numpy_reader.bm25.document_frequency(term)
            assert cold_reader.bm25.has_near_term(term) == numpy_reader.bm25.has_near_term(term), term
    assert compared > 100  # the queries matched something


def assert_same_answers(numpy_reader: IndexReader, cold_reader: ColdReader, queries: list[str], project: str | None) -> int:
    """The cold answer against ``pipeline.run`` with the hook's options, BM25 alone. Returns how many had hits."""
    with_hits = 0
    for query in queries:
        options = cold.hook_options(project, NOW)
        want = run(numpy_reader, query, options, encode=None, access={})
        try:
            got = cold.run_cold(cold_reader, query, cold.hook_options(project, NOW), access={})
        except cold.Declined:
            continue
        assert [h.id for h in got.hits] == [h.id for h in want.hits], query
        assert [h.score for h in got.hits] == pytest.approx([h.score for h in want.hits], rel=1e-9), query
        assert got.gap.gap == want.gap.gap and got.gap.reason == want.gap.reason, query
        with_hits += bool(got.hits) and not got.gap.gap
    return with_hits


def test_cold_scores_are_the_numpy_channels_on_the_demo_data(demo_index: tuple[IndexReader, ColdReader]) -> None:
    assert_same_channel(*demo_index, demo_questions())


def test_cold_scores_are_the_numpy_channels_with_a_delta_segment(delta_store: Locations) -> None:
    numpy_reader, cold_reader = readers(delta_store)
    assert numpy_reader.dead_rows  # the newer version of decision 0 retired its base row
    assert_same_channel(numpy_reader, cold_reader, [*EXTRA, "decision pgbouncer transaction", "queues incident 41",
                                                    "redis eviction", "incident 0 involving kafka"])  # fmt: skip


def test_cold_answer_is_the_bm25_pipelines_on_the_demo_data(demo_index: tuple[IndexReader, ColdReader]) -> None:
    questions = demo_questions()
    assert assert_same_answers(*demo_index, questions, None) >= 10
    assert_same_answers(*demo_index, questions[:30], "lore")  # the project boost applies alike


def test_cold_answer_is_the_bm25_pipelines_with_a_delta_segment(delta_store: Locations) -> None:
    numpy_reader, cold_reader = readers(delta_store)
    assert_same_answers(numpy_reader, cold_reader, [*EXTRA, "decision pgbouncer transaction mode", "queues incident 41",
                                                    "redis cache eviction incident"], "p")  # fmt: skip


def test_quoted_phrases_are_a_hint_on_the_prompt_path_and_a_filter_only_when_asked(
        demo_index: tuple[IndexReader, ColdReader]) -> None:  # fmt: skip
    # The hook ranks a quoted prompt by its words, as an unquoted one (issue: quotes became a
    # filter, and a title spelled differently got nothing); only `lore search` filters, and
    # that needs Whoosh's positions, so the cold path leaves it to the whole pipeline.
    quoted, plain = 'what did we decide about "connection pooling"', "what did we decide about connection pooling"
    hint = cold.run_cold(demo_index[1], quoted, cold.hook_options(None, NOW))
    assert [h.id for h in hint.hits] == [h.id for h in cold.run_cold(demo_index[1], plain, cold.hook_options(None, NOW)).hits]
    with pytest.raises(cold.Declined):
        cold.run_cold(demo_index[1], quoted, cold.hook_options(None, NOW)._replace(phrases="filter"))


# -- the hook, in a fresh interpreter ----------------------------------------------------------

HOOK_AND_MODULES = """
import io, json, sys
from lore.agent.hook import run_prompt_hook
out = io.StringIO()
code = run_prompt_hook([], stdin=io.StringIO(sys.argv[1]), stdout=out)
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"numpy", "tokenizers", "model2vec", "whoosh", "networkx", "yaml"})
# What the cold path once imported for nothing (each cost 2-8 ms): the index writer's modules,
# hashlib's OpenSSL binding, statistics (fractions, decimal, random), Whoosh's checker; orjson,
# which brings uuid, dataclasses and inspect (a tenth of a cold prompt: docs/performance.md).
avoidable = sorted(m for m in ("hashlib", "statistics", "zipfile", "socket", "lore.index.delta", "lore.rank.querylang",
                               "lore.index.bm25", "lore.index.build", "lore.store.store", "orjson", "dataclasses",
                               "inspect", "uuid") if m in sys.modules)
print(json.dumps({"code": code, "out": out.getvalue(), "heavy": heavy, "avoidable": avoidable}))
"""


def hook_in_fresh_interpreter(prompt: str, env: dict[str, str] | None = None) -> dict[str, object]:
    event = json.dumps({"session_id": "s1", "cwd": str(Path.cwd()), "prompt": prompt})
    done = subprocess.run([sys.executable, "-c", HOOK_AND_MODULES, event], capture_output=True, timeout=120,
                          env={**os.environ, "LORE_HOOK_DEADLINE_MS": "20000", **(env or {})})  # fmt: skip
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    result = json.loads(done.stdout)
    assert isinstance(result, dict)
    return result


@pytest.fixture
def demo_copy(demo_indexed: Locations) -> Locations:
    return demo_indexed


# Names the record's "outbound provider": the shorter "... jitter for webhooks" has a gate of 0.28
# against the built-in null since the refit on 24 dev sessions (threshold 0.30).
DEMO_PROMPT = "how do we handle retries with exponential backoff and jitter for outbound provider webhooks"


def test_cold_hook_injects_without_numpy_tokenizers_or_model2vec(demo_copy: Locations) -> None:
    result = hook_in_fresh_interpreter(DEMO_PROMPT)
    assert result["code"] == 0 and result["heavy"] == [] and result["avoidable"] == []
    context = json.loads(str(result["out"]))["hookSpecificOutput"]["additionalContext"]
    assert context.startswith('<lore-memory source="lore" role="reference-data">') and len(context) <= 1500
    # The same block the in-process code gives (what a test can compare without a subprocess).
    answer = cold_context_for_prompt(DEMO_PROMPT, str(Path.cwd()), 1500, demo_copy)
    assert answer is not None and answer[0] == context and answer[1]
    full = hook_in_fresh_interpreter(DEMO_PROMPT, {"LORE_HOOK_COLD": "full"})
    assert "numpy" in full["heavy"]  # the measure means something: the full path does load it
    assert hook_in_fresh_interpreter(DEMO_PROMPT, {"LORE_HOOK_COLD": "off"})["out"] == ""


def test_candidates_are_never_injected(demo_copy: Locations) -> None:
    store = Store(demo_copy.data_dir, actor="test")
    text = "Webhook retries use exponential backoff with jitter, capped at zebrafish attempts"
    rid = capture.remember(store, text, project="lore", rationale="zebrafish " * 3, options=PLAIN).record.id

    def mutate(raw: dict[str, object]) -> None:
        raw["status"] = "candidate"  # captured, awaiting review (lore inbox)

    store.update(rid, mutate)
    IndexManager(demo_copy).build()
    reader = cold.open_reader(demo_copy)
    assert reader.table.statuses[reader.table.row(rid)] == "candidate"
    prompt = DEMO_PROMPT + " zebrafish attempts"
    assert reader.bm25.scores(unique_terms(prompt))[reader.table.row(rid)] > 0  # it would match
    reader.close()
    block = cold_context_for_prompt(prompt, None, 1500, demo_copy)
    assert block and block[0] and rid not in block[0] and rid not in block[1]


def corrupt_header(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[:6] = b"NOTNPY"  # same size: only the header check can tell
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-8])


def remove(path: Path) -> None:
    path.unlink()


def garble(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(b"{" * len(data))


@pytest.mark.parametrize(("key", "damage"), [("bm25_rows", corrupt_header), ("bm25_terms", corrupt_header),
                                             ("bm25_tf", truncate), ("bm25_offsets", remove), ("table", garble),
                                             ("bm25_lengths", corrupt_header)])  # fmt: skip
def test_damaged_files_inject_nothing(demo_copy: Locations, key: str, damage: object, monkeypatch: pytest.MonkeyPatch) -> None:
    from lore.agent.hook import run_prompt_hook
    from lore.index.layout import GenerationMeta, current_dir

    monkeypatch.setenv("LORE_HOOK_DEADLINE_MS", "20000")  # a loaded machine must not turn the first answer into nothing

    directory = current_dir(demo_copy.index_dir)
    assert directory is not None
    before = io.StringIO()
    event = json.dumps({"session_id": "s1", "cwd": str(Path.cwd()), "prompt": DEMO_PROMPT})
    assert run_prompt_hook([], stdin=io.StringIO(event), stdout=before) == 0 and before.getvalue()
    damage(directory / GenerationMeta.read(directory).files[key])  # type: ignore[operator]
    out = io.StringIO()
    assert run_prompt_hook([], stdin=io.StringIO(event), stdout=out) == 0
    assert out.getvalue() == ""
    log = (Path(os.environ["LORE_CACHE_DIR"]) / "hook.log").read_text()
    assert "IndexDamagedError" in log or "FileNotFoundError" in log


def test_a_damaged_delta_injects_nothing(delta_store: Locations) -> None:
    from lore.index.layout import GenerationMeta, current_dir

    directory = current_dir(delta_store.index_dir)
    assert directory is not None
    files = GenerationMeta.read(directory).files
    data = bytearray((directory / files["delta_bm25_forward"]).read_bytes())
    data[:4] = b"JUNK"  # not a zip any more, same size
    (directory / files["delta_bm25_forward"]).write_bytes(bytes(data))
    with pytest.raises(Exception, match="unreadable"):
        cold_context_for_prompt("redis cache eviction incident", None, 1500, delta_store)


def test_a_young_store_is_answered_by_the_whole_pipeline(indexed: Path) -> None:
    """Fewer than three BM25 candidates: the lexical gap rule cannot judge, so the cold path declines."""
    locations = resolve_locations(indexed)
    prompt = "add jittered exponential backoff around the payment provider charge call"
    reader = cold.open_reader(locations)
    assert 0 < len(reader.bm25.scores(unique_terms(prompt))) < cold.MIN_CANDIDATES
    with pytest.raises(cold.Declined):
        cold.run_cold(reader, prompt, cold.hook_options(None, NOW))
    reader.close()
    assert cold_context_for_prompt(prompt, None, 1500, locations) is None
    result = hook_in_fresh_interpreter(prompt)
    assert "exponential backoff" in json.loads(str(result["out"]))["hookSpecificOutput"]["additionalContext"]
    assert "numpy" in result["heavy"]  # the whole pipeline answered
