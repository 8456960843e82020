"""The benchmark harness's building blocks on tiny inputs, so `python -m benchmarks` keeps working.

No thresholds on any figure: these tests check that every section runs end to
end and produces well-formed results. Skipped when the shared data or the
bench extra is missing.
"""

from __future__ import annotations

import io
import shutil
import sys
from pathlib import Path

import orjson
import pytest

from benchmarks import shared_dir
from tests.conftest import resolve_locations

SHARED = shared_dir(required=False)
pytestmark = pytest.mark.skipif(SHARED is None, reason="shared benchmark data (../shared) not available")
pytest.importorskip("ir_measures")
pytest.importorskip("pytrec_eval")


@pytest.fixture()
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LORE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("LORE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LORE_LLM_CMD", raising=False)
    return tmp_path


def test_commit_conversion() -> None:
    from benchmarks import corpora

    assert corpora.strip_trailers("Fix the thing.\n\nSigned-off-by: A <a@b.c>\nHelped-by: B <b@c.d>\ncc: x") == "Fix the thing."
    assert SHARED is not None
    raws, mapping, duplicates = corpora.commit_raws(corpora.load_commits(SHARED, 50))
    assert duplicates == 0 and len(raws) == 50 == len(mapping)
    for raw in raws:
        assert raw["id"].startswith("dec-") and len(raw["id"]) == 12
        assert mapping[raw["id"]].startswith(raw["id"][4:])
        assert raw["project"] == "git" and "Signed-off-by" not in raw["rationale"]
        assert raw["timestamp"].endswith("Z")


def test_the_real_text_store_keeps_whole_messages_scrubbed_as_lore_remember_stores_them() -> None:
    from benchmarks import corpora, runner

    assert SHARED is not None
    commits = corpora.load_commits(SHARED, 50)
    raws, duplicates = corpora.remembered_commit_raws(commits)
    synthetic, _, _ = corpora.commit_raws(commits)
    assert duplicates == 0 and [r["id"] for r in raws] == [r["id"] for r in synthetic]
    signed = [raw for raw in raws if "Signed-off-by" in raw["rationale"]]
    assert signed and all("[REDACTED:email]" in raw["rationale"] and "@pobox.com" not in raw["rationale"] for raw in signed)
    assert all(raw["tags"] == [] and raw["project"] == "git" for raw in raws)
    assert sum(len(r["rationale"]) for r in raws) > sum(len(r["rationale"]) for r in synthetic)
    assert runner.store_raws("real", commits)[0] == raws and runner.store_raws("synthetic", commits)[0] == synthetic


def test_the_stores_option_is_checked() -> None:
    from benchmarks.__main__ import parser, settings_from
    from lore.errors import UsageError

    assert tuple(settings_from(parser().parse_args(["--stores", "real"])).stores) == ("real",)
    assert tuple(settings_from(parser().parse_args([])).stores) == ("synthetic", "real")
    with pytest.raises(UsageError):
        settings_from(parser().parse_args(["--stores", "fake"]))


def test_evaluate_counts_queries_without_results() -> None:
    from benchmarks.quality import evaluate

    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}}
    perfect = evaluate({"q1": ["d1"], "q2": ["d2", "d9"]}, qrels, ("nDCG@10", "R@100", "RR@10"))
    assert perfect == {"nDCG@10": 1.0, "R@100": 1.0, "RR@10": 1.0}
    half = evaluate({"q1": ["d1"]}, qrels, ("R@100",))  # q2 returned nothing: it counts as 0
    assert half == {"R@100": 0.5}


def test_matrix_on_a_tiny_set_reports_every_system_on_both_splits(isolated: Path) -> None:
    from rich.console import Console

    from benchmarks import corpora, matrix, sets
    from benchmarks.report import matrix_table

    assert SHARED is not None
    raws, _, _ = corpora.commit_raws(corpora.load_commits(SHARED, 80))
    # Each question is one commit's subject: a set whose answers every system can find.
    questions = {f"q{i}": raw["decision"] for i, raw in enumerate(raws[:6])}
    qrels = {f"q{i}": {raw["id"]: 1} for i, raw in enumerate(raws[:4])}
    split = {q: ("dev" if int(q[1:]) % 2 == 0 else "test") for q in questions}
    tiny = sets.EvalSet("tiny", raws, questions, qrels, split, max(corpora.epoch(r["timestamp"]) for r in raws))
    result = matrix.run_set(tiny, isolated / "work")
    assert result["records"] == 80 and set(result["splits"]) == {"dev", "test"}
    for figures in result["splits"].values():
        assert figures["answerable"] == 2 and figures["unanswerable"] == 1
        assert set(figures["systems"]) == set(matrix.SYSTEMS)
        for row in figures["systems"].values():
            assert 0.0 <= row["R@10"] <= 1.0 and 0.0 <= row["RR@10"] <= 1.0
        # An exact subject is found by every lexical system.
        assert figures["systems"]["textbook"]["R@10"] == 1.0
        assert figures["systems"]["default"]["R@10"] == 1.0
        assert 0.0 <= figures["systems"]["default"]["gap_unanswerable"] <= 1.0
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(matrix_table("tiny", result))
    printed = console.export_text()
    assert "textbook BM25" in printed and "test MRR@10" in printed


def test_memory_records_are_short_and_tagged_by_area() -> None:
    from benchmarks import sets

    assert SHARED is not None
    commit = {"sha": "ab" * 20, "date": "2020-01-01T00:00:00Z", "subject": "fetch: fix a leak",
              "body": "x " * 400 + "\n\nSecond paragraph.\n\nSigned-off-by: A <a@b.c>",
              "files": ["builtin/fetch.c", "t/t5510.sh", "fetch.h"]}  # fmt: skip
    raw = sets.memory_record(commit)
    assert len(raw["decision"]) + 1 + len(raw["rationale"]) <= sets.MEMORY_CHARS
    assert "Second" not in raw["rationale"] and raw["tags"] == ["builtin", "t", "fetch.h"]


def test_indexing_latency_scale_and_report(isolated: Path) -> None:
    from rich.console import Console

    from benchmarks import corpora, indexing, latency, report, runner

    assert SHARED is not None
    raws, _, _ = corpora.commit_raws(corpora.load_commits(SHARED, 60))
    data_dir, index_dir = isolated / "data", isolated / "index"
    corpora.write_decisions(data_dir, raws)
    full = indexing.full_build(data_dir, index_dir, 1)
    assert full["records"] == 60 and full["index_bytes"] > 0
    bare = indexing.bare_whoosh(data_dir, isolated, 1)
    assert bare["seconds_p50"] > 0
    timed = latency.measure(data_dir, index_dir, isolated / "run", ["why did the manpage dates show apostrophes"],
                            runs=1, warm_helper=False)  # fmt: skip
    assert set(timed["commands"]) >= {"python -c pass", "grep -ril", "lore search --json", "lore hook prompt (cold)"}
    assert timed["commands"]["lore search --json"]["failures"] == 0
    if shutil.which("sqlite3"):  # the original bash Lore's query, same decisions (CI installs sqlite3)
        assert timed["commands"]["sqlite3 FTS5 (bash original's search)"]["failures"] == 0
        assert timed["commands"]["lore search --json"]["ratio_to_sqlite3_fts5"] > 0
    stages = latency.stage_timings(data_dir, index_dir, ["merge conflict markers", "slow fetch over http"], 0.0)
    assert "total" in stages
    inc = indexing.incremental(data_dir, index_dir, 1, raws[0]["timestamp"])
    assert inc["modes"] == ["incremental"]
    process = indexing.whole_process(data_dir, index_dir, isolated / "process", 1, raws[0]["timestamp"])
    assert process["noop_seconds_p50"] > process["python_seconds_p50"] > 0 and process["refresh_seconds_p50"] > 0
    assert abs(process["beyond_noop_seconds_p50"] - (process["refresh_seconds_p50"] - process["noop_seconds_p50"])) < 0.002

    rebuild = indexing.rebuild_process(data_dir, index_dir, isolated / "process", 1)
    assert rebuild["seconds_p50"] > rebuild["python_seconds_p50"] > 0 and "bm25" in rebuild["timings_last"]
    fresh, _, _ = corpora.commit_raws(corpora.load_commits(SHARED, 60 + 2 * latency.WRITES_PER_RUN + 2)[60:])
    writes = latency.measure_writes(data_dir, index_dir, isolated / "writes", [(r["decision"], r["rationale"]) for r in fresh],
                                    runs=1)  # fmt: skip
    rows = {latency.write_row(kind, warm) for kind in ("remember", "learn", "lesson", "handoff") for warm in (False, True)}
    assert set(writes["commands"]) == {*rows, latency.MCP_REMEMBER}, writes["notes"]
    assert {latency.WRITE_COLD, latency.WRITE_WARM} <= rows
    for row in rows:
        assert writes["commands"][row]["exit_codes"] == {"0": 1} and writes["commands"][row]["ratio_to_python_floor"] > 0, row
    assert writes["commands"][latency.MCP_REMEMBER]["errors"] == 0 and not writes["notes"]
    entry = {"indexing": {"full": full, "bare_whoosh": bare, "incremental": inc, "process": process,
                          "rebuild_process": rebuild}, "latency": timed,
             "stages": stages, "writes": writes}  # fmt: skip
    per_size = {60: entry, 120: entry}
    scale = runner.scale_curve(per_size)
    assert scale["full build"]["growth_exponent"] is not None
    results = {"machine": corpora.machine_info(), "sizes": {"60": entry}, "scale": scale, "harness_seconds": {},
               "real_sizes": {"60": entry}}  # fmt: skip
    buffer = io.StringIO()
    report.render(results, Console(file=buffer, width=260))
    assert "Whole-process latency at 60 decisions of real text" in buffer.getvalue()
    assert "rebuild peak RSS MiB" in buffer.getvalue()
    assert "Indexing" in buffer.getvalue() and "process: beyond no-op s" in buffer.getvalue()
    assert "Write latency at 60 decisions" in buffer.getvalue()
    headers = [str(column.header) for column in report.latency_table("60", timed).columns]
    assert ("x sqlite3 FTS5" in headers) == bool(shutil.which("sqlite3"))
    orjson.dumps(results, option=orjson.OPT_NON_STR_KEYS)


def test_missing_extra_is_a_lore_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import require_extra
    from lore.errors import LoreError

    monkeypatch.setitem(sys.modules, "ir_measures", None)
    with pytest.raises(LoreError) as caught:
        require_extra()
    assert caught.value.hint == "pip install -e '.[bench]'"


def test_soak_section_runs_and_renders(isolated: Path) -> None:
    """A tiny helper soak, rendered like `python -m benchmarks` does (the surfaces section runs in `--quick`)."""
    from rich.console import Console

    from benchmarks import corpora, helper
    from benchmarks.report import render
    from lore.index.manager import IndexManager

    assert SHARED is not None
    raws, _, _ = corpora.commit_raws(corpora.load_commits(SHARED, 60))
    data_dir, index_dir = isolated / "soak-data", isolated / "soak-index"
    corpora.write_decisions(data_dir, raws)
    IndexManager(resolve_locations(data_dir, index_dir)).build()
    soaked = helper.soak(data_dir, index_dir, isolated / "soak-run", ["fix the merge of refs when fetching"],
                         total_prompts=20, total_writes=2)  # fmt: skip
    assert soaked["lost_answers"] == 0 and soaked["writes"] == 2 and soaked["same_helper_throughout"]
    assert soaked["fds"]["end"] is not None and soaked["rss_mib"]["end"]
    out = io.StringIO()
    render({"machine": {}, "soak": {**soaked, "records": len(raws)}}, Console(file=out, width=140))
    assert "Helper soak: 20 prompts and 2 writes at 60 decisions" in out.getvalue()


def test_the_whole_process_refresh_figure_first_ends_helpers_serving_its_index(tmp_path, monkeypatch) -> None:
    """A helper left by another section refreshed the index behind the measured `lore index` (a failed run)."""
    import subprocess

    from benchmarks.indexing import stop_helpers_of
    from lore.index.manager import IndexManager

    data_dir = tmp_path / "demo"
    shutil.copytree(Path(__file__).resolve().parent.parent / "data", data_dir)
    locations = resolve_locations(data_dir)
    IndexManager(locations).build()
    monkeypatch.delenv("LORE_SERVER", raising=False)
    monkeypatch.setenv("LORE_DATA_DIR", str(data_dir))
    monkeypatch.setenv("LORE_INDEX_DIR", str(locations.index_dir))
    started = subprocess.run([sys.executable, "-m", "lore", "server", "start", "--idle", "60"],
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    assert started.returncode == 0, started.stderr
    assert stop_helpers_of(locations.index_dir) == 1
    assert stop_helpers_of(locations.index_dir) == 0  # none left


def test_a_quick_run_asks_the_memory_sets_the_first_questions_of_each_split() -> None:
    from benchmarks import sets

    assert SHARED is not None
    whole = sets.memory(SHARED)
    quick = sets.all_sets(SHARED, quick=True)["memory"]()
    assert quick.raws == whole.raws  # the same 8,000 records
    for split in sets.SPLITS:
        asked, unasked = list(whole.answerable(split)), list(whole.unanswerable(split))
        assert list(quick.answerable(split)) == asked[: sets.QUICK_QUESTIONS]
        share = round(len(unasked) * sets.QUICK_QUESTIONS / len(asked))
        assert list(quick.unanswerable(split)) == unasked[:share] and share > 0
        assert quick.judged(split) == {q: whole.qrels[q] for q in asked[: sets.QUICK_QUESTIONS]}
    assert sets.all_sets(SHARED)["memory"]().questions == whole.questions  # the full bench asks them all
