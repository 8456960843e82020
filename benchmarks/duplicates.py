"""Duplicate detection on the labelled pair set, dev and test splits, against simple baselines.

Each pair (a, b) is checked the way ``lore remember`` / ``lore learn`` checks a
new record: ``a`` is stored among a dozen unrelated records of its kind, ``b``
is the new record. A pair is called a duplicate when ``b`` is refused as a
duplicate of ``a`` (a match with a background record counts against precision).

Baselines, each with its threshold chosen on the dev split (the lowest one whose
dev precision is at least 0.95, the bar the issue sets):

* ``exact``: normalised texts equal;
* ``jaccard``: stemmed word Jaccard of the full texts;
* ``cosine``: the bundled model's cosine of the full texts.

lore's contradiction notices are counted too: contradictions reported as such, and
pairs that got a notice they should not have (on a non-contradiction, or naming a
background record).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.sets import data_file, read_jsonl

PAIRS = "duplicate_pairs.jsonl"
PRECISION_BAR = 0.95
SPECIFIC_CATEGORIES = ("identifier-changed", "number-changed")
PARAPHRASE_CATEGORIES = ("paraphrase-low-overlap",)

# Other records in the store while each pair is checked: realistic BM25 statistics, and a
# match against any of them is a false positive.
BACKGROUND: dict[str, list[dict[str, Any]]] = {
    "decision": [
        {"decision": "Use Sentry for error tracking in all services", "rationale": "One place to triage exceptions"},
        {"decision": "Host internal docs in the repository as Markdown", "rationale": "Docs change with the code"},
        {"decision": "Use Terraform workspaces per environment"},
        {"decision": "Store feature flags in LaunchDarkly"},
        {"decision": "Publish the mobile app through staged rollouts", "rationale": "Catch crashes on a small share of users"},
        {"decision": "Keep the billing service on a separate database", "rationale": "Isolation of financial data"},
        {"decision": "Serve static assets from CloudFront", "rationale": "Cache close to users"},
        {"decision": "Draw architecture diagrams in Mermaid inside the docs", "rationale": "Diagrams are reviewed with the code"},
        {"decision": "Keep a CHANGELOG.md in the Keep a Changelog format"},
        {"decision": "Standardise on ruff for Python linting and formatting", "rationale": "One fast tool instead of four"},
        {"decision": "Run load tests before every major release", "rationale": "Capacity regressions slipped through"},
        {"decision": "Record a product demo at every sprint review"},
    ],
    "pattern": [
        {"name": "Feature flags for unfinished work", "solution": "Merge unfinished features behind a flag that defaults off"},
        {"name": "Screenshots in bug reports", "solution": "Attach a screenshot and the exact build number to every UI bug"},
        {"name": "Runbooks next to alerts", "solution": "Link every alert to a runbook page that says what to check first"},
        {"name": "Backpressure in stream consumers", "solution": "Pause consumption when the processing buffer is above a high-water mark"},
        {"name": "Stable sort keys for pagination", "solution": "Order by a unique column as a tie-breaker so pages never overlap"},
        {"name": "Typed configuration", "solution": "Parse environment variables into a typed settings object at startup and fail fast"},
        {"name": "Property-based tests for parsers", "solution": "Generate random inputs and check round-trip properties"},
        {"name": "Fixtures built by factories", "solution": "Create test data with factory functions that fill sensible defaults"},
        {"name": "Small pull requests", "solution": "Split changes into reviewable steps under 400 lines each"},
        {"name": "Timeouts on every network call", "solution": "Give each outbound call a deadline derived from the caller's budget"},
        {"name": "Check exit codes in pipelines", "solution": "Set pipefail so a failing command in a pipe fails the script"},
        {"name": "Soft deletes for user content", "solution": "Mark rows deleted with a timestamp and purge them after the retention window"},
    ],
}  # fmt: skip


def load_pairs() -> list[dict[str, Any]]:
    return list(read_jsonl(data_file(PAIRS)))


def _record(kind: str, raw: dict[str, Any], number: int) -> Any:
    from lore.store.records import Record

    prefix = "dec" if kind == "decision" else "pat"
    record_id = f"{prefix}-{number:08x}"
    return Record(kind, record_id, {"id": record_id, "timestamp": "2026-01-01T00:00:00Z", "status": "active", **raw})


def lore_checks(pairs: list[dict[str, Any]], embed: Callable[[list[str]], Any] | None) -> list[tuple[bool, bool, bool]]:
    """For each pair: (``b`` refused as a duplicate, ``a`` reported as contradicted, another record reported)."""
    from lore.curate.dedup import find_duplicate

    backgrounds = {kind: [_record(kind, raw, 0x100 + i) for i, raw in enumerate(raws)] for kind, raws in BACKGROUND.items()}
    checks = []
    for pair in pairs:
        kind = pair["kind"]
        stored = _record(kind, pair["a"], 1)
        match, contradictions = find_duplicate([*backgrounds[kind], stored], kind, pair["b"], embed)
        reported = {m.record.id for m in contradictions}
        checks.append((match is not None, stored.id in reported, bool(reported - {stored.id})))
    return checks


def lore_verdicts(pairs: list[dict[str, Any]], embed: Callable[[list[str]], Any] | None) -> list[bool]:
    """For each pair: was ``b`` refused as a duplicate of ``a``?"""
    return [called for called, _, _ in lore_checks(pairs, embed)]


def contradiction_figures(pairs: list[dict[str, Any]], checks: list[tuple[bool, bool, bool]]) -> dict[str, Any]:
    """How many contradictions were reported as such, and how many pairs got a notice they should not have."""
    contradictions = [c for c, p in zip(checks, pairs, strict=True) if p["label"] == "contradiction"]
    false_notices = sum(
        1 for (_, on_target, elsewhere), p in zip(checks, pairs, strict=True)
        if elsewhere or (on_target and p["label"] != "contradiction")
    )  # fmt: skip
    return {"contradictions": len(contradictions), "reported": sum(1 for _, on_target, _ in contradictions if on_target),
            "false_notices": false_notices}  # fmt: skip


def full_text(kind: str, raw: dict[str, Any]) -> str:
    from lore.curate.dedup import compared_text

    return "\n".join(t for t in compared_text(kind, raw) if t)


def scores(pairs: list[dict[str, Any]], embed: Callable[[list[str]], Any] | None) -> dict[str, list[float]]:
    """Each baseline's similarity for each pair."""
    import numpy as np

    from lore.curate.similarity import jaccard, text_hash, tokens

    texts = [(full_text(p["kind"], p["a"]), full_text(p["kind"], p["b"])) for p in pairs]
    result = {
        "exact": [float(text_hash(a) == text_hash(b)) for a, b in texts],
        "jaccard": [jaccard(tokens(a), tokens(b)) for a, b in texts],
    }
    if embed is not None:
        vectors = np.asarray(embed([t for pair in texts for t in pair]), dtype=np.float32)
        result["cosine"] = [float(vectors[2 * i] @ vectors[2 * i + 1]) for i in range(len(texts))]
    return result


def figures(pairs: list[dict[str, Any]], called: list[bool]) -> dict[str, Any]:
    positives = [p["label"] == "duplicate" for p in pairs]
    tp = sum(1 for c, p in zip(called, positives, strict=True) if c and p)
    fp = sum(1 for c, p in zip(called, positives, strict=True) if c and not p)
    fn = sum(1 for c, p in zip(called, positives, strict=True) if p and not c)

    def share(category: tuple[str, ...]) -> float | None:
        picked = [c for c, p in zip(called, pairs, strict=True) if p["category"] in category]
        return round(sum(picked) / len(picked), 4) if picked else None

    return {
        "precision": round(tp / (tp + fp), 4) if tp + fp else 1.0,
        "recall": round(tp / (tp + fn), 4) if tp + fn else 1.0,
        "true_positives": tp, "false_positives": fp, "false_negatives": fn,
        "paraphrase_recall": share(PARAPHRASE_CATEGORIES),
        "specifics_called_duplicate": share(SPECIFIC_CATEGORIES),
        "contradictions_called_duplicate": share(("contradiction", "opposite-advice")),
    }  # fmt: skip


def threshold_on_dev(values: list[float], pairs: list[dict[str, Any]]) -> float:
    """The lowest threshold whose dev precision reaches the bar (the highest-precision one if none does)."""
    best: tuple[float, float] | None = None
    for candidate in sorted(set(values)):
        called = [v >= candidate for v in values]
        f = figures(pairs, called)
        if f["precision"] >= PRECISION_BAR and f["true_positives"]:
            return candidate
        if best is None or f["precision"] > best[0]:
            best = (f["precision"], candidate)
    return best[1] if best else 1.0


def evaluate_pairs(progress: Callable[[str], None] | None = None, *, use_model: bool = True) -> dict[str, Any]:
    from benchmarks import settings
    from lore.embedder import get_query_encoder

    pairs = load_pairs()
    embed = get_query_encoder(settings().embed_model).encode if use_model else None  # what the write check embeds with
    if progress:
        progress(f"duplicates: {len(pairs)} labelled pairs")
    split = {s: [i for i, p in enumerate(pairs) if p["split"] == s] for s in ("dev", "test")}
    detectors: dict[str, Any] = {}
    checks = lore_checks(pairs, embed)
    verdicts = [called for called, _, _ in checks]
    detectors["lore"] = {s: figures([pairs[i] for i in idx], [verdicts[i] for i in idx]) for s, idx in split.items()}
    contradictions = {s: contradiction_figures([pairs[i] for i in idx], [checks[i] for i in idx]) for s, idx in split.items()}
    for name, values in scores(pairs, embed).items():
        dev_pairs = [pairs[i] for i in split["dev"]]
        threshold = threshold_on_dev([values[i] for i in split["dev"]], dev_pairs)
        detectors[f"{name} >= {threshold:.2f}"] = {
            s: figures([pairs[i] for i in idx], [values[i] >= threshold for i in idx]) for s, idx in split.items()
        }
    return {"pairs": len(pairs), "dev": len(split["dev"]), "test": len(split["test"]), "detectors": detectors,
            "contradiction_notices": contradictions}  # fmt: skip
