"""Pattern reliability: outcome counts, a confidence that follows them, pruning.

The rule: a pattern's confidence is the mean of a Beta distribution over "this pattern
works". Its prior is the confidence the pattern had before its first recorded outcome,
held with the weight of ``PRIOR_WEIGHT`` outcomes; each success adds one to the
successes, each failure one to the failures. With ``s`` successes, ``f`` failures and
prior confidence ``c0``::

    confidence = (s + PRIOR_WEIGHT * c0) / (s + f + PRIOR_WEIGHT)

It is computed incrementally, so no prior has to be stored: with ``k = s + f`` outcomes
so far and the current confidence ``c``, a success gives ``(c * (k + W) + 1) / (k + W + 1)``
and a failure ``c * (k + W) / (k + W + 1)``. ``W = 4`` keeps the first step of the
original Lore's ``validate`` (0.5 -> 0.6). Successes are stored in the original's
``validations`` field (so ``lore validate`` is an outcome with success, and counts it
where bash Lore did); failures in ``failures``.

``prune`` retracts the patterns that failures brought below a threshold: a pattern no
failure was recorded against is untested, not unreliable, and is never pruned. A pruned
pattern is retracted (it stays in its file, audited as ``prune``) and ``restore`` makes
it active again (audited as ``restore``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lore.errors import UsageError
from lore.store import Record, Store

PRIOR_WEIGHT = 4
OUTCOME_KINDS = ("pattern", "lesson", "anti_pattern")


def _count(raw: dict[str, Any], name: str) -> int:
    value = raw.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def successes(record: Record) -> int:
    return _count(record.raw, "validations")


def failures(record: Record) -> int:
    return _count(record.raw, "failures")


def next_confidence(confidence: float, outcomes: int, success: bool) -> float:
    """The Beta mean after one more outcome, from the current mean and the outcomes so far."""
    weight = outcomes + PRIOR_WEIGHT
    return round((confidence * weight + (1.0 if success else 0.0)) / (weight + 1), 4)


def _confidence_field(record: Record) -> str:
    # A lesson's confidence is its rule_confidence (Record.confidence reads that first).
    return "rule_confidence" if record.kind == "lesson" and "rule_confidence" in record.raw else "confidence"


def record_outcome(store: Store, pattern_id: str, success: bool) -> Record:
    """Count one success or failure of a pattern and move its confidence by the Beta rule."""
    store.require()
    record = store.load().get(pattern_id)
    if record.kind not in OUTCOME_KINDS:
        raise UsageError(f"{record.id} is a {record.kind}; outcomes are recorded for patterns and lessons")
    field_name = _confidence_field(record)

    def mutate(raw: dict[str, Any]) -> None:
        # From the record as read under the lock: a concurrent outcome must not be lost.
        current = Record(kind=record.kind, id=record.id, raw=raw).confidence
        wins, losses = _count(raw, "validations"), _count(raw, "failures")
        raw[field_name] = next_confidence(current, wins + losses, success)
        if success:
            raw["validations"] = wins + 1
        else:
            raw["failures"] = losses + 1

    op = "validate" if success else "outcome"
    return store.update(record.id, mutate, op=op, detail={"success": success})


@dataclass(frozen=True)
class Pruned:
    record: Record
    reliability: float


def prune_candidates(store: Store, threshold: float) -> list[Pruned]:
    """Active patterns with at least one failure whose confidence is below ``threshold``."""
    if not 0.0 <= threshold <= 1.0:
        raise UsageError(f"the threshold must be between 0 and 1, got {threshold}")
    found = [
        Pruned(record, record.confidence)
        for record in store.load().of_kind(*OUTCOME_KINDS)
        if record.active and failures(record) > 0 and record.confidence < threshold
    ]
    return sorted(found, key=lambda p: (p.reliability, p.record.id))


def prune(store: Store, threshold: float, *, dry_run: bool = False) -> list[Pruned]:
    """Retract what ``prune_candidates`` finds (audited as ``prune``; ``restore`` undoes it)."""
    store.require()
    found = prune_candidates(store, threshold)
    if dry_run:
        return found
    pruned = []
    for item in found:
        reason = (f"pruned: reliability {item.reliability:.2f} below {threshold:.2f} after "
                  f"{successes(item.record)} success(es) and {failures(item.record)} failure(s)")  # fmt: skip
        now = store.now_iso()

        def mutate(raw: dict[str, Any], reason: str = reason, now: str = now) -> None:
            raw["status"] = "retracted"
            raw["retracted_reason"] = reason
            raw["status_changed_at"] = now

        updated = store.update(item.record.id, mutate, op="prune",
                               detail={"reason": reason, "threshold": threshold})  # fmt: skip
        pruned.append(Pruned(updated, item.reliability))
    return pruned


def restore(store: Store, record_id: str) -> Record:
    """Make a retracted record active again (the undo of ``retract`` and ``prune``)."""
    store.require()
    record = store.load().get(record_id)
    if record.status != "retracted":
        raise UsageError(f"{record.id} is {record.status}; only a retracted record can be restored",
                         hint="a superseded record comes back by retracting the one that superseded it")  # fmt: skip
    now = store.now_iso()

    def mutate(raw: dict[str, Any]) -> None:
        raw["status"] = "active"
        raw["retracted_reason"] = None
        raw["status_changed_at"] = now

    return store.update(record.id, mutate, op="restore", detail={"was": record.raw.get("retracted_reason")})
