"""Pass/fail counts of the converted KAI cases, per KAI file and per category.

    python -m tests.kai_port.report [--failures] [--write-known]

Runs every case in-process (as the pytest module does) and prints, per KAI test file and
per category, passed/converted, plus the cases not converted and not supported (from
cases/UNCONVERTED.md). `--failures` lists each failing case with its first problem;
`--write-known` rewrites known_differences.yaml from the failures of this run, keeping
the reasons already written for cases that still fail.
"""

from __future__ import annotations

import argparse
import re
import time
from collections import Counter
from pathlib import Path

import yaml

from tests.kai_port.runner import CASES, KNOWN, case_id, case_paths, check_case, known_differences


def _unconverted() -> tuple[Counter[str], Counter[str]]:
    unconverted: Counter[str] = Counter()
    unsupported: Counter[str] = Counter()
    section = None
    path = CASES / "UNCONVERTED.md"
    for line in path.read_text().splitlines() if path.exists() else []:
        if line.startswith("## Not converted"):
            section = unconverted
        elif line.startswith("## Not supported"):
            section = unsupported
        match = re.match(r"\| ([^ |]+)/\d+", line)
        if section is not None and match:
            section[match.group(1)] += 1
    return unconverted, unsupported


def _category(stem: str) -> str:
    if stem.startswith("integration_"):
        return "integration/" + stem.split("_")[1]
    if stem.startswith("interpod"):
        return "allocate"
    for action in ("allocate", "reclaim", "preempt", "consolidation", "stalegangeviction"):
        if stem.startswith(action):
            return action
    return stem


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--failures", action="store_true")
    parser.add_argument("--write-known", action="store_true")
    args = parser.parse_args(argv)
    started = time.monotonic()
    passed: Counter[str] = Counter()
    total: Counter[str] = Counter()
    failures: dict[str, list[str]] = {}
    for path in case_paths():
        identifier = case_id(path)
        stem = identifier.split("/")[0]
        total[stem] += 1
        try:
            problems = check_case(yaml.safe_load(Path(path).read_text()))
        except Exception as error:
            problems = [f"error: {type(error).__name__}: {error}"]
        if problems:
            failures[identifier] = problems
        else:
            passed[stem] += 1
    unconverted, unsupported = _unconverted()
    stems = sorted(set(total) | set(unconverted) | set(unsupported))
    print(f"{'KAI file':62} {'pass':>9} {'uncvt':>6} {'unsup':>6}")
    for stem in stems:
        print(
            f"{stem:62} {passed[stem]:>4}/{total[stem]:<4} {unconverted[stem]:>6} {unsupported[stem]:>6}"
        )
    print()
    categories = sorted({_category(s) for s in stems})
    print(f"{'category':30} {'pass':>9} {'xfail':>6} {'uncvt':>6} {'unsup':>6}")
    known = known_differences()
    for name in categories:
        members = [s for s in stems if _category(s) == name]
        p = sum(passed[s] for s in members)
        t = sum(total[s] for s in members)
        x = sum(1 for f in failures if f.split("/")[0] in members and f in known)
        u = sum(unconverted[s] for s in members)
        n = sum(unsupported[s] for s in members)
        print(f"{name:30} {p:>4}/{t:<4} {x:>6} {u:>6} {n:>6}")
    print(
        f"\n{sum(passed.values())}/{sum(total.values())} passed; "
        f"{sum(unconverted.values())} not converted, {sum(unsupported.values())} not supported; "
        f"{time.monotonic() - started:.0f} s"
    )
    if args.failures:
        for identifier, problems in sorted(failures.items()):
            print(
                f"{identifier}: {problems[0]}"
                + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else "")
            )
    if args.write_known:
        entries = {f: known.get(f, problems[0]) for f, problems in sorted(failures.items())}
        KNOWN.write_text(
            "# KAI cases kai fails today: case id -> apparent cause. The tests mark them\n"
            "# xfail(strict=True): a case that starts passing must be removed from here.\n"
            + yaml.safe_dump(entries, sort_keys=True, width=200, allow_unicode=True)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
