"""Engine allocation benchmark: one cycle's time, peak memory and GPUs placed, against the greedy pass.

The same synthetic snapshot is scheduled twice per run: once by the full cycle
(greedy, then CP-SAT warm-started from it) and once greedy only. Absolute times on
a shared 2-core machine are noise; the ratios between the two, measured in the same
process and interleaved run by run, are what the benchmark is for. `--all` runs the
size matrix of issue 3 with each size in its own process, so peak memory is per size.

    python bench/engine.py --nodes 1000 --pods 10000 [--runs 5] [--seed 1] [--time-limit 1.0] [--json]
    python bench/engine.py --all [--runs 5] [--json]
    python bench/engine.py --steady [--runs 5] [--json]
    python bench/engine.py --nodes 1000 --pods 10000 --runs 1 --profile cycle.prof

The engine runs as `kai run` configures it: the solver isolated in forked children
(`EngineConfig.isolate_solver`), where the eviction actions start beside the allocation
solver. `--in-process` runs it as `kai simulate` does, everything in this process (the
same decisions; `--profile` always profiles that way, as cProfile sees no children).

`--steady` times the other end of a live cluster's life: one pending pod beside 8,000
running on the openb trace's cluster (`bench/steady.py`), with the memo a live scheduler
keeps from the cycle before and the account of what changed since that its snapshot
builder gives (`kai.engine.snapshot_changes`), and without them; `--all` runs it too.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

# `python bench/engine.py` puts bench/ on the import path, not the checkout that holds it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.arguments import positive_int
from bench.steady import previous_snapshot, steady_state_snapshot
from bench.synthetic import ClusterSpec, synthetic_cluster
from bench.timing import summarize, timed_cycle
from kai.engine.accounting import accounting_device_memory
from kai.engine.cycle import CycleResult, preload_solver, run_cycle
from kai.engine.gangs import pod_resources
from kai.engine.memo import SnapshotMemo
from kai.engine.model import EngineConfig, PodPhase, Snapshot
from kai.engine.snapshot_changes import changes_between

MATRIX = ((100, 1000), (500, 5000), (1000, 10000), (5000, 50000))
TARGET_CYCLE_SECONDS = 1.0  # issue 3: 1,000 nodes / 10,000 pending pods, on this machine
TARGET_LARGE_CYCLE_SECONDS = 5.0  # issue 15: 5,000 nodes / 50,000 pending pods
TARGET_PEAK_RSS_BYTES = 2**30
TARGET_STEADY_SECONDS = 0.020  # issue 15: 1 pending pod beside 8,000 running
PROFILE_LINES = 30
TABLE_COLUMNS = (
    "nodes|pods|gangs|cycle s med|p95|greedy s med|p95|time ratio|cycle cpu s|greedy cpu s|"
    "GPUs engine|greedy|bound|GPU ratio|violations|peak RSS MiB|answers"
)

Document = dict[str, Any]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    if args.all:
        results = [_measure_in_subprocess(nodes, pods, args) for nodes, pods in MATRIX]
        steady = _measure_in_subprocess(None, None, args)
        document: Document = {"bench": "engine", "matrix": results, "steadyState": steady}
    elif args.steady:
        steady = measure_steady(args.runs, args.time_limit, _progress, not args.in_process)
        print(json.dumps(steady) if args.json else format_steady(steady))
        return 0
    else:
        spec = ClusterSpec(args.nodes, args.pods, args.seed)
        results = [measure(spec, args.runs, args.time_limit, _progress, not args.in_process)]
        document = results[0]
        if args.profile is not None:
            profile_cycle(spec, args.time_limit, args.profile)
    if args.json:
        print(json.dumps(document))
    else:
        print(format_table(results))
        if args.all:
            print(format_steady(steady))
    return 0


def measure(
    spec: ClusterSpec,
    runs: int,
    time_limit: float,
    progress: Callable[[str], None],
    isolated: bool = True,
) -> Document:
    """Build the cluster, then time `runs` full cycles and `runs` greedy-only cycles, interleaved.

    `isolated`: the solver in forked children, as `kai run` runs it."""
    label = f"[{spec.nodes} nodes / {spec.pods} pods]"
    started = time.perf_counter()
    snapshot = synthetic_cluster(spec)
    generate_seconds = time.perf_counter() - started
    generated_rss = _peak_rss_bytes()
    progress(f"{label} generated in {generate_seconds:.2f} s")
    full_config = EngineConfig(time_limit_seconds=time_limit, isolate_solver=isolated)
    greedy_config = EngineConfig(time_limit_seconds=0, isolate_solver=isolated)
    cycle_seconds: list[float] = []
    greedy_seconds: list[float] = []
    cycle_cpu: list[float] = []
    greedy_cpu: list[float] = []
    cycles: list[CycleResult] = []
    greedy_gpus: list[Fraction] = []
    for run in range(1, runs + 1):
        greedy_time, greedy_cpu_time, greedy_only = timed_cycle(snapshot, greedy_config)
        cycle_time, cycle_cpu_time, cycle = timed_cycle(snapshot, full_config)
        greedy_seconds.append(greedy_time)
        cycle_seconds.append(cycle_time)
        greedy_cpu.append(greedy_cpu_time)
        cycle_cpu.append(cycle_cpu_time)
        greedy_gpus.append(greedy_only.report.gpus_greedy)
        cycles.append(cycle)
        progress(
            f"{label} run {run}/{runs}: greedy {greedy_time:.2f} s, cycle {cycle_time:.2f} s "
            f"({cycle.report.answer}, solver {cycle.report.status})"
        )
    engine = min(c.report.gpus_engine for c in cycles)  # the worst run is the one that counts
    greedy = min(greedy_gpus)
    bound = min(
        c.report.gpus_bound for c in cycles
    )  # every run's bound holds; the least is tightest
    peak_rss = _peak_rss_bytes()
    free_gpus, pending_gpus = _gpu_supply_and_demand(snapshot)
    cycle_summary = summarize(cycle_seconds)
    return {
        "bench": "engine",
        "nodes": spec.nodes,
        "gpusPerNode": spec.gpus_per_node,
        "pods": spec.pods,
        "gangs": len({p.group for p in snapshot.pods if p.phase is PodPhase.PENDING}),
        "runs": runs,
        "seed": spec.seed,
        "timeLimitSeconds": time_limit,
        "solverIsolated": isolated,
        "cycleSeconds": cycle_summary,
        "greedySeconds": summarize(greedy_seconds),
        "cycleCpuSeconds": summarize(cycle_cpu),
        "greedyCpuSeconds": summarize(greedy_cpu),
        "gpusAllocated": {
            "engine": _number(engine),
            "greedy": _number(greedy),
            "bound": _number(bound),
        },
        "validatorViolations": sum(c.report.validator_violations for c in cycles),
        "peakRssBytes": peak_rss,
        "timeRatio": round(cycle_summary["median"] / statistics.median(greedy_seconds), 3),
        "gpuRatio": round(float(engine / greedy), 4) if greedy else None,
        "answers": dict(Counter(c.report.answer for c in cycles)),
        "greedyKeptOnTie": sum(c.report.greedy_kept_on_tie for c in cycles),
        "greedyKeptLessStranded": sum(c.report.greedy_kept_less_stranded for c in cycles),
        "solverStatuses": dict(Counter(c.report.status for c in cycles)),
        "runningPods": sum(1 for p in snapshot.pods if p.phase is PodPhase.BOUND),
        "freeGpus": _number(free_gpus),
        "pendingGpus": _number(pending_gpus),
        "generateSeconds": round(generate_seconds, 3),
        "generatedRssBytes": generated_rss,
        "loadAverage1m": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
        "targetsMet": {
            "cycleMedianWithin1s": cycle_summary["median"] <= TARGET_CYCLE_SECONDS,
            "cycleMedianWithinTarget": cycle_summary["median"] <= cycle_target(spec.nodes),
            "peakRssWithin1GiB": peak_rss <= TARGET_PEAK_RSS_BYTES,
            "engineNotBelowGreedy": engine >= greedy,
        },
    }


def cycle_target(nodes: int) -> float:
    """The cycle time the issues ask for at this size: 1 s up to 1,000 nodes, 5 s beyond."""
    return TARGET_CYCLE_SECONDS if nodes <= 1000 else TARGET_LARGE_CYCLE_SECONDS


def measure_steady(
    runs: int, time_limit: float, progress: Callable[[str], None], isolated: bool = True
) -> Document:
    """One pending pod beside `steady.RUNNING_TARGET` running, three ways interleaved: the
    full cycle with the memo a live scheduler keeps (brought to the cycle before, untimed)
    and the account of what changed since that its snapshot builder gives, the greedy
    pass alone with both, and the full cycle without them (cold, every pod read)."""
    started = time.perf_counter()
    snapshot = steady_state_snapshot()
    before = previous_snapshot(snapshot)
    snapshot = dataclasses.replace(snapshot, changes=changes_between(before, snapshot))
    running = sum(1 for p in snapshot.pods if p.phase is PodPhase.BOUND)
    progress(
        f"[steady state] {running} running pods, filled in {time.perf_counter() - started:.1f} s"
    )
    full_config = EngineConfig(time_limit_seconds=time_limit, isolate_solver=isolated)
    greedy_config = EngineConfig(time_limit_seconds=0, isolate_solver=isolated)
    memo = SnapshotMemo()
    seconds: dict[str, list[float]] = {"cycle": [], "greedy": [], "cold": []}
    answers: Counter[str] = Counter()
    always_bound = same_decisions = True
    for run in range(1, runs + 1):
        memo.facts(before)
        greedy_time, _, greedy_only = timed_cycle(snapshot, greedy_config, memo)
        memo.facts(before)
        cycle_time, _, cycle = timed_cycle(snapshot, full_config, memo)
        cold_time, _, cold = timed_cycle(snapshot, full_config)
        for side, value in (("cycle", cycle_time), ("greedy", greedy_time), ("cold", cold_time)):
            seconds[side].append(value)
        answers[cycle.report.answer] += 1
        always_bound &= bool(cycle.bindings) and bool(greedy_only.bindings)
        same_decisions &= cycle.bindings == cold.bindings and cycle.groups == cold.groups
        progress(
            f"[steady state] run {run}/{runs}: greedy {greedy_time:.3f} s, cycle "
            f"{cycle_time:.3f} s, cold cycle {cold_time:.3f} s"
        )
    cycle_summary = summarize(seconds["cycle"])
    return {
        "bench": "engine-steady",
        "nodes": len(snapshot.nodes),
        "runningPods": running,
        "pendingPods": len(snapshot.pods) - running,
        "runs": runs,
        "timeLimitSeconds": time_limit,
        "solverIsolated": isolated,
        "cycleSeconds": cycle_summary,
        "greedySeconds": summarize(seconds["greedy"]),
        "coldCycleSeconds": summarize(seconds["cold"]),
        "timeRatio": round(cycle_summary["median"] / statistics.median(seconds["greedy"]), 3),
        "coldRatio": round(cycle_summary["median"] / statistics.median(seconds["cold"]), 3),
        "pendingPodBound": always_bound,
        "sameDecisionsAsCold": same_decisions,
        "answers": dict(answers),
        "peakRssBytes": _peak_rss_bytes(),
        "loadAverage1m": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
        "targetsMet": {"cycleMedianWithin20ms": cycle_summary["median"] <= TARGET_STEADY_SECONDS},
    }


def format_steady(result: Document) -> str:
    cycle, greedy = result["cycleSeconds"], result["greedySeconds"]
    cold = result["coldCycleSeconds"]
    met = result["targetsMet"]["cycleMedianWithin20ms"]
    return (
        f"steady state ({result['pendingPods']} pending beside {result['runningPods']} running "
        f"on {result['nodes']} nodes): cycle {cycle['median']:.3f} s median / {cycle['p95']:.3f} "
        f"p95, greedy-only {greedy['median']:.3f} / {greedy['p95']:.3f}, cold cycle (no memo) "
        f"{cold['median']:.3f} / {cold['p95']:.3f}; pending pod bound "
        f"{result['pendingPodBound']}, same decisions as cold {result['sameDecisionsAsCold']}; "
        f"cycle median <= {TARGET_STEADY_SECONDS * 1000:g} ms "
        f"{_verdict(met)} (load average {result['loadAverage1m']} on {result['cpus']} CPUs)"
    )


def profile_cycle(spec: ClusterSpec, time_limit: float, path: Path) -> None:
    """One more full cycle, untimed, under cProfile: stats to `path`, the top functions to stderr."""
    snapshot = synthetic_cluster(spec)
    preload_solver()  # a cycle's profile, not the imports'
    profiler = cProfile.Profile()
    profiler.runcall(run_cycle, snapshot, EngineConfig(time_limit_seconds=time_limit))
    profiler.dump_stats(path)
    stats = pstats.Stats(profiler, stream=sys.stderr)
    stats.sort_stats(pstats.SortKey.CUMULATIVE).print_stats(PROFILE_LINES)


def format_table(results: Sequence[Document]) -> str:
    """One row per size, then a line per size saying which targets were met."""
    rows = [TABLE_COLUMNS.split("|")]
    for r in results:
        cycle, greedy, gpus = r["cycleSeconds"], r["greedySeconds"], r["gpusAllocated"]
        rows.append(
            [
                str(r["nodes"]),
                str(r["pods"]),
                str(r["gangs"]),
                f"{cycle['median']:.2f}",
                f"{cycle['p95']:.2f}",
                f"{greedy['median']:.2f}",
                f"{greedy['p95']:.2f}",
                f"{r['timeRatio']:.2f}",
                f"{r['cycleCpuSeconds']['median']:.2f}",
                f"{r['greedyCpuSeconds']['median']:.2f}",
                f"{gpus['engine']:g}",
                f"{gpus['greedy']:g}",
                f"{gpus['bound']:g}",
                "-" if r["gpuRatio"] is None else f"{r['gpuRatio']:.4f}",
                str(r["validatorViolations"]),
                f"{r['peakRssBytes'] / 2**20:.0f}",
                ", ".join(f"{name} x{n}" for name, n in sorted(r["answers"].items()))
                + (f" ({r['greedyKeptOnTie']} ties)" if r["greedyKeptOnTie"] else ""),
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    lines.append("")
    for r in results:
        met = r["targetsMet"]
        lines.append(
            f"{r['nodes']} nodes / {r['pods']} pods: cycle median <= {cycle_target(r['nodes']):g} s "
            f"{_verdict(met['cycleMedianWithinTarget'])}; peak RSS <= 1 GiB "
            f"{_verdict(met['peakRssWithin1GiB'])}; engine GPUs >= greedy "
            f"{_verdict(met['engineNotBelowGreedy'])} "
            f"(load average {r['loadAverage1m']} on {r['cpus']} CPUs)"
        )
    return "\n".join(lines)


def _gpu_supply_and_demand(snapshot: Snapshot) -> tuple[Fraction, Fraction]:
    """GPUs not held by running pods, and GPUs the pending pods ask for: how oversubscribed it is."""
    device_mib = {node.name: node.gpu_memory_mib for node in snapshot.nodes}
    pending_mib = accounting_device_memory(snapshot)
    held = demand = Fraction(0)
    for pod in snapshot.pods:
        if pod.phase.occupies_node and pod.node in device_mib:
            held += pod_resources(pod, device_mib[pod.node]).gpu
        elif pod.phase is PodPhase.PENDING:
            demand += pod_resources(pod, pending_mib).gpu
    return sum((Fraction(n.gpus) for n in snapshot.nodes), Fraction(0)) - held, demand


def _measure_in_subprocess(
    nodes: int | None, pods: int | None, args: argparse.Namespace
) -> Document:
    """One size (None: the steady state) in a fresh interpreter: its peak RSS is then its alone."""
    size = ["--steady"] if nodes is None else [f"--nodes={nodes}", f"--pods={pods}"]
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        *size,
        f"--runs={args.runs}",
        f"--seed={args.seed}",
        f"--time-limit={args.time_limit}",
        *(["--in-process"] if args.in_process else []),
        "--json",
    ]
    completed = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True)
    document: Document = json.loads(completed.stdout)
    return document


def _peak_rss_bytes() -> int:
    """The largest resident set of this process or of any child it forked and reaped."""
    most = max(
        resource.getrusage(who).ru_maxrss
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return most * 1024  # Linux reports KiB


def _number(value: Fraction) -> float | int:
    return int(value) if value.denominator == 1 else round(float(value), 3)


def _verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/engine.py",
        description="Time one allocation cycle against the greedy pass on a synthetic cluster.",
    )
    parser.add_argument("--nodes", type=positive_int, help="nodes of 8 GPUs")
    parser.add_argument("--pods", type=positive_int, help="pending pods, in gangs of 1-32")
    parser.add_argument(
        "--all",
        action="store_true",
        help="run the matrix " + ", ".join(f"{n}/{p}" for n, p in MATRIX) + ", one process each",
    )
    parser.add_argument(
        "--steady", action="store_true", help="one pending pod beside 8,000 running (openb)"
    )
    parser.add_argument("--runs", type=positive_int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--time-limit", type=float, default=1.0, help="solver seconds per cycle")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run the solver in this process, as kai simulate does (default: isolated, as kai run)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="FILE",
        help="after measuring, profile one more cycle: pstats to FILE, top functions to stderr",
    )
    args = parser.parse_args(argv)
    sized = args.nodes is not None or args.pods is not None
    if [args.all, args.steady, sized].count(True) != 1:
        parser.error("give one of --all, --steady, or both --nodes and --pods")
    if sized and (args.nodes is None or args.pods is None):
        parser.error("--nodes and --pods go together")
    if not sized and args.profile is not None:
        parser.error("--profile profiles one size; give --nodes and --pods")
    if args.time_limit < 0:
        parser.error(f"--time-limit must be >= 0, got {args.time_limit}")
    return args


if __name__ == "__main__":
    sys.exit(main())
