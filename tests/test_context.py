"""`lore context`: the agent-ready block, its formats, budgets, evidence gap and optional synthesis."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lore import capture
from lore.capture import WriteOptions
from lore.context import (
    FENCE_CLOSE,
    FENCE_NOTE,
    FENCE_OPEN,
    GAP_LINE,
    MIN_SHARE_OF_TOP,
    POINTER_HEADER,
    POINTER_LINE_CHARS,
)
from lore.rank.fusion import RELEVANCE_SHARPNESS
from lore.store import Store

PLAIN = WriteOptions(check_duplicates=False)
QUERY = "add jittered exponential backoff around the payment provider charge call"
# Nonsense and off-topic. (Near misses can sit above the cosine floor calibrated on the
# bench sets' dev splits: docs/search.md, "Evidence gap".)
GAP_QUERIES = ["zxqv blorf quantum giraffe", "what is a good sourdough starter recipe for a cold kitchen"]
MARKER = "…"
SUMMARY = "Payment calls retry with jittered exponential backoff and send idempotency keys."

BACKOFF = ("Wrap payment-provider calls in exponential backoff with full jitter",
           "A Stripe degradation turned synchronized retry attempts into a thundering herd that kept "
           "the provider down for forty minutes; spreading the attempts with full jitter and capping "
           "the delay at thirty seconds let the provider recover while our checkout queue drained "
           "steadily. The first attempt waits between zero and one second, each further attempt "
           "doubles the ceiling, and after six attempts the charge is parked for a human to look at "
           "instead of hammering the provider again. The delays live in one helper that every "
           "provider client shares, so a new integration gets the same behaviour without copying the "
           "arithmetic.")  # fmt: skip
WEBHOOK = ("Process payment provider webhooks from a durable queue",
           "Charge webhooks arrived during deploys and were dropped; a durable queue with retries and"
           " backoff lets the consumer catch up after a restart without losing a single charge event."
           " The handler acknowledges only after the ledger write commits, so a crash between the two"
           " replays the event instead of losing it, and the ledger ignores an event id it has "
           "already applied.")  # fmt: skip
IDEMPOTENCY = ("Idempotency keys for payment calls",
               "Send a stable idempotency key with every charge request so a retried attempt after a "
               "timeout cannot double-charge the customer; derive the key from the order id and the "
               "attempt purpose, never from a random value generated per retry. Keys are kept for "
               "twenty-four hours on the provider side, which covers every retry schedule we run, and"
               " the key is logged next to the charge so support can trace a customer complaint about"
               " a duplicate to the exact attempt that caused it.")  # fmt: skip
# Related, from another project (no project boost). The project boost only breaks ties
# between records of similar evidence, so TIMEOUT, which shares most words with QUERY,
# still ranks second.
BREAKER = ("Open a circuit breaker around the payment provider client after repeated charge failures",
           "When the provider is down, retrying every charge only lengthens the outage: after five "
           "failed charge attempts in a minute the client stops calling for thirty seconds and the "
           "checkout shows a clear retry-later message instead of spinning.")  # fmt: skip
TIMEOUT = ("Give every payment provider call a ten second timeout before the backoff retries it",
           "A charge call that hangs holds a worker and hides the failure from the backoff logic; a "
           "bounded timeout turns a hang into an ordinary failed attempt that the jittered retry "
           "schedule already knows how to handle.")  # fmt: skip
NOTES = ["office plants need watering on Fridays", "the lunch menu rotates weekly",
         "parking permits renew in January", "the design team prefers Figma comments",
         "standup moved to ten thirty", "the coffee machine descales monthly",
         "holiday calendar lives in the wiki", "new laptops ship with sixteen gigabytes"]

MARKDOWN_LINE = re.compile(r"^- \[(?P<type>[a-z-]+)\] (?P<text>.+) \(confidence: (?P<conf>\d\.\d), "
                           r"age: (?P<age>\d+(?:min|h|d|mo|y)), id: (?P<id>[a-z]+-[0-9a-z-]+)\)$")  # fmt: skip
COMPACT_LINE = re.compile(r"^- (?P<text>.+) \((?P<type>[a-z_-]+) (?P<id>[a-z]+-[0-9a-z-]+), "
                          r"conf (?P<conf>\d\.\d), (?P<age>\d+(?:min|h|d|mo|y))\)$")  # fmt: skip
POINTER_LINE = re.compile(r"^- (?P<text>.+) \((?P<id>[a-z]+-[0-9a-z-]+)\)$")


@pytest.fixture
def seeded(data_dir: Path) -> dict[str, str]:
    """Five records about payment retries (one three days old), one about Postgres, eight unrelated notes."""
    three_days_ago = datetime.now(UTC) - timedelta(days=3, hours=2)
    old = Store(data_dir, actor="test", clock=lambda: three_days_ago)
    old.init()
    store = Store(data_dir, actor="test")
    project = "acme-api"
    backoff = capture.remember(old, BACKOFF[0], project=project, rationale=BACKOFF[1], importance=4,
                               options=PLAIN)  # fmt: skip
    webhook = capture.remember(store, WEBHOOK[0], project=project, rationale=WEBHOOK[1], confidence=0.7,
                               options=PLAIN)  # fmt: skip
    idempotency = capture.learn(store, IDEMPOTENCY[0], project=project, solution=IDEMPOTENCY[1],
                                confidence=0.6, options=PLAIN)  # fmt: skip
    pool = capture.remember(store, "Use PgBouncer transaction pooling for billing Postgres", project=project,
                            rationale="asyncpg exhausted RDS connections during the March spike",
                            options=PLAIN)  # fmt: skip
    breaker = capture.remember(store, BREAKER[0], project="payments-edge", rationale=BREAKER[1], confidence=0.5,
                               options=PLAIN)  # fmt: skip
    timeout = capture.remember(store, TIMEOUT[0], project="payments-edge", rationale=TIMEOUT[1], confidence=0.5,
                               options=PLAIN)  # fmt: skip
    ids = {"backoff": backoff.record.id, "webhook": webhook.record.id, "idempotency": idempotency.record.id,
           "pool": pool.record.id, "breaker": breaker.record.id, "timeout": timeout.record.id}  # fmt: skip
    for note in NOTES:
        capture.observe(store, f"Team note: {note}", project="other", options=PLAIN)
    return ids


def full_text(pair: tuple[str, str]) -> str:
    return f"{pair[0]}: {pair[1]}"


# What each record contributes for QUERY since the block carries the title and the body's
# sentences that hold the query's other words (issue: 600-character rationales filled the
# budget after two items): the title, then, in body order, what fits 230 characters.
SNIPPETS = {
    "backoff": (f"{BACKOFF[0]} — The first attempt waits between zero and one second, each further attempt "
                "doubles the ceiling, and after six attempts the charge is parked for a human to look…"),
    "timeout": (f"{TIMEOUT[0]} — a bounded timeout turns a hang into an ordinary failed attempt that the "
                "jittered retry schedule already knows how to handle."),
    "breaker": (f"{BREAKER[0]} — When the provider is down, retrying every charge only lengthens the outage: "
                "after five failed charge attempts in a minute the client stops…"),
}  # fmt: skip


def item_lines(output: str) -> list[str]:
    """The full items' lines (above the pointers' heading)."""
    return [line for line in output.split(POINTER_HEADER)[0].splitlines() if line.startswith("- ")]


def pointer_lines(output: str) -> list[str]:
    _, heading, pointers = output.partition(POINTER_HEADER)
    return [line for line in pointers.splitlines() if line.startswith("- ")] if heading else []


def printed_ids(output: str, fmt: str = "markdown") -> list[str]:
    """Every id the block shows, full items first, then pointers."""
    pattern = MARKDOWN_LINE if fmt == "markdown" else COMPACT_LINE
    full = [pattern.match(line) for line in item_lines(output)]
    pointers = [POINTER_LINE.match(line) for line in pointer_lines(output)]
    assert all(full) and all(pointers), output
    return [m["id"] for m in full + pointers]  # type: ignore[index]


def context(cli, *args: str):  # type: ignore[no-untyped-def]
    result = cli("context", *args)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


def full_texts(cli) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """Every item's unshortened text by id, from a budget nothing exceeds."""
    payload = json.loads(context(cli, QUERY, "--format", "json", "--budget-tokens", "100000").stdout)
    return {item["id"]: item["text"] for item in payload["items"]}


def assert_word_boundary_prefix(short: str, full: str) -> None:
    """``short`` is ``full`` cut at a space (trailing punctuation dropped), never inside a word."""
    assert short and full.startswith(short), (short, full)
    cuts = {full[:i].rstrip(" ,;:.-") for i, ch in enumerate(full) if ch == " "}
    assert short in cuts, f"cut mid-word: {short!r}"


# -- formats ----------------------------------------------------------------------------


def test_markdown_block_exact_shape(cli, seeded: dict[str, str]) -> None:
    result = context(cli, QUERY, "--max-items", "3")
    # The first hit in full (its evidence clears the bar); the next ones as pointers, titles only.
    assert result.stdout == (
        "## Relevant Memories\n"
        f"- [decision] {SNIPPETS['backoff']} (confidence: 0.8, age: 3d, id: {seeded['backoff']})\n"
        f"{POINTER_HEADER}\n"
        f"- {TIMEOUT[0]} ({seeded['timeout']})\n"
        f"- {BREAKER[0]} ({seeded['breaker']})\n"
    )
    assert result.stderr == ""


def test_compact_block_exact_shape(cli, seeded: dict[str, str]) -> None:
    result = context(cli, QUERY, "--max-items", "3", "--format", "compact")
    assert result.stdout == (
        "## Relevant Memories\n"
        f"- {SNIPPETS['backoff']} (decision {seeded['backoff']}, conf 0.8, 3d)\n"
        f"{POINTER_HEADER}\n"
        f"- {TIMEOUT[0]} ({seeded['timeout']})\n"
        f"- {BREAKER[0]} ({seeded['breaker']})\n"
    )


def test_json_document_keys_and_items(cli, seeded: dict[str, str]) -> None:
    payload = json.loads(context(cli, QUERY, "--max-items", "3", "--format", "json").stdout)
    assert list(payload) == ["query", "evidence_gap", "gap", "budget_chars", "items", "synthesis", "notices"]
    assert payload["query"] == QUERY
    assert payload["evidence_gap"] is False and payload["gap"]["evidence_gap"] is False
    assert (payload["budget_chars"], payload["synthesis"], payload["notices"]) == (2000, None, [])
    keys = ["id", "type", "tier", "text", "confidence", "age", "score"]
    assert [list(item) for item in payload["items"]] == [keys] * 3
    assert [(i["id"], i["type"], i["tier"], i["text"], i["confidence"], i["age"]) for i in payload["items"]] == [
        (seeded["backoff"], "decision", "full", SNIPPETS["backoff"], 0.8, "3d"),
        (seeded["timeout"], "decision", "pointer", TIMEOUT[0], 0.5, "0min"),
        (seeded["breaker"], "decision", "pointer", BREAKER[0], 0.5, "0min"),
    ]
    scores = [item["score"] for item in payload["items"]]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0


def test_invalid_format_is_a_usage_error(cli, seeded: dict[str, str]) -> None:
    result = cli("context", QUERY, "--format", "yaml")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "unknown format 'yaml'" in result.stderr and "markdown, compact, json" in result.stderr


# -- budgets and item counts ----------------------------------------------------------------


def test_filler_far_below_the_best_item_is_left_out(cli, seeded: dict[str, str]) -> None:
    payload = json.loads(context(cli, QUERY, "--format", "json", "--max-items", "20", "--budget-tokens", "100000").stdout)
    listed = [item["id"] for item in payload["items"]]
    # At most three full items and three pointers, all among the five payment records.
    assert set(listed) <= {seeded[k] for k in ("backoff", "webhook", "idempotency", "breaker", "timeout")}
    assert 1 <= sum(i["tier"] == "full" for i in payload["items"]) <= 3 and sum(i["tier"] == "pointer" for i in payload["items"]) <= 3
    scores = [item["score"] for item in payload["items"]]
    assert (min(scores) / max(scores)) ** (1 / RELEVANCE_SHARPNESS) >= MIN_SHARE_OF_TOP
    search = json.loads(cli("search", QUERY, "--json", "--limit", "20").stdout)["results"]
    assert len(search) > len(listed)  # search still lists the weak tail; the agent's block does not


def test_default_budget_is_500_tokens_and_5_items(cli, seeded: dict[str, str]) -> None:
    unbounded = context(cli, QUERY, "--budget-tokens", "100000").stdout
    assert len(item_lines(unbounded)) >= 1 and len(item_lines(unbounded)) + len(pointer_lines(unbounded)) <= 5
    default = context(cli, QUERY).stdout
    assert len(default) <= 500 * 4
    # The items cut to what serves the query, and the pointers, fit the default budget whole.
    assert default == unbounded
    tight = context(cli, QUERY, "--budget-tokens", "60").stdout
    assert len(unbounded) > 60 * 4 >= len(tight)  # a smaller budget has to bite
    lines = item_lines(tight) + pointer_lines(tight)
    assert 1 <= len(lines) < len(item_lines(unbounded)) + len(pointer_lines(unbounded))
    assert tight.startswith("## Relevant Memories\n")
    # whole items first; only the last full one may be shortened, and pointers go before it does
    assert item_lines(tight)[:-1] == item_lines(unbounded)[: len(item_lines(tight)) - 1]


@pytest.mark.parametrize("tokens", [10, 25, 40, 60, 120, 250])
@pytest.mark.parametrize("fmt", ["markdown", "compact"])
def test_small_budgets_are_never_exceeded_nor_words_cut(cli, seeded: dict[str, str], tokens: int,
                                                        fmt: str) -> None:  # fmt: skip
    texts = full_texts(cli)
    out = context(cli, QUERY, "--budget-tokens", str(tokens), "--format", fmt).stdout
    assert len(out) <= tokens * 4
    pattern = MARKDOWN_LINE if fmt == "markdown" else COMPACT_LINE
    for line in pointer_lines(out):
        assert POINTER_LINE.match(line) and len(line) <= POINTER_LINE_CHARS, line
    for line in item_lines(out):
        found = pattern.match(line)
        assert found, line
        text, full = found["text"], texts[found["id"]]
        if text != full:
            assert text.endswith(MARKER) and not text.endswith(" " + MARKER), line
            assert_word_boundary_prefix(text.removesuffix(MARKER), full)
    assert not out or item_lines(out) or pointer_lines(out)  # never a bare heading


def test_a_tight_budget_shortens_the_top_item_with_the_marker(cli, seeded: dict[str, str]) -> None:
    out = context(cli, QUERY, "--budget-tokens", "40").stdout
    lines = item_lines(out)
    assert len(lines) == 1
    found = MARKDOWN_LINE.match(lines[0])
    assert found and found["id"] == seeded["backoff"] and found["text"].endswith(MARKER)
    assert_word_boundary_prefix(found["text"].removesuffix(MARKER), SNIPPETS["backoff"].removesuffix(MARKER))
    assert len(found["text"]) > 24  # shortened, not dropped


@pytest.mark.parametrize("count", [1, 2, 4])
def test_max_items_limits_the_block(cli, seeded: dict[str, str], count: int) -> None:
    everything = printed_ids(context(cli, QUERY, "--budget-tokens", "100000").stdout)
    limited = context(cli, QUERY, "--budget-tokens", "100000", "--max-items", str(count)).stdout
    assert printed_ids(limited) == everything[:count]
    payload = json.loads(context(cli, QUERY, "--format", "json", "--max-items", str(count)).stdout)
    assert len(payload["items"]) == count


def test_json_lists_only_the_items_that_fit_the_budget(cli, seeded: dict[str, str]) -> None:
    """The budget is never exceeded, whatever the format: JSON lists what the block kept (as MCP's does)."""
    block = context(cli, QUERY, "--budget-tokens", "40").stdout
    kept = [MARKDOWN_LINE.match(line)["id"] for line in item_lines(block)]  # type: ignore[index]
    assert len(kept) == 1
    payload = json.loads(context(cli, QUERY, "--budget-tokens", "40", "--format", "json").stdout)
    assert payload["budget_chars"] == 160
    assert [item["id"] for item in payload["items"]] == kept


@pytest.mark.parametrize("fmt", ["markdown", "compact", "json"])
def test_every_printed_id_resolves_with_show(cli, seeded: dict[str, str], fmt: str) -> None:
    out = context(cli, QUERY, "--format", fmt, "--budget-tokens", "100000").stdout
    if fmt == "json":
        items = [(i["id"], i["text"]) for i in json.loads(out)["items"]]
    else:
        pattern = MARKDOWN_LINE if fmt == "markdown" else COMPACT_LINE
        items = [(m["id"], m["text"]) for m in map(pattern.match, item_lines(out)) if m]
        items += [(m["id"], m["text"]) for m in map(POINTER_LINE.match, pointer_lines(out)) if m]
        assert len(items) == len(item_lines(out)) + len(pointer_lines(out))
    assert 3 <= len(items) <= 6 and seeded["backoff"] in dict(items)
    for record_id, text in items:
        shown = cli("show", record_id, "--json")
        assert shown.exit_code == 0, shown.stderr
        record = json.loads(shown.stdout)
        assert record["id"] == record_id
        title = record.get("title") or record.get("decision") or record.get("name") or record.get("content")
        assert title and text.startswith(title[:20]), (text, record)


# -- evidence gap ---------------------------------------------------------------------------


@pytest.mark.parametrize("query", GAP_QUERIES)
def test_evidence_gap_prints_the_gap_line_above_pointers_only(cli, seeded: dict[str, str], query: str) -> None:
    # Someone asked: the best candidates come, as titles only, under the gap line.
    plain = context(cli, query)
    assert plain.stderr == "" and plain.stdout.startswith(GAP_LINE + "\n" + POINTER_HEADER + "\n")
    assert not item_lines(plain.stdout) and 1 <= len(pointer_lines(plain.stdout)) <= 3
    assert context(cli, query, "--gap-line").stdout == plain.stdout
    payload = json.loads(context(cli, query, "--format", "json").stdout)
    assert payload["evidence_gap"] is True and payload["items"] and {i["tier"] for i in payload["items"]} == {"pointer"}


# -- synthesis ------------------------------------------------------------------------------


def fake_llm(tmp_path: Path, body: str) -> Path:
    """A real executable that logs its argv and stdin, then runs ``body``."""
    log = tmp_path / "llm-calls.jsonl"
    script = tmp_path / "fake-llm"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        "prompt = sys.stdin.read()\n"
        f"with open({str(log)!r}, 'a', encoding='utf-8') as handle:\n"
        "    handle.write(json.dumps({'argv': sys.argv[1:], 'stdin': prompt}) + '\\n')\n" + body
    )
    script.chmod(0o755)
    return script


def llm_calls(tmp_path: Path) -> list[dict]:
    log = tmp_path / "llm-calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_synthesize_without_llm_cmd_is_a_notice(cli, seeded: dict[str, str]) -> None:
    baseline = context(cli, QUERY).stdout
    result = context(cli, QUERY, "--synthesize")
    assert result.stdout == baseline
    notice = result.stderr.strip()
    assert notice and "\n" not in notice and "LORE_LLM_CMD" in notice
    payload = json.loads(context(cli, QUERY, "--synthesize", "--format", "json").stdout)
    assert payload["synthesis"] is None and payload["notices"] == [notice]


def test_synthesize_prints_the_summary_above_the_excerpts(
    cli, seeded: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = fake_llm(tmp_path, f"print({SUMMARY!r})\n")
    monkeypatch.setenv("LORE_LLM_CMD", f"{shlex.quote(str(script))} --style brief")
    result = context(cli, QUERY, "--synthesize")
    assert result.stderr == ""
    head, _, block = result.stdout.partition("\n\n")
    assert head == f"Summary: {SUMMARY}"
    assert block.startswith("## Relevant Memories\n")
    printed = [MARKDOWN_LINE.match(line) for line in item_lines(block)] + [POINTER_LINE.match(line) for line in pointer_lines(block)]
    assert printed and all(printed)
    # The synthesis call got the query and every printed excerpt, with its id, on stdin.
    ids = [m["id"] for m in printed]  # type: ignore[index]
    synthesis = [c for c in llm_calls(tmp_path) if all(i in c["stdin"] for i in ids)]
    assert len(synthesis) == 1
    assert synthesis[0]["argv"] == ["--style", "brief"]
    assert QUERY in synthesis[0]["stdin"]
    for found in printed:
        assert found["text"].removesuffix(MARKER) in synthesis[0]["stdin"]  # type: ignore[index]
    payload = json.loads(context(cli, QUERY, "--synthesize", "--format", "json").stdout)
    assert payload["synthesis"] == SUMMARY and payload["notices"] == []


@pytest.mark.parametrize("tokens", [60, 150, 500])
def test_the_summary_counts_against_the_budget(
    cli, seeded: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tokens: int
) -> None:
    long_summary = " ".join([SUMMARY] * 40)
    monkeypatch.setenv("LORE_LLM_CMD", shlex.quote(str(fake_llm(tmp_path, f"print({long_summary!r})\n"))))
    out = context(cli, QUERY, "--synthesize", "--budget-tokens", str(tokens)).stdout
    assert len(out.rstrip("\n")) <= tokens * 4
    head, _, block = out.partition("\n\n")
    assert head.startswith("Summary: ") and head.endswith(MARKER)
    assert long_summary.startswith(head.removeprefix("Summary: ").removesuffix(MARKER))
    assert len(head) <= tokens * 4 // 2
    if block:
        assert block.startswith("## Relevant Memories\n")
    payload = json.loads(context(cli, QUERY, "--synthesize", "--budget-tokens", str(tokens), "--format", "json").stdout)
    assert payload["synthesis"] == head.removeprefix("Summary: ")
    assert [i["id"] for i in payload["items"]] == (printed_ids(block) if block else [])


def test_synthesize_without_the_flag_prints_no_summary(
    cli, seeded: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = fake_llm(tmp_path, f"print({SUMMARY!r})\n")
    monkeypatch.setenv("LORE_LLM_CMD", shlex.quote(str(script)))
    result = context(cli, QUERY)
    assert "Summary:" not in result.stdout and SUMMARY not in result.stdout
    assert result.stdout.startswith("## Relevant Memories\n") and result.stderr == ""
    assert not any("Excerpts" in c["stdin"] or seeded["backoff"] in c["stdin"] for c in llm_calls(tmp_path))


@pytest.mark.parametrize("kind", ["fails", "missing", "silent"])
def test_a_broken_llm_cmd_is_a_notice_not_an_error(
    cli, seeded: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    baseline = context(cli, QUERY).stdout
    if kind == "fails":
        command = str(fake_llm(tmp_path, "print('half an answer')\nsys.exit(1)\n"))
    elif kind == "silent":
        command = str(fake_llm(tmp_path, ""))
    else:
        command = str(tmp_path / "no-such-llm")
    monkeypatch.setenv("LORE_LLM_CMD", shlex.quote(command))
    result = context(cli, QUERY, "--synthesize")
    assert result.stdout == baseline  # excerpts still printed, no summary
    assert "half an answer" not in result.stdout
    notice = result.stderr.strip()
    assert notice.startswith("synthesis failed") and "\n" not in notice
    if kind == "fails":
        assert "exited 1" in notice
    if kind != "missing":
        assert llm_calls(tmp_path)


# -- the prompt hook shares the assembly ----------------------------------------------------


def test_hook_injects_the_same_assembly_within_1500_characters(cli, seeded: dict[str, str]) -> None:
    asked = context(cli, QUERY, "--format", "compact", "--budget-tokens", "100000").stdout
    event = json.dumps({"session_id": "s1", "cwd": str(Path.cwd()), "hook_event_name": "UserPromptSubmit",
                        "prompt": QUERY})  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "lore", "hook", "prompt"], input=event.encode(),
                          capture_output=True, timeout=60,  # the whole pipeline, as `lore context` runs it
                          env={**os.environ, "LORE_HOOK_DEADLINE_MS": "20000", "LORE_HOOK_COLD": "full"})  # fmt: skip
    assert (done.returncode, done.stderr) == (0, b"")
    injected = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert len(injected) <= 1500
    lines = injected.split("\n")
    assert lines[:2] == [FENCE_OPEN, FENCE_NOTE] and lines[-1] == FENCE_CLOSE
    block = "\n".join(lines[2:-1])
    # The hook's decision is its own (nobody asked: its thresholds are higher), its lines the same assembly:
    # each full item the asked block's line for it, each pointer its title and id.
    asked_full = {COMPACT_LINE.match(line)["id"]: line for line in item_lines(asked)}  # type: ignore[index]
    for line in item_lines(block):
        found = COMPACT_LINE.match(line)
        assert found and found["id"] in asked_full
        if line != asked_full[found["id"]]:
            assert found["text"].endswith(MARKER)
    assert printed_ids(block, "compact") and set(printed_ids(block, "compact")) <= set(printed_ids(asked, "compact"))


def test_a_command_that_outlives_its_timeout_is_killed_with_its_children(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    from lore import llm

    pids = tmp_path / "pids"
    script = tmp_path / "slow-llm"
    # A wrapper that starts a child (as `ollama run` would) and waits on it.
    script.write_text(f"#!/bin/sh\nsleep 30 &\necho $! > {pids}\nwait\n")
    script.chmod(0o755)
    # 2 s leaves the wrapper time to start its child even on a loaded machine.
    reply = llm.ask("anything", timeout=2.0, command=str(script))
    assert reply.text is None and reply.failure == "LORE_LLM_CMD gave no answer within 2 s"
    child = int(pids.read_text())
    stat = Path(f"/proc/{child}/stat")

    def running() -> bool:
        # Gone, or a zombie waiting for init to reap it: either way no longer running.
        try:
            return stat.read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        except (FileNotFoundError, ProcessLookupError):
            return False

    # SIGKILL is delivered asynchronously: poll (a loaded machine may take a moment), never sleep blindly.
    deadline = time.monotonic() + 10.0
    while running() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not running(), stat.read_text()
