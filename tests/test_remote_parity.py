"""The warm helper answers `lore search` and `lore context` exactly as the CLI does, for every option.

Real processes: a real ``lore server`` (tests/conftest.py ``demo_helper``), each command a real
``python -m lore`` (which hands the command line to the helper), and the same command line run by a
real process that goes straight to the CLI (``lore.cli.app.run``, no helper asked). Both sides
must print the same bytes on stdout and stderr and exit alike, with and without ``LORE_LLM_CMD``
(a tiny script here): the helper runs the command with its client's settings, not its own.
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from lore.agent import client
from lore.paths import Locations
from tests.conftest import settings

QUERY = "how do we retry failed stripe charges without hammering the payment provider"
# Each option of the two commands, in combinations (each case costs two processes); the query language;
# a malformed query.
CASES: list[list[str]] = [
    ["search", QUERY],
    ["search", QUERY, "--json", "-n", "5", "--explain"],
    ["-P", "billing-api", "search", QUERY, "--explain", "-n", "3"],
    ["search", "type:decision retry -celery", "--json"],
    ["search", 'title:retry OR tag:postgres "exponential backoff" retr* NOT webhook', "--graph-depth", "1"],
    ["search", "title:(", "--json"],
    ["context", QUERY],
    ["context", QUERY, "--format", "compact", "--max-items", "2", "--budget-tokens", "60"],
    ["-P", "infra", "context", QUERY, "--format", "json", "--max-items", "3"],
    ["context", "zebra crossing quantum pastry", "--format", "markdown", "--gap-line"],
    # The rest of the options, at once (none of them was answered by the helper before it parsed with the CLI).
    ["search", QUERY, "--since", "3650d", "--until", "2100-01-01", "--channels", "bm25,vector,hyde",
     "--weights", "vector=1,bm25=0.5", "--fusion", "rrf", "--diversity", "--disable", "decay", "--all",
     "--intent", "debug", "--in-project", "billing-api", "--tag", "payments", "--json"],
    ["context", QUERY, "--graph-depth", "2", "--all", "--synthesize", "--format", "json"],
]
# With LORE_LLM_CMD set, the HyDE channel searches with the command's answer as well (cases of CASES).
LLM_CASES: list[list[str]] = [["search", QUERY, "--json", "-n", "5", "--explain"], ["context", QUERY],
                              ["context", QUERY, "--graph-depth", "2", "--all", "--synthesize", "--format", "json"]]
DIRECT = "import sys\nfrom lore.cli.app import run\nsys.exit(run(sys.argv[1:]))\n"


def status(locations: Locations) -> dict[str, int]:
    found = client.read_status(locations.index_dir, settings()) or {}
    return {key: int(found.get(key, 0)) for key in ("requests", "declined")}


def answered(locations: Locations, count: int, timeout: float = 30.0) -> dict[str, int]:
    """The helper's counts once it has counted ``count`` requests (it writes its status just after replying)."""
    end = time.monotonic() + timeout
    while (found := status(locations))["requests"] < count and time.monotonic() < end:
        time.sleep(0.02)
    return found


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=cwd, env=env)
    return done.returncode, without_timings(done.stdout), done.stderr


def without_timings(stdout: str) -> str:
    """The output less its wall-clock timings (JSON's ``timings_ms``, --explain's line of them), the one part no
    two runs share."""
    try:
        data = orjson.loads(stdout)
    except orjson.JSONDecodeError:
        return "\n".join(line for line in stdout.split("\n") if not re.search(r"\bwall [0-9.]+$", line))
    if isinstance(data, dict):
        data.pop("timings_ms", None)
    return orjson.dumps(data).decode()


def both_ways(args: list[str], locations: Locations, cwd: Path, env: dict[str, str]) -> tuple[tuple, tuple]:
    """(through the helper, straight to the CLI); each starts from the same (empty) access history."""
    locations.access_log.unlink(missing_ok=True)  # reinforcement reads it: each search changes the next one's scores
    before = status(locations)
    helped = run([sys.executable, "-m", "lore", *args], cwd, env)
    after = answered(locations, before["requests"] + 1)
    # Answered by the helper, not declined (the CLI would then have answered itself).
    assert after["requests"] == before["requests"] + 1 and after["declined"] == before["declined"], (args, after)
    locations.access_log.unlink(missing_ok=True)
    direct = run([sys.executable, "-P", "-c", DIRECT, *args], cwd, env)
    return helped, direct


@pytest.fixture
def llm_script(tmp_path: Path) -> str:
    script = tmp_path / "llm.py"
    script.write_text("import sys\nsys.stdin.read()\n"
                      "print('Retry failed charges with exponential backoff and an idempotency key per attempt.')\n")
    return f"{sys.executable} {script}"


def test_the_helper_answers_every_option_as_the_cli(demo_helper: Locations, tmp_path: Path, llm_script: str) -> None:
    answered(demo_helper, 1)  # the fixture's readiness ping, counted once its status is written
    cwd = tmp_path / "asking"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "LORE_LLM_CMD"}
    # A relative --data-dir starts from the asking process's directory (the helper's is /).
    relative = os.path.relpath(demo_helper.data_dir, cwd)
    cases = [*CASES, ["--data-dir", relative, "search", QUERY, "--json"]]
    differ = []
    without_llm = {}
    for args in cases:
        helped, direct = without_llm[tuple(args)] = both_ways(args, demo_helper, cwd, env)
        if helped != direct:
            differ.append((args, helped, direct))
    with_llm = {**env, "LORE_LLM_CMD": llm_script}
    changed = 0
    for args in LLM_CASES:
        helped, direct = both_ways(args, demo_helper, cwd, with_llm)
        if helped != direct:
            differ.append((["LORE_LLM_CMD", *args], helped, direct))
        changed += helped != without_llm[tuple(args)][0]
    for args, helped, direct in differ[:1]:
        lines = difflib.unified_diff(str(helped).replace(",", ",\n").splitlines(),
                                     str(direct).replace(",", ",\n").splitlines(), "helper", "cli", lineterm="", n=1)
        pytest.fail(f"{len(differ)} command lines differ, first {args}:\n" + "\n".join(lines))
    assert changed, "LORE_LLM_CMD changed no answer: the comparison with it would show nothing"
