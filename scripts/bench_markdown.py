#!/usr/bin/env python3
"""Render a `python -m benchmarks --out FILE` JSON as the Markdown tables of docs/performance.md.

    python -m benchmarks --out bench-results.json && python scripts/bench_markdown.py bench-results.json
"""

from __future__ import annotations

import json
import sys
from typing import Any

LABELS = {"textbook": "textbook BM25", "grep": "grep -il", "bm25": "lore BM25 channel alone",
          "vector": "lore vector channel alone", "hyde": "lore HyDE channel alone", "default": "**lore defaults**",
          "cold": "lore prompt hook, cold path (BM25 reranked)"}  # fmt: skip
SET_TITLES = {"scifact": "BEIR SciFact (5,183 abstracts; 300 test queries)",
              "knownitem": "known-item questions over 5,000 git commits (47 answerable + 21 unanswerable test questions)",
              "memory": "memory regime: 8,000 short git memories, coding-agent prompts (140 + 39 test)",
              "memory-fresh": "memory regime, 200 fresh prompts written after every default was frozen (test only)",
              "demo": "the bundled demo data, coding-agent prompts (45 + 20 test)"}  # fmt: skip


def quality(results: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for name, data in results.items():
        test = data["splits"]["test"]
        measures = ["R@5", "R@10", "RR@10"] + (["nDCG@10"] if data.get("primary") == "nDCG@10" else [])
        out.append(f"**{SET_TITLES.get(name, name)}**, test split:\n")
        out.append("| system | " + " | ".join(m.replace("RR@10", "MRR@10") for m in measures) + " | gap flagged (answerable / unanswerable) |")
        out.append("| --- | " + " | ".join("---:" for _ in measures) + " | ---: |")
        for system, row in test["systems"].items():
            gap = "-"
            if "gap_answerable" in row:
                gap = f"{row['gap_answerable']:.0%} / {row['gap_unanswerable']:.0%}"
            out.append(f"| {LABELS.get(system, system)} | " + " | ".join(f"{row[m]:.3f}" for m in measures) + f" | {gap} |")
        margins = test.get("margins", {})
        if margins:
            parts = []
            for m in measures:
                g = margins[m]
                noise = " (noise)" if g["lo"] <= 0 <= g["hi"] else ""
                parts.append(f"{m.replace('RR@10', 'MRR@10')} {g['diff']:+.3f} [{g['lo']:+.3f}, {g['hi']:+.3f}]{noise}")
            out.append("\nDefaults minus textbook BM25, 95% paired bootstrap: " + "; ".join(parts) + ".\n")
    return out


def duplicates(data: dict[str, Any]) -> list[str]:
    out = ["| detector | dev precision | dev recall | test precision | test recall | test paraphrase recall | test specifics called duplicate | test contradictions called duplicate |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for name, row in data["detectors"].items():
        dev, test = row["dev"], row["test"]
        out.append(f"| {name} | {dev['precision']:.2f} | {dev['recall']:.2f} | {test['precision']:.2f} | {test['recall']:.2f} | "
                   f"{test['paraphrase_recall']:.2f} | {test['specifics_called_duplicate']:.2f} | {test['contradictions_called_duplicate']:.2f} |")  # fmt: skip
    return out


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as handle:
        data = json.load(handle)
    lines: list[str] = []
    if "quality" in data:
        lines += quality(data["quality"])
    if "duplicates" in data:
        lines += duplicates(data["duplicates"])
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
