"""Query intent by nearest centroid of embedded seed phrases, and what each intent prefers.

Centroids are computed once per embedding model and cached next to the index.
An empty or unclassifiable query falls back to ``understand``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import numpy as np

FALLBACK = "understand"
# Below this cosine to the nearest centroid the query is unclassifiable. Set for the
# bundled WordLlama model, whose cosines run lower than the distilled model's (which
# used 0.25): 0.2 leaves 44 of the 137 known-item questions and 9 of 25 demo
# questions unclassified (47 and 8 before), and still every one of five junk
# queries ("asdf qwer zxcv", "ok thanks", ...).
MIN_SIMILARITY = 0.2
MIN_MARGIN = 0.02

SEED_PHRASES: dict[str, tuple[str, ...]] = {
    "add_feature": (
        "add a new feature", "implement support for a new endpoint", "build a new screen for users",
        "create an integration with a third-party service", "add an option to the command",
        "introduce a new capability", "extend the API with a new field", "ship the new onboarding flow",
    ),
    "fix_bug": (
        "fix the bug where requests fail", "why is this crashing", "error when running the tests",
        "the build is broken", "exception thrown in production", "debug the failing job",
        "timeout errors after deploy", "it returns the wrong result", "stack trace null pointer",
    ),
    "refactor": (
        "refactor this module", "clean up the code", "split the large function into smaller ones",
        "rename and restructure the package", "remove duplication", "simplify the design",
        "migrate the code to the new library", "extract a shared helper",
    ),
    "security_audit": (
        "security audit of the service", "are there any vulnerabilities", "how do we store secrets",
        "authentication and authorization checks", "injection attacks and input validation",
        "rotate leaked credentials", "encryption of data at rest", "permissions and access control review",
    ),
    "understand": (
        "how does this work", "explain the architecture", "what does this component do",
        "give me an overview of the system", "walk me through the data flow", "where is this handled",
    ),
    "find_decision": (
        "why did we choose this database", "what was decided about the queue", "why did we pick this approach",
        "what were the alternatives we considered", "when did we decide to switch", "the rationale behind the choice",
        "did we decide against using it",
    ),
    "find_pattern": (
        "what is the best practice for this", "how should I structure this", "is there a pattern for handling",
        "the recommended way to do it", "conventions we follow for", "what should I avoid when",
        "lessons learned about",
    ),
}  # fmt: skip

# Channel weight multipliers and record-type preferences per intent.
CHANNEL_ADJUST: dict[str, dict[str, float]] = {
    "fix_bug": {"bm25": 1.3, "hyde": 0.8},
    "security_audit": {"bm25": 1.2},
    "find_decision": {"vector": 1.1},
    "find_pattern": {"hyde": 1.1},
}
TYPE_PREFERENCES: dict[str, dict[str, float]] = {
    "fix_bug": {"failure": 1.3, "lesson": 1.3, "anti_pattern": 1.25, "pattern": 1.05, "observation": 1.05},
    "find_decision": {"decision": 1.3, "handoff": 0.9, "observation": 0.85},
    "find_pattern": {"pattern": 1.3, "lesson": 1.2, "anti_pattern": 1.2},
    "security_audit": {"anti_pattern": 1.2, "lesson": 1.15, "decision": 1.05},
    "refactor": {"pattern": 1.15, "anti_pattern": 1.15, "decision": 1.05},
    "add_feature": {"decision": 1.1, "pattern": 1.1, "handoff": 1.05},
    "understand": {},
}

INTENTS = tuple(SEED_PHRASES)


class IntentResult(NamedTuple):
    intent: str
    similarity: float
    margin: float
    fallback: bool


def compute_centroids(encode: Callable[[list[str]], np.ndarray]) -> dict[str, list[float]]:
    import numpy as np

    centroids = {}
    for intent, phrases in SEED_PHRASES.items():
        vectors = encode(list(phrases))
        centroid = vectors.mean(axis=0)
        norm = float(np.linalg.norm(centroid)) or 1.0
        centroids[intent] = (centroid / norm).astype(float).tolist()
    return centroids


def load_centroids(cache: Path, identity: str, encode: Callable[[list[str]], np.ndarray]) -> dict[str, list[float]]:
    """Centroids for the model ``identity``, computed on first use and cached in ``cache``.

    The cache is disposable: anything in it that is not this model's centroids (junk,
    another model's, a half-written file) is recomputed and replaced.
    """
    import orjson  # the cold hook's path imports this module, never this function

    try:
        data = orjson.loads(cache.read_bytes())
        if isinstance(data, dict) and data.get("model") == identity and data.get("phrases") == _phrases_key():
            cached = _valid_centroids(data.get("centroids"))
            if cached is not None:
                return cached
    except (OSError, ValueError):  # orjson.JSONDecodeError is a ValueError
        pass
    centroids = compute_centroids(encode)
    import secrets

    tmp = cache.with_name(f"{cache.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")  # one per writer
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(orjson.dumps({"model": identity, "phrases": _phrases_key(), "centroids": centroids}))
        tmp.replace(cache)
    except OSError:  # a read-only cache dir only costs recomputation
        with contextlib.suppress(OSError):
            tmp.unlink()
    return centroids


def _valid_centroids(value: object) -> dict[str, list[float]] | None:
    """``value`` if it holds one vector of numbers per intent, all of one dimension; else None."""
    if not isinstance(value, dict) or set(value) != set(INTENTS):
        return None
    dims = set()
    for vector in value.values():
        if not isinstance(vector, list) or not vector or not all(isinstance(x, (int, float)) for x in vector):
            return None
        dims.add(len(vector))
    return dict(value) if len(dims) == 1 else None


def _phrases_key() -> str:
    import hashlib

    import orjson

    return hashlib.sha256(orjson.dumps(SEED_PHRASES, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def classify(query_vector: np.ndarray | None, centroids: dict[str, list[float]] | None, query_text: str) -> IntentResult:
    import numpy as np

    if query_vector is None or not centroids or not query_text.strip() or not np.any(query_vector):
        return IntentResult(FALLBACK, 0.0, 0.0, True)
    names = list(centroids)
    matrix = np.asarray([centroids[n] for n in names], dtype=np.float32)
    sims = matrix @ np.asarray(query_vector, dtype=np.float32)
    order = np.argsort(-sims)
    best, second = float(sims[order[0]]), float(sims[order[1]]) if len(order) > 1 else 0.0
    if best < MIN_SIMILARITY or best - second < MIN_MARGIN:
        return IntentResult(FALLBACK, best, best - second, True)
    return IntentResult(names[int(order[0])], best, best - second, False)
