"""Whole-store consolidation: find clusters of near-duplicates, and merge a cluster on request.

Merging keeps history: nothing is deleted. The survivor is the **newest** record of the
cluster (its wording is the most recent; ties go to the higher confidence, then the
larger id); it takes the highest confidence in the cluster, and each other member becomes
``status: superseded`` with ``superseded_by`` naming the survivor and a ``supersedes``
edge from the survivor. The survivor's update is audited with op ``merge``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lore.curate.dedup import Match, consolidation_clusters
from lore.curate.write_check import model_embed
from lore.errors import UsageError
from lore.store import Record, Store

# --type values: a group is compared when it holds the kind (patterns and lessons are one group).
TYPE_KINDS = {
    "decision": ("decision",), "pattern": ("pattern", "lesson"), "lesson": ("pattern", "lesson"),
    "anti_pattern": ("anti_pattern",),
}  # fmt: skip


@dataclass
class Cluster:
    members: list[Match]  # oldest first, as consolidation_clusters returns them
    survivor: Record

    @property
    def others(self) -> list[Match]:
        return [m for m in self.members if m.record.id != self.survivor.id]

    @property
    def best_confidence(self) -> float:
        return max(m.record.confidence for m in self.members)


@dataclass
class Review:
    clusters: list[Cluster] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)


def _moment(record: Record) -> str:
    moment = record.timestamp
    return moment.isoformat() if moment else ""


def choose_survivor(records: list[Record]) -> Record:
    """The newest record; on equal timestamps the higher confidence, then the larger id."""
    return max(records, key=lambda r: (_moment(r), r.confidence, r.id))


def find_clusters(store: Store, type_filter: str | None = None, *, semantic: bool = True,
                  model: str | None = None) -> Review:  # fmt: skip
    """Clusters of active near-duplicates across the store (lexical only when the model is unavailable)."""
    kinds: tuple[str, ...] | None = None
    if type_filter is not None:
        from lore.store.records import normalise_kind

        kind = normalise_kind(type_filter)
        if kind not in TYPE_KINDS:
            raise UsageError(
                f"cannot consolidate {kind} records", hint="types: decision, pattern, anti-pattern"
            )
        kinds = TYPE_KINDS[kind]
    store.require()
    review = Review()
    snapshot = store.load()
    if snapshot.incomplete_files:
        names = ", ".join(sorted(str(p) for p in snapshot.incomplete_files))
        review.notices.append(
            f"some files did not parse completely ({names}); their bad lines are not compared"
        )
    embed = model_embed(review.notices, model) if semantic else None
    for members in consolidation_clusters(snapshot, embed, kinds):
        review.clusters.append(
            Cluster(members=members, survivor=choose_survivor([m.record for m in members]))
        )
    return review


@dataclass
class MergeResult:
    survivor: Record
    superseded: list[Record]
    confidence: float


def merge_cluster(store: Store, cluster: Cluster) -> MergeResult:
    """Merge one reviewed cluster into its survivor (see the module docstring for the rule)."""
    from lore.capture import supersede

    snapshot = store.load()
    current = [snapshot.get(m.record.id) for m in cluster.members]
    stale = [r.id for r in current if not r.active]
    if stale:
        raise UsageError(
            f"{', '.join(stale)} changed since the review (no longer active); run consolidate again"
        )
    survivor = snapshot.get(cluster.survivor.id)
    others = [r for r in current if r.id != survivor.id]
    confidence = round(max(r.confidence for r in current), 4)
    key = (
        "rule_confidence" if survivor.kind == "lesson" and "rule_confidence" in survivor.raw else "confidence"
    )

    def mutate(raw: dict[str, Any]) -> None:
        raw[key] = confidence
        if survivor.kind in ("pattern", "lesson"):
            validations = raw.get("validations")
            raw["validations"] = (validations if isinstance(validations, int) else 0) + len(others)

    detail = {"merged": [r.id for r in others], "confidence": confidence,
              "similarity": {m.record.id: m.similarity for m in cluster.members},
              "layer": {m.record.id: m.layer for m in cluster.members}}  # fmt: skip
    updated = store.update(survivor.id, mutate, op="merge", detail=detail)
    superseded = [supersede(store, other.id, survivor.id) for other in others]
    return MergeResult(survivor=updated, superseded=superseded, confidence=confidence)
