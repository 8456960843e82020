"""The gate threshold of the surfaces where someone asks for memory, from the question sets' dev splits.

    python scripts/asked_threshold.py [--shared ../shared]

``lore context``, MCP ``context`` and ``Lore.context`` answer a question someone
asked: their best candidates always come, in full where the evidence is strong and as
pointers otherwise; a block without a full item carries the evidence-gap line. Their
full threshold (``InjectSettings.asked_gate_threshold``) is the highest that leaves at
most 10% of the answerable dev questions of each of the demo, memory and known-item
sets without a full item, with the weights as fitted (``scripts/fit_injection.py``).
Prints each set's share of answerable and unanswerable questions marked a gap at the
chosen threshold. The test splits are never read.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout's benchmarks package

from benchmarks import sets
from benchmarks.matrix import open_set
from lore.context import decide
from lore.rank import inject, null
from lore.search import search_options

MAX_REFUSED = 0.10


Judge = list[tuple[float, bool]]  # per question: the gate, and whether an item clears the item score alone


def gates(evalset: sets.EvalSet, work: Path) -> tuple[Judge, Judge]:
    """Each answerable and unanswerable dev question's gate and item verdict, searched as `lore context` searches."""
    searcher = open_set(evalset, work)
    try:
        null.ensure(searcher.session, evalset.now)
        evidence = null.load(searcher.session.open("ignore").directory)
        options = search_options(limit=5, graph_depth=1, include_candidates=False)._replace(now=evalset.now)
        never = inject.DEFAULT_SETTINGS._replace(asked_gate_threshold=2.0)  # full items by the item score alone

        def judged(text: str) -> tuple[float, bool]:
            decision = decide(searcher.query(text, options), null=evidence, asked=True, settings=never)
            return decision.gate, bool(decision.chosen)

        return ([judged(t) for t in evalset.answerable("dev").values()],
                [judged(t) for t in evalset.unanswerable("dev").values()])  # fmt: skip
    finally:
        searcher.close()


def gap_share(questions: Judge, threshold: float) -> float:
    """The share marked a gap (no full item) with the asked full threshold at ``threshold``."""
    return sum(1 for gate, item in questions if gate < threshold and not item) / max(len(questions), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shared", type=Path, default=Path("../shared"))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lore-asked-"))
    found = {name: gates(evalset, work) for name, evalset in
             (("demo", sets.demo()), ("memory", sets.memory(args.shared)), ("knownitem", sets.knownitem(args.shared)))}  # fmt: skip
    best = 0.0
    for step in range(0, 201):
        threshold = step / 200
        if all(gap_share(answerable, threshold) <= MAX_REFUSED for answerable, _ in found.values()):
            best = threshold
    print(f"asked_gate_threshold: {best}")
    for name, (answerable, unanswerable) in found.items():
        print(f"  {name}: a gap for {gap_share(answerable, best):.0%} of {len(answerable)} answerable and "
              f"{gap_share(unanswerable, best):.0%} of {len(unanswerable)} unanswerable dev questions")


if __name__ == "__main__":
    main()
