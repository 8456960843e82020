"""The gate threshold of the surfaces where someone asks for memory, from the question sets' dev splits.

    python scripts/asked_threshold.py [--shared ../shared]

``lore context``, MCP ``context`` and ``Lore.context`` answer a question someone
asked: their gate threshold (``InjectSettings.asked_gate_threshold``) is the highest
that refuses at most 5% of the answerable dev questions of each of the demo, memory
and known-item sets, with the gate as fitted (``scripts/fit_injection.py``). Prints
each set's gate values' refusal shares (answerable and unanswerable) at the chosen
threshold. The test splits are never read.
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

MAX_REFUSED = 0.05


def gates(evalset: sets.EvalSet, work: Path) -> tuple[list[float], list[float]]:
    """The gate of every answerable and unanswerable dev question, searched as `lore context` searches."""
    searcher = open_set(evalset, work)
    try:
        null.ensure(searcher.session, evalset.now)
        evidence = null.load(searcher.session.open("ignore").directory)
        options = search_options(limit=5, graph_depth=1, include_candidates=False)._replace(now=evalset.now)

        def gate(text: str) -> float:
            return decide(searcher.query(text, options), null=evidence, asked=True).gate

        return ([gate(t) for t in evalset.answerable("dev").values()],
                [gate(t) for t in evalset.unanswerable("dev").values()])  # fmt: skip
    finally:
        searcher.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shared", type=Path, default=Path("../shared"))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lore-asked-"))
    found = {name: gates(evalset, work) for name, evalset in
             (("demo", sets.demo()), ("memory", sets.memory(args.shared)), ("knownitem", sets.knownitem(args.shared)))}  # fmt: skip
    best = 0.0
    for step in range(0, 101):
        threshold = step / 200
        if all(sum(g < threshold for g in answerable) <= MAX_REFUSED * len(answerable) for answerable, _ in found.values()):
            best = threshold
    print(f"asked_gate_threshold: {best}")
    hook = inject.DEFAULT_SETTINGS.warm_gate_threshold
    for name, (answerable, unanswerable) in found.items():
        for label, threshold in (("asked", best), ("the hook's", hook)):
            refused = sum(g < threshold for g in answerable) / len(answerable)
            gap = sum(g < threshold for g in unanswerable) / len(unanswerable) if unanswerable else 0.0
            print(f"  {name}, {label} threshold {threshold}: refuses {refused:.0%} of {len(answerable)} answerable, "
                  f"{gap:.0%} of {len(unanswerable)} unanswerable dev questions")


if __name__ == "__main__":
    main()
