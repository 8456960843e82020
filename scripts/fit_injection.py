"""Fit the injection decision's weights and thresholds on every author group of the prompt stream.

    python scripts/fit_injection.py [--shared ../shared] [--without FEATURE ...]

Runs every group's searches once (``benchmarks.stream.observe`` over
``benchmarks.stream.load_groups``), fits the gate (one logistic score per prompt:
does any memory apply?) and the item score (per hit) on all groups, and picks the
thresholds by ``benchmarks.authors.choose`` on out-of-fold scores (each group scored
by the weights fitted on the others). Prints the ``InjectSettings`` fields to paste
into ``lore/rank/inject.py``. How the shipped decision does on people it was not
fitted on is ``python -m benchmarks --only stream`` (leave one author group out).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the harness (benchmarks/) of this checkout

from benchmarks import authors, stream

# Left out: each helped some author groups left out and hurt others, or only hurt (docs/search.md).
WITHOUT = tuple(sorted(authors.WITHOUT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shared", type=Path, default=Path("../shared"))
    parser.add_argument("--without", action="append", default=list(WITHOUT),
                        help="a feature held at 0 in the fit (log_terms, top_other, or an evidence: passage...)")
    args = parser.parse_args()
    without = frozenset(args.without)
    work = Path(tempfile.mkdtemp(prefix="lore-fit-"))
    groups = authors.Groups.of(stream.observe(args.shared, work, print, stream.load_groups()))
    names = groups.names()
    thresholds = authors.choose(authors.out_of_fold(groups, names, without))
    lexical = authors.choose(authors.out_of_fold(groups, names, without, path="lexical"))
    settings = authors.apply(groups.fit_on(names, without), thresholds, lexical)
    print(f"groups: {', '.join(names)}; without: {', '.join(sorted(without))}; thresholds (out of fold): {thresholds}")
    for name in ("warm_gate", "warm_item", "cold_gate", "cold_item", "warm_gate_threshold", "warm_item_threshold",
                 "warm_pointer_threshold",
                 "cold_gate_threshold", "cold_item_threshold", "cold_pointer_threshold"):
        print(f"    {name} = {getattr(settings, name)!r}")


if __name__ == "__main__":
    main()
