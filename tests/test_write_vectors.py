"""The vectors the write check keeps on disk (lore.curate.text_vectors): read by later processes, never trusted blindly.

A CLI write reads its shortlisted decisions' vectors from the files beside the pool's cache
instead of encoding their texts; the answers must be those of a check that encodes everything
(``find_duplicate`` over a whole load), whatever state the files are in: absent, damaged,
truncated, of another model, or written by several processes at once.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lore.curate import dedup, pool, text_vectors, write_check
from lore.curate.text_vectors import TextVectors, VectorsFile, fill_lock, filling, text_key
from lore.embedder import BUNDLED_MODEL_DIR, model_identity
from lore.errors import DuplicateError
from lore.paths import write_check_dir
from lore.store import Store
from tests.conftest import settings
from tests.test_write_pool import DECISIONS, NEW_TEXTS, append, decision, outcome_of, whole_load

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def store(data_dir: Path) -> Store:
    store = Store(data_dir, actor="test")
    store.init()
    lines = [decision(f"dec-{i:08x}", f"Adopt service {i} for the billing workload", f"reason {i % 7}") for i in range(60)]
    store.path(DECISIONS).write_bytes(b"".join(lines))
    return store


@pytest.fixture
def cache_dir() -> Path:
    return write_check_dir(settings())


def texts_of(store: Store) -> list[str]:
    """The texts the check embeds of each active decision: its decision line, and that with its rationale."""
    texts: list[str] = []
    for record in store.load().of_kind("decision"):
        if record.active:
            primary, secondary = dedup.compared_text("decision", record.raw)
            texts += (primary, dedup._join(primary, secondary))
    return list(dict.fromkeys(texts))


def vectors_of(store: Store, cache_dir: Path, model: str | None = None) -> TextVectors:
    return TextVectors(pool.cache_path(store.data_dir, cache_dir), model_identity(model))


def new_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a new CLI process starts with: no pool in memory (it loads the cache file)."""
    monkeypatch.setattr(pool, "_POOLS", {})


def checked(store: Store, raw: dict[str, Any], cache_dir: Path, model: str | None = None) -> tuple[Any, ...]:
    """The check as a CLI write runs it, its pool saved after (as ``capture.store_record`` does)."""
    try:
        found = outcome_of(write_check.check_before_write(store, "decision", raw, force=False, merge=False,
                                                          model=model, pool_cache=cache_dir))  # fmt: skip
    except DuplicateError as error:
        found = outcome_of(error)
    pool.save(store.data_dir)
    return found


def the_pool(store: Store) -> pool.DecisionPool:
    return pool._POOLS[store.data_dir.resolve()]


def lore(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-P", "-m", "lore", *args], capture_output=True, text=True, timeout=120)


def test_a_later_process_reads_the_vectors_and_encodes_only_its_own_texts(store: Store, cache_dir: Path) -> None:
    first = lore("remember", "Pin the Python version in CI images", "-r", "builds drifted")
    assert first.returncode == 0, first.stderr
    vectors = vectors_of(store, cache_dir)
    assert vectors.complete  # the first write filled them for every decision
    keys = [text_key(text) for text in texts_of(store)]
    assert vectors.has(keys).all()
    main = vectors.main_path.stat()
    second = lore("remember", "Store money as integer cents", "-r", "floats lose pennies")
    assert second.returncode == 0, second.stderr
    vectors.reopen()
    # The second process read the 50 decisions it shortlisted from the main file: it added only its own two texts.
    assert vectors.recent is not None
    assert sorted(zip(vectors.recent.first.tolist(), vectors.recent.second.tolist(), strict=True)) == sorted(
        [text_key("Store money as integer cents"), text_key("Store money as integer cents\nfloats lose pennies")])
    assert (vectors.main_path.stat().st_ino, vectors.main_path.stat().st_size) == (main.st_ino, main.st_size)
    again = lore("remember", "Store money as integer cents", "-r", "floats lose pennies")
    assert again.returncode == 3 and second.stdout.split()[2].rstrip(":") in again.stderr


def test_the_answers_are_those_of_a_check_that_encodes_everything(store: Store, cache_dir: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    append(store.data_dir / DECISIONS, decision("dec-feed0001", "Cache rendered invoices in Redis", "rendering is slow"))
    for text, rationale in NEW_TEXTS:
        raw = {"decision": text, "rationale": rationale}
        new_process(monkeypatch)
        assert checked(store, raw, cache_dir) == whole_load(store, raw), text
        # From the second check on, the decisions' vectors come from the files: only the new texts are encoded.
        assert the_pool(store).encoded <= 2 or the_pool(store).builds == 1, text


def test_the_answers_on_the_demo_store_are_unchanged(data_dir: Path, cache_dir: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    shutil.copytree(PROJECT_ROOT / "data", data_dir)
    store = Store(data_dir, actor="test")
    monkeypatch.setattr(dedup, "EMBED_CANDIDATES", 20)
    records = [r for r in store.load().of_kind("decision") if r.active]
    for record in records[::13]:
        for raw in ({"decision": record.raw["decision"], "rationale": record.raw.get("rationale") or ""},
                    {"decision": "Do not " + record.raw["decision"].lower(), "rationale": ""}):  # fmt: skip
            new_process(monkeypatch)
            assert checked(store, raw, cache_dir) == whole_load(store, raw), raw
            assert the_pool(store).encoded <= 2 or the_pool(store).builds == 1


def damage_rows(path: Path) -> None:
    """Overwrite every row of a vectors file with other floats, its size, header and keys unchanged."""
    data = bytearray(path.read_bytes())
    vectors = VectorsFile.open(path, model_identity(None))
    assert vectors is not None
    start = len(data) - vectors.rows.nbytes
    data[start:] = np.full(vectors.rows.shape, 0.5, dtype="<f4").tobytes()
    del vectors
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["rows", "truncated", "garbage", "another model's"])
def test_a_damaged_or_foreign_vectors_file_is_ignored_and_filled_again(store: Store, cache_dir: Path, damage: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    raw = {"decision": "Adopt service 12 for the billing workloads", "rationale": "reason 5"}
    expected = whole_load(store, raw)
    assert checked(store, raw, cache_dir) == expected
    vectors = vectors_of(store, cache_dir)
    path = vectors.main_path
    if damage == "rows":
        damage_rows(path)
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:-100])
    elif damage == "garbage":
        path.write_bytes(b"lorevec1" + b"\xff" * 4000)
    else:  # a file written for another model, under this model's name
        other = vectors_of(store, cache_dir, model=str(BUNDLED_MODEL_DIR.parent / "elsewhere"))
        other.add([text_key("a text")], np.ones((1, 256), dtype=np.float32) / 16)
        other.rewrite_main = True
        other.save()
        shutil.copyfile(other.main_path, path)
    new_process(monkeypatch)
    assert checked(store, raw, cache_dir) == expected
    if damage == "rows":
        # Found damaged when read: the check encoded what it needed, then filled a new file.
        assert the_pool(store).encoded >= len(texts_of(store))
    else:
        assert VectorsFile.open(path, model_identity(None)) is None or the_pool(store).encoded >= len(texts_of(store))
    vectors.reopen()
    assert vectors.complete and vectors.has([text_key(t) for t in texts_of(store)]).all()
    assert vectors.main is not None and vectors.main.read(np.arange(len(vectors.main))) is not None  # whole again
    new_process(monkeypatch)
    assert checked(store, raw, cache_dir) == expected
    assert the_pool(store).encoded == 0  # the refilled file serves the next process (the new text was encoded before)


def test_another_model_keeps_its_own_vectors(store: Store, cache_dir: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    copy = tmp_path / "model-copy"
    shutil.copytree(BUNDLED_MODEL_DIR, copy)  # the same vectors under another identity (its path)
    raw = {"decision": "Cache rendered invoices in Redis", "rationale": "rendering is slow"}
    expected = whole_load(store, raw)
    assert checked(store, raw, cache_dir) == expected
    new_process(monkeypatch)
    assert checked(store, raw, cache_dir, model=str(copy)) == expected
    assert the_pool(store).encoded >= len(texts_of(store))  # none of the bundled model's vectors were taken
    bundled, other = vectors_of(store, cache_dir), vectors_of(store, cache_dir, model=str(copy))
    assert bundled.main_path != other.main_path and bundled.complete and other.complete
    assert VectorsFile.open(other.main_path, model_identity(None)) is None  # its header names its model
    new_process(monkeypatch)
    assert checked(store, raw, cache_dir, model=str(copy)) == expected
    assert the_pool(store).encoded == 0


def test_writers_saving_at_once_leave_whole_files(store: Store, cache_dir: Path) -> None:
    assert lore("remember", "Pin the Python version in CI images", "-r", "builds drifted").returncode == 0
    texts = [(f"Run the nightly job {i} on a spot instance", f"it is cheap {i}") for i in range(4)]
    processes = [subprocess.Popen([sys.executable, "-P", "-m", "lore", "remember", text, "-r", why],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for text, why in texts]  # fmt: skip
    for process in processes:
        _, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
    vectors = vectors_of(store, cache_dir)
    for source in (vectors.main, vectors.recent):
        assert source is None or source.read(np.arange(len(source))) is not None
    assert vectors.complete
    raw = {"decision": "Run the nightly job 2 on a spot instance", "rationale": "it is cheap 2"}
    assert checked(store, raw, cache_dir) == whole_load(store, raw)


def test_a_large_fill_is_left_to_a_detached_process(store: Store, cache_dir: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Past INLINE_FILL texts the write that builds the pool does not fill them all (4-7 s at 10,000 commits)."""
    monkeypatch.setattr(text_vectors, "INLINE_FILL", 10)
    raw = {"decision": "Adopt service 12 for the billing workloads", "rationale": "reason 5"}
    expected = whole_load(store, raw)
    assert checked(store, raw, cache_dir) == expected
    assert the_pool(store).encoded < len(texts_of(store))  # what it compared (50 decisions), not all 60
    vectors = vectors_of(store, cache_dir)
    lock = fill_lock(vectors)
    deadline = time.monotonic() + 120
    while filling(lock) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not lock.exists()  # the process removed it when done
    vectors.reopen()
    assert vectors.complete and vectors.has([text_key(t) for t in texts_of(store)]).all()
    new_process(monkeypatch)
    assert checked(store, raw, cache_dir) == expected
    assert the_pool(store).encoded <= 2  # its own texts (no decision's: the new file does not keep them)


def test_the_warm_helper_fills_the_vectors_when_idle(demo_indexed: Any, data_dir: Path, cache_dir: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    from tests.conftest import wait_for_helper

    written = lore("remember", "Serve invoices from a read replica", "-r", "the primary was saturated by reports")
    assert written.returncode == 0, written.stderr
    store = Store(data_dir)
    vectors = vectors_of(store, cache_dir)
    assert vectors.complete
    for path in (vectors.main_path, vectors.recent_path):
        path.unlink(missing_ok=True)  # the pool's cache file stays: the helper loads it when first idle
    vectors.reopen()
    assert not vectors.complete
    monkeypatch.delenv("LORE_SERVER")
    started = lore("server", "start", "--idle", "120")
    assert started.returncode == 0, started.stderr
    try:
        wait_for_helper(demo_indexed.index_dir)
        deadline = time.monotonic() + 120
        while not vectors.complete and time.monotonic() < deadline:
            time.sleep(0.1)
            vectors.reopen()
    finally:
        lore("server", "stop")
    assert vectors.complete and vectors.has([text_key(t) for t in texts_of(store)]).all()
