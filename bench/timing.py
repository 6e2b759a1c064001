"""Timing shared by the benchmarks: one cycle's wall and CPU seconds, and how runs are summarised."""

from __future__ import annotations

import math
import resource
import statistics
import time
from collections.abc import Sequence

from kai.engine.cycle import CycleResult, preload_solver, run_cycle
from kai.engine.memo import SnapshotMemo
from kai.engine.model import EngineConfig, Snapshot


def timed_cycle(
    snapshot: Snapshot, config: EngineConfig, memo: SnapshotMemo | None = None
) -> tuple[float, float, CycleResult]:
    """Wall seconds, and CPU seconds of this process (all threads: the solver runs two workers)
    and of the children it forked (with `EngineConfig.isolate_solver` the solver and the
    eviction actions run in children, each reaped before the cycle returns).

    On a loaded machine the CPU time is the steadier of the two. `memo`: what the caller's
    earlier cycles kept, as a live scheduler keeps it from cycle to cycle. The solver is
    loaded before the clock starts, as a live scheduler loads it once it is idle.
    """
    preload_solver()
    started, started_cpu = time.perf_counter(), _cpu_seconds()
    result = run_cycle(snapshot, config, memo)
    return time.perf_counter() - started, _cpu_seconds() - started_cpu, result


def _cpu_seconds() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def summarize(seconds: Sequence[float]) -> dict[str, float]:
    """Median and nearest-rank 95th percentile: with fewer than 20 runs the p95 is the slowest."""
    return {
        "median": round(statistics.median(seconds), 3),
        "p95": round(nearest_rank(seconds, 0.95), 3),
    }


def nearest_rank(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile: the smallest value with at least `fraction` of all at or below it."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(fraction * len(ordered))) - 1]
