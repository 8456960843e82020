"""`lore search` / `lore context` answered by a running warm helper: the same bytes the CLI prints.

Real processes: the helper is a real ``lore server`` and each command a real ``python -m lore``;
the CLI answering itself is the same command through the typer app in process. Waits poll.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from lore.agent import client
from lore.agent.remote import READ_COMMANDS, locate
from lore.paths import Locations
from tests.conftest import settings

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# A question the injection decision answers: "how do we retry failed stripe charges" alone is
# refused by `lore context` (gate 0.012 against 0.03: four terms are weak evidence), and the
# helper and the CLI print the same nothing for it.
QUERY = "how do we retry failed stripe charges without hammering the payment provider"


@pytest.mark.parametrize(("args", "expected"), [
    (["search", "q"], (None, None)),
    (["search", "q w", "--json", "-n", "3"], (None, None)),
    (["--data-dir", "d", "-P", "p", "search", "--explain", "q"], ("d", None)),
    (["--index-dir=i", "-Pp", "context", "q", "--format", "json", "--max-items", "2"], (None, "i")),
])  # fmt: skip
def test_the_reads_go_to_the_helper_whole(args: list[str], expected: tuple[str | None, str | None]) -> None:
    """The client finds the helper from the root options alone; the helper parses the rest with the CLI's own
    declarations (no copy of the options here)."""
    assert locate(args, READ_COMMANDS) == expected


@pytest.mark.parametrize("args", [["list"], ["--debug", "search", "q"], ["search", "q", "--help"], ["remember", "x"]])
def test_anything_else_is_left_to_the_cli(args: list[str]) -> None:
    assert locate(args, READ_COMMANDS) is None


def lore(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lore", *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def helper(demo_helper: Locations) -> Locations:
    """The demo data served by a real warm helper (tests/conftest.py)."""
    return demo_helper


def answered_by_helper(locations: Locations) -> int:
    status = client.read_status(locations.index_dir, settings())
    return int(status.get("requests", 0)) if status else 0


def wait_until_answered(locations: Locations, count: int, timeout: float = 30.0) -> None:
    """The helper counts a request in its status file just after replying: poll for it."""
    end = time.monotonic() + timeout
    while answered_by_helper(locations) < count:
        if time.monotonic() > end:
            pytest.fail(f"the helper answered {answered_by_helper(locations)} requests, {count} expected")
        time.sleep(0.02)


def forget_access(locations: Locations) -> None:
    # Reinforcement reads the access log: each search changes the next one's scores. Both
    # sides must start from the same (empty) history to be compared byte for byte.
    locations.access_log.unlink(missing_ok=True)


def test_search_through_the_helper_prints_what_the_cli_prints(helper: Locations, cli) -> None:  # type: ignore[no-untyped-def]
    before = answered_by_helper(helper)
    remote = lore("search", QUERY)
    wait_until_answered(helper, before + 1)
    forget_access(helper)
    local = cli("search", QUERY)
    assert remote.returncode == local.exit_code == 0, remote.stderr
    assert "dec-" in remote.stdout
    assert remote.stdout == local.stdout and remote.stderr == local.stderr


def test_search_json_and_context_through_the_helper(helper: Locations, cli) -> None:  # type: ignore[no-untyped-def]
    before = answered_by_helper(helper)
    forget_access(helper)
    remote = orjson.loads(lore("search", QUERY, "--json", "-n", "5").stdout)
    forget_access(helper)
    local = orjson.loads(cli("search", QUERY, "--json", "-n", "5").stdout)
    assert [(h["id"], h["score"]) for h in remote["results"]] == [(h["id"], h["score"]) for h in local["results"]]
    assert len(remote["results"]) == 5
    forget_access(helper)
    remote_block = lore("context", QUERY, "--format", "compact")
    forget_access(helper)
    local_block = cli("context", QUERY, "--format", "compact")
    assert remote_block.stdout == local_block.stdout and "<lore-memory" not in remote_block.stdout
    assert remote_block.stdout.strip()
    wait_until_answered(helper, before + 2)  # the two remote commands were the helper's


def test_a_record_written_after_the_helper_loaded_is_found(helper: Locations) -> None:
    added = lore("remember", "Stripe charge retries stop after the zanzibar threshold of attempts",
                 "--rationale", "zanzibar zanzibar")  # fmt: skip
    assert added.returncode == 0, added.stderr
    # The helper's index is behind the files: it declines, and the CLI refreshes and answers.
    found = lore("search", "zanzibar threshold", "--json")
    assert found.returncode == 0, found.stderr
    assert any("zanzibar" in h["title"].lower() for h in orjson.loads(found.stdout)["results"])


# The client side in a fresh interpreter: what it imports while the helper answers.
REMOTE_AND_MODULES = """
import json, sys
from lore.agent.remote import run_remote
code = run_remote(sys.argv[1:])
sys.stdout.flush()
avoidable = sorted(m for m in ("typing", "socket", "selectors", "orjson", "numpy", "rich", "typer",
                               "lore.cli", "lore.search") if m in sys.modules)
sys.stderr.write(json.dumps({"code": code, "avoidable": avoidable}))
"""


def test_the_client_side_imports_only_what_it_needs(helper: Locations) -> None:
    # typing and the socket wrapper cost the warm hook and each terminal search ~3 ms apiece.
    before = answered_by_helper(helper)
    done = subprocess.run([sys.executable, "-c", REMOTE_AND_MODULES, "search", QUERY, "--json"], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["results"]
    assert orjson.loads(done.stderr) == {"code": 0, "avoidable": []}
    wait_until_answered(helper, before + 1)
