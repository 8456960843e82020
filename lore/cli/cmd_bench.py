"""`lore bench`: ranking quality on every evaluation set, duplicates, latency, indexing and scale (docs/evaluation.md)."""

from __future__ import annotations

import typer

from lore.cli.base import app, state
from lore.errors import UsageError


@app.command("bench")
def bench(
    ctx: typer.Context,
    quick: bool = typer.Option(False, "--quick", help="A small subset that runs in about a minute."),
    out: str | None = typer.Option(None, "--out", help="Write every figure and the machine description to this JSON file."),
    sizes: str | None = typer.Option(None, "--sizes", help="Store sizes for latency, indexing and scale (default 1000,10000,50000; quick: 1000)."),
    only: str | None = typer.Option(None, "--only", help="Comma-separated sections: quality,stream,duplicates,latency,indexing,firstprompt,surfaces,soak,import,capture (the default), sync (the lore sync soak; only when named)."),
    sets: str | None = typer.Option(None, "--sets", help="Comma-separated evaluation sets of the quality section: scifact,knownitem,memory,memory-fresh,demo,locomo (LoCoMo is downloaded once into the bench cache)."),
    keep: bool = typer.Option(False, "--keep", help="Keep the temporary work directory (its path is printed)."),
) -> None:
    """Measure ranking quality (every set, dev and test splits, against baselines), duplicate detection, latency, indexing,
    the first prompt after a session starts, the characters each agent surface hands the model, and a helper soak;
    `--only sync` runs the lore sync soak."""
    import time
    from pathlib import Path

    import orjson
    from rich.console import Console

    from lore.bench import DEFAULT_SECTIONS, SECTIONS, SETS, require_extra, shared_dir
    from lore.bench.quality import temporary_workdir
    from lore.bench.report import render
    from lore.bench.runner import BenchSettings, run

    state(ctx)  # the bench uses its own temporary data dirs, never the user's
    chosen = tuple(s.strip() for s in only.split(",") if s.strip()) if only else DEFAULT_SECTIONS
    unknown = [s for s in chosen if s not in SECTIONS]
    if unknown:
        raise UsageError(f"unknown section {unknown[0]!r}", hint="sections: " + ",".join(SECTIONS))
    picked = tuple(s.strip() for s in sets.split(",") if s.strip()) if sets else SETS
    # The sync soak writes its own records; the demo and LoCoMo sets bring their own data.
    needs_corpora = any(s != "sync" for s in chosen) and not (set(chosen) == {"quality"} and set(picked) <= {"demo", "locomo"})
    if any(s != "sync" for s in chosen):
        require_extra()
    settings = BenchSettings.for_quick(chosen) if quick else BenchSettings(only=chosen)
    if quick:
        settings.extra["sync"] = {"per_type": 30, "shared_patterns": 10, "rounds": 10, "collisions": 3}
    if sets:
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
    settings.keep_workdir = keep
    shared = shared_dir(required=needs_corpora) or Path()
    work = temporary_workdir()
    console = Console(stderr=True)
    started = time.monotonic()

    def progress(message: str) -> None:
        console.print(f"[dim]{time.monotonic() - started:7.1f}s  {message}[/dim]")

    if keep:
        progress(f"work dir: {work}")
    import signal
    import sys

    # A terminated run still deletes its temporary stores (the runner cleans up in `finally`).
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    def write(results: dict) -> None:
        if out:
            Path(out).write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))

    results = run(settings, shared, work, progress, checkpoint=write)
    render(results, Console())
    if out:
        typer.echo(f"wrote {out}")
    if results.get("errors"):
        typer.echo("Error: some measurements failed:\n  " + "\n  ".join(results["errors"]), err=True)
        raise typer.Exit(1)
