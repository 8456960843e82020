"""The prompt hook's tiers as an agent meets them: full items, pointers or nothing; what it logs; a compaction."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from lore.context import POINTER_HEADER

# Written for these tests (no evaluation stream holds them): the README's question, a short
# imperative task the demo's backoff decision answers, and one no demo memory answers.
README_QUESTION = "how do we retry failed stripe charges"
TASK = "add jittered backoff to the charge call"
OFF_TOPIC = "explain the CAP theorem briefly"
BACKOFF = "dec-d0a58788"


def hook(prompt: str, session: str, cwd: Path, event: str = "UserPromptSubmit") -> str:
    """The block a real `lore hook prompt` process hands for ``prompt`` ("" for nothing)."""
    payload = json.dumps({"session_id": session, "cwd": str(cwd), "hook_event_name": event, "prompt": prompt})
    done = subprocess.run([sys.executable, "-P", "-m", "lore", "hook", "prompt"], input=payload.encode(), capture_output=True,
                          env={**os.environ, "LORE_HOOK_DEADLINE_MS": "20000"}, timeout=60)  # fmt: skip
    assert done.returncode == 0 and done.stderr == b""
    return json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"] if done.stdout else ""


def lore_index() -> None:
    """`lore index` as a user runs it once the data is there: it also measures the store's null evidence."""
    done = subprocess.run([sys.executable, "-P", "-m", "lore", "index"], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr


def prompt_log() -> list[dict[str, Any]]:
    path = Path(os.environ["LORE_CACHE_DIR"]) / "hook-prompts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_the_readme_question_and_a_short_task_reach_the_agent_and_an_off_topic_prompt_gets_nothing(
        demo_indexed: Any, tmp_path: Path) -> None:  # fmt: skip
    cwd = tmp_path / "somewhere"  # a directory lore has no memory of: no record is "another project's"
    cwd.mkdir()
    lore_index()
    readme = hook(README_QUESTION, "s-readme", cwd)
    task = hook(TASK, "s-task", cwd)
    assert BACKOFF in readme and BACKOFF in task
    assert hook(OFF_TOPIC, "s-off", cwd) == ""
    for block in (readme, task):  # a pointer is its title and id on a line of its own, under its heading
        if POINTER_HEADER in block:
            pointers = block.split(POINTER_HEADER)[1].strip().splitlines()[:-1]
            assert pointers and all(line.startswith("- ") and line.endswith(")") and len(line) <= 120 for line in pointers)
    # The hook's own log: one line a prompt, its tier and the characters it added, never the prompt's words.
    logged = prompt_log()
    assert [entry["tier"] for entry in logged][-1] == "none" and len(logged) == 3
    assert [entry["chars"] for entry in logged] == [len(readme), len(task), 0]
    assert not any(word in json.dumps(logged) for word in ("stripe", "jittered", "theorem"))
    assert all(set(entry) == {"ts", "route", "tier", "chars", "full", "pointers"} for entry in logged)


def test_a_pointer_opened_with_show_is_counted_and_a_compaction_lets_the_memory_come_again(
        demo_indexed: Any, tmp_path: Path) -> None:  # fmt: skip
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    lore_index()
    first = hook(README_QUESTION, "s-1", cwd)
    assert BACKOFF in first
    handed = prompt_log()[-1]
    pointed = handed["pointers"]
    assert handed["tier"] in ("full", "pointer") and (pointed or handed["full"])
    # The same question again in the same session: what the agent already holds does not come again.
    again = hook(README_QUESTION, "s-1", cwd)
    assert BACKOFF not in again
    # Compaction drops what the session held: the memory may come again.
    compact = subprocess.run([sys.executable, "-P", "-m", "lore", "hook", "pre-compact"], capture_output=True, timeout=60,
                             input=json.dumps({"session_id": "s-1", "cwd": str(cwd), "hook_event_name": "PreCompact"}).encode())  # fmt: skip
    assert compact.returncode == 0
    assert BACKOFF in hook(README_QUESTION, "s-1", cwd)
    if pointed:
        shown = subprocess.run([sys.executable, "-P", "-m", "lore", "show", pointed[0]], capture_output=True, timeout=60)
        assert shown.returncode == 0
        doctor = subprocess.run([sys.executable, "-P", "-m", "lore", "doctor", "--json"], capture_output=True, timeout=60)
        summary = json.loads(doctor.stdout)["agent_side"]["prompts"]
        assert summary["pointers_opened"] == 1 and summary["pointers_handed"] >= 1 and summary["prompts"] == 3
