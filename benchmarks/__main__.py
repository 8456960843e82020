"""``python -m benchmarks``: lore's evaluation harness, run from a checkout (docs/evaluation.md).

Ranking quality on every evaluation set, duplicates, latency, indexing and scale, the
first prompt after a session starts, the characters each agent surface hands the model,
a helper soak; ``--only sync`` runs the lore sync soak. An installed lore ships none of
this: its ``lore bench`` measures the user's own store.

Usage errors exit 2 with one ``Error:`` line (and a hint); a failed measurement exits 1.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from lore.errors import LoreError, UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """argparse's own usage errors, in the harness's words (and its exit code 2)."""
        raise UsageError(message, hint="python -m benchmarks --help")


def parser() -> argparse.ArgumentParser:
    from benchmarks import SECTIONS, SETS

    made = _Parser(
        prog="python -m benchmarks",
        description="Measure ranking quality (every set, dev and test splits, against baselines), duplicate "
                    "detection, latency, indexing, the first prompt after a session starts, the characters each "
                    "agent surface hands the model, and a helper soak; `--only sync` runs the lore sync soak. "
                    "Run it from a checkout of lore with the bench extra (pip install -e '.[bench]'); the shared "
                    "corpora are found as ../shared or $LORE_SHARED_DIR.",
    )  # fmt: skip
    made.add_argument("--quick", action="store_true", help="A small subset that runs in about a minute.")
    made.add_argument("--out", metavar="FILE", help="Write every figure and the machine description to this JSON file.")
    made.add_argument("--sizes", help="Store sizes for latency, indexing and scale (default 1000,10000,50000; quick: 1000).")
    made.add_argument("--only", help="Comma-separated sections: " + ",".join(s for s in SECTIONS if s != "sync")
                      + " (the default), sync (the lore sync soak; only when named).")  # fmt: skip
    made.add_argument("--sets", help="Comma-separated evaluation sets of the quality section: " + ",".join(SETS)
                      + " (LoCoMo is downloaded once into the bench cache).")  # fmt: skip
    made.add_argument("--stores", help="Comma-separated stores the latency, indexing and first-prompt sections build "
                      "at each size: synthetic (git commits as the bench writes them), real (as `lore remember` "
                      "stores them: whole messages, scrubbed); default both.")
    made.add_argument("--keep", action="store_true", help="Keep the temporary work directory (its path is printed).")
    return made


def settings_from(options: argparse.Namespace) -> Any:
    """The runner's settings from the command line; a ``UsageError`` for what does not make sense."""
    from benchmarks import DEFAULT_SECTIONS, SECTIONS, SETS
    from benchmarks.runner import BenchSettings

    only, sets, sizes = options.only, options.sets, options.sizes
    chosen = tuple(s.strip() for s in only.split(",") if s.strip()) if only else DEFAULT_SECTIONS
    unknown = [s for s in chosen if s not in SECTIONS]
    if unknown:
        raise UsageError(f"unknown section {unknown[0]!r}", hint="sections: " + ",".join(SECTIONS))
    settings = BenchSettings.for_quick(chosen) if options.quick else BenchSettings(only=chosen)
    if options.quick:
        settings.extra["sync"] = {"per_type": 30, "shared_patterns": 10, "rounds": 10, "collisions": 3}
    if sets:
        picked = tuple(s.strip() for s in sets.split(",") if s.strip())
        unknown = [s for s in picked if s not in SETS]
        if unknown or not picked:
            raise UsageError(f"unknown evaluation set {(unknown or [sets])[0]!r}", hint="sets: " + ",".join(SETS))
        settings.sets = picked
    if sizes:
        try:
            settings.sizes = tuple(sorted({int(s.replace("_", "")) for s in sizes.split(",") if s.strip()}))
        except ValueError as exc:
            raise UsageError(f"cannot read sizes {sizes!r}", hint="e.g. --sizes 1000,10000,50000") from exc
        if not settings.sizes or min(settings.sizes) < 10 or max(settings.sizes) > 60000:
            raise UsageError("sizes must be between 10 and 60000 (the git corpus holds 60,000 commits)")
    if options.stores:
        from benchmarks.runner import STORES

        stores = tuple(s.strip() for s in options.stores.split(",") if s.strip())
        unknown = [s for s in stores if s not in STORES]
        if unknown or not stores:
            raise UsageError(f"unknown store {(unknown or [options.stores])[0]!r}", hint="stores: " + ",".join(STORES))
        settings.stores = stores
    settings.keep_workdir = options.keep
    return settings


def run(argv: Sequence[str] | None = None) -> int:
    """Parse, run the chosen sections, render and write the figures; the exit code."""
    import orjson
    from rich.console import Console

    from benchmarks import require_extra, shared_dir
    from benchmarks.quality import temporary_workdir
    from benchmarks.report import render
    from benchmarks.runner import run as run_sections

    options = parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    settings = settings_from(options)
    chosen, picked = tuple(settings.only), tuple(settings.sets)
    # The sync soak writes its own records; the demo and LoCoMo sets bring their own data.
    needs_corpora = any(s != "sync" for s in chosen) and not (set(chosen) == {"quality"} and set(picked) <= {"demo", "locomo"})
    if any(s != "sync" for s in chosen):
        require_extra()
    shared = shared_dir(required=needs_corpora) or Path()
    work = temporary_workdir()
    console = Console(stderr=True)
    started = time.monotonic()

    def progress(message: str) -> None:
        console.print(f"[dim]{time.monotonic() - started:7.1f}s  {message}[/dim]")

    if options.keep:
        progress(f"work dir: {work}")
    # A terminated run still deletes its temporary stores (the runner cleans up in `finally`).
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))

    def write(results: dict[str, Any]) -> None:
        if options.out:
            Path(options.out).write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))

    results = run_sections(settings, shared, work, progress, checkpoint=write)
    render(results, Console())
    if options.out:
        print(f"wrote {options.out}")
    if results.get("errors"):
        print("Error: some measurements failed:\n  " + "\n  ".join(results["errors"]), file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``run`` with lore's error boundary: ``Error: ...`` (and ``Hint: ...``) and the error's exit code."""
    try:
        return run(argv)
    except LoreError as error:
        from lore.cli.base import report_error

        report_error(error)
        return error.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
