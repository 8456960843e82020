"""Generate the labelled Claude Code transcripts under tests/data/transcripts/ with the real CLI.

Each scenario runs the real ``claude -p`` (the pinned npm ``@anthropic-ai/claude-code``
of e2e/claude_code.py) in a fresh temporary HOME and project directory, against the
scripted fake Messages API of e2e/fake_anthropic.py on 127.0.0.1: the fake "model"
issues the scenario's tool calls one after another (Bash, Read, Edit, Write), Claude
Code really executes them in the project (python3, git, make, node...), and the fake
ends the turn with the scenario's text. A scenario with several prompts resumes the
same session (``--resume``), so one transcript holds them all.

After each run the transcript Claude Code wrote (``$HOME/.claude/projects/<slug>/<id>.jsonl``)
is checked (every scripted tool call happened; the ones meant to fail failed, the others
did not; expected output is there) and copied with the temporary paths replaced by
``/home/dev`` and ``/home/dev/projects/<project>``. To keep the set small, long strings
in Claude Code's bookkeeping lines (system prompt snapshots, request shapes, skill and
agent listings) are shortened; the conversation lines (``user``, ``assistant``) are kept
exactly as written.

The labels (tests/data/transcripts/labels.jsonl) are written by hand; this script
only checks that every labelled substring and secret occurs in its transcript.

Usage (needs npm and network access to the npm registry for the first install)::

    python scripts/gen_transcripts.py [--only NN] [--prefix NPM_PREFIX] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "e2e"))

from claude_code import CLAUDE_CODE_VERSION, CLAUDE_ENV, PACKAGE  # noqa: E402
from common import npm_install  # noqa: E402
from fake_anthropic import FakeAnthropic, Reply  # noqa: E402

OUT = ROOT / "tests" / "data" / "transcripts"
HOME_PLACEHOLDER = "/home/dev"
TRIM_OVER = 240  # characters; longer strings (and lists over 4x that) in bookkeeping lines are shortened
KEEP_TYPES = {"user", "assistant", "summary", "system"}


@dataclass
class Step:
    """One scripted assistant turn: a tool call (checked after the run) or the final text."""

    tool: str | None
    input: dict[str, Any] = field(default_factory=dict)
    preface: str = ""
    text: str = ""
    error: bool = False  # the tool call is meant to fail (is_error in its result)
    expect: str = ""  # a substring its result must contain


def bash(command: str, description: str = "", preface: str = "", *, error: bool = False, expect: str = "") -> Step:
    return Step("Bash", {"command": command, "description": description or command[:60]}, preface, error=error,
                expect=expect)  # fmt: skip


def read(path: str, preface: str = "", *, expect: str = "") -> Step:
    return Step("Read", {"file_path": "{P}/" + path}, preface, expect=expect)


def edit(path: str, old: str, new: str, preface: str = "", *, error: bool = False, expect: str = "") -> Step:
    return Step("Edit", {"file_path": "{P}/" + path, "old_string": old, "new_string": new}, preface, error=error,
                expect=expect)  # fmt: skip


def write(path: str, content: str, preface: str = "", *, error: bool = False) -> Step:
    return Step("Write", {"file_path": "{P}/" + path, "content": content}, preface, error=error)


def say(text: str) -> Step:
    return Step(None, text=text)


@dataclass
class Turn:
    prompt: str
    steps: list[Step]


@dataclass
class Scenario:
    name: str  # NN-short-name (the file name without .jsonl)
    project: str
    files: dict[str, str]
    turns: list[Turn]
    setup: str = ""  # shell run in the project before the session (not part of the transcript)


GIT_INIT = ("git init -q -b main && git config user.email dev@example.com && git config user.name Dev && "
            "git add -A && git commit -qm 'initial import'")  # fmt: skip


def substitute(value: Any, project: str) -> Any:
    if isinstance(value, str):
        return value.replace("{P}", project)
    if isinstance(value, dict):
        return {k: substitute(v, project) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, project) for v in value]
    return value


def _prompt_index(body: dict[str, Any], turns: list[Turn]) -> tuple[int, int]:
    """(turn index, assistant messages since that turn's prompt) for a main-loop request."""
    messages = body.get("messages") or []
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
            continue
        text = "\n".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict))
        for index in range(len(turns) - 1, -1, -1):
            if turns[index].prompt in text:
                done = sum(1 for m in messages[position + 1 :] if m.get("role") == "assistant")
                return index, done
    return -1, 0


def make_script(turns: list[Turn], project: str) -> Callable[[dict[str, Any]], Reply | None]:
    def script(body: dict[str, Any]) -> Reply | None:
        if not body.get("tools"):  # a side request (title, summary...): a short text
            return Reply(text="Coding session")
        turn, done = _prompt_index(body, turns)
        if turn < 0 or done >= len(turns[turn].steps):
            return Reply(text="Done.")
        step = turns[turn].steps[done]
        if step.tool is None:
            return Reply(text=step.text)
        return Reply(tool_name=step.tool, tool_input=substitute(step.input, project), preface=step.preface)

    return script


def _trim(value: Any) -> Any:
    """Long strings shortened; a large list replaced by a note of its size; dicts keep their keys."""
    size = len(json.dumps(value, ensure_ascii=False))
    if isinstance(value, str) and len(value) > TRIM_OVER:
        return value[:160] + f" [... {len(value) - 160} characters trimmed]"
    if isinstance(value, dict):
        return {k: _trim(v) for k, v in value.items()}
    if isinstance(value, list):
        if size > 4 * TRIM_OVER:
            return f"[list of {len(value)} items, {size} characters of JSON, trimmed]"
        return [_trim(v) for v in value]
    return value


def slug(path: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "-", path)


def normalise(lines: list[str], home: Path, work: Path, project: str) -> list[str]:
    """Stable paths and small bookkeeping lines; conversation lines unchanged but for the paths."""
    placeholder_work = f"{HOME_PLACEHOLDER}/projects/{project}"
    swaps = [(str(work), placeholder_work), (slug(str(work)), slug(placeholder_work)), (str(home), HOME_PLACEHOLDER),
             (slug(str(home)), slug(HOME_PLACEHOLDER)), (str(home.parent), "/tmp/session")]  # fmt: skip
    out = []
    for line in lines:
        for old, new in swaps:
            line = line.replace(old, new)
        record = json.loads(line)
        if record.get("type") not in KEEP_TYPES:
            record = _trim(record)
        out.append(json.dumps(record, ensure_ascii=False))
    return out


def check_transcript(records: list[dict[str, Any]], sc: Scenario) -> list[str]:
    """What went differently from the script (an empty list when the run did what the labels assume)."""
    uses: list[dict[str, Any]] = []
    results: dict[str, dict[str, Any]] = {}
    for record in records:
        content = (record.get("message") or {}).get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if record.get("type") == "assistant" and block.get("type") == "tool_use":
                uses.append(block)
            if record.get("type") == "user" and block.get("type") == "tool_result":
                results[block.get("tool_use_id", "")] = block
    planned = [s for t in sc.turns for s in t.steps if s.tool is not None]
    problems = []
    if len(uses) != len(planned):
        problems.append(f"{len(uses)} tool calls in the transcript, {len(planned)} scripted")
    for number, (use, step) in enumerate(zip(uses, planned, strict=False), 1):
        result = results.get(use.get("id", ""))
        if result is None:
            problems.append(f"call {number} ({step.tool}) has no result")
            continue
        body = result.get("content")
        text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
        if bool(result.get("is_error")) != step.error:
            problems.append(f"call {number} ({step.tool} {str(step.input)[:80]}) is_error={result.get('is_error')}, "
                            f"scripted error={step.error}: {text[:300]}")  # fmt: skip
        if step.expect and step.expect not in text:
            problems.append(f"call {number} ({step.tool}) result lacks {step.expect!r}: {text[:300]}")
    return problems


def run_scenario(sc: Scenario, claude: Path, keep: bool) -> Path:
    root = Path(tempfile.mkdtemp(prefix="txgen-"))
    home = root / "home"
    work = home / "projects" / sc.project
    work.mkdir(parents=True)
    try:
        for name, text in sc.files.items():
            path = work / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "TERM": "dumb", "LANG": "C.UTF-8",
               "IS_SANDBOX": "1", **CLAUDE_ENV}  # fmt: skip
        if sc.setup:
            subprocess.run(["bash", "-c", sc.setup], cwd=work, env=env, check=True, capture_output=True, timeout=120)
        session = ""
        with FakeAnthropic(make_script(sc.turns, str(work))) as api:
            for turn in sc.turns:
                resume = ["--resume", session] if session else []
                done = subprocess.run([str(claude), "-p", turn.prompt, "--dangerously-skip-permissions",
                                       "--output-format", "json", *resume], cwd=work, capture_output=True, text=True,
                                      timeout=300, env={**env, "ANTHROPIC_BASE_URL": api.url})  # fmt: skip
                if done.returncode != 0:
                    raise RuntimeError(f"{sc.name}: claude exited {done.returncode}: {done.stdout[-500:]} {done.stderr[-500:]}")
                session = json.loads(done.stdout)["session_id"]
        files = list((home / ".claude" / "projects").glob(f"*/{session}.jsonl"))
        if len(files) != 1:
            raise RuntimeError(f"{sc.name}: transcript for session {session} not found: {files}")
        lines = files[0].read_text().splitlines()
        problems = check_transcript([json.loads(line) for line in lines], sc)
        if problems:
            raise RuntimeError(f"{sc.name}: the run did not follow the script:\n  " + "\n  ".join(problems))
        out = OUT / f"{sc.name}.jsonl"
        out.write_text("\n".join(normalise(lines, home, work, sc.project)) + "\n")
        leftover = [m for m in ("/tmp/txgen-", str(root)) if m in out.read_text()]
        if leftover:
            raise RuntimeError(f"{sc.name}: temporary paths left in {out}: {leftover}")
        return out
    finally:
        if keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def check_labels() -> list[str]:
    """Every labelled file exists; every match substring and secret occurs in it (case-insensitive for matches)."""
    problems = []
    for number, line in enumerate((OUT / "labels.jsonl").read_text().splitlines(), 1):
        label = json.loads(line)
        path = OUT / label["file"]
        if not path.exists():
            problems.append(f"labels.jsonl:{number}: {label['file']} does not exist")
            continue
        text = path.read_text()
        for item in label["expected"]:
            for needle in item["match"]:
                if needle.lower() not in text.lower():
                    problems.append(f"labels.jsonl:{number}: {label['file']}: {item['kind']} match {needle!r} not found")
        for secret in label["secrets"]:
            if secret not in text:
                problems.append(f"labels.jsonl:{number}: {label['file']}: secret {secret[:12]!r}... not found")
    return problems


AWS_KEY_ID = "AKIABJOZXCCZU6EOUGFH"
AWS_SECRET = "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"
GITHUB_TOKEN = "ghp_xEEsAoCaA2QTqpOoast0vQj8VMtbYo9Mqb5j"
SLACK_TOKEN = "xoxb-482910375612-5938201746352-ryAczD4UDDqcdbTmBQq79Gyg"
DB_PASSWORD = "Tr0ub4dor-Xq93-prod"
STRIPE_KEY = "sk_live_pazOc61hVRd82Wzj5OSqplLapHp6hgPj"
KEY_LINES = ("Bo1nKo63sZEqqZ3CYxU/w0A2c+MLpjN/E8A4r+knOh7k/gQvmUZKYiCy6AbaCQYAhIcXhs",
             "CAIdB89Sr6wnyclVKmtexpDSA3lxl7kettuA1fToZ0HpXyT4V3cSykBX0hB0RfZScs1EPv")  # fmt: skip

CALC = '''"""Invoice totals."""


def total(lines, tax_rate=0.2):
    net = sum(qty * price for qty, price in lines)
    return round(net * (1 + tax_rate), 2)
'''
TEST_CALC = '''import unittest

from invoices.calc import total


class TotalTest(unittest.TestCase):
    def test_total_with_tax(self):
        self.assertEqual(total([(2, 10.0), (1, 5.0)]), 30.0)

    def test_empty_invoice(self):
        self.assertEqual(total([]), 0)
'''
DISCOUNT = '''def apply_discount(price, percent):
    """Price after a percentage discount, in cents."""
    return price - price * percent // 10
'''
TEST_DISCOUNT = '''import unittest

from discount import apply_discount


class DiscountTest(unittest.TestCase):
    def test_ten_percent(self):
        self.assertEqual(apply_discount(1000, 10), 900)

    def test_no_discount(self):
        self.assertEqual(apply_discount(1000, 0), 1000)
'''
REPORT = '''import csv
import sys


def main(path)
    with open(path) as handle:
        rows = list(csv.DictReader(handle))
    print(f"{len(rows)} orders, {sum(float(r['amount']) for r in rows):.2f} EUR")


if __name__ == "__main__":
    main(sys.argv[1])
'''
ORDERS = "id,amount\n1,19.90\n2,5.00\n3,42.10\n"
SETTINGS = '''import os

DEBUG = os.environ.get("APP_DEBUG", "0") == "1"
REQUEST_TIMEOUT = 10  # seconds
RETRIES = 3
'''
LONG_MODULES = {
    f"shop/{name}.py": f'''"""The {name} part of the shop."""

from shop.money import Money


def {name}_total(items):
    return sum((Money(i["cents"]) for i in items), Money(0))
''' for name in ("cart", "orders", "refunds", "invoices", "shipping", "coupons")
}


def build_scenarios() -> list[Scenario]:
    s: list[Scenario] = []
    s.append(Scenario("01-unittest-module-not-found", "invoice-service",
        {"invoices/__init__.py": "", "invoices/calc.py": CALC, "tests/test_calc.py": TEST_CALC}, [
        Turn("run the tests for the invoice calc please", [
            bash("cd tests && python3 -m unittest test_calc", "Run the calc tests", "I'll run the calc tests.",
                 error=True, expect="ModuleNotFoundError"),
            bash("ls tests invoices", "Look at the layout",
                 "The tests can't import `invoices`: run from tests/, the project root is not on sys.path. "
                 "Let me check the layout."),
            bash("python3 -m unittest discover -s tests -v", "Run the tests from the project root",
                 "Running discovery from the project root instead.", expect="OK"),
            say("Both tests pass. The first run failed with `ModuleNotFoundError: No module named 'invoices'` "
                "because it ran inside tests/; run unittest discovery from the project root."),
        ])]))
    s.append(Scenario("02-assertion-discount-fix", "pricing",
        {"discount.py": DISCOUNT, "test_discount.py": TEST_DISCOUNT}, [
        Turn("the discount tests are red on CI, can you fix it?", [
            bash("python3 -m unittest -v test_discount", "Run the discount tests", error=True,
                 expect="AssertionError"),
            read("discount.py", "`apply_discount(1000, 10)` returns 0 instead of 900. Let me read the function."),
            edit("discount.py", "price * percent // 10", "price * percent // 100",
                 "The percentage is divided by 10 instead of 100."),
            bash("python3 -m unittest -v test_discount", "Re-run the discount tests", expect="OK"),
            say("Fixed: `apply_discount` divided by 10 instead of 100, so a 10% discount removed the whole price. "
                "Tests pass now."),
        ])]))
    s.append(Scenario("03-syntax-error-report", "sales-report", {"report.py": REPORT, "orders.csv": ORDERS}, [
        Turn("can you run report.py on orders.csv and tell me the total?", [
            bash("python3 report.py orders.csv", "Run the report", error=True, expect="SyntaxError"),
            edit("report.py", "def main(path)\n", "def main(path):\n",
                 "There's a missing colon after `def main(path)`. Fixing it."),
            bash("python3 report.py orders.csv", "Run the report again", expect="3 orders"),
            say("The script had a SyntaxError (missing colon on `def main(path)`); after the fix it reports "
                "3 orders, 67.00 EUR."),
        ])]))
    s.append(Scenario("04-make-version-mismatch-twice", "libwidget", {
        "Makefile": "build: check\n\tpython3 -m compileall -q widget\n\ncheck:\n\tpython3 tools/check_version.py\n",
        "pyproject.toml": '[project]\nname = "libwidget"\nversion = "1.4.0"\n',
        "widget/__init__.py": '__version__ = "1.3.9"\n',
        "tools/check_version.py": ('import re, sys\nfrom pathlib import Path\n\n'
            'py = re.search(r\'version = "(.+?)"\', Path("pyproject.toml").read_text()).group(1)\n'
            'init = re.search(r\'__version__ = "(.+?)"\', Path("widget/__init__.py").read_text()).group(1)\n'
            'if py != init:\n    sys.exit(f"version mismatch: pyproject {py} vs widget/__init__.py {init}")\n'
            'print(f"version {py} ok")\n'),
    }, [
        Turn("make build fails after my release bump, take a look", [
            bash("make build", "Build the package", error=True, expect="version mismatch"),
            bash("rm -rf widget/__pycache__ && make build", "Clean the cache and build again",
                 "Maybe a stale cache; let me clean and retry.", error=True, expect="version mismatch"),
            read("widget/__init__.py", "Same error twice, so it's not the cache: the versions really differ."),
            edit("widget/__init__.py", '__version__ = "1.3.9"', '__version__ = "1.4.0"'),
            bash("make build", "Build again", expect="version 1.4.0 ok"),
            say("`make build` failed twice with `version mismatch: pyproject 1.4.0 vs widget/__init__.py 1.3.9`: "
                "the release bump only touched pyproject.toml. I set `__version__` to 1.4.0 and the build passes."),
        ]),
        Turn("thanks. lesson learned: bump the version in pyproject.toml and widget/__init__.py together, "
             "or better read it from one place", [
            say("Agreed. A single source would avoid this: `importlib.metadata.version('libwidget')` in "
                "`__init__.py`. Want me to make that change?"),
        ]),
    ], setup=GIT_INIT))
    s.append(Scenario("05-git-push-rejected", "notes-api", {"app.py": "print('notes api')\n"}, [
        Turn("commit the README I added and push it to origin", [
            bash("git add README.md && git commit -m 'Add README' && git push origin main", "Commit and push",
                 error=True, expect="rejected"),
            bash("git pull --rebase origin main", "Rebase on the remote branch",
                 "The push was rejected because origin/main has a commit we don't have. Rebasing onto it.",
                 expect="Successfully rebased"),
            bash("git push origin main && git log --oneline -3", "Push again", expect="Add README"),
            say("Pushed. The first push was rejected (non-fast-forward: a teammate pushed `Add healthcheck` "
                "meanwhile); `git pull --rebase` then push worked."),
        ]),
    ], setup=("git init -q --bare -b main ../notes-api-origin.git && " + GIT_INIT + " && git remote add origin ../notes-api-origin.git && "
              "git push -q origin main && git clone -q ../notes-api-origin.git ../other && cd ../other && "
              "git config user.email ana@example.com && git config user.name Ana && echo ok > health.txt && "
              "git add health.txt && git commit -qm 'Add healthcheck' && git push -q origin main && cd - && "
              "rm -rf ../other && printf '# Notes API\\n' > README.md")))
    s.append(Scenario("06-merge-conflict-timeout", "gateway", {"settings.py": SETTINGS}, [
        Turn("merge the feature/slow-upstream branch into main", [
            bash("git merge feature/slow-upstream", "Merge the feature branch", error=True, expect="CONFLICT"),
            read("settings.py", "Let me look at the conflict."),
            say("Conflict in settings.py: main has `REQUEST_TIMEOUT = 15`, the branch has `REQUEST_TIMEOUT = 30`. "
                "Which one should win?"),
        ]),
        Turn("keep 30. we decided to raise the upstream timeout to 30 seconds because the payments provider "
             "takes up to 25s at peak", [
            write("settings.py", SETTINGS.replace("10  # seconds", "30  # seconds: payments provider peaks at 25 s"),
                  "Resolving with 30 s."),
            bash("git add settings.py && git commit -m 'Merge feature/slow-upstream: upstream timeout 30 s' && "
                 "git log --oneline -3", "Conclude the merge", expect="Merge feature/slow-upstream"),
            say("Merged with `REQUEST_TIMEOUT = 30` and a comment saying why."),
        ]),
    ], setup=(GIT_INIT + " && git checkout -qb feature/slow-upstream && sed -i 's/= 10 /= 30 /' settings.py && "
              "git commit -qam 'Raise timeout' && git checkout -q main && sed -i 's/= 10 /= 15 /' settings.py && "
              "git commit -qam 'Timeout 15'")))
    s.append(Scenario("07-edit-old-string-not-found", "gateway", {"settings.py": SETTINGS}, [
        Turn("set RETRIES to 5 in settings.py", [
            edit("settings.py", "RETRIES=3", "RETRIES=5", "Updating the retry count.", error=True,
                 expect="String to replace not found"),
            read("settings.py", "The string didn't match; let me read the file."),
            edit("settings.py", "RETRIES = 3", "RETRIES = 5", "It has spaces around `=`."),
            bash("grep -n RETRIES settings.py", "Check the change", expect="RETRIES = 5"),
            say("RETRIES is 5 now (my first edit missed because the file writes `RETRIES = 3` with spaces)."),
        ]),
    ]))
    s.append(Scenario("08-decision-switch-httpx", "weather-bot", {
        "requirements.txt": "requests==2.32.3\npython-dateutil==2.9.0\n",
        "bot/fetch.py": "import requests\n\n\ndef forecast(city):\n    return requests.get(f'https://api.example.com/{city}', timeout=5).json()\n",
    }, [
        Turn("let's switch from requests to httpx because we need async calls for the forecast fan-out. "
             "update requirements and the fetch module", [
            read("bot/fetch.py"),
            write("bot/fetch.py", "import httpx\n\n\nasync def forecast(client: httpx.AsyncClient, city):\n"
                  "    response = await client.get(f'https://api.example.com/{city}', timeout=5)\n"
                  "    return response.json()\n", "Rewriting fetch.py on httpx.AsyncClient."),
            read("requirements.txt"),
            edit("requirements.txt", "requests==2.32.3", "httpx==0.28.1"),
            bash("python3 -m py_compile bot/fetch.py && grep -rn 'requests' --include=*.py . || true",
                 "Compile and look for leftovers"),
            say("Switched to httpx: `forecast` is now async and takes an `httpx.AsyncClient`; requirements.txt "
                "pins httpx 0.28.1 instead of requests. Callers need `await` now."),
        ]),
    ]))
    s.append(Scenario("09-decision-utc-timestamps", "mobile-sync", {
        "sync/serialize.py": "import time\n\n\ndef stamp(record):\n    record['updated'] = int(time.time())\n    return record\n",
    }, [
        Turn("We decided to store all timestamps as UTC ISO-8601 strings, not epoch ints, because the mobile "
             "client parses them directly. Update serialize.py accordingly.", [
            read("sync/serialize.py"),
            write("sync/serialize.py", "from datetime import datetime, timezone\n\n\ndef stamp(record):\n"
                  "    record['updated'] = datetime.now(timezone.utc).isoformat(timespec='seconds')\n"
                  "    return record\n"),
            bash("python3 -c \"import sys; sys.path.insert(0, 'sync'); from serialize import stamp; print(stamp({}))\"",
                 "Try the new stamp", expect="+00:00"),
            say("`stamp` now writes e.g. `2026-11-25T10:02:11+00:00` (UTC, ISO-8601)."),
        ]),
    ]))
    s.append(Scenario("10-decision-sqlite-wal", "cache-daemon", {
        "cache/db.py": "import sqlite3\n\n\ndef connect(path):\n    return sqlite3.connect(path, timeout=1)\n",
        "tools/contend.py": ('import sqlite3, sys, threading, time\nsys.path.insert(0, ".")\nfrom cache.db import connect\n\n'
            'path = "/tmp/contend-demo.db"\nw = connect(path)\nw.execute("create table if not exists kv(k, v)")\n'
            'w.execute("begin exclusive")\nw.execute("insert into kv values (1, 2)")\n'
            'try:\n    connect(path).execute("select count(*) from kv").fetchone()\n    print("reader ok")\n'
            'except sqlite3.OperationalError as error:\n    print("reader failed:", error)\n    sys.exit(1)\n'
            'finally:\n    w.rollback()\n'),
    }, [
        Turn("readers of the cache sometimes get 'database is locked'. investigate", [
            bash("rm -f /tmp/contend-demo.db* && python3 tools/contend.py", "Reproduce the contention", error=True,
                 expect="database is locked"),
            read("cache/db.py", "Reproduced: a reader fails while a writer holds the rollback journal's lock."),
            edit("cache/db.py", "    return sqlite3.connect(path, timeout=1)\n",
                 "    connection = sqlite3.connect(path, timeout=1)\n    connection.execute('pragma journal_mode=wal')\n"
                 "    return connection\n"),
            bash("rm -f /tmp/contend-demo.db* && python3 tools/contend.py", "Re-run with WAL", expect="reader ok"),
            say("Decision: use SQLite WAL mode for the cache database, because with the default rollback journal "
                "readers block on a writer's lock. With `journal_mode=wal` the reader no longer fails."),
        ]),
    ]))
    s.append(Scenario("11-decision-chose-ruff", "tooling-demo", {
        "pyproject.toml": '[project]\nname = "tooling-demo"\nversion = "0.1.0"\n',
        "setup.cfg": "[flake8]\nmax-line-length = 100\n",
    }, [
        Turn("set up linting for this repo", [
            bash("ls -a && cat setup.cfg", "See what is configured"),
            say("There's a flake8 section in setup.cfg. Options: keep flake8 (+ isort, black), or ruff, which "
                "covers lint and format in one tool. Which do you prefer?"),
        ]),
        Turn("we chose ruff over flake8 since it's one tool for lint and format and it's much faster. "
             "move the config to pyproject and drop setup.cfg", [
            read("pyproject.toml"),
            write("pyproject.toml", '[project]\nname = "tooling-demo"\nversion = "0.1.0"\n\n[tool.ruff]\n'
                  'line-length = 100\n\n[tool.ruff.lint]\nselect = ["E", "F", "I"]\n'),
            bash("git rm -q setup.cfg && git status --short", "Drop setup.cfg"),
            say("Done: ruff configured in pyproject.toml with line length 100 and rules E, F, I; setup.cfg removed."),
        ]),
    ], setup=GIT_INIT))
    s.append(Scenario("12-lesson-idempotent-migration", "ledger", {
        "migrate.py": ('import sqlite3\n\ndb = sqlite3.connect("ledger.db")\n'
                       'db.execute("create table if not exists entries(id integer primary key, amount integer)")\n'
                       'db.execute("alter table entries add column currency text")\ndb.commit()\nprint("migrated")\n'),
    }, [
        Turn("run the migration again, the deploy script retried it", [
            bash("python3 migrate.py && python3 migrate.py", "Run the migration twice, as the deploy retry does",
                 error=True, expect="duplicate column name"),
            read("migrate.py", "The second run fails: `sqlite3.OperationalError: duplicate column name: currency`."),
            edit("migrate.py", 'db.execute("alter table entries add column currency text")\n',
                 'columns = {row[1] for row in db.execute("pragma table_info(entries)")}\n'
                 'if "currency" not in columns:\n    db.execute("alter table entries add column currency text")\n'),
            bash("python3 migrate.py && python3 migrate.py", "Run it twice again", expect="migrated"),
            say("The migration is now safe to re-run: it checks `pragma table_info` before `ALTER TABLE`."),
        ]),
        Turn("good. lesson learned: every migration must be idempotent, the deploy retries them", [
            say("Noted: migrations must be idempotent because deploys retry them."),
        ]),
    ]))
    s.append(Scenario("13-note-to-self-staging-vpn", "ops-scripts", {
        "check_staging.py": ('import socket, sys\n\ntry:\n    socket.create_connection(("127.0.0.1", 6543), timeout=2)\n'
                             'except OSError as error:\n    sys.exit(f"staging db unreachable: {error}")\nprint("ok")\n'),
    }, [
        Turn("why does check_staging.py fail for me?", [
            bash("python3 check_staging.py", "Run the staging check", error=True, expect="unreachable"),
            read("check_staging.py"),
            say("It can't open a TCP connection to the staging database port (connection refused). That usually "
                "means the tunnel isn't up. Are you on the VPN?"),
        ]),
        Turn("ah right, I wasn't. note to self: the staging DB only accepts connections through the VPN tunnel "
             "on port 6543", [
            say("Got it. When it's up, `python3 check_staging.py` should print `ok`."),
        ]),
    ]))
    s.append(Scenario("14-remember-fixtures-generated", "parser-lib", {
        "scripts/make_fixtures.py": ('import json\nfrom pathlib import Path\n\nPath("tests/data").mkdir(parents=True, exist_ok=True)\n'
            'cases = [{"input": "a=1", "want": {"a": "1"}}, {"input": "a=1;b=2", "want": {"a": "1", "b": "2"}}]\n'
            'Path("tests/data/cases.json").write_text(json.dumps(cases, indent=1))\nprint(len(cases), "cases")\n'),
        "tests/data/cases.json": '[{"input": "a=1", "want": {"a": "1"}}]\n',
    }, [
        Turn("add a test case for an empty input to tests/data/cases.json", [
            bash("head -5 scripts/make_fixtures.py && git log --oneline -- tests/data/cases.json", "Where the fixtures come from"),
            edit("scripts/make_fixtures.py", '{"input": "a=1;b=2", "want": {"a": "1", "b": "2"}}]',
                 '{"input": "a=1;b=2", "want": {"a": "1", "b": "2"}}, {"input": "", "want": {}}]',
                 "cases.json is generated, so I'm adding the case to the generator instead."),
            bash("python3 scripts/make_fixtures.py", "Regenerate the fixtures", expect="3 cases"),
            say("Added the empty-input case. Remember that tests/data/cases.json is generated by "
                "scripts/make_fixtures.py: edit the script and regenerate, never the JSON by hand."),
        ]),
    ], setup=GIT_INIT))
    s.append(Scenario("15-from-now-on-pin-versions", "etl-jobs", {
        "requirements.txt": "pandas\nurllib3\nboto3>=1.28\n",
    }, [
        Turn("from now on always pin exact versions in requirements.txt, the unpinned urllib3 bump broke the "
             "nightly job last week. pin them to what we run in prod: pandas 2.2.3, urllib3 1.26.20, boto3 1.35.99", [
            read("requirements.txt"),
            write("requirements.txt", "pandas==2.2.3\nurllib3==1.26.20\nboto3==1.35.99\n"),
            bash("cat requirements.txt", "Show the pinned file", expect="urllib3==1.26.20"),
            say("All three are pinned with `==` now."),
        ]),
    ]))
    s.append(Scenario("16-secret-aws-keys-upload", "media-upload", {
        "upload.py": ('import os\nimport boto3\n\ns3 = boto3.client("s3")\n'
                      's3.upload_file("report.pdf", os.environ["BUCKET"], "reports/report.pdf")\n'),
        "report.pdf": "%PDF-1.4 fake\n",
    }, setup="python3 -m venv --without-pip .venv", turns=[
        Turn(f"try the upload with these creds: AWS_ACCESS_KEY_ID={AWS_KEY_ID} AWS_SECRET_ACCESS_KEY={AWS_SECRET} "
             "bucket acme-reports-dev", [
            bash(f"AWS_ACCESS_KEY_ID={AWS_KEY_ID} AWS_SECRET_ACCESS_KEY={AWS_SECRET} BUCKET=acme-reports-dev "
                 ".venv/bin/python upload.py", "Run the upload", error=True, expect="No module named 'boto3'"),
            say("The upload didn't run: `ModuleNotFoundError: No module named 'boto3'`. Install boto3 in the venv "
                "first. Also, please don't paste keys into the chat: put them in ~/.aws/credentials or use "
                "`aws sso login`, and rotate this pair."),
        ]),
    ]))
    s.append(Scenario("17-secret-github-token-remote", "widgets", {"main.go": "package main\n\nfunc main() {}\n"}, [
        Turn(f"set the origin remote to https://github.com/acme/widgets.git using my token {GITHUB_TOKEN} so "
             "CI can push tags", [
            bash(f"git remote add origin https://x-access-token:{GITHUB_TOKEN}@github.com/acme/widgets.git && "
                 "git remote -v", "Add the origin remote", expect="github.com/acme/widgets.git"),
            say("Origin is set. Note the token is now stored in .git/config in clear text; a credential helper "
                "(`gh auth setup-git`) would be safer."),
        ]),
    ], setup=GIT_INIT))
    s.append(Scenario("18-secret-db-url-refused", "billing", {
        "check_db.py": ('import os, socket, sys\nfrom urllib.parse import urlparse\n\nurl = urlparse(os.environ["DATABASE_URL"])\n'
                        'socket.create_connection((url.hostname, url.port), timeout=2)\nprint("connected to", url.hostname)\n'),
    }, [
        Turn(f"the integration tests need DATABASE_URL=postgresql://billing_app:{DB_PASSWORD}@127.0.0.1:5432/billing "
             "— can you check the db is reachable?", [
            bash(f"DATABASE_URL=postgresql://billing_app:{DB_PASSWORD}@127.0.0.1:5432/billing python3 check_db.py",
                 "Check the database connection", error=True, expect="ConnectionRefusedError"),
            say("Not reachable: `ConnectionRefusedError` on 127.0.0.1:5432, so Postgres isn't running locally. "
                "Start it with `docker compose up -d db` and re-run."),
        ]),
    ]))
    s.append(Scenario("19-secret-slack-token-env", "alerts", {
        "notify.py": 'import os\n\nTOKEN = os.environ["SLACK_BOT_TOKEN"]\n',
        ".gitignore": "__pycache__/\n",
    }, [
        Turn(f"put SLACK_BOT_TOKEN={SLACK_TOKEN} in a .env file for local runs and make sure it never gets committed", [
            write(".env", f"SLACK_BOT_TOKEN={SLACK_TOKEN}\n", "Creating .env."),
            read(".gitignore"),
            edit(".gitignore", "__pycache__/\n", "__pycache__/\n.env\n"),
            bash("git status --short && git check-ignore -v .env", "Confirm .env is ignored", expect=".gitignore"),
            say(".env holds the token and is ignored by git (.gitignore line 2)."),
        ]),
    ], setup=GIT_INIT))
    s.append(Scenario("20-secret-private-key-invalid", "deploy", {"deploy.sh": "#!/bin/sh\nrsync -a build/ deploy@web1:/srv/app\n"}, [
        Turn("ssh says my deploy key is bad. here it is:\n-----BEGIN OPENSSH PRIVATE KEY-----\n"
             f"{KEY_LINES[0]}\n{KEY_LINES[1]}\n-----END OPENSSH PRIVATE KEY-----\nsave it as deploy_key and check it", [
            write("deploy_key", f"-----BEGIN OPENSSH PRIVATE KEY-----\n{KEY_LINES[0]}\n{KEY_LINES[1]}\n"
                  "-----END OPENSSH PRIVATE KEY-----\n"),
            bash("chmod 600 deploy_key && ssh-keygen -y -f deploy_key", "Derive the public key", error=True,
                 expect="Load key"),
            say("`ssh-keygen -y` can't load it (`error in libcrypto`): the key is truncated (an OpenSSH key has many more lines). "
                "Copy it again from the vault, and since it has been pasted here, rotate it."),
        ]),
    ]))
    s.append(Scenario("21-negative-read-explain", "invoice-service",
        {"invoices/__init__.py": "", "invoices/calc.py": CALC, "tests/test_calc.py": TEST_CALC}, [
        Turn("what does the invoices package do?", [
            bash("ls -R invoices tests", "List the package"),
            read("invoices/calc.py"),
            say("It's small: `invoices.calc.total(lines, tax_rate=0.2)` sums quantity × price over the lines and "
                "adds tax (20% by default), rounded to cents. tests/test_calc.py covers a taxed total and an empty "
                "invoice."),
        ]),
    ]))
    s.append(Scenario("22-negative-chitchat", "scratch", {}, [
        Turn("quick question, what's the difference between a list and a tuple in python?", [
            say("A list is mutable (append, assign by index); a tuple is immutable, hashable when its items are, "
                "and a bit smaller. Use tuples for fixed records and dict keys, lists for collections that change."),
        ]),
        Turn("cool thanks, that's all for today", [say("You're welcome, have a good evening!")]),
    ]))
    s.append(Scenario("23-negative-tests-pass", "pricing", {"discount.py": DISCOUNT.replace("// 10", "// 100"),
                                                             "test_discount.py": TEST_DISCOUNT}, [
        Turn("run the tests before I open the PR", [
            bash("python3 -m unittest -v", "Run all tests", expect="OK"),
            say("All 2 tests pass."),
        ]),
    ]))
    s.append(Scenario("24-negative-git-log-review", "notes-api", {"app.py": "print('notes api')\n"}, [
        Turn("what changed in the last commits?", [
            bash("git log --oneline -5 && git show --stat HEAD", "Recent history"),
            say("Two commits: the initial import and `Add healthcheck endpoint` (app.py, 2 lines)."),
        ]),
    ], setup=GIT_INIT + " && echo \"print('ok')\" >> app.py && git commit -qam 'Add healthcheck endpoint'"))
    s.append(Scenario("25-node-test-typeerror", "slugify-js", {
        "package.json": '{"name": "slugify-js", "version": "1.0.0", "type": "module", "scripts": {"test": "node --test"}}\n',
        "slugify.js": "export function slugify(title) {\n  return title.toLowercase().replace(/[^a-z0-9]+/g, '-');\n}\n",
        "slugify.test.js": ("import test from 'node:test';\nimport assert from 'node:assert/strict';\nimport { slugify } from './slugify.js';\n\n"
                            "test('slugify', () => {\n  assert.equal(slugify('Hello World'), 'hello-world');\n});\n"),
    }, [
        Turn("npm test is failing, fix slugify", [
            bash("node --test", "Run the node tests", error=True, expect="toLowercase is not a function"),
            edit("slugify.js", "title.toLowercase()", "title.toLowerCase()", "Typo: `toLowercase` should be `toLowerCase`."),
            bash("node --test", "Run the tests again", expect="pass 1"),
            say("Fixed the `TypeError: title.toLowercase is not a function` typo; the test passes."),
        ]),
    ]))
    s.append(Scenario("26-decision-going-with-argparse", "csv-tools", {
        "dedupe.py": "import sys\n\nseen = set()\nfor line in open(sys.argv[1]):\n    if line not in seen:\n        seen.add(line)\n        print(line, end='')\n",
        "people.csv": "name\nana\nbo\nana\n",
    }, [
        Turn("add a --output option to dedupe.py. should we use click?", [
            read("dedupe.py"),
            write("dedupe.py", "import argparse\n\nparser = argparse.ArgumentParser(description='Drop repeated lines.')\n"
                  "parser.add_argument('path')\nparser.add_argument('--output', '-o')\nargs = parser.parse_args()\n"
                  "seen, out = set(), []\nfor line in open(args.path):\n    if line not in seen:\n        seen.add(line)\n"
                  "        out.append(line)\nif args.output:\n    open(args.output, 'w').writelines(out)\nelse:\n"
                  "    print(''.join(out), end='')\n",
                  "I'm going with argparse instead of click: it's a 15-line script and argparse avoids adding a "
                  "dependency."),
            bash("python3 dedupe.py people.csv -o out.csv && cat out.csv", "Try it", expect="bo"),
            say("Added `--output/-o`. I went with argparse rather than click, so the script keeps zero dependencies."),
        ]),
    ]))
    # a long session: a refactor with many reads and runs, one failure, a decision and a lesson
    long_steps: list[Step] = [bash("ls -R shop tests", "Look at the package")]
    for module in LONG_MODULES:
        long_steps.append(read(module))
        long_steps.append(bash(f"grep -n 'Money' {module}", f"Money uses in {module}"))
    long_steps += [
        read("shop/money.py", "All six modules build `Money` from cents. Let me look at the class."),
        bash("python3 -m unittest discover -s tests -t . -v", "Baseline test run", expect="OK"),
        edit("shop/money.py", "    def __init__(self, cents):\n        self.cents = cents\n",
             "    def __init__(self, cents, currency):\n        self.cents = cents\n        self.currency = currency\n",
             "Adding the currency to Money."),
        bash("python3 -m unittest discover -s tests -t . -v", "Run the tests after the change", error=True,
             expect="TypeError"),
        say("Decision: `currency` gets a default of \"EUR\" for now, because every caller today is EUR-only; "
            "making it required would touch all six modules at once. Applying that."),
    ]
    long_steps2: list[Step] = [
        edit("shop/money.py", "def __init__(self, cents, currency):", 'def __init__(self, cents, currency="EUR"):'),
        bash("python3 -m unittest discover -s tests -t . -v", "Run the tests again", expect="OK"),
    ]
    for module in LONG_MODULES:
        dotted = module[:-3].replace("/", ".")
        long_steps2.append(bash(f"python3 -c 'import {dotted}' && echo imported {module}", f"Import {module}",
                                expect="imported"))
    long_steps2 += [
        edit("shop/money.py", "    def __add__(self, other):\n",
             "    def __add__(self, other):\n        if other.currency != self.currency:\n"
             "            raise ValueError(f'cannot add {other.currency} to {self.currency}')\n"),
        bash("python3 -m unittest discover -s tests -t . -v", "Full run", expect="OK"),
        bash("git add -A && git commit -qm 'Money carries a currency (default EUR); adding mixed currencies raises' "
             "&& git log --oneline -2", "Commit", expect="Money carries a currency"),
        say("Committed. Money has a `currency` (default EUR) and refuses to add mixed currencies."),
    ]
    long_steps3: list[Step] = [bash("ls tests && wc -l shop/*.py", "What is there")]
    for module in LONG_MODULES:
        name = module.split("/")[1][:-3]
        long_steps3 += [
            read(module),
            edit(module, f"def {name}_total(items):\n",
                 f'def {name}_total(items):\n    """Sum of the {name} items\' cents, as Money."""\n'),
            write(f"tests/test_{name}.py", f"import unittest\n\nfrom shop.{name} import {name}_total\n"
                  f"from shop.money import Money\n\n\nclass {name.title()}Test(unittest.TestCase):\n"
                  f"    def test_empty(self):\n        self.assertEqual({name}_total([]), Money(0))\n\n"
                  f"    def test_two(self):\n        self.assertEqual({name}_total([{{'cents': 1}}, {{'cents': 2}}]), Money(3))\n"),
            bash(f"python3 -m unittest -v tests.test_{name}", f"Run the {name} tests", expect="OK"),
            bash(f"git add {module} tests/test_{name}.py && git commit -qm 'Document and test {name}_total' && "
                 "git log --oneline -1", f"Commit {name}", expect=f"{name}_total"),
        ]
    long_steps3 += [
        bash("python3 -m unittest discover -s tests -t . -v", "Full run", expect="Ran 13 tests"),
        say("Each of the six `*_total` functions has a docstring and two tests; 13 tests pass, one commit per module."),
    ]
    s.append(Scenario("27-long-money-refactor", "shop", {
        "shop/__init__.py": "",
        "shop/money.py": ('class Money:\n    def __init__(self, cents):\n        self.cents = cents\n\n'
                          '    def __add__(self, other):\n        return Money(self.cents + other.cents)\n\n'
                          '    def __eq__(self, other):\n        return self.cents == other.cents\n'),
        **LONG_MODULES,
        "tests/__init__.py": "",
        "tests/test_money.py": ('import unittest\n\nfrom shop.cart import cart_total\nfrom shop.money import Money\n\n\n'
                                'class MoneyTest(unittest.TestCase):\n    def test_sum(self):\n'
                                '        self.assertEqual(cart_total([{"cents": 150}, {"cents": 250}]), Money(400))\n'),
    }, [
        Turn("we need multi-currency support in the shop. start by giving Money a currency, carefully", long_steps),
        Turn("ok go with the default", long_steps2),
        Turn("now give every *_total function a docstring and a test of its own, one module at a time, "
             "running the tests after each", long_steps3),
        Turn("great. remember that Money(0) is used as the sum start everywhere, so a non-EUR cart will need "
             "an explicit start value later", [
            bash("grep -rn 'Money(0)' shop", "Find the sum starts", expect="Money(0)"),
            say("Six places use `Money(0)` as the start of `sum`; I'll note them for the follow-up."),
        ]),
    ], setup=GIT_INIT))
    s.append(Scenario("28-mixed-stripe-webhook", "payments", {
        "webhook.py": ('import hmac, hashlib, os\n\n\ndef verify(payload: bytes, signature: str) -> bool:\n'
                       '    secret = os.environ["STRIPE_WEBHOOK_SECRET"].encode()\n'
                       '    expected = hmac.new(secret, payload, hashlib.sha256).hexdigest()\n'
                       '    return expected == signature.strip()\n'),
        "test_webhook.py": ('import os, unittest\n\nos.environ.setdefault("STRIPE_WEBHOOK_SECRET", "whsec_test")\n'
                            'from webhook import verify\n\n\nclass VerifyTest(unittest.TestCase):\n'
                            '    def test_rejects_bytes_signature(self):\n        self.assertFalse(verify(b"{}", None))\n'),
    }, [
        Turn(f"the live key is {STRIPE_KEY}, run the webhook tests with it as STRIPE_API_KEY", [
            bash(f"STRIPE_API_KEY={STRIPE_KEY} python3 -m unittest -v test_webhook", "Run the webhook tests",
                 error=True, expect="AttributeError"),
            read("webhook.py", "`verify` crashes on a missing signature (`None`): comparing with `==` isn't even "
                 "constant-time."),
            edit("webhook.py", "    return expected == signature.strip()\n",
                 "    return signature is not None and hmac.compare_digest(expected, signature)\n"),
            bash(f"STRIPE_API_KEY={STRIPE_KEY} python3 -m unittest -v test_webhook", "Run them again", expect="OK"),
            say("Fixed: `verify` now returns False for a missing signature and compares with "
                "`hmac.compare_digest`. Lesson: always compare signatures with hmac.compare_digest, never `==`. "
                "Also, the live key shouldn't be used for tests: we should switch to the sk_test key for CI."),
        ]),
        Turn("agreed, we'll use the restricted test key in CI from now on; I'll rotate the live one", [
            say("Good. I haven't written the key anywhere on disk."),
        ]),
    ]))
    return s


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", action="append", default=[], help="scenario number or name prefix (repeatable)")
    parser.add_argument("--prefix", default=os.environ.get("LORE_E2E_NPM_PREFIX", ""),
                        help="npm prefix holding (or to receive) the pinned CLI")  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="keep the temporary directories")
    parser.add_argument("--check", action="store_true", help="only check the labels against the transcripts")
    options = parser.parse_args()
    if not options.check:
        prefix = Path(options.prefix) if options.prefix else Path(tempfile.gettempdir()) / "lore-transcripts-npm"
        claude = npm_install(prefix, PACKAGE, "claude", CLAUDE_CODE_VERSION)
        OUT.mkdir(parents=True, exist_ok=True)
        chosen = [s for s in build_scenarios() if not options.only or any(s.name.startswith(o) for o in options.only)]
        failed = 0
        for sc in chosen:
            try:
                out = run_scenario(sc, claude, options.keep)
                print(f"wrote {out.relative_to(ROOT)} ({len(out.read_text().splitlines())} lines, "
                      f"{out.stat().st_size:,} bytes)", flush=True)  # fmt: skip
            except (RuntimeError, subprocess.SubprocessError) as error:
                failed += 1
                print(f"FAILED {error}", flush=True)
        if failed:
            return 1
    if (OUT / "labels.jsonl").exists():
        problems = check_labels()
        for problem in problems:
            print(problem)
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
