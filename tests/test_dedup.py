"""Write-time duplicate and contradiction detection: similarity functions, the labelled
pair set (precision/recall, with and without the bundled model), and the write path."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.duplicates import BACKGROUND as BENCH_BACKGROUND
from lore import capture
from lore.capture import WriteOptions
from lore.curate import dedup
from lore.curate.dedup import Match, consolidation_clusters, find_duplicate
from lore.curate.similarity import (
    Bm25Stats,
    bm25_normalised,
    differs_in_specifics,
    extract_specifics,
    jaccard,
    normalise,
    opposite_advice,
    substituted_slot,
    text_hash,
    tokens,
)
from lore.curate.write_check import check_before_write
from lore.embedder import BUNDLED_MODEL_DIR
from lore.errors import DuplicateError, ModelError
from lore.store import Store
from lore.store.records import Record

PAIRS_FILE = Path(__file__).parent / "data" / "duplicate_pairs.jsonl"
MODEL_FILE = BUNDLED_MODEL_DIR / "model.safetensors"
OPTIONS = WriteOptions(redact=False)

# Other records already in the store while each pair is checked (the bench's own): realistic
# BM25 statistics, and a match against any of them is a false positive.
BACKGROUND = BENCH_BACKGROUND

CATEGORY_LABEL = {
    "verbatim": "duplicate", "paraphrase": "duplicate", "reordered": "duplicate",
    "number-changed": "distinct", "identifier-changed": "distinct", "same-topic-different-advice": "distinct",
    "opposite-advice": "contradiction", "unrelated": "distinct",
}  # fmt: skip


def load_pairs() -> list[dict]:
    return [json.loads(line) for line in PAIRS_FILE.read_text(encoding="utf-8").splitlines() if line.strip()]


# -- normalisation, Jaccard, BM25 ----------------------------------------------------------


def test_normalise_and_hash() -> None:
    assert normalise("  Use   Postgres\tLocks. ") == "use postgres locks"
    assert text_hash("Use Postgres locks") == text_hash("use  postgres LOCKS.")
    assert text_hash("Use Postgres locks") != text_hash("Use Postgres queues")


def test_tokens_stem_and_keep_negations() -> None:
    assert tokens("Caching cached caches") == ["cach", "cach", "cach"]
    assert "not" in tokens("Don't use the cache")
    # Snowball stems: "ready" and "readiness" meet (the light stemmer before kept them apart).
    assert tokens("ready readiness") == ["readi", "readi"]


def test_whether_or_not_is_no_negation() -> None:
    # A dev pair of the bench: the same decision, and not a contradiction of it.
    assert not opposite_advice("Mobile releases ship on a two-week train regardless of feature readiness",
                               "Whether or not features are ready, the mobile app goes out every two weeks on a fixed train")  # fmt: skip
    assert opposite_advice("Ship features when they are ready", "Do not ship features when they are ready")


def test_jaccard_basics() -> None:
    assert jaccard("use postgres locks", "locks postgres use") == 1.0
    assert jaccard("use postgres", "adopt tailwind") == 0.0
    assert jaccard("", "") == 1.0


def test_bm25_normalised() -> None:
    corpus = ["use postgres advisory locks for the job queue", "adopt tailwind for the design system",
              "use sentry for error tracking"]  # fmt: skip
    stats = Bm25Stats.build(corpus)
    assert bm25_normalised(corpus[0], corpus[0], stats) == pytest.approx(1.0)
    assert bm25_normalised(corpus[0], corpus[1], stats) == 0.0
    partial = bm25_normalised(corpus[0], "postgres advisory locks", stats)
    assert 0.3 < partial < 1.0
    # Rare words weigh more than common ones.
    assert bm25_normalised("postgres use", "postgres", stats) > bm25_normalised("postgres use", "use", stats)


words = st.lists(st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCXYZ0123456789-_.", min_size=1, max_size=10),
                 max_size=12)  # fmt: skip
texts = st.text(alphabet=st.characters(codec="ascii", categories=("L", "N", "P", "Zs")), max_size=80)


@settings(max_examples=200, deadline=None)
@given(texts, texts)
def test_jaccard_symmetric_and_bounded(a: str, b: str) -> None:
    value = jaccard(a, b)
    assert 0.0 <= value <= 1.0
    assert value == jaccard(b, a)


@settings(max_examples=200, deadline=None)
@given(words, st.lists(st.sampled_from([" ", "  ", "\t", "\n", " \n\t "]), min_size=12, max_size=12),
       st.booleans())  # fmt: skip
def test_hash_invariant_under_whitespace_and_case(parts: list[str], gaps: list[str], upper: bool) -> None:
    plain = " ".join(parts)
    spaced = " \t" + "".join(p + g for p, g in zip(parts, gaps, strict=False)) + "\n"
    variant = spaced.upper() if upper else spaced.swapcase()
    assert text_hash(plain) == text_hash(variant)


@settings(max_examples=100, deadline=None)
@given(texts, texts)
def test_bm25_normalised_bounded(a: str, b: str) -> None:
    stats = Bm25Stats.build([a, b, "some other record text"])
    assert 0.0 <= bm25_normalised(a, b, stats) <= 1.0


@settings(max_examples=100, deadline=None)
@given(texts)
def test_a_text_never_differs_from_itself(a: str) -> None:
    assert differs_in_specifics(a, a) is None
    assert substituted_slot(a, a) is None


# -- specifics, minimal pairs, contradictions ---------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "reason"),
    [
        ("Set the timeout to 30s", "Set the timeout to 300s", "number 30s vs 300s"),
        ("Set the timeout to 30 seconds", "Set the timeout to 5 minutes", "number 30s vs 5min"),
        ("Retry three times", "Retry 5 times", "number 3 vs 5"),
        ("Pin Python 3.11", "Pin Python 3.12", "version 3.11 vs 3.12"),
        ("Run pytest with --lf", "Run pytest with -x", "flag --lf vs -x"),
        ("Call requests.get() with a timeout", "Call httpx.get() with a timeout", "identifier"),
        ("Wrap get_user in a cache", "Wrap get_team in a cache", "identifier get_user vs get_team"),
        ("Derive it with useMemo", "Derive it with useCallback", "identifier"),
        ("Edit config/settings.py", "Edit app/config.py", "file"),
        ("Use Redis for sessions", "Use Memcached for sessions", "name"),
        ("Use async handlers", "Use sync handlers", "choice"),
        # Letter+digit words are names: this pair was called a duplicate before they were.
        ("concurrent decision w0 n10", "concurrent decision w0 n1", "identifier"),
        ("Serve the API over ipv6", "Serve the API over ipv4", "identifier"),
        ("Run the cleanup cron on worker-a", "Run the cleanup cron on worker-b", "identifier"),  # pair p086
    ],
)
def test_differs_in_specifics(a: str, b: str, reason: str) -> None:
    found = differs_in_specifics(a, b)
    assert found is not None and found.startswith(reason), found


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Set the timeout to 30s", "Use a 30 second timeout"),  # same number, other units spelling
        ("Use Postgres advisory locks", "Use advisory locks in postgres for the queue"),  # name lower-cased
        ("Retry 3 times", "Retry 3 times with a 2s backoff"),  # one side adds a detail
        ("Read and write through the cache", "Read/write through the cache"),  # prose slash, not a path
    ],
)
def test_no_difference_in_specifics(a: str, b: str) -> None:
    assert differs_in_specifics(a, b) is None


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # Reworded duplicates of the dev half of benchmarks/data/duplicate_pairs.jsonl that the
        # number guard used to veto: a compound number word, a hyphenated unit, a "k" multiplier.
        ("Keep pull requests under 400 lines of diff",
         "Split work so a reviewer never faces more than roughly four hundred changed lines"),  # p022
        ("Mobile releases ship on a two-week train regardless of feature readiness",
         "Whether or not features are ready, the mobile app goes out every two weeks on a fixed train"),  # p075
        ("Render only the rows in the viewport. Rendering 10k rows froze the page",
         "Only the visible rows are rendered. The page locked up rendering ten thousand rows"),  # p082
        # Two numbers of different kinds are not one replacing the other (p010).
        ("Rotate database credentials every 90 days",
         "Postgres passwords are cycled quarterly\nCompliance audit finding from SOC 2"),
    ],
)  # fmt: skip
def test_numbers_written_differently_are_the_same(a: str, b: str) -> None:
    assert differs_in_specifics(a, b) is None


def test_number_words_are_read_as_numbers() -> None:
    assert extract_specifics("roughly four hundred changed lines").numbers == {"400"}
    assert extract_specifics("ten thousand rows").numbers == extract_specifics("10k rows").numbers == {"10000"}
    assert extract_specifics("a two-week train").numbers == extract_specifics("every two weeks").numbers == {"2w"}
    # A number of the same kind replaced is still a difference, whatever the unit's spelling.
    assert differs_in_specifics("Ship on a two-week train", "Ship on a three-week train") == "number 2w vs 3w"


def test_extract_specifics() -> None:
    found = extract_specifics(
        "Run `pytest -x --maxfail=2` on tests/unit/test_api.py; call os.path.join() in v2.1.0, 30s"
    )
    assert "-x" in found.flags and "--maxfail=2" in found.flags
    assert "tests/unit/test_api.py" in found.files
    assert "os.path.join()" in found.identifiers
    assert "2.1.0" in found.versions and "30s" in found.numbers


def test_substituted_slot() -> None:
    assert substituted_slot(
        "Cache responses at the CDN keyed on the URL", "Cache responses in the browser keyed on the URL"
    )
    assert substituted_slot("Use Postgres advisroy locks", "Use Postgres advisory locks") is None  # typo fix
    assert substituted_slot("Squash-merge pull requests to keep history linear",
                            "Pull requests are squash-merged so history stays linear") is None  # fmt: skip


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Use connection pooling", "Don't use connection pooling"),
        ("Enable strict mode in tsconfig", "Disable strict mode in tsconfig"),
        ("Always squash-merge pull requests", "Never squash-merge pull requests"),
        ("Prefer composition over inheritance", "Prefer inheritance over composition"),
        ("Allow force pushes to release branches", "Forbid force pushes to release branches"),
        ("Adopt GraphQL for the public API", "Drop GraphQL for the public API"),
        ("Use Postgres, not MySQL", "Use MySQL, not Postgres"),
        ("Run migrations before the deploy", "Deploy before running migrations"),
        # The chosen-between word on both sides of "over" hid this swap (pair p128 of the set).
        ("Prefer soft deletes over hard deletes", "Prefer hard deletes over soft deletes"),
    ],
)
def test_opposite_advice(a: str, b: str) -> None:
    assert opposite_advice(a, b)
    assert opposite_advice(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # Contradictions of the dev half of benchmarks/data/duplicate_pairs.jsonl whose clauses do
        # not line up one to one; each was called a duplicate once the cosine bar was lowered.
        ("Wrap errors with fmt.Errorf(\"doing x: %w\", err) at every layer",
         "Return errors unchanged up the stack; do not wrap them at each layer"),  # p162
        ("Engineers may use kubectl directly against production for fixes",
         "No human kubectl write access to production; every change goes through GitOps"),  # p147
        ("Add user_id as a Prometheus label on request metrics so dashboards can slice by user",
         "Never put user ids in metric labels; use logs or traces for per-user detail"),  # p170
    ],
)  # fmt: skip
def test_opposite_advice_by_words_said_yes_and_no_to(a: str, b: str) -> None:
    assert opposite_advice(a, b)
    assert opposite_advice(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # Duplicates of the dev half in which one word changes polarity: one flipped word is not a reversal.
        ("Set CPU requests but no CPU limits on Kubernetes pods",
         "Kubernetes pods get CPU requests and no CPU limits"),  # p074
        ("Move background jobs off cron to a managed scheduler",
         "Stop relying on crontab entries on the VM; periodic tasks run under Cloud Scheduler"),  # p018
    ],
)  # fmt: skip
def test_one_flipped_word_is_not_opposite_advice(a: str, b: str) -> None:
    assert not opposite_advice(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Use async handlers for the gateway", "Use sync handlers for the back office"),
        ("Use Redis for caching", "Use Memcached for caching"),
        ("Use retries because the API is not reliable", "Use retries with jitter"),
        ("Validate payloads against a schema", "Validate payloads with a schema at the edge"),
        ("Use Postgres advisory locks for the queue", "Use MySQL, not Postgres, for analytics"),
        ("Store the event id and skip events already seen", "Deduplicate on the event id"),
        ("Before applying them, review Terraform plans", "Review Terraform plans before applying them"),
    ],
)
def test_not_opposite_advice(a: str, b: str) -> None:
    assert not opposite_advice(a, b)


# -- the labelled pair set -------------------------------------------------------------------


def test_pair_set_shape() -> None:
    pairs = load_pairs()
    assert len(pairs) >= 70
    counts = Counter(p["category"] for p in pairs)
    assert set(counts) == set(CATEGORY_LABEL)
    assert min(counts.values()) >= 8, counts
    for pair in pairs:
        assert pair["kind"] in ("decision", "pattern")
        assert pair["label"] == CATEGORY_LABEL[pair["category"]], pair


def _bundled_encoder():  # type: ignore[no-untyped-def]
    from lore.embedder import Embedder

    return Embedder(str(BUNDLED_MODEL_DIR)).encode


@pytest.mark.parametrize("layers", ["lexical", "semantic"])
def test_labelled_pairs_precision_recall(layers: str) -> None:
    if layers == "semantic" and not MODEL_FILE.exists():
        pytest.skip(f"bundled model missing at {MODEL_FILE}; semantic layer not evaluated")
    embed = _bundled_encoder() if layers == "semantic" else None
    tp = fp = fn = 0
    contradictions_found = contradictions = false_contradictions = 0
    mistakes: list[str] = []
    for index, pair in enumerate(load_pairs()):
        kind = pair["kind"]
        target = Record(kind=kind, id=f"target-{index}", raw=pair["a"])
        background = [Record(kind=kind, id=f"bg-{i}", raw=raw) for i, raw in enumerate(BACKGROUND[kind])]
        match, contra = find_duplicate([target, *background], kind, pair["b"], embed)
        hit = match is not None and match.record.id == target.id
        where = f"#{index} {pair['category']}: {json.dumps(pair['b'])[:90]}"
        if pair["label"] == "duplicate":
            tp += hit
            fn += not hit
            if not hit:
                mistakes.append(f"missed duplicate {where}")
        if match is not None and (not hit or pair["label"] != "duplicate"):
            fp += 1
            mistakes.append(f"false duplicate ({match.layer} {match.similarity:.2f}) {where}")
        contra_ids = {m.record.id for m in contra}
        if pair["label"] == "contradiction":
            contradictions += 1
            contradictions_found += target.id in contra_ids
            if target.id not in contra_ids:
                mistakes.append(f"missed contradiction {where}")
        elif contra_ids:
            false_contradictions += 1
            mistakes.append(f"false contradiction {where}")
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    print(f"\n[dedup {layers}] duplicate precision={precision:.3f} recall={recall:.3f} (tp={tp} fp={fp} fn={fn}); "
          f"contradictions detected {contradictions_found}/{contradictions} "
          f"({contradictions_found / max(1, contradictions):.0%}), false contradiction notices {false_contradictions}")  # fmt: skip
    for line in mistakes:
        print("   ", line)
    assert precision >= 0.95, mistakes
    assert recall >= 0.80, mistakes


def test_find_duplicate_ignores_inactive_and_other_kinds() -> None:
    raw = {"decision": "Use Postgres advisory locks for the job queue"}
    retired = Record(kind="decision", id="dec-00000001", raw={**raw, "status": "superseded"})
    pattern = Record(kind="pattern", id="pat-1-aaaa", raw={"name": raw["decision"]})
    assert find_duplicate([retired, pattern], "decision", raw, None) == (None, [])


def test_patterns_and_lessons_compared_together() -> None:
    lesson = Record(kind="lesson", id="pat-1-bbbb",
                    raw={"kind": "lesson", "name": "Quote shell variables", "solution": "Always quote \"$var\" in bash"})  # fmt: skip
    match, _ = find_duplicate(
        [lesson],
        "pattern",
        {"name": "Quote shell variables", "solution": 'Always quote "$var" in bash'},
        None,
    )
    assert match is not None and match.layer == "exact"


# -- the write path, on real files -------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "lore-data")
    store.init()
    return store


def _records(store: Store, kind: str) -> list[Record]:
    return store.load().of_kind(kind)


def test_duplicate_is_refused(store: Store) -> None:
    first = capture.remember(store, "Use Postgres advisory locks for the job queue", project="billing",
                             rationale="No separate broker", options=OPTIONS)  # fmt: skip
    with pytest.raises(DuplicateError) as caught:
        capture.remember(store, "use postgres advisory locks for the job queue.", project="billing",
                         rationale="No separate broker", options=OPTIONS)  # fmt: skip
    error = caught.value
    assert error.exit_code == 3
    assert error.existing_id == first.record.id
    assert error.similarity == 1.0
    assert first.record.id in error.message and "100%" in error.message and "exact" in error.message
    assert "Use Postgres advisory locks" in error.message
    assert error.hint and "--force" in error.hint and "--merge" in error.hint
    assert len(_records(store, "decision")) == 1


def test_reordered_duplicate_is_refused_lexically(store: Store) -> None:
    capture.learn(store, "Graceful shutdown for workers", project="x",
                  solution="Stop accepting new jobs, finish in-flight jobs, then exit on SIGTERM", options=OPTIONS)  # fmt: skip
    with pytest.raises(DuplicateError) as caught:
        capture.learn(store, "Graceful shutdown for workers", project="x",
                      solution="On SIGTERM stop accepting new jobs, finish in-flight jobs, then exit", options=OPTIONS)  # fmt: skip
    assert caught.value.exit_code == 3


def test_force_writes_anyway(store: Store) -> None:
    capture.remember(store, "Store all timestamps in UTC", project="x", options=OPTIONS)
    result = capture.remember(store, "Store all timestamps in UTC", project="x",
                              options=WriteOptions(redact=False, force=True))  # fmt: skip
    assert result.created
    assert len(_records(store, "decision")) == 2
    assert any("--force" in notice for notice in result.notices)


def test_merge_raises_confidence_and_validations(store: Store) -> None:
    first = capture.learn(store, "Debounce search input", project="x", confidence=0.5,
                          solution="Wait for a pause in typing before querying", options=OPTIONS)  # fmt: skip
    result = capture.learn(store, "Debounce search input", project="x", confidence=0.9,
                           solution="Wait for a pause in typing before querying",
                           options=WriteOptions(redact=False, merge=True))  # fmt: skip
    assert not result.created and result.merged_into == first.record.id
    patterns = _records(store, "pattern")
    assert len(patterns) == 1
    assert patterns[0].confidence == pytest.approx(0.9)
    assert patterns[0].raw["validations"] == 1
    assert any("merged into" in notice for notice in result.notices)


def test_merge_keeps_the_higher_confidence(store: Store) -> None:
    capture.remember(store, "Adopt trunk-based development", project="x", confidence=0.9, options=OPTIONS)
    result = capture.remember(store, "Adopt trunk-based development", project="x", confidence=0.6,
                              options=WriteOptions(redact=False, merge=True))  # fmt: skip
    assert not result.created
    [decision] = _records(store, "decision")
    assert decision.confidence == pytest.approx(0.9)


def test_contradiction_writes_with_a_notice(store: Store) -> None:
    first = capture.remember(
        store, "Enable strict mode in tsconfig for all packages", project="x", options=OPTIONS
    )
    result = capture.remember(
        store, "Disable strict mode in tsconfig for all packages", project="x", options=OPTIONS
    )
    assert result.created
    assert len(_records(store, "decision")) == 2
    [notice] = [n for n in result.notices if n.startswith("contradicts")]
    assert first.record.id in notice and "{new_id}" in notice
    assert f"lore link {{new_id}} {first.record.id} contradicts" in notice
    assert f"lore supersede {first.record.id} {{new_id}}" in notice


def test_identifier_with_a_digit_changed_is_written(store: Store) -> None:
    # Issue 14: "concurrent decision w0 n10" was refused as a 100% duplicate of "... w0 n1".
    capture.remember(store, "concurrent decision w0 n1", project="x", options=OPTIONS)
    result = capture.remember(store, "concurrent decision w0 n10", project="x", options=OPTIONS)
    assert result.created and len(_records(store, "decision")) == 2


def _dev_pair_verdict(a: dict, b: dict, kind: str) -> tuple[Match | None, list[Match]]:
    target = Record(kind=kind, id="target", raw=a)
    background = [Record(kind=kind, id=f"bg-{i}", raw=raw) for i, raw in enumerate(BACKGROUND[kind])]
    from lore.embedder import get_query_encoder

    return find_duplicate([target, *background], kind, b, get_query_encoder(str(BUNDLED_MODEL_DIR)).encode)


def test_a_number_spelled_out_does_not_veto_a_duplicate() -> None:
    # The guard read "four hundred" as 4 and 100, and vetoed this as "number 4 vs 400".
    match, _ = _dev_pair_verdict(
        {"decision": "Keep pull requests under 400 changed lines", "rationale": "Large PRs got rubber-stamped"},
        {"decision": "Keep pull requests under four hundred changed lines", "rationale": "Large PRs got rubber-stamped"},
        "decision",
    )  # fmt: skip
    assert match is not None and match.record.id == "target", match
    match, _ = _dev_pair_verdict(
        {"decision": "Keep pull requests under 400 changed lines", "rationale": "Large PRs got rubber-stamped"},
        {"decision": "Keep pull requests under four thousand changed lines", "rationale": "Large PRs got rubber-stamped"},
        "decision",
    )  # fmt: skip
    assert match is None


def test_opposite_advice_is_reported_not_refused() -> None:
    match, contradictions = _dev_pair_verdict(
        {"name": "Error context in Go", "solution": 'Wrap errors with fmt.Errorf("doing x: %w", err) at every layer'},
        {"name": "Error context in Go", "solution": "Return errors unchanged up the stack; do not wrap them at each layer",
         "problem": "Wrapped messages became unreadable chains"},
        "pattern",
    )  # fmt: skip
    assert match is None
    assert [m.record.id for m in contradictions] == ["target"]


def test_number_changed_is_written(store: Store) -> None:
    capture.remember(
        store, "Set the HTTP client timeout to 30s for the payments API", project="x", options=OPTIONS
    )
    result = capture.remember(store, "Set the HTTP client timeout to 300s for the payments API", project="x",
                              options=OPTIONS)  # fmt: skip
    assert result.created and len(_records(store, "decision")) == 2


def test_retracted_record_is_not_a_duplicate(store: Store) -> None:
    first = capture.remember(store, "Use Memcached for sessions", project="x", options=OPTIONS)
    capture.retract(store, first.record.id, "moved to Redis")
    assert capture.remember(store, "Use Memcached for sessions", project="x", options=OPTIONS).created


def test_model_error_skips_semantic_layer(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(spec: str | None = None):  # type: ignore[no-untyped-def]
        raise ModelError("cannot load embedding model 'x': boom")

    monkeypatch.setattr("lore.embedder.get_query_encoder", broken)
    capture.remember(store, "Use Sentry for error tracking", project="x", options=OPTIONS)
    outcome = check_before_write(store, "decision", {"decision": "Use Sentry for error tracking"}, force=False,
                                 merge=True)  # fmt: skip
    assert outcome.merged is not None
    assert any("semantic duplicate check skipped" in n for n in outcome.notices)


def test_empty_store_needs_no_model(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    def unexpected(spec: str | None = None):  # type: ignore[no-untyped-def]
        raise AssertionError("the model is not needed when nothing can match")

    monkeypatch.setattr("lore.embedder.get_query_encoder", unexpected)
    outcome = check_before_write(store, "decision", {"decision": "Anything"}, force=False, merge=False)
    assert outcome.duplicate is None and outcome.notices == []


def test_consolidation_clusters(store: Store) -> None:
    force = WriteOptions(redact=False, force=True)
    a = capture.remember(store, "Store all timestamps in UTC", project="x", options=force)
    b = capture.remember(store, "store all timestamps in utc.", project="x", options=force)
    c = capture.remember(store, "Store all timestamps in UTC ", project="x", options=force)
    capture.remember(store, "Adopt Tailwind for the design system", project="x", options=force)
    capture.learn(
        store, "Graceful shutdown", project="x", solution="Finish in-flight jobs, then exit", options=force
    )
    capture.learn(
        store, "Graceful shutdown", project="x", solution="Finish in-flight jobs then exit", options=force
    )
    clusters = consolidation_clusters(store.load(), None)
    assert [len(c) for c in clusters] == [3, 2]
    assert {m.record.id for m in clusters[0]} == {a.record.id, b.record.id, c.record.id}
    assert all(isinstance(m, Match) and m.layer == "exact" for m in clusters[0])


def test_dedup_thresholds_hold_the_precision_bar_on_the_dev_half_they_were_chosen_on() -> None:
    from benchmarks.duplicates import PRECISION_BAR, figures, load_pairs, lore_verdicts
    from lore.embedder import get_query_encoder

    assert (dedup.LEXICAL_BM25, dedup.LEXICAL_JACCARD, dedup.SEMANTIC_COSINE, dedup.CORE_COSINE) == (0.60, 0.80, 0.80, 0.60)
    assert dedup.CORE_COSINE <= dedup.SEMANTIC_COSINE
    dev = [pair for pair in load_pairs() if pair["split"] == "dev"]
    result = figures(dev, lore_verdicts(dev, get_query_encoder().encode))
    assert result["precision"] >= PRECISION_BAR and result["specifics_called_duplicate"] == 0.0, result


def test_contradiction_figures_count_reports_and_false_notices() -> None:
    from benchmarks.duplicates import contradiction_figures

    pairs = [{"label": "contradiction"}, {"label": "contradiction"}, {"label": "duplicate"}, {"label": "distinct"}]
    # (called a duplicate, the stored record reported as contradicted, another record reported)
    checks = [(False, True, False), (False, False, True), (True, False, False), (False, True, False)]
    assert contradiction_figures(pairs, checks) == {"contradictions": 2, "reported": 1, "false_notices": 2}
