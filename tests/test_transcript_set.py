"""The labelled Claude Code transcripts under tests/data/transcripts/ are complete and their labels hold.

The set is the held-out test set for session capture (issue 16). These tests check
the data only: every file parses, every label points at a transcript, and every
labelled substring is where the label says it is (a failure's in a tool call that
errored, a decision's or lesson's in what the user or the assistant said, an
observation's in a tool call's input), so a label cannot drift from its transcript.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

DIR = Path(__file__).resolve().parent / "data" / "transcripts"
KINDS = {"failure", "decision", "lesson", "observation"}
TRANSCRIPTS = sorted(DIR.glob("[0-9][0-9]-*.jsonl"))


def _labels() -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DIR / "labels.jsonl").read_text().splitlines() if line.strip()]


def _conversation(path: Path) -> dict[str, list[str]]:
    """The transcript's said text (prompts, assistant text), tool inputs, and errored calls (input + result)."""
    said: list[str] = []
    inputs: dict[str, str] = {}
    failed: list[str] = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record.get("type") not in ("user", "assistant"):
            continue
        content = (record.get("message") or {}).get("content")
        if isinstance(content, str):
            said.append(content)
            continue
        for block in content or []:
            kind = block.get("type")
            if kind == "text":
                said.append(block["text"])
            elif kind == "tool_use":
                inputs[block["id"]] = f"{block['name']} {json.dumps(block['input'], ensure_ascii=False)}"
            elif kind == "tool_result" and block.get("is_error"):
                result = block.get("content")
                result = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
                failed.append(f"{inputs.get(block['tool_use_id'], '')}\n{result}")
    return {"said": said, "inputs": list(inputs.values()), "failed": failed}


def test_the_set_is_big_and_varied_enough() -> None:
    labels = _labels()
    transcripts = TRANSCRIPTS
    assert len(transcripts) >= 20
    assert sorted(label["file"] for label in labels) == [p.name for p in transcripts], "one label line per transcript"
    having = Counter()
    for label in labels:
        for kind in {item["kind"] for item in label["expected"]}:
            having[kind] += 1
        having["secrets"] += bool(label["secrets"])
        having["negative"] += not label["expected"]
    assert having["failure"] >= 5 and having["decision"] >= 5 and having["lesson"] >= 3, having
    assert having["secrets"] >= 3 and having["negative"] >= 3, having
    assert any(len(p.read_text().splitlines()) >= 200 for p in transcripts), "a long session"
    assert sum(p.stat().st_size for p in DIR.iterdir()) < 2_000_000


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=lambda p: p.name)
def test_every_line_is_json_and_paths_are_stable(path: Path) -> None:
    lines = path.read_text().splitlines()
    assert lines
    for number, line in enumerate(lines, 1):
        try:
            json.loads(line)
        except ValueError as error:
            pytest.fail(f"{path.name}:{number}: {error}")
    text = path.read_text()
    assert "/tmp/txgen-" not in text and "/home/dev/projects/" in text


@pytest.mark.parametrize("label", _labels(), ids=lambda label: label["file"])
def test_labels_hold_in_their_transcript(label: dict[str, Any]) -> None:
    path = DIR / label["file"]
    assert path.exists(), label["file"]
    assert set(label) == {"file", "scenario", "expected", "secrets"} and label["scenario"]
    text = path.read_text()
    parts = _conversation(path)
    where = {"failure": parts["failed"], "decision": parts["said"], "lesson": parts["said"],
             "observation": parts["inputs"]}  # fmt: skip
    for item in label["expected"]:
        assert item["kind"] in KINDS and item["match"] and item["why"], item
        lowered = [needle.lower() for needle in item["match"]]
        assert all(needle in text.lower() for needle in lowered), item
        assert any(all(needle in place.lower() for needle in lowered) for place in where[item["kind"]]), (
            f"{label['file']}: no single {item['kind']} place holds all of {item['match']}")
    kinds = [item["kind"] for item in label["expected"]]
    assert kinds.count("observation") <= 1, "one observation per session"
    assert "failure" in kinds or not parts["failed"], f"{label['file']}: a tool call failed but no failure is labelled"
    assert "observation" in kinds or not any(k in kinds for k in ("failure", "decision", "lesson")) or not parts["inputs"], (
        f"{label['file']}: a session worth keeping that used tools needs its observation")
    for secret in label["secrets"]:
        assert len(secret) >= 12 and secret in text, f"{label['file']}: secret {secret[:8]}... not in the transcript"
