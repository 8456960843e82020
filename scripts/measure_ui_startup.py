"""How long `lore ui` takes to print its URL, beside `python -c pass` measured in the same run.

    python scripts/measure_ui_startup.py [--runs 15] [--data-dir data]

Each run starts `lore ui` cold (a new process), reads the first line of its
output, and stops it. The index is not opened before the URL is printed, so its
size does not matter here; the first search pays for opening it.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def time_to_first_line(args: list[str]) -> float:
    started = time.perf_counter()
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    elapsed = time.perf_counter() - started
    process.terminate()
    process.wait()
    if not line.startswith("http://127.0.0.1:"):
        raise SystemExit(f"unexpected first line: {line!r}")
    return elapsed


def time_to_exit(args: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(args, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--data-dir", default=str(Path(__file__).resolve().parents[1] / "data"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as index:
        ui = [sys.executable, "-P", "-m", "lore", "--data-dir", args.data_dir, "--index-dir", index, "ui"]
        floor = [sys.executable, "-c", "pass"]
        time_to_first_line(ui), time_to_exit(floor)  # warm the page cache and bytecode
        ui_times = sorted(time_to_first_line(ui) for _ in range(args.runs))
        floor_times = sorted(time_to_exit(floor) for _ in range(args.runs))
    p50, p95 = statistics.median(ui_times), ui_times[min(len(ui_times) - 1, round(0.95 * (len(ui_times) - 1)))]
    base = statistics.median(floor_times)
    print(f"lore ui, URL printed: p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, max {ui_times[-1] * 1000:.0f} ms "
          f"over {args.runs} runs")
    print(f"python -c pass: p50 {base * 1000:.0f} ms; ratio {p50 / base:.2f}x")


if __name__ == "__main__":
    main()
