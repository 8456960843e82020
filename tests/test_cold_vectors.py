"""The cold path's vector channel without numpy: the query vector, the index rows and the cosines the warm pipeline gives.

``lore.index.cold_vectors`` must give what the numpy side gives: ``QueryEncoder.encode``'s
vector (the bundled model, its tokenizer read from the token cache), ``IndexReader.vectors``'
rows (after a delta refresh too) and ``pipeline.run``'s vector-channel cosine of each hit;
``retrieval.Sparse`` ranks BM25's candidates by it (``cold.RERANKED``).
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest

from lore.embedder import BUNDLED_MODEL_DIR, PureBpe, QueryEncoder, model_identity
from lore.index import cold_vectors
from lore.index.cold import ColdReader
from lore.index.manager import IndexManager, IndexReader
from lore.paths import Locations
from lore.rank import cold
from lore.rank.pipeline import CHANNELS, PASSAGE_HITS, run
from tests.conftest import resolve_locations
from tests.test_cold_hook import EXTRA, NOW, delta_store, demo_questions  # noqa: F401  (a fixture)
from tests.test_embedder_pure import AWKWARD, repository_texts

ROOT = Path(__file__).resolve().parent.parent
IDENTITY = model_identity(str(BUNDLED_MODEL_DIR))


@pytest.fixture(scope="module")
def cached(tmp_path_factory: pytest.TempPathFactory) -> cold_vectors.QueryVector:
    """The bundled model's pure query vector, its tokenizer read back from a token cache file."""
    directory = tmp_path_factory.mktemp("cache")
    tokens = cold_vectors.token_cache(directory, BUNDLED_MODEL_DIR, IDENTITY)
    assert tokens is not None and (directory / cold_vectors.CACHE_FILE).exists()
    loaded = cold_vectors.TokenCache.load(directory / cold_vectors.CACHE_FILE, IDENTITY)
    assert loaded is not None and isinstance(loaded.bpe.vocab, cold_vectors.HashTable)  # the file's tables, not dicts
    return cold_vectors.QueryVector(BUNDLED_MODEL_DIR, loaded)


def test_the_pure_query_vector_is_the_query_encoders(cached: cold_vectors.QueryVector) -> None:
    texts = [t for t in repository_texts() if not any(s in t for s in ("<s>", "</s>", "<unk>"))][:600] + AWKWARD
    texts += [*demo_questions(), "Retry the PostgreSQL HTTP call", "RETRY THE HTTP CALL NOW", "zyzzogeton"]
    assert sum(len(t) > 2000 for t in texts) > 5  # texts past the 512-token cut are in
    encoder = QueryEncoder(BUNDLED_MODEL_DIR)
    encoder.PURE_CHARACTERS = -1  # the numpy side tokenized by ``tokenizers`` itself
    expected = encoder.encode(texts)
    for text, want in zip(texts, expected, strict=True):
        assert cached.token_ids(text) == encoder.token_ids([text])[0], text[:100]
        found = cached.encode(text)
        assert found is not None and len(found) == 256
        assert np.allclose(found, want, rtol=0, atol=2e-6), text[:100]
    assert cached.encode("") == [0.0] * 256  # no token: all zeros, as the encoder gives
    assert cached.encode("a <s> b") is None  # an added token: left to tokenizers, no cosine here
    assert cached.median == encoder.median_token_length


def test_the_token_cache_gives_the_tokenizer_json_ids(cached: cold_vectors.QueryVector) -> None:
    pure = PureBpe.load(BUNDLED_MODEL_DIR / "tokenizer.json")
    assert pure is not None
    for text in [*AWKWARD, *EXTRA, *demo_questions()]:
        assert cached.bpe.token_ids(text, 512) == pure.token_ids(text, 512), text[:100]
    vocab = cached.bpe.vocab
    assert isinstance(vocab, cold_vectors.HashTable)
    assert all(vocab[token] == index for token, index in list(pure.vocab.items())[::97])
    assert vocab.get("no such token \u2581\u2581") is None and "no such token" not in vocab
    assert cached.bpe.by_word == pure.by_word and cached.bpe.unk == pure.unk and cached.bpe.added == pure.added


def test_a_stale_or_damaged_token_cache_is_written_again(tmp_path: Path) -> None:
    tmp_path = tmp_path / "generation"
    tmp_path.mkdir()
    path = tmp_path / cold_vectors.CACHE_FILE
    assert cold_vectors.token_cache(tmp_path, BUNDLED_MODEL_DIR, IDENTITY) is not None
    assert cold_vectors.TokenCache.load(path, "another model") is None  # written for another model: ignored
    path.write_bytes(path.read_bytes()[:-10])  # truncated
    assert cold_vectors.TokenCache.load(path, IDENTITY) is None
    assert cold_vectors.token_cache(tmp_path, BUNDLED_MODEL_DIR, IDENTITY) is not None
    assert cold_vectors.TokenCache.load(path, IDENTITY) is not None  # written again
    assert sorted(p.name for p in tmp_path.iterdir()) == [cold_vectors.CACHE_FILE]  # no temporary left behind


def test_weights_and_a_mapping_tensor_are_applied_as_the_query_encoder_does(tmp_path: Path) -> None:
    """model2vec models may carry per-token weights and a token -> row mapping: read them as ``QueryEncoder`` does."""
    model = tmp_path / "model"
    model.mkdir()
    for name in ("tokenizer.json", "config.json"):
        shutil.copy(BUNDLED_MODEL_DIR / name, model / name)
    rng = np.random.default_rng(7)
    tensors = {"embeddings": rng.standard_normal((500, 16)).astype(np.float16),
               "weights": rng.uniform(0.1, 2.0, 32000).astype(np.float16),
               "mapping": rng.integers(0, 500, 32000).astype(np.int64)}  # fmt: skip
    codes = {np.float16: "F16", np.int64: "I64"}
    header, offset, blobs = {}, 0, []
    for name, array in tensors.items():
        data = array.tobytes()
        header[name] = {"dtype": codes[array.dtype.type], "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    head = json.dumps(header).encode()
    (model / "model.safetensors").write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))
    encoder = QueryEncoder(model)
    assert encoder.weights is not None and encoder.mapping is not None
    tokens = cold_vectors.token_cache(tmp_path, model, model_identity(str(model)))
    assert tokens is not None
    pure = cold_vectors.QueryVector(model, tokens)
    texts = [*EXTRA, "Retry the PostgreSQL HTTP call", "webhooks and exponential backoff"]
    for text, want in zip(texts, encoder.encode(texts), strict=True):
        found = pure.encode(text)
        assert found is not None and np.allclose(found, want, rtol=0, atol=2e-6), text


def rows_of(locations: Locations) -> tuple[IndexReader, ColdReader, cold_vectors.ColdVectors]:
    found = IndexManager(locations).read_meta()
    assert found is not None
    reader, cold_reader = IndexReader(*found), ColdReader(*found)
    cold_reader.load()
    vectors = cold_vectors.for_reader(cold_reader)
    assert vectors is not None
    return reader, cold_reader, vectors


def test_the_rows_are_the_readers_after_a_delta_refresh(delta_store: Locations) -> None:  # noqa: F811
    reader, cold_reader, vectors = rows_of(delta_store)
    assert reader.has_delta and reader.dead_rows  # a newer version in the delta retired a base row
    matrix = np.asarray(reader.vectors[list(range(len(reader.table)))], dtype=np.float32)
    assert matrix.shape == (len(cold_reader.table), 256) == (44, 256)
    for row in range(len(reader.table)):
        assert vectors.rows.row(row) == matrix[row].tolist(), row  # float32 read as is: equal, not close
    assert reader.table.ids == cold_reader.table.ids


def assert_warm_cosines(locations: Locations, queries: list[str]) -> int:
    """Every reranked cold hit the warm pipeline also returns carries the warm hit's cosine; BM25's evidence is the lexical path's."""
    reader, cold_reader, _ = rows_of(locations)
    from lore.embedder import get_query_encoder

    encode = get_query_encoder().encode
    compared = 0
    for query in queries:
        try:
            reranked = cold.run_cold(cold_reader, query, cold.hook_options(None, NOW, channels=cold.RERANKED))
        except cold.Declined:
            continue
        warm = run(reader, query, cold.hook_options(None, NOW, channels=CHANNELS), encode=encode, access={})
        assert reranked.channels_used == ("bm25", "vector")
        # The vector channel ranks BM25's candidates only: it adds none, and each hit keeps its BM25 score.
        plain = cold.run_cold(cold_reader, query, cold.hook_options(None, NOW))
        assert plain.channels_used == ("bm25",)
        lexical = {h.id: h.channel_scores.get("bm25") for h in plain.hits}
        for hit in reranked.hits:
            assert "vector" not in hit.ranks or "bm25" in hit.ranks, (query, hit.id)
            if lexical.get(hit.id) is not None and "bm25" in hit.channel_scores:
                assert hit.channel_scores["bm25"] == lexical[hit.id]
        warm_cosines = {h.id: h.channel_scores["vector"] for h in warm.hits if "vector" in h.channel_scores}
        for hit in reranked.hits:
            if "graph_hops" in hit.ranks:
                assert "vector" not in hit.channel_scores  # as the warm pipeline: none for a record the graph added
            elif hit.id in warm_cosines:
                assert hit.channel_scores.get("vector", 0.0) == pytest.approx(warm_cosines[hit.id], abs=1e-6), (query, hit.id)
                compared += 1
        # The injection decision's passage evidence: the same in both, for the hits it reads.
        warm_passages = {h.id: h.passage_cosine for h in warm.hits[:PASSAGE_HITS]}
        for hit in reranked.hits[:PASSAGE_HITS]:
            assert hit.passage_cosine is not None, (query, hit.id)
            if hit.id in warm_passages:
                assert hit.passage_cosine == pytest.approx(warm_passages[hit.id], abs=1e-5), (query, hit.id)
        assert all(h.passage_cosine is None for h in (*reranked.hits[PASSAGE_HITS:], *plain.hits))
    return compared


def test_cold_hits_carry_the_warm_pipelines_cosine(data_dir: Path) -> None:
    shutil.copytree(ROOT / "data", data_dir)
    locations = resolve_locations(data_dir)
    IndexManager(locations).build()
    assert assert_warm_cosines(locations, demo_questions()) > 100


def test_cold_hits_carry_the_warm_pipelines_cosine_with_a_delta_segment(delta_store: Locations) -> None:  # noqa: F811
    assert assert_warm_cosines(delta_store, [*EXTRA, "decision pgbouncer transaction mode", "queues incident 41",
                                             "new decision about queues", "postgres pooling incident"]) > 10  # fmt: skip


def test_no_vectors_or_another_model_means_no_cosines(delta_store: Locations, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    found = IndexManager(delta_store).read_meta()
    assert found is not None
    directory, meta = found
    files, rows = meta.files, len(IndexReader(directory, meta).table)
    assert cold_vectors.ColdVectors.open(directory, files, rows, [0, 1], meta.model) is None  # rows not the table's
    assert cold_vectors.ColdVectors.open(directory, files, rows, [0], "another@model") is None
    without = {k: v for k, v in files.items() if k != "vectors"}
    assert cold_vectors.ColdVectors.open(directory, without, rows, [0], meta.model) is None
    assert cold_vectors.ColdVectors.open(directory, files, rows, [0], meta.model, "some/hub-model") is None
    assert cold_vectors.ColdVectors.open(directory, files, rows, [0], meta.model, meta.model_spec) is not None


COLD_COSINES = """
import json, sys
from pathlib import Path
from lore.paths import Locations
from lore.rank import cold
from lore.settings import Settings
reader = cold.open_reader(Locations.resolve(Path(sys.argv[1]), None, Settings.from_env()))
response = cold.run_cold(reader, sys.argv[2], cold.hook_options(None, 2e9, channels=cold.RERANKED))
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"numpy", "tokenizers", "model2vec"})
avoidable = sorted(m for m in ("hashlib", "statistics", "tempfile", "lore.index.delta", "lore.index.build")
                   if m in sys.modules)
print(json.dumps({"cosines": [h.channel_scores.get("vector") for h in response.hits],
                  "passages": [h.passage_cosine for h in response.hits], "heavy": heavy + avoidable}))
"""


def test_the_cosines_need_neither_numpy_nor_tokenizers(delta_store: Locations) -> None:  # noqa: F811
    (next(delta_store.index_dir.glob("gen-*")) / cold_vectors.CACHE_FILE).unlink()  # written by the build: gone
    for _ in range(2):  # the first writes the token cache, the second reads it
        done = subprocess.run([sys.executable, "-c", COLD_COSINES, str(delta_store.data_dir), "postgres pooling incident"],
                              capture_output=True, timeout=120, check=True)  # fmt: skip
        result = orjson.loads(done.stdout)
        assert result["heavy"] == [] and result["cosines"] and all(c is not None and c > 0 for c in result["cosines"][:3])
        assert all(c is not None and c > 0 for c in result["passages"][:3])


def test_a_build_writes_the_token_cache(delta_store: Locations) -> None:  # noqa: F811
    """The index build (and refresh) writes the cache, so no prompt pays for reading ``tokenizer.json``."""
    found = IndexManager(delta_store).read_meta()
    assert found is not None
    path = found[0] / cold_vectors.CACHE_FILE
    assert cold_vectors.TokenCache.load(path, found[1].model or "") is not None
    path.unlink()
    IndexManager(delta_store).build()  # up to date: the cache alone is written again
    assert cold_vectors.TokenCache.load(path, found[1].model or "") is not None


def test_a_build_writes_every_base_rows_passage_tokens_as_the_pure_tokenizer_gives_them(
        data_dir: Path, cached: cold_vectors.QueryVector, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The build tokenises each row's passages once, so a cold prompt reads numbers; the ids are ``PureBpe``'s."""
    from lore.analysis import passages

    shutil.copytree(ROOT / "data", data_dir)
    locations = resolve_locations(data_dir)
    report = IndexManager(locations).build()
    assert report.timings["hook_files"] > 0 and report.seconds >= report.timings["hook_files"]  # `lore index --json`
    found = IndexManager(locations).read_meta()
    assert found is not None
    directory, meta = found
    docs = directory / meta.files["docs"]
    tokens = cold_vectors.PassageTokens.load(directory / cold_vectors.PASSAGE_FILE, meta.model or "", docs)
    assert tokens is not None
    compared = 0
    position = 0
    for line in docs.read_bytes().split(b"\n"):
        if line.strip():
            doc = orjson.loads(line)
            texts = passages(str(doc.get("title") or ""), str(doc.get("content") or ""))
            assert tokens.token_ids(position, texts) == [cached.token_ids(text) for text in texts], texts
            assert tokens.token_ids(position, [*texts[:-1], texts[-1] + " changed"]) is None  # other text: not these ids
            compared += len(texts)
        position += len(line) + 1
    assert compared > 600
    assert tokens.token_ids(position + 7, ["no such line"]) is None
    # Docs read in chunks (each chunk's new words tokenised together): the same file byte for byte.
    monkeypatch.setattr(cold_vectors, "PASSAGE_CHUNK", 7)
    encoder = QueryEncoder(BUNDLED_MODEL_DIR)
    assert encoder.pure is not None
    cold_vectors.write_passage_tokens(directory / "chunked.bin", docs, meta.model or "", encoder.tokenizer, encoder.pure,
                                      encoder.max_length, encoder.median_token_length)  # fmt: skip
    assert (directory / "chunked.bin").read_bytes() == (directory / cold_vectors.PASSAGE_FILE).read_bytes()
    # Written for another model, or from another docs file: not read.
    assert cold_vectors.PassageTokens.load(directory / cold_vectors.PASSAGE_FILE, "another@model", docs) is None
    assert cold_vectors.PassageTokens.load(directory / cold_vectors.PASSAGE_FILE, meta.model or "", directory / "x") is None


def test_words_batched_through_the_tokenizer_get_the_ids_each_word_gets_alone() -> None:
    encoder = QueryEncoder(BUNDLED_MODEL_DIR)
    text = " ".join(repository_texts()[:200]) + " " + " ".join(AWKWARD)
    words = sorted({w for t in text.split("\n") if (found := cold_vectors._passage_words(t, [], None, 1)) for w in found})
    assert len(words) > 2000
    pure = encoder.pure
    assert pure is not None and pure.by_word
    batched = cold_vectors._word_ids([*words, "\u2581"], encoder.tokenizer, pure)
    words.append("\u2581")
    assert batched == {word: pure._ids(word) for word in words}


def test_cold_passage_cosines_from_the_build_equal_those_tokenised_at_the_prompt(data_dir: Path) -> None:
    shutil.copytree(ROOT / "data", data_dir)
    locations = resolve_locations(data_dir)
    IndexManager(locations).build()
    reader = cold.open_reader(locations)
    vectors = cold_vectors.for_reader(reader)
    assert vectors is not None and vectors.passages is not None
    from lore.analysis import passages
    from lore.rank.retrieval import Sparse

    channels = Sparse(reader, cold.hook_options(None, NOW, channels=cold.RERANKED))
    channels.query_vector = vectors.encoder.encode("how do we retry failed stripe charges")
    rows = list(range(0, len(reader.table), 7))
    texts = [passages(reader.table.doc(row)["title"], reader.table.doc(row)["content"]) for row in rows]
    assert channels.passage_cosines(texts, rows) == channels.passage_cosines(texts)  # bit for bit
    reader.close()
