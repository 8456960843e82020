"""The wheel ships lore and nothing of the project's benchmark harness (benchmarks/ stays in the checkout).

Built from a copy of the sources (a stale ``build/`` of the checkout would leak into a
wheel built in place), offline: ``--no-build-isolation`` with the setuptools and wheel
the test extra installs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
QUESTION_SETS = {path.name for path in (ROOT / "benchmarks" / "data").iterdir()}


def _build_requirements_present() -> bool:
    try:
        import setuptools
        import wheel  # noqa: F401
    except ImportError:
        return False
    return int(setuptools.__version__.split(".")[0]) >= 68


pytestmark = pytest.mark.skipif(not _build_requirements_present(),
                                reason="building the wheel offline needs setuptools>=68 and wheel (the test extra)")  # fmt: skip


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    source = work / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("lore", "benchmarks"):  # the harness beside lore/, as in a checkout: it must be left out
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
                           "--no-index", "-q", "-w", str(work / "out")], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr
    (built,) = (work / "out").glob("lore-*.whl")
    return built


def test_the_wheel_holds_no_benchmark_harness_and_no_question_set(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.startswith(("benchmarks/", "lore/bench/"))]
    assert not [n for n in names if n.rsplit("/", 1)[-1] in QUESTION_SETS]
    (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")] or [None]
    if top_level is not None:
        assert zipfile.ZipFile(wheel).read(top_level).split() == [b"lore"]


def test_the_wheel_holds_the_model_the_ui_and_lore_bench(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in ("model", "ui/static"):
        files = {f"lore/{folder}/{p.name}" for p in (ROOT / "lore" / folder).iterdir() if p.is_file()}
        assert files and files <= names, folder
    assert {"lore/measure.py", "lore/cli/cmd_bench.py", "lore/py.typed"} <= names


def test_the_wheels_one_whoosh_module_is_the_query_parser(wheel: Path) -> None:
    # The Whoosh index lore once built (lore/index/lexical.py) is the bench's now (benchmarks/whoosh_index.py).
    archive = zipfile.ZipFile(wheel)
    importers = sorted(n for n in archive.namelist() if n.endswith(".py") and b"from whoosh" in archive.read(n))
    assert importers == ["lore/rank/querylang.py"]
    assert "lore/index/lexical.py" not in archive.namelist()
    from lore.version import __version__  # the version's one home (pyproject.toml reads it from there)

    version = f"\nVersion: {__version__}\n".encode()
    assert any(n.endswith(".dist-info/METADATA") and version in archive.read(n) for n in archive.namelist())


def test_the_installed_lore_lists_bench_and_runs_without_the_harness(wheel: Path, tmp_path: Path) -> None:
    unpacked = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(unpacked)
    env = {**os.environ, "PYTHONPATH": str(unpacked)}
    code = ("import importlib.util, lore; print(lore.__file__); "
            "print(importlib.util.find_spec('benchmarks') is None)")  # fmt: skip
    where = subprocess.run([sys.executable, "-P", "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                           check=True, timeout=60).stdout.split()  # fmt: skip
    assert where == [str(unpacked / "lore" / "__init__.py"), "True"]
    listed = subprocess.run([sys.executable, "-P", "-m", "lore", "--help"], env=env, cwd=tmp_path, capture_output=True,
                            text=True, check=True, timeout=60).stdout  # fmt: skip
    assert any(line.split()[:1] == ["bench"] for line in listed.splitlines()), listed
    helped = subprocess.run([sys.executable, "-P", "-m", "lore", "bench", "--help"], env=env, cwd=tmp_path,
                            capture_output=True, text=True, check=True, timeout=60).stdout  # fmt: skip
    assert "python -m benchmarks" in " ".join(helped.split())
