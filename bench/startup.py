"""How long `kai` commands that need no cluster take to start, against a bare interpreter.

`python bench/startup.py [--runs 15] [--json]`. Each command is a fresh process, the
way a user or a shell completion runs it; the baseline is `python -c pass` from the
same interpreter, timed in the same rounds (commands interleaved, order rotated each
round), so the ratio holds on a loaded machine where the seconds do not.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from bench.arguments import positive_int
from bench.timing import summarize

ROOT = Path(__file__).resolve().parents[1]
CATALOG_DEFINITION = min((ROOT / "kai" / "workloads" / "catalog").glob("*.yaml"))
BASELINE = "python -c pass"
COMMANDS: dict[str, list[str]] = {
    BASELINE: ["-c", "pass"],
    "kai --help": ["-m", "kai.cli.main", "--help"],
    "kai run --help": ["-m", "kai.cli.main", "run", "--help"],
    "kai webhook --help": ["-m", "kai.cli.main", "webhook", "--help"],
    "kai workload validate": [
        "-m",
        "kai.cli.main",
        "workload",
        "validate",
        str(CATALOG_DEFINITION),
    ],
}


def _seconds(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, check=True)
    return time.perf_counter() - started


def measure(runs: int) -> dict[str, list[float]]:
    names = list(COMMANDS)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(2):  # warm the page cache and any bytecode caches first
        for name in names:
            _seconds(COMMANDS[name])
    for round_ in range(runs):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            seconds[name].append(_seconds(COMMANDS[name]))
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=positive_int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    seconds = measure(args.runs)
    baseline = summarize(seconds[BASELINE])["median"]
    report = {
        "bench": "startup",
        "runs": args.runs,
        "commands": {
            name: {**summarize(times), "ratio": round(summarize(times)["median"] / baseline, 2)}
            for name, times in seconds.items()
        },
    }
    if args.json:
        print(json.dumps(report))
    else:
        print(f"{'command':<24} {'median s':>9} {'p95 s':>7} {'x python -c pass':>17}")
        for name, row in report["commands"].items():
            print(f"{name:<24} {row['median']:>9.3f} {row['p95']:>7.3f} {row['ratio']:>17.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
