"""The steady state of a live cluster: one pending pod beside thousands running, as one cycle.

Why: a live cluster spends most cycles with a pod or two pending and everything else
running, so a cycle's cost there is what a user waits for after `kubectl apply`. The
synthetic matrix (`bench/engine.py --nodes/--pods`) times bursts of thousands of
pending pods; this times the other end, on real demand: the openb cluster (`bench/
traces/openb/`) filled by the engine's greedy pass with the trace's arrivals (seed
42, batches of 500, as `bench/trace.py --mode batch` packs them) until
`RUNNING_TARGET` pods run, then the next arrival that fits pending alone.

A live scheduler keeps a memo of its last snapshot (`kai.engine.memo`), so what a
steady cycle costs depends on what changed since the last: `previous_snapshot` is the
cycle before, where the pod that arrived last was still pending and the new one not
there yet. The benchmark brings the memo to it, untimed, before each timed cycle.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from bench.openb import DEFAULT_NODES, DEFAULT_PODS, arrivals, read_nodes, read_pods
from bench.trace import START, TraceCluster, carried_out, without_pending
from kai.engine.cycle import run_cycle
from kai.engine.model import EngineConfig, EvictionConfig, Pod, PodGroup, PodPhase, Snapshot

RUNNING_TARGET = 8000  # the "openb cluster holding 8,000 running pods"
SEED = 42
FILL_BATCH = 500
FILL_CONFIG = EngineConfig(
    time_limit_seconds=0, evictions=EvictionConfig(max_consolidation_preemptees=0)
)


def steady_state_snapshot() -> Snapshot:
    """The filled openb cluster with one pending pod that fits: deterministic for the seed."""
    cluster = TraceCluster(read_nodes(DEFAULT_NODES))
    order = arrivals(read_pods(DEFAULT_PODS), cluster.gpus, 1.3, SEED)
    state = Snapshot(cluster.nodes, (), (), (cluster.queue,), START)
    index = 0
    while _running(state) < RUNNING_TARGET:
        if index >= len(order):
            raise RuntimeError(f"the trace's arrivals ran out before {RUNNING_TARGET} pods ran")
        chunk = [
            cluster.arriving(pod, index + i) for i, pod in enumerate(order[index:][:FILL_BATCH])
        ]
        index += len(chunk)
        state = _pending_added(state, chunk, index)
        state, _ = without_pending(carried_out(state, run_cycle(state, FILL_CONFIG)))
    for position in range(index, len(order)):
        candidate = _pending_added(
            state, [cluster.arriving(order[position], position)], position + 1
        )
        if run_cycle(candidate, FILL_CONFIG).bindings:
            return candidate
    raise RuntimeError("no further arrival fits the filled cluster")


def previous_snapshot(snapshot: Snapshot) -> Snapshot:
    """The cycle before the steady one: its pending pod not yet arrived, and the pod bound
    last (the greatest key: arrivals are numbered) pending, as it was before its cycle."""
    pending = next(pod for pod in snapshot.pods if pod.phase is PodPhase.PENDING)
    last = max((pod for pod in snapshot.pods if pod.phase is PodPhase.BOUND), key=lambda p: p.key)
    waiting = dataclasses.replace(last, phase=PodPhase.PENDING, node=None, gpu_groups=())
    return dataclasses.replace(
        snapshot,
        pods=tuple(waiting if pod is last else pod for pod in snapshot.pods if pod is not pending),
        pod_groups=tuple(group for group in snapshot.pod_groups if group.key != pending.group),
        now=snapshot.now - timedelta(seconds=1),
    )


def _pending_added(state: Snapshot, chunk: list[tuple[Pod, PodGroup]], arrived: int) -> Snapshot:
    return dataclasses.replace(
        state,
        pods=state.pods + tuple(pod for pod, _ in chunk),
        pod_groups=state.pod_groups + tuple(group for _, group in chunk),
        now=START + timedelta(seconds=arrived),
    )


def _running(state: Snapshot) -> int:
    return sum(1 for pod in state.pods if pod.phase is PodPhase.BOUND)
