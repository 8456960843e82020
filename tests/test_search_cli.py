"""`lore search` end to end: terminal listing, --json, --explain, filters, gap, reinforcement, bad input."""

from __future__ import annotations

import math
import re
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import read_jsonl

DAY = 86400
GAP_LINE = "[EVIDENCE GAP: no reliable memory for this query]"
STRIPE = "stripe retry backoff"
NONSENSE = "banana bread recipe with walnuts"
RATIONALE = "Stripe rate limits bursts; full jitter spreads the retries out over a minute"


@pytest.fixture(autouse=True)
def plain_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """CliRunner output is not a tty: rich prints no colour at width 100 unless the environment forces it."""
    for name in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS", "LORE_INDEX_REFRESH"):
        monkeypatch.delenv(name, raising=False)


def ago(days: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - days * DAY))


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))


@pytest.fixture
def store(initialised: Path) -> Path:
    """Seven records: three projects' worth of decisions, a failure, an observation; one superseded, one retracted."""
    write_jsonl(initialised / "journal/data/decisions.jsonl", [
        {"id": "dec-0000000a", "timestamp": ago(3), "decision": "Retry failed Stripe charges with exponential backoff",
         "rationale": RATIONALE, "project": "acme-api", "tags": ["payments", "reliability"], "importance": 4},
        {"id": "dec-0000000b", "timestamp": ago(40), "decision": "Store money as integer minor units",
         "rationale": "Floats lose cents when invoices are summed", "project": "billing-api", "tags": ["payments"]},
        {"id": "dec-0000000c", "timestamp": ago(10), "decision": "Use Postgres advisory locks for the job queue",
         "rationale": "Avoids double processing without a broker", "project": "acme-api", "tags": ["queue"],
         "status": "superseded", "superseded_by": "dec-0000000d"},
        {"id": "dec-0000000d", "timestamp": ago(5), "decision": "Use SKIP LOCKED for the job queue",
         "rationale": "Advisory locks leaked when workers crashed", "project": "acme-api", "tags": ["queue"]},
        {"id": "dec-0000000e", "timestamp": ago(20), "decision": "Retry Stripe webhooks forever",
         "rationale": "Stripe retries on its side anyway", "project": "acme-api", "tags": ["payments"],
         "status": "retracted", "retracted_reason": "Poison messages blocked the queue"},
    ])  # fmt: skip
    write_jsonl(initialised / "failures/data/failures.jsonl", [
        {"id": "fail-0000000a", "timestamp": ago(1), "error_type": "Timeout",
         "error_message": "Stripe webhook handler took 31s", "tool": "pytest", "project": "acme-api"},
    ])  # fmt: skip
    write_jsonl(initialised / "inbox/data/observations.jsonl", [
        {"id": "obs-0000000a", "timestamp": ago(2), "content": "Stripe webhooks arrive out of order",
         "tags": ["Payments"], "project": "billing-api"},
    ])  # fmt: skip
    return initialised


def search_json(cli, *args: str) -> dict:  # type: ignore[no-untyped-def]
    result = cli("search", *args, "--json")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    return orjson.loads(result.stdout)


def ids(payload: dict) -> list[str]:
    return [r["id"] for r in payload["results"]]


def all_ids(cli, *args: str) -> set[str]:  # type: ignore[no-untyped-def]
    """Every record a search may return: no noise floor, no cap."""
    return set(ids(search_json(cli, "stripe queue money", "--disable", "threshold", "--limit", "50", *args)))


ACTIVE = {"dec-0000000a", "dec-0000000b", "dec-0000000d", "fail-0000000a", "obs-0000000a"}


def access_lines(tmp_path: Path) -> list[dict]:
    logs = list((tmp_path / "state" / "access").glob("*.jsonl"))
    assert len(logs) <= 1, logs
    return read_jsonl(logs[0]) if logs else []


# -- --json ----------------------------------------------------------------------------------------

TOP_KEYS = {"query", "results", "evidence_gap", "gap", "intent", "weights", "fusion", "timings_ms", "warnings", "schema_version"}
RESULT_KEYS = {"id", "type", "title", "content", "project", "timestamp", "status", "score", "components"}
COMPONENT_KEYS = {"relevance", "fused", "ranks", "contributions", "channel_scores", "factors"}
GAP_KEYS = {"evidence_gap", "z_score", "top_relevance", "top_cosine", "term_coverage", "channels_agreeing", "reason",
            "idf_coverage", "lexical_z"}  # fmt: skip
TIMING_KEYS = {"bm25", "encode", "vectors", "fusion", "stages", "gap", "mmr", "passages", "total", "open_index", "wall"}
# Present in the output but not (yet) in docs/search.md's example.
UNDOCUMENTED_GAP_KEYS = {"unknown_share"}
UNDOCUMENTED_TIMING_KEYS = {"filter"}  # and "graph", only when the graph channel has a weight


def test_json_has_the_documented_shape(cli, store: Path) -> None:
    payload = search_json(cli, STRIPE, "--no-diversity")
    assert set(payload) == TOP_KEYS
    assert payload["query"] == STRIPE
    assert payload["schema_version"] == 2
    assert payload["fusion"] == "score"
    assert payload["warnings"] == []
    assert payload["evidence_gap"] is False and payload["gap"]["evidence_gap"] is False
    assert set(payload["gap"]) == GAP_KEYS | UNDOCUMENTED_GAP_KEYS
    assert set(payload["intent"]) == {"name", "similarity", "fallback"}
    assert set(payload["weights"]) == {"vector", "hyde", "bm25", "graph"}
    assert set(payload["timings_ms"]) == TIMING_KEYS | UNDOCUMENTED_TIMING_KEYS
    assert all(isinstance(v, float | int) and v >= 0 for v in payload["timings_ms"].values())
    assert payload["results"], payload
    by_id = {r["id"]: r for r in payload["results"]}
    for result in payload["results"]:
        assert set(result) == RESULT_KEYS  # path, notes, represents only when they apply
        assert set(result["components"]) == COMPONENT_KEYS
        components = result["components"]
        assert set(components["ranks"]) <= {"bm25", "vector", "hyde", "graph"}
        # Score fusion: every channel's score of the record (not only of its own top records),
        # divided by the channel's best score for the query, times the channel's weight.
        assert set(components["contributions"]) == set(components["channel_scores"])
        for channel, share in components["contributions"].items():
            best = max(r["components"]["channel_scores"].get(channel, 0.0) for r in payload["results"])
            expected_share = payload["weights"][channel] * components["channel_scores"][channel] / best
            assert share == pytest.approx(expected_share, abs=1e-3)
        assert components["fused"] == pytest.approx(sum(components["contributions"].values()), abs=1e-5)
        expected = components["relevance"] * math.prod(components["factors"].values())
        assert result["score"] == pytest.approx(expected, rel=1e-3, abs=1e-6)
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", result["timestamp"])
    top = by_id["dec-0000000a"]
    assert top == {
        **top,
        "type": "decision",
        "title": "Retry failed Stripe charges with exponential backoff",
        "content": "Retry failed Stripe charges with exponential backoff\n" + RATIONALE,
        "project": "acme-api",
        "status": "active",
    }
    assert top["components"]["ranks"]["bm25"] == 1
    assert set(top["components"]["factors"]) == {"decay", "reinforcement", "project", "coverage"}  # "type": --adaptive
    assert by_id["fail-0000000a"]["type"] == "failure" and by_id["fail-0000000a"]["title"] == "Timeout: Stripe webhook handler took 31s"
    # Sorted by score without diversity.
    scores = [r["score"] for r in payload["results"]]
    assert scores == sorted(scores, reverse=True)


def test_json_with_diversity_adds_only_the_mmr_figures(cli, store: Path) -> None:
    payload = search_json(cli, STRIPE, "--diversity")
    assert set(payload) == TOP_KEYS
    assert len(payload["results"]) >= 3
    score_ranks = []
    for position, result in enumerate(payload["results"]):
        assert set(result) == RESULT_KEYS
        assert set(result["components"]) == COMPONENT_KEYS | {"diversity"}
        diversity = result["components"]["diversity"]
        assert set(diversity) == {"score_rank", "max_similarity"}
        score_ranks.append(diversity["score_rank"])
        if position == 0:
            assert diversity["max_similarity"] is None
        else:
            assert -1.0 <= diversity["max_similarity"] <= 1.0
    assert sorted(score_ranks) == list(range(1, len(score_ranks) + 1))


# -- terminal listing --------------------------------------------------------------------------------


def test_terminal_listing_exact(cli, store: Path) -> None:
    result = cli("search", STRIPE, "--disable", "decay", "--limit", "3")
    assert result.exit_code == 0 and result.stderr == ""
    assert result.stdout == (
        " 1. [decision] dec-0000000a  acme-api  3d  score 1.500\n"
        "    Retry failed Stripe charges with exponential backoff\n"
        "    Stripe rate limits bursts; full jitter spreads the retries out over a minute\n"
        " 2. [failure] fail-0000000a  acme-api  1d  score 0.001\n"
        "    Timeout: Stripe webhook handler took 31s\n"
        "    Stripe webhook handler took 31s · pytest\n"
        " 3. [observation] obs-0000000a  billing-api  2d  score <0.001\n"
        "    Stripe webhooks arrive out of order\n"
    )


def test_snippet_of_a_long_body_is_cut_at_word_boundaries_around_the_match(cli, initialised: Path) -> None:
    body = ("Context: " + "the nightly batch touches every customer record once; " * 3
            + "So Stripe retries with backoff keep the rate under the limit. " + "Filler words follow here. " * 12)  # fmt: skip
    write_jsonl(initialised / "journal/data/decisions.jsonl", [
        {"id": "dec-000000f1", "timestamp": ago(7), "decision": "Batch settings", "rationale": body, "project": "acme-api"},
    ])  # fmt: skip
    lines = logical_lines(cli("search", STRIPE).stdout)
    header = next(i for i, line in enumerate(lines) if line.startswith(" 1. "))
    assert lines[header].startswith(" 1. [decision] dec-000000f1  acme-api  7d  score ")
    assert lines[header + 1] == "    Batch settings"
    snippet = lines[header + 2].removeprefix("    ")
    assert len(lines) == header + 3
    assert "So Stripe retries with backoff keep the rate under the limit." in snippet
    assert snippet.startswith("…") and snippet.endswith("…") and len(snippet) <= 1 + 220
    words = body.split()
    inner = snippet.strip("…").split()
    assert inner[-1].rstrip(",;:.-") in {w.rstrip(",;:.-") for w in words}  # the end is cut at a word
    assert inner[0] in words, f"the snippet starts inside a word: {snippet[:20]!r}"


def test_a_tiny_score_is_shown_as_below_a_thousandth(cli, store: Path) -> None:
    payload = search_json(cli, STRIPE, "--limit", "20")
    tiny = [r["id"] for r in payload["results"] if r["score"] < 0.0005]
    assert tiny  # a vector-only hit at the gated weight scores far under a thousandth
    lines = cli("search", STRIPE, "--limit", "20").stdout.splitlines()
    assert not any(line.endswith("score 0.000") for line in lines)
    for record_id in tiny:
        assert any(f"] {record_id} " in line and line.endswith("score <0.001") for line in lines)


def test_piped_output_keeps_long_lines_whole(cli, initialised: Path) -> None:
    title = "Retry failed Stripe charges with exponential backoff, " + "capped jitter and idempotency keys " * 2
    write_jsonl(initialised / "journal/data/decisions.jsonl", [
        {"id": "dec-000000f2", "timestamp": ago(7), "decision": title.strip(), "rationale": RATIONALE * 3},
    ])  # fmt: skip
    lines = cli("search", STRIPE, "--explain").stdout.splitlines()
    assert f"    {title.strip()}" in lines  # not hard-wrapped at 100 columns for grep
    assert any(re.fullmatch(r"    score = relevance .* × coverage \d\.\d{3} = \d+\.\d{3}", line) for line in lines)
    assert all(not line or line.startswith((" ", "[EVIDENCE GAP", "intent ", "timings ")) for line in lines)


def test_terminal_highlights_the_matched_terms(cli, store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("TERM", "xterm-256color")
    stdout = cli("search", STRIPE, "--type", "decision", "--limit", "1").stdout
    lines = stdout.splitlines()
    assert re.sub(r"\x1b\[[0-9;]*m", "", lines[0]).startswith(" 1. [decision] dec-0000000a  acme-api  3d  score ")

    def emphasised(line: str) -> list[str]:
        """The words printed bold and underlined (SGR 1 and 4)."""
        return [word for codes, word in re.findall(r"\x1b\[([0-9;]*)m([^\x1b]+)", line)
                if {"1", "4"} <= set(codes.split(";"))]  # fmt: skip

    assert emphasised(lines[1]) == ["Retry", "Stripe", "backoff"]
    snippet = "".join(lines[2:])
    assert emphasised(snippet) == ["Stripe", "retries"]  # stems match too: retry -> retri -> retries


# -- --explain ----------------------------------------------------------------------------------------


def logical_lines(text: str) -> list[str]:
    """Rejoin lines rich hard-wrapped at 100 columns (continuations start in column 0)."""
    lines: list[str] = []
    for line in text.splitlines():
        starts = line.startswith((" ", "[EVIDENCE GAP", "timings ms: ")) or re.match(r"intent \w+ \(sim ", line)
        if lines and not starts:
            lines[-1] += line
        else:
            lines.append(line)
    return lines


def test_explain_shows_every_channel_rank_share_and_factor(cli, store: Path) -> None:
    options = ("--all", "--intent", "payments", "--limit", "5", "--diversity")
    payload = search_json(cli, STRIPE, *options)
    expected = {r["id"]: r for r in payload["results"]}
    result = cli("search", STRIPE, *options, "--explain")
    assert result.exit_code == 0 and result.stderr == ""
    lines = logical_lines(result.stdout)
    headers = [i for i, line in enumerate(lines) if re.match(r" ?\d+\. \[", line)]
    shown = [re.match(r" ?\d+\. \[[\w-]+\] (\S+)", lines[i]).group(1) for i in headers]  # type: ignore[union-attr]
    assert set(shown) == set(expected)
    assert "dec-0000000e" in shown  # retracted, shown with --all and marked
    assert lines[headers[shown.index("dec-0000000e")]].endswith("  [retracted]")
    for start, record_id in zip(headers, shown, strict=True):
        block = lines[start: next((h for h in headers if h > start), len(lines))]
        (channels,) = [line for line in block if line.startswith("    channels: ")]
        parts = channels.removeprefix("    channels: ").split(" · ")
        assert [p.split()[0] for p in parts] == ["bm25", "vector", "hyde", "graph"]
        ranks = expected[record_id]["components"]["ranks"]
        scored = expected[record_id]["components"]["channel_scores"]
        for part in parts:
            channel = part.split()[0]
            if channel not in ranks and channel not in scored:
                assert part == f"{channel} -"
                continue
            # "#-": the channel scores the record without ranking it among its own best.
            match = re.fullmatch(rf"{channel} #(\d+|-)(?: s=-?\d+\.\d{{3}})? \+(\d\.\d{{4}})", part)
            assert match, part
            assert match.group(1) == str(ranks.get(channel, "-"))
            contribution = expected[record_id]["components"]["contributions"].get(channel, 0.0)
            assert float(match.group(2)) == pytest.approx(contribution, abs=1e-4)
        (score_line,) = [line for line in block if line.startswith("    score = ")]
        match = re.fullmatch(r"    score = relevance (\d\.\d{3}) \(fused (\d\.\d{4})\) × (.*) = (\d+\.\d{3})", score_line)
        assert match, score_line
        factors = [(f.rsplit(" ", 1)[0], float(f.rsplit(" ", 1)[1])) for f in match.group(3).split(" × ")]
        names = [name for name, _ in factors]
        every_stage = ["decay", "reinforcement", "project", "intent", "coverage"]  # "type" only with --adaptive
        inactive = {"dec-0000000c", "dec-0000000e"}  # superseded, retracted: shown with --all
        assert names == (["status", *every_stage] if record_id in inactive else every_stage)
        assert dict(factors)["project"] == (1.5 if expected[record_id]["project"] == "acme-api" else 1.0)
        tagged = {"dec-0000000a", "dec-0000000b", "dec-0000000e", "obs-0000000a"}  # tags payments / Payments
        assert dict(factors)["intent"] == (1.25 if record_id in tagged else 1.0)
        if record_id in inactive:
            assert dict(factors)["status"] == 0.5
        product = float(match.group(1)) * math.prod(v for _, v in factors)
        assert float(match.group(4)) == pytest.approx(product, abs=0.01)
        (diversity,) = [line for line in block if line.startswith("    diversity: ")]
        cosine = "" if start == headers[0] else r", cosine -?\d\.\d\d to the closest hit above"
        assert re.fullmatch(rf"    diversity: #\d+ by score{cosine}", diversity), diversity
    footer = lines[-2:]
    assert footer[0].startswith(f"intent {payload['intent']['name']} (sim ")
    weights = payload["weights"]
    assert "score fusion, weights " + ", ".join(f"{k} {v:.2f}" for k, v in weights.items()) + " · gap z " in footer[0]
    assert footer[1].startswith("timings ms: filter ")


# -- filters ------------------------------------------------------------------------------------------


def test_hidden_statuses_and_all(cli, store: Path) -> None:
    assert all_ids(cli) == ACTIVE
    assert all_ids(cli, "--all") == ACTIVE | {"dec-0000000c", "dec-0000000e"}
    payload = search_json(cli, "retry stripe webhooks", "--all", "--no-diversity")
    retracted = next(r for r in payload["results"] if r["id"] == "dec-0000000e")
    assert retracted["status"] == "retracted" and retracted["components"]["factors"]["status"] == 0.5
    stdout = cli("search", "postgres advisory locks job queue", "--all", "--limit", "2").stdout
    headers = [line for line in stdout.splitlines() if re.match(r" ?\d+\. ", line)]
    assert len(headers) == 2
    assert {h.split()[2] for h in headers} == {"dec-0000000c", "dec-0000000d"}
    superseded = next(h for h in headers if "dec-0000000c" in h)
    assert re.fullmatch(r" ?\d\. \[decision\] dec-0000000c  acme-api  10d  score \d\.\d{3}  \[superseded\]", superseded)
    assert "[superseded]" not in next(h for h in headers if "dec-0000000d" in h)
    assert "dec-0000000c" not in cli("search", "postgres advisory locks job queue").stdout


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        (["--type", "decision"], {"dec-0000000a", "dec-0000000b", "dec-0000000d"}),
        (["--type", "obs"], {"obs-0000000a"}),  # an alias
        (["--type", "failure", "--type", "observation"], {"fail-0000000a", "obs-0000000a"}),
        (["--in-project", "billing-api"], {"dec-0000000b", "obs-0000000a"}),
        (["--in-project", "nowhere"], set()),
        (["--tag", "payments"], {"dec-0000000a", "dec-0000000b", "obs-0000000a"}),  # tags match case-insensitively
        (["--tag", "#Payments", "--tag", "reliability"], {"dec-0000000a"}),  # every tag must match
        (["--type", "decision", "--in-project", "acme-api", "--tag", "queue"], {"dec-0000000d"}),
        (["--since", "4d"], {"dec-0000000a", "fail-0000000a", "obs-0000000a"}),
        (["--until", "4d"], {"dec-0000000b", "dec-0000000d"}),
        (["--since", "30d", "--until", "60h"], {"dec-0000000a", "dec-0000000d"}),
        (["--since", "2w", "--all", "--type", "decision"], {"dec-0000000a", "dec-0000000c", "dec-0000000d"}),
    ],
)
def test_filters(cli, store: Path, option: list[str], expected: set[str]) -> None:
    assert all_ids(cli, *option) == expected


def test_project_option_is_the_main_spelling_of_in_project(cli, store: Path) -> None:
    assert all_ids(cli, "--project", "billing-api") == {"dec-0000000b", "obs-0000000a"}


def test_since_is_inclusive_and_until_exclusive_at_an_exact_timestamp(cli, store: Path) -> None:
    rows = {r["id"]: r for r in read_jsonl(store / "journal/data/decisions.jsonl")}
    moment = rows["dec-0000000a"]["timestamp"]
    assert all_ids(cli, "--since", moment) == {"dec-0000000a", "fail-0000000a", "obs-0000000a"}
    assert all_ids(cli, "--until", moment) == {"dec-0000000b", "dec-0000000d"}
    day = time.strftime("%Y-%m-%d", time.gmtime(time.time() - 60 * DAY))
    assert all_ids(cli, "--since", day) == ACTIVE


def test_limit(cli, store: Path) -> None:
    assert len(ids(search_json(cli, "stripe queue money", "--disable", "threshold"))) == 5
    assert len(ids(search_json(cli, "stripe queue money", "--disable", "threshold", "--limit", "2"))) == 2
    stdout = cli("search", STRIPE, "-n", "1").stdout
    assert [line[:4] for line in stdout.splitlines() if re.match(r" ?\d+\. ", line)] == [" 1. "]
    too_many = cli("search", STRIPE, "--limit", "0")
    assert too_many.exit_code == 2 and "'--limit'" in too_many.stderr


def test_channels_and_fixed_weights(cli, store: Path) -> None:
    lexical = search_json(cli, STRIPE, "--channels", "bm25")
    assert lexical["results"] and all(set(r["components"]["ranks"]) == {"bm25"} for r in lexical["results"])
    assert set(lexical["timings_ms"]).isdisjoint({"encode", "vectors", "graph"})
    fixed = search_json(cli, "advisory locks", "--weights", "vector=0.5,hyde=0.25,bm25=2,graph=0")
    assert fixed["intent"]["name"] not in {"fix_bug", "security_audit", "find_decision", "find_pattern"}  # no adjustment
    assert fixed["weights"] == {"vector": 0.5, "hyde": 0.25, "bm25": 2.0, "graph": 0.0}
    assert fixed["results"]
    assert all("graph" not in r["components"]["ranks"] for r in fixed["results"])


# -- evidence gap -------------------------------------------------------------------------------------


def test_evidence_gap_line_and_json_figures(cli, store: Path, tmp_path: Path) -> None:
    stdout = cli("search", NONSENSE).stdout
    assert stdout.splitlines()[0] == GAP_LINE
    payload = search_json(cli, NONSENSE)
    assert payload["evidence_gap"] is True
    gap = payload["gap"]
    assert gap["evidence_gap"] is True
    assert gap["reason"] == "best similarity below the floor"
    assert gap["term_coverage"] == 0.0 and gap["idf_coverage"] == 0.0
    assert 0.0 < gap["top_cosine"] < 0.3
    assert access_lines(tmp_path) == []  # a gap is not an access


def test_no_candidates_at_all(cli, store: Path) -> None:
    result = cli("search", "zyxxy quuxle", "--channels", "bm25")
    assert (result.exit_code, result.stdout, result.stderr) == (0, f"{GAP_LINE}\nNo results.\n", "")
    payload = search_json(cli, "zyxxy quuxle", "--channels", "bm25")
    assert payload["results"] == [] and payload["evidence_gap"] is True
    assert payload["gap"]["reason"] == "no candidates"


# -- reinforcement and the project boost --------------------------------------------------------------


def test_every_answered_search_appends_its_top_hits_to_the_access_log(cli, store: Path, tmp_path: Path) -> None:
    sources = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    first = cli("search", STRIPE).stdout
    shown = [line.split()[2] for line in first.splitlines() if re.match(r" ?\d+\. ", line)]
    log = access_lines(tmp_path)
    assert [(e["q"], e["ids"]) for e in log] == [(STRIPE, shown[:3])]
    assert log[0]["ts"] == pytest.approx(time.time(), abs=600)
    payload = search_json(cli, "job queue locks")
    assert [(e["q"], e["ids"]) for e in access_lines(tmp_path)[1:]] == [("job queue locks", ids(payload)[:3])]
    cli("search", NONSENSE)
    assert len(access_lines(tmp_path)) == 2
    # The log lives in the state dir; the data dir (sources and audit log) is untouched.
    assert {p: p.read_bytes() for p in store.rglob("*") if p.is_file()} == sources


def twins(store: Path, first: dict, second: dict) -> None:
    base = {"timestamp": ago(4), "decision": "Rotate the webhook signing secret every quarter",
            "rationale": "A leaked secret stays useful for at most three months", "project": "acme-api"}  # fmt: skip
    write_jsonl(store / "journal/data/decisions.jsonl", [{**base, **first}, {**base, **second}])


def test_more_accessed_record_ranks_higher_among_equals(cli, initialised: Path, tmp_path: Path) -> None:
    twins(initialised, {"id": "dec-000000a1", "tags": ["alpha"]}, {"id": "dec-000000b2", "tags": ["beta"]})
    query = "rotate webhook signing secret"
    for _ in range(3):  # only the beta twin matches, so only it is logged
        assert ids(search_json(cli, query, "--tag", "beta")) == ["dec-000000b2"]
    assert [e["ids"] for e in access_lines(tmp_path)] == [["dec-000000b2"]] * 3
    reinforced = search_json(cli, query, "--no-diversity", "--limit", "2")
    assert ids(reinforced) == ["dec-000000b2", "dec-000000a1"]
    factors = {r["id"]: r["components"]["factors"]["reinforcement"] for r in reinforced["results"]}
    assert factors["dec-000000a1"] == 1.0 and factors["dec-000000b2"] > 1.1
    plain = search_json(cli, query, "--no-diversity", "--limit", "2", "--disable", "reinforcement")
    assert ids(plain) == ["dec-000000a1", "dec-000000b2"]


def test_current_project_is_boosted_among_equals(cli, initialised: Path) -> None:
    twins(initialised, {"id": "dec-000000c1", "project": "billing-api"}, {"id": "dec-000000c2", "project": "acme-api"})
    query = ("rotate webhook signing secret", "--no-diversity", "--limit", "2")
    here = search_json(cli, *query)  # the working directory is acme-api
    assert ids(here) == ["dec-000000c2", "dec-000000c1"]
    assert [r["components"]["factors"]["project"] for r in here["results"]] == [1.5, 1.0]
    billing = cli("--project", "billing-api", "search", *query, "--json")
    assert ids(orjson.loads(billing.stdout)) == ["dec-000000c1", "dec-000000c2"]
    unboosted = search_json(cli, *query, "--disable", "project")
    assert ids(unboosted) == ["dec-000000c1", "dec-000000c2"]
    assert all("project" not in r["components"]["factors"] for r in unboosted["results"])


# -- bad input ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "stderr"),
    [
        (["--since", "2025-13-45"], "Error: cannot read '2025-13-45' as a time\n"
                                    "Hint: use a date like 2025-03-01 or an age like 30d, 2w, 6mo, 1y\n"),
        (["--until", "yesterday-ish"], "Error: cannot read 'yesterday-ish' as a time\n"
                                       "Hint: use a date like 2025-03-01 or an age like 30d, 2w, 6mo, 1y\n"),
        (["--weights", "vector=lots"], "Error: cannot read weight 'vector=lots'\n"
                                       "Hint: use --weights vector=1,hyde=0.8,bm25=0.6\n"),
        (["--type", "decisions-ish"], "Error: unknown record type 'decisions-ish'\n"
                                      "Hint: types: decision, pattern, anti-pattern, lesson, handoff, failure, observation\n"),
        (["--channels", "bm25,vectors"], "Error: unknown channel 'vectors'\nHint: channels: bm25, vector, hyde, graph\n"),
    ],
)  # fmt: skip
def test_bad_input_is_a_usage_error(cli, store: Path, tmp_path: Path, option: list[str], stderr: str) -> None:
    result = cli("search", STRIPE, *option)
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", stderr)
    assert access_lines(tmp_path) == []


def test_an_empty_time_range_and_an_unknown_refresh_policy_are_usage_errors(cli, store: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    empty = cli("search", STRIPE, "--since", "2026-01-01", "--until", "2025-01-01")
    assert (empty.exit_code, empty.stdout) == (2, "")
    assert empty.stderr == ("Error: --since 2026-01-01 is not before --until 2025-01-01\n"
                            "Hint: nothing can match an empty time range\n")  # fmt: skip
    monkeypatch.setenv("LORE_INDEX_REFRESH", "bogus")
    bogus = cli("search", STRIPE)
    assert (bogus.exit_code, bogus.stderr) == (2, "Error: LORE_INDEX_REFRESH='bogus' is not a policy\n"
                                                  "Hint: use refresh, warn, ignore\n")  # fmt: skip
    monkeypatch.setenv("LORE_INDEX_REFRESH", "Warn")
    assert cli("search", STRIPE).exit_code == 0


@pytest.mark.parametrize("query", ["", "   ", "\t\n"])
def test_an_empty_query_is_a_usage_error(cli, store: Path, query: str) -> None:
    result = cli("search", query)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == ("Error: the query is empty\n"
                             "Hint: say what you are looking for, or list records with `lore list`\n")  # fmt: skip


@pytest.mark.parametrize(
    ("option", "named"),
    [
        (["--disable", "decays"], "decays"),  # a misspelt stage must not silently leave decay on
        (["--weights", "vectors=0"], "vectors"),  # a misspelt channel must not silently leave vectors at their default
    ],
)
def test_unknown_stage_or_weight_name_is_a_usage_error(cli, store: Path, option: list[str], named: str) -> None:
    result = cli("search", STRIPE, *option)
    assert result.exit_code == 2, result.stdout
    assert result.stdout == ""
    assert result.stderr.startswith("Error: ") and f"'{named}'" in result.stderr


# -- HyDE with a local LLM command ---------------------------------------------------------------


def llm_script(tmp_path: Path, body: str) -> str:
    """A real executable standing in for LORE_LLM_CMD: it logs its stdin, then runs ``body``."""
    script = tmp_path / "answer-llm"
    script.write_text(f"#!{sys.executable}\nimport sys\nprompt = sys.stdin.read()\n"
                      f"open({str(tmp_path / 'prompts.txt')!r}, 'a').write(prompt + '\\n')\n{body}")  # fmt: skip
    script.chmod(0o755)
    return str(script)


@pytest.fixture
def nodes_store(initialised: Path) -> Path:
    write_jsonl(initialised / "journal/data/decisions.jsonl", [
        {"id": "dec-0000001a", "timestamp": ago(9), "decision": "Provision capacity with Karpenter",
         "rationale": "Karpenter launches right-sized instances within a minute of pods going pending"},
        {"id": "dec-0000001b", "timestamp": ago(9), "decision": "Keep invoices in Postgres",
         "rationale": "One database for billing data keeps reporting simple"},
        {"id": "dec-0000001c", "timestamp": ago(9), "decision": "Send emails through SES",
         "rationale": "Deliverability and bounce handling come for free"},
    ])  # fmt: skip
    return initialised


def hyde_ranks(cli) -> dict[str, int]:  # type: ignore[no-untyped-def]
    payload = search_json(cli, "what adds machines when the cluster is full", "--channels", "hyde", "--no-diversity",
                          "--disable", "threshold")  # fmt: skip
    return {r["id"]: r["components"]["ranks"]["hyde"] for r in payload["results"]}


def test_llm_answer_replaces_the_hyde_template(cli, nodes_store: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    answer = "Karpenter provisions right-sized instances for pending pods. It launches them within a minute."
    assert hyde_ranks(cli)["dec-0000001a"] != 1  # the template alone does not find it
    monkeypatch.setenv("LORE_LLM_CMD", llm_script(tmp_path, f"print({answer!r})\n"))
    assert hyde_ranks(cli)["dec-0000001a"] == 1
    prompt = (tmp_path / "prompts.txt").read_text()
    assert "what adds machines when the cluster is full" in prompt and "two sentences" in prompt


@pytest.mark.parametrize("body", ["print('half an answer')\nsys.exit(1)\n", "", "import os\nos._exit(0)\n"])
def test_a_failing_llm_command_falls_back_to_the_template(cli, nodes_store: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch, body: str) -> None:  # fmt: skip
    template = hyde_ranks(cli)
    monkeypatch.setenv("LORE_LLM_CMD", llm_script(tmp_path, body))
    assert hyde_ranks(cli) == template
    assert (tmp_path / "prompts.txt").exists()  # it was asked, and its failure cost nothing but the answer


def test_fusion_option_chooses_rrf_and_refuses_an_unknown_one(cli, store: Path) -> None:
    default = search_json(cli, STRIPE)
    rrf = search_json(cli, STRIPE, "--fusion", "rrf")
    assert (default["fusion"], rrf["fusion"]) == ("score", "rrf")
    for result in rrf["results"]:  # RRF shares: weight / (60 + rank)
        components = result["components"]
        for channel, rank in components["ranks"].items():
            assert components["contributions"][channel] == pytest.approx(rrf["weights"][channel] / (60 + rank), abs=1e-6)
    bad = cli("search", STRIPE, "--fusion", "borda")
    assert bad.exit_code == 2 and bad.stdout == ""
    assert "unknown fusion 'borda'" in bad.stderr and "score, rrf" in bad.stderr
