"""lore's child processes run the lore that started them, wherever they are started from.

A ``lore`` run from inside a checkout of lore (a non-editable install, say) started
its index build worker with ``python -m lore.index.build_worker``: the working
directory came first on the worker's import path, so it imported the checkout's
``lore``, whose bundled model files have other mtimes, and recorded another model
identity. Every search right after ``lore index --rebuild`` then found the index
"stale (embedding model changed)" and rebuilt it.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson

import lore
from benchmarks.corpora import decision_raw, write_decisions
from lore.embedder import BUNDLED_MODEL_DIR, BUNDLED_MODEL_SHA256, bundled_model_digest, model_identity
from lore.index.build import EMBED_PROCESS_THRESHOLD
from lore.interpreter import lore_argv, python_argv

LORE_PACKAGE = Path(lore.__file__).resolve().parent


def fake_checkout(root: Path, marker: Path) -> Path:
    """A directory holding a copy of lore's package that writes ``marker`` when imported.

    Copied without the files' times (``shutil.copy``), as a checkout's would differ from an install's.
    """
    target = root / "lore"
    shutil.copytree(LORE_PACKAGE, target, copy_function=shutil.copy, ignore=shutil.ignore_patterns("__pycache__"))
    init = target / "__init__.py"
    init.write_text(init.read_text() + f"\nimport pathlib as _p\n_p.Path({str(marker)!r}).write_text(__file__)\n")
    return root


def run_lore(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The parent is the installed lore, as a console script would be (its own directory, not
    # the working directory, leads its import path); its children are what is under test.
    done = subprocess.run(lore_argv(*args), cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done


def test_a_search_right_after_a_rebuild_in_a_directory_holding_another_lore_does_not_rebuild(
        tmp_path: Path, data_dir: Path) -> None:  # fmt: skip
    marker = tmp_path / "imported-the-checkout"
    checkout = fake_checkout(tmp_path / "checkout", marker)
    # Enough records for the build to embed in its worker process (below this it uses a thread).
    raws = [decision_raw(f"dec-{i:08x}", "2024-01-01T00:00:00Z", f"Decision {i} about retry policy {i % 97}",
                         f"because of incident {i % 13} and cache {i % 31}") for i in range(EMBED_PROCESS_THRESHOLD + 50)]  # fmt: skip
    write_decisions(data_dir, raws)

    run_lore(checkout, "index", "--rebuild")
    index_dir = Path(os.environ["LORE_INDEX_DIR"])
    built = (index_dir / "CURRENT").read_text()
    status = orjson.loads(run_lore(checkout, "index", "status", "--json").stdout)
    assert (status["stale"], status["reason"], status["embeddings"]) == (False, "up to date", True)

    found = run_lore(checkout, "search", "retry policy incident", "--json")
    assert orjson.loads(found.stdout)["results"]
    assert (index_dir / "CURRENT").read_text() == built  # not rebuilt
    assert orjson.loads(run_lore(checkout, "index", "status", "--json").stdout)["updated_at"] == status["updated_at"]
    assert not marker.exists(), f"a child process imported {marker.read_text()}"


def test_the_bundled_model_identity_is_its_content_not_its_path_or_mtime(tmp_path: Path) -> None:
    """Another copy of lore (other path, other mtimes) names the bundled model as this one does."""
    marker = tmp_path / "imported"
    checkout = fake_checkout(tmp_path / "checkout", marker)
    code = "from lore.embedder import model_identity; print(model_identity(None))"
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    other = subprocess.run(python_argv("-c", code), env=env, capture_output=True, text=True, check=True, timeout=60)
    assert marker.exists()  # that process did run the copy
    assert other.stdout.strip() == model_identity(None) == f"bundled@{BUNDLED_MODEL_SHA256[:16]}"


def test_the_recorded_digest_of_the_bundled_model_matches_its_files() -> None:
    # Fails once the model is replaced until BUNDLED_MODEL_SHA256 is updated: otherwise indexes
    # embedded with the old model would pass for current.
    assert bundled_model_digest(BUNDLED_MODEL_DIR) == BUNDLED_MODEL_SHA256


def test_another_model_directory_is_still_named_by_its_path(tmp_path: Path) -> None:
    copy = tmp_path / "my-model"
    shutil.copytree(BUNDLED_MODEL_DIR, copy)
    assert model_identity(str(copy)).startswith(f"{copy.resolve()}@")


def test_the_argv_helpers_keep_the_working_directory_off_the_import_path() -> None:
    assert lore_argv("index") == [sys.executable, "-P", "-m", "lore", "index"]
    assert python_argv("-c", "pass") == [sys.executable, "-P", "-c", "pass"]


def test_the_merge_driver_git_runs_keeps_the_working_directory_off_the_import_path() -> None:
    from lore.sync.engine import driver_command

    assert driver_command().split()[1:] == ["-P", "-m", "lore", "merge-driver", "%O", "%A", "%B", "%P"]


# The only command lines lore and its benchmark harness build from their interpreter outside
# lore.interpreter: the `python -c pass` floors, which import nothing (lore.measure holds the one
# `lore bench` and the harness's latency section share).
ALLOWED_ARGV = {"lore/measure.py": 1, "benchmarks/helper.py": 1, "benchmarks/indexing.py": 1, "benchmarks/mcpstart.py": 1}
HARNESS = Path(__file__).resolve().parent.parent / "benchmarks"


def test_every_child_python_of_lore_is_started_through_lore_interpreter() -> None:
    """A new ``[sys.executable, "-m", ...]`` would import from its working directory again."""

    def is_executable(node: ast.expr) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "executable" and getattr(node.value, "id", None) == "sys"

    found: dict[str, int] = {}
    for package in (LORE_PACKAGE, HARNESS):
        for path in sorted(package.rglob("*.py")):
            name = str(path.relative_to(package.parent))
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.List) and node.elts and is_executable(node.elts[0]):
                    found[name] = found.get(name, 0) + 1
    assert found == {"lore/interpreter.py": 1, **ALLOWED_ARGV}
