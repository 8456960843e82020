"""A damaged index, or one built while the embedding model was unavailable, repairs itself.

Every case goes through the real CLI on real files: the index is built, one of
its files is damaged on disk, and ``lore search`` / ``lore index`` must warn and
rebuild rather than crash (exit 70) or report an up-to-date index.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from lore import capture
from lore.capture import WriteOptions
from lore.index import columns
from lore.index.manager import IndexManager
from lore.store import Store
from tests.conftest import resolve_locations

PLAIN = WriteOptions(check_duplicates=False)
CELERY = "Use celery for background jobs"


def seed(data_dir: Path) -> None:
    store = Store(data_dir, actor="test")
    store.init()
    capture.remember(store, CELERY, project="p", rationale="Retries and scheduled tasks come built in", options=PLAIN)
    capture.remember(store, "Pin the redis version", project="p", rationale="The eviction policy changed in 7.2",
                     options=PLAIN)  # fmt: skip
    capture.remember(store, "Run database migrations before the deploy", project="p",
                     rationale="Old code tolerates the new schema, not the reverse", options=PLAIN)  # fmt: skip


def generation(data_dir: Path) -> Path:
    current = IndexManager(resolve_locations(data_dir)).current_dir()
    assert current is not None
    return current


def junk(path: Path) -> None:
    path.write_bytes(b"junk junk junk")


def truncate(path: Path) -> None:
    with path.open("r+b") as handle:
        handle.truncate(max(1, path.stat().st_size // 2))


def same_size_junk(path: Path) -> None:
    path.write_bytes(b"\x07" * path.stat().st_size)


# name: (files of the generation to damage, how, the query that reads them, the file the warning names)
CASES: dict[str, tuple[str, Callable[[Path], None], str, str]] = {
    "vectors-junk": ("vectors-*.npy", junk, "celery", "vectors-"),
    "vectors-truncated": ("vectors-*.npy", truncate, "celery", "vectors-"),
    "vectors-same-size": ("vectors-*.npy", same_size_junk, "celery", "vectors-"),
    "bm25-junk": ("bm25-*", junk, "celery", "bm25-"),
    "bm25-postings-same-size": ("bm25-rows-*.npy", same_size_junk, "celery", "bm25-rows-"),
    "phrase-junk": ("bm25-sequence-*.npy", junk, '"background jobs"', "bm25-sequence-"),
    "phrase-fields-junk": ("bm25-fields-*.npy", junk, '"background jobs"', "bm25-fields-"),
    "docs-junk": ("docs-*.jsonl", junk, "celery", "docs-"),
    "docs-same-size": ("docs-*.jsonl", same_size_junk, "celery", "docs-"),
    "table-junk": ("table-*.bin", junk, "celery", "table-"),
    "table-same-size": ("table-*.bin", same_size_junk, "celery", "table-"),
    "table-wrong-shape": ("table-*.bin", lambda p: p.write_bytes(columns.dump({"ids": ("str", ["a", "b"])})), "celery", "table-"),
    "graph-junk": ("graph-*.json", junk, "celery", "graph-"),
    "graph-wrong-shape": ("graph-*.json", lambda p: p.write_bytes(b'{"edges": [[1]]}'), "celery", "graph-"),
}


def damage(data_dir: Path, pattern: str, how: Callable[[Path], None]) -> None:
    targets = sorted(p for p in generation(data_dir).glob(pattern) if p.is_file())
    assert targets, pattern
    for path in targets:
        how(path)


def search_json(cli, query: str, *options: str) -> dict:  # type: ignore[no-untyped-def]
    result = cli("search", query, "--json", *options)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return orjson.loads(result.stdout)


@pytest.fixture
def built(data_dir: Path, cli) -> Path:  # type: ignore[no-untyped-def]
    seed(data_dir)
    assert cli("index").stdout.startswith("Built index of 3 records")
    search_json(cli, "celery", "--adaptive")  # also caches the intent centroids in the generation
    return data_dir


@pytest.mark.parametrize("case", list(CASES))
def test_search_rebuilds_an_unreadable_index_and_answers(built: Path, cli, case: str) -> None:
    pattern, how, query, named = CASES[case]
    before = generation(built)
    damage(built, pattern, how)
    payload = search_json(cli, query)
    assert payload["results"] and payload["results"][0]["title"] == CELERY
    unreadable = [w for w in payload["warnings"] if "unreadable" in w]
    assert len(unreadable) == 1, payload["warnings"]
    assert unreadable[0].startswith("index unreadable (") and named in unreadable[0] and unreadable[0].endswith("rebuilt it")
    assert "\n" not in unreadable[0]
    assert generation(built) != before
    status = orjson.loads(cli("index", "status", "--json").stdout)
    assert (status["exists"], status["stale"], status["embeddings"]) == (True, False, True)
    again = search_json(cli, query)
    assert again["results"][0]["title"] == CELERY
    assert not [w for w in again["warnings"] if "unreadable" in w]


@pytest.mark.parametrize("case", ["vectors-junk", "bm25-junk", "phrase-junk", "docs-junk", "table-junk", "graph-junk"])
def test_index_status_reports_and_lore_index_repairs_an_unreadable_index(built: Path, cli, case: str) -> None:
    pattern, how, query, named = CASES[case]
    damage(built, pattern, how)
    status = orjson.loads(cli("index", "status", "--json").stdout)
    assert status["stale"] is True and "unreadable" in status["reason"] and named in status["reason"], status
    human = cli("index", "status").stdout
    assert "up to date" not in human and "unreadable" in human
    result = cli("index")
    assert result.exit_code == 0
    assert result.stdout.startswith("Built index of 3 records"), result.stdout
    assert result.stderr.startswith("Warning: index unreadable (") and named in result.stderr
    assert result.stderr.count("\n") == 1
    assert cli("index").stdout == "Index is up to date (3 records)\n"
    payload = search_json(cli, query)
    assert payload["results"][0]["title"] == CELERY
    assert not [w for w in payload["warnings"] if "unreadable" in w]


def junk_sequence(data_dir: Path) -> None:
    damage(data_dir, "bm25-sequence-*.npy", same_size_junk)


def decreasing_field_starts(data_dir: Path) -> None:
    """A well-formed .npy of the right size whose field starts make no sense."""
    import numpy as np

    path = next(generation(data_dir).glob("bm25-fields-*.npy"))
    starts = np.load(path)
    np.save(path, starts[::-1].copy())


def junk_middle_doc(data_dir: Path) -> None:
    docs = next(generation(data_dir).glob("docs-*.jsonl"))
    lines = docs.read_bytes().splitlines(keepends=True)
    lines[1] = b"\x07" * (len(lines[1]) - 1) + b"\n"
    docs.write_bytes(b"".join(lines))


# Same-size junk that only a query touching it can see: the term sequence is opened only
# for quoted phrases, a docs line is read only when shown.
LATE: dict[str, tuple[Callable[[Path], None], str, str, str]] = {
    "phrase-sequence": (junk_sequence, '"background jobs"', CELERY, "bm25-sequence-"),
    "phrase-field-starts": (decreasing_field_starts, '"background jobs"', CELERY, "bm25-fields-"),
    "middle-docs-line": (junk_middle_doc, "redis", "Pin the redis version", "docs-"),
}


@pytest.mark.parametrize("case", list(LATE))
def test_damage_found_while_answering_is_a_clear_error_and_the_next_run_rebuilds(built: Path, cli, case: str) -> None:
    how, query, title, named = LATE[case]
    how(built)
    result = cli("search", query, "--json")
    assert result.exit_code == 1, (result.stdout, result.stderr)  # a lore error, not the catch-all's 70
    assert result.stderr.startswith(f"Error: index unreadable ({named}"), result.stderr
    assert "lore index" in result.stderr  # the hint
    status = orjson.loads(cli("index", "status", "--json").stdout)
    assert status["stale"] is True and "unreadable" in status["reason"]
    payload = search_json(cli, query)
    assert any(w.startswith(f"index unreadable ({named}") and w.endswith("rebuilt it") for w in payload["warnings"])
    assert payload["results"][0]["title"] == title
    assert orjson.loads(cli("index", "status", "--json").stdout)["stale"] is False


@pytest.mark.parametrize("content", [b"junk", b"[1, 2]", b'{"model": 3}', b"\xff\xfe", b""])
def test_junk_intent_centroids_are_recomputed(built: Path, cli, content: bytes) -> None:
    cache = generation(built) / "intent-centroids.json"
    assert cache.exists()
    cache.write_bytes(content)
    payload = search_json(cli, "why did we choose celery", "--adaptive")  # the centroids serve --adaptive
    assert payload["results"][0]["title"] == CELERY
    assert not [w for w in payload["warnings"] if "unreadable" in w]
    assert orjson.loads(cache.read_bytes())["centroids"]


def test_intent_centroids_of_the_right_model_but_the_wrong_shape_are_recomputed(built: Path, cli) -> None:
    cache = generation(built) / "intent-centroids.json"
    data = orjson.loads(cache.read_bytes())
    data["centroids"] = {name: "junk" for name in data["centroids"]}
    cache.write_bytes(orjson.dumps(data))
    payload = search_json(cli, "why did we choose celery", "--adaptive")
    assert payload["results"][0]["title"] == CELERY
    fresh = orjson.loads(cache.read_bytes())["centroids"]
    assert all(isinstance(v, list) and v for v in fresh.values())


# -- the embedding model ---------------------------------------------------------------
@pytest.fixture
def offline_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty Hugging Face cache, and an endpoint nothing listens on: any download attempt fails."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-home" / "hub"))
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")


@pytest.mark.parametrize("spec", ["/nonexistent/model", "no-such-org/no-such-model"])
def test_an_unloadable_model_is_named_clearly(data_dir: Path, cli, monkeypatch, offline_hub, spec: str) -> None:
    seed(data_dir)
    monkeypatch.setenv("LORE_EMBED_MODEL", spec)
    payload = search_json(cli, "celery")
    assert payload["results"][0]["title"] == CELERY
    model = [w for w in payload["warnings"] if spec in w]
    assert model, payload["warnings"]
    assert "neither a directory nor a loadable hub model" in model[0]
    assert "lexical search still works" in model[0]
    assert not any("Error" in w or "Repo id" in w for w in payload["warnings"]), payload["warnings"]
    result = cli("index", "--rebuild")
    assert f"Warning: cannot load embedding model {spec!r}: it is neither a directory nor a loadable hub model" in result.stderr


def test_an_index_built_without_the_model_re_embeds_once_the_model_is_back(data_dir: Path, cli, monkeypatch,
                                                                          offline_hub) -> None:  # fmt: skip
    seed(data_dir)
    monkeypatch.setenv("LORE_EMBED_MODEL", "/nonexistent/model")
    search_json(cli, "celery")
    status = orjson.loads(cli("index", "status", "--json").stdout)
    assert status["embeddings"] is False and status["model_spec"] == "/nonexistent/model"
    built = generation(data_dir)
    # The same model, still missing: no rebuild on every search.
    for _ in range(2):
        assert search_json(cli, "celery")["results"]
        assert orjson.loads(cli("index", "status", "--json").stdout)["stale"] is False
    assert cli("index").stdout == "Index is up to date (3 records)\n"
    assert generation(data_dir) == built
    # The model is configured again: the index is stale and the next search re-embeds.
    monkeypatch.delenv("LORE_EMBED_MODEL")
    status = orjson.loads(cli("index", "status", "--json").stdout)
    assert status["stale"] is True and "embedding model" in status["reason"]
    payload = search_json(cli, "celery")
    assert payload["results"][0]["title"] == CELERY
    assert not [w for w in payload["warnings"] if "embeddings" in w or "lexical" in w], payload["warnings"]
    status = orjson.loads(cli("index", "status", "--json").stdout)
    assert (status["stale"], status["embeddings"]) == (False, True) and status["model"].startswith("bundled@")


def test_lore_index_re_embeds_once_the_model_is_back(data_dir: Path, cli, monkeypatch, offline_hub, tmp_path: Path) -> None:
    seed(data_dir)
    missing = tmp_path / "models" / "later"
    monkeypatch.setenv("LORE_EMBED_MODEL", str(missing))
    assert "neither a directory" in cli("index").stderr
    assert orjson.loads(cli("index", "status", "--json").stdout)["embeddings"] is False
    assert cli("index").stdout == "Index is up to date (3 records)\n"
    # The very same spec now names a model: that is a change too.
    from lore.embedder import BUNDLED_MODEL_DIR

    missing.parent.mkdir(parents=True)
    os.symlink(BUNDLED_MODEL_DIR, missing)
    result = cli("index")
    assert result.stdout.startswith("Built index of 3 records") and result.stderr == ""
    status = orjson.loads(cli("index", "status", "--json").stdout)
    assert (status["stale"], status["embeddings"]) == (False, True)


def test_an_index_from_before_model_wanted_re_embeds_once_the_spec_changes(data_dir: Path, cli, monkeypatch,
                                                                          offline_hub) -> None:  # fmt: skip
    # Indexes written before meta recorded "model_wanted" fall back to comparing the spec.
    seed(data_dir)
    monkeypatch.setenv("LORE_EMBED_MODEL", "/nonexistent/model")
    cli("index")
    meta_path = generation(data_dir) / "meta.json"
    meta = orjson.loads(meta_path.read_bytes())
    del meta["model_wanted"], meta["model_error"]
    meta_path.write_bytes(orjson.dumps(meta))
    assert orjson.loads(cli("index", "status", "--json").stdout)["stale"] is False
    monkeypatch.delenv("LORE_EMBED_MODEL")
    assert cli("index").stdout.startswith("Built index of 3 records")
    assert orjson.loads(cli("index", "status", "--json").stdout)["embeddings"] is True


# -- another process changing the index under a reader -------------------------------------
def test_a_reader_whose_generation_was_replaced_does_not_mark_the_new_one(built: Path, cli) -> None:
    from lore.index.manager import IndexDamagedError

    mgr = IndexManager(resolve_locations(built))
    reader, _ = mgr.open()
    assert cli("index", "--rebuild").exit_code == 0  # "another process": the old generation is gone
    with pytest.raises(IndexDamagedError) as caught:
        reader.phrases.matching(["background jobs"])  # a quoted phrase reads the term sequence
    assert caught.value.replaced and "changed while it was being read" in caught.value.message
    assert mgr.read_meta() is not None and mgr.status().stale is False


def test_a_reader_whose_revision_was_refreshed_away_does_not_mark_the_index(built: Path, cli, monkeypatch) -> None:
    from lore.index.manager import IndexDamagedError, IndexReader

    # Appends would only add a delta segment beside revision 1's files: fold every refresh into the base.
    monkeypatch.setattr("lore.index.delta.DELTA_MIN_LIMIT", 0)
    monkeypatch.setattr("lore.index.delta.DELTA_SHARE_LIMIT", 0.0)
    mgr = IndexManager(resolve_locations(built))
    found = mgr.read_meta()
    assert found is not None
    reader = IndexReader(*found)  # nothing loaded yet
    store = Store(built, actor="test")
    for title in ("Adopt pgbouncer", "Drop the legacy queue"):  # two refreshes collect revision 1's files
        capture.remember(store, title, project="p", options=PLAIN)
        assert cli("index").stdout.startswith("Refreshed index")
    with pytest.raises(IndexDamagedError) as caught:
        _ = reader.table
    assert caught.value.replaced
    assert not (found[0] / "DAMAGED").exists() and mgr.status().stale is False
