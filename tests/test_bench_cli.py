"""`python -m benchmarks`: the harness's command line (its usage errors, and that it runs from a checkout).

Nothing here measures anything: the sections themselves are tested in test_bench*.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.__main__ import main

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(("argv", "message"), [
    (["--only", "nonsense"], "Error: unknown section 'nonsense'\nHint: sections: quality,stream,duplicates,"),
    (["--sets", "scifact,nope"], "Error: unknown evaluation set 'nope'\nHint: sets: scifact,"),
    (["--sizes", "1k"], "Error: cannot read sizes '1k'\nHint: e.g. --sizes 1000,10000,50000"),
    (["--sizes", "5"], "Error: sizes must be between 10 and 60000"),
    (["--frobnicate"], "Error: unrecognized arguments: --frobnicate\nHint: python -m benchmarks --help"),
])  # fmt: skip
def test_a_usage_error_is_one_clear_message_and_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(message) and captured.out == ""


def test_it_runs_from_the_checkout_and_from_any_directory_with_the_checkout_on_the_path(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    here = subprocess.run([sys.executable, "-m", "benchmarks", "--help"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert here.returncode == 0, here.stderr
    assert here.stdout.startswith("usage: python -m benchmarks [-h] [--quick] [--out FILE] [--sizes SIZES]")
    for option in ("--only", "--sets", "--keep"):
        assert option in here.stdout
    elsewhere = subprocess.run([sys.executable, "-m", "benchmarks", "--only", "nonsense"], cwd=tmp_path,
                               env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert (elsewhere.returncode, elsewhere.stderr.splitlines()[0]) == (2, "Error: unknown section 'nonsense'")


def test_lore_bench_is_no_longer_the_harness() -> None:
    from lore.cli.app import run

    assert run(["bench", "--only", "quality"]) == 2  # `lore bench` measures your own store: no sections
