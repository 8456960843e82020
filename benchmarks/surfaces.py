"""How many characters each agent surface hands the model, at its defaults, on the bundled demo data.

Surfaces: the prompt hook's block (``additionalContext``), the session-start block,
and every MCP tool called through the SDK server's own call path with its default
arguments. For an MCP result two sizes matter: its text and its structured content
serialised as JSON. Claude Code hands the model ``JSON.stringify(structuredContent)``
whenever a result has structured content, and the text otherwise, so "to the model"
is the first when present. The demo prompts are the 130 coding-agent prompts of the
demo evaluation set (docs/evaluation.md); the data is a copy of ``data/``.
"""

from __future__ import annotations

import json
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Progress = Callable[[str], None]


def _quiet(message: str) -> None:
    return None


def _stats(values: list[int]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"n": len(ordered), "p50": int(statistics.median(ordered)), "p95": p95, "max": ordered[-1],
            "mean": round(statistics.fmean(ordered), 1)}  # fmt: skip


def _js_json(value: Any) -> str:
    """What JavaScript's JSON.stringify makes of a value (no spaces, non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def measure(work: Path, progress: Progress = _quiet, prompt_limit: int | None = None,
            start_runs: int = 10) -> dict[str, Any]:  # fmt: skip
    """Sizes per surface, and `lore mcp`'s start over ``start_runs`` rounds; logs stay in ``work``."""
    from benchmarks import environment

    with environment(LORE_STATE_DIR=str(work / "surfaces-state"), LORE_CACHE_DIR=str(work / "surfaces-cache")):
        return _measure(work, progress, prompt_limit, start_runs)


def _measure(work: Path, progress: Progress, prompt_limit: int | None, start_runs: int) -> dict[str, Any]:
    from benchmarks import demo_dir
    from benchmarks import locations as bench_locations
    from benchmarks.corpora import read_jsonl
    from benchmarks.sets import data_file
    from lore.agent.hook import DEFAULT_BUDGET, hook_output, is_trivial
    from lore.agent.prompt import context_for_prompt
    from lore.agent.session import session_start_text
    from lore.index.manager import IndexManager
    from lore.search import SearchSession
    from lore.store import Store

    data_dir, index_dir = work / "surfaces-data", work / "surfaces-index"
    shutil.copytree(demo_dir(), data_dir)
    locations = bench_locations(data_dir, index_dir)
    progress("surfaces: indexing a copy of the demo data")
    IndexManager(locations).build()
    prompts = [q["question"] for q in read_jsonl(data_file("demo_questions.jsonl"))][:prompt_limit]
    session = SearchSession(locations)
    result: dict[str, Any] = {"records": len(Store(data_dir).load().records), "prompts": len(prompts),
                              "budget_chars": DEFAULT_BUDGET}  # fmt: skip

    progress(f"surfaces: the prompt hook's block for {len(prompts)} prompts")
    blocks, outputs, skipped = [], [], 0
    for prompt in prompts:
        if is_trivial(prompt):
            skipped += 1
            continue
        text = context_for_prompt(session, prompt, None, DEFAULT_BUDGET, None).text
        if text:
            blocks.append(len(text))
            outputs.append(len(hook_output("UserPromptSubmit", text)))
    result["hook block"] = {**_stats(blocks), "injected": len(blocks), "trivial": skipped,
                            "hook stdout": _stats(outputs)}  # fmt: skip

    projects = sorted({r.project for r in Store(data_dir).load().records.values() if r.project})
    starts = [len(text) for text in (session_start_text(locations, p, DEFAULT_BUDGET) for p in projects) if text]
    result["session-start block"] = {**_stats(starts), "projects": len(projects)}

    try:
        result["mcp"] = _mcp_sizes(locations, prompts, progress)
    except ImportError as error:
        result["mcp"] = {"note": f"not measured: the mcp extra is not installed ({error})"}
        return result
    from benchmarks import mcpstart

    progress("surfaces: lore mcp's start, whole process")
    result["mcp start"] = mcpstart.measure(data_dir, work, runs=start_runs, progress=progress)
    return result


def _mcp_sizes(locations: Any, prompts: list[str], progress: Progress) -> dict[str, Any]:
    import anyio

    from lore.agent.mcp import LoreMCP, build_server

    server = build_server(LoreMCP(locations))
    sizes: dict[str, dict[str, list[int]]] = {}
    timings: dict[str, list[float]] = {}

    def record(name: str, result: Any, started: float) -> dict[str, Any]:
        data = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        text = "".join(block.get("text", "") for block in data.get("content", []) if block.get("type") == "text")
        structured = data.get("structuredContent")
        entry = sizes.setdefault(name, {"text": [], "structured": [], "to model": []})
        entry["text"].append(len(text))
        if structured is not None:
            entry["structured"].append(len(_js_json(structured)))
        entry["to model"].append(len(_js_json(structured)) if structured is not None else len(text))
        timings.setdefault(name, []).append((time.perf_counter() - started) * 1000)
        return data

    async def call(name: str, arguments: dict[str, Any], label: str | None = None) -> dict[str, Any]:
        started = time.perf_counter()
        return record(label or name, await server.call_tool(name, arguments), started)

    async def main() -> None:
        for index, prompt in enumerate(prompts):
            found = await call("search", {"query": prompt})
            await call("search", {"query": prompt, "verbose": True}, "search (verbose=true)")
            await call("context", {"query": prompt})
            hits = (found.get("structuredContent") or {}).get("results") or []
            if hits and index % 4 == 0:
                await call("show", {"id": hits[0]["id"]})
                await call("graph_neighbors", {"id": hits[0]["id"]})
        # Writes, on the copy: what an agent gets back after recording something.
        for i in range(5):
            written = await call("remember", {"decision": f"Bench decision {i}: cap the export worker pool at {4 + i}",
                                              "rationale": "The export queue starved the API workers at peak"})  # fmt: skip
            await call("learn", {"name": f"Bench pattern {i}: stream CSV exports in {100 * (i + 1)}-row pages",
                                 "solution": "Write each page as it is read; never hold the export in memory"})  # fmt: skip
            await call("handoff", {"text": f"Bench handoff {i}: export paging half done", "next_steps": ["Finish it"]})
            new_id = (written.get("structuredContent") or {}).get("id")
            if new_id:
                target = (await call("search", {"query": "export worker pool"}, "search (for link)"))
                ids = [h["id"] for h in (target.get("structuredContent") or {}).get("results", []) if h["id"] != new_id]
                if ids:
                    await call("link", {"from_id": new_id, "to_id": ids[0], "relation": "relates_to"})

    progress("surfaces: every MCP tool at its defaults, through the SDK server")
    anyio.run(main)
    sizes.pop("search (for link)", None)
    return {name: {kind: _stats(values) for kind, values in kinds.items() if values}
            | {"ms_p50": round(statistics.median(timings[name]), 1)} for name, kinds in sizes.items()}  # fmt: skip
