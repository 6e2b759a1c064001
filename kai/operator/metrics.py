"""Prometheus metrics, under KAI's names where KAI has one (kai-semantics §15).

A registry is made per operator (never the process-global default), so two
operators in one test process keep separate numbers.

The per-queue gauges and `kai_pending_pod_groups` describe the cluster as the
last cycle saw it, and only the leader runs cycles: a replica that loses the
Lease drops those series (`leading`), so after a failover the dashboards in
charts/kai-scheduler/dashboards do not show the former leader's numbers frozen
beside the new leader's.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Collection, Mapping
from fractions import Fraction

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kai.engine.decision_changes import NO_ACCOUNT, DecisionChanges
from kai.engine.fairshare import QueueShare
from kai.engine.group_decision import GroupDecision
from kai.engine.model import UNLIMITED

_LATENCY_BUCKETS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.e2e_latency = Histogram(
            "e2e_scheduling_latency_milliseconds",
            "Whole scheduling cycle latency, snapshot to last write.",
            buckets=_LATENCY_BUCKETS_MS,
            registry=r,
        )
        self.action_latency = Histogram(
            "action_scheduling_latency_milliseconds",
            "Latency of each step of a cycle.",
            ["action"],
            buckets=_LATENCY_BUCKETS_MS,
            registry=r,
        )
        self.queue_deserved_gpus = Gauge(
            "queue_deserved_gpus", "Deserved GPUs of each queue.", ["queue_name"], registry=r
        )
        self.queue_allocated_gpus = Gauge(
            "queue_allocated_gpus", "GPUs allocated to each queue.", ["queue_name"], registry=r
        )
        self.queue_fair_share_gpu = Gauge(
            "queue_fair_share_gpu", "Fair share of GPUs of each queue.", ["queue_name"], registry=r
        )
        self.pending_pod_groups = Gauge(
            "kai_pending_pod_groups",
            "PodGroups the last cycle did not schedule, by queue and the reason in their status.",
            ["queue_name", "reason"],
            registry=r,
        )
        self.evicted_pods = Counter(
            "pod_group_evicted_pods_total",
            "Pods evicted, by PodGroup.",
            ["pod_group", "namespace"],
            registry=r,
        )
        self._evicted_groups: set[tuple[str, str]] = set()
        # The pending groups per (queue, reason) of the decisions last counted, brought up
        # to date from the groups the next cycle decided anew (`DecisionChanges`).
        self._pending_counts: Tally[tuple[str, str]] = Tally()
        self._pending_read: Mapping[str, GroupDecision] | None = None
        self.binds = Counter("kai_binds_total", "Bind attempts by result.", ["result"], registry=r)
        self.cycles = Counter("kai_cycles_total", "Scheduling cycles run.", registry=r)
        self.cycles_skipped = Counter(
            "kai_cycles_skipped_total",
            "Cycles not run: nothing had changed since a cycle that decided nothing.",
            registry=r,
        )
        self.cycle_failures = Counter(
            "kai_scheduler_cycle_failures_total",
            "Scheduling cycles that raised; their decisions did not reach the cluster.",
            registry=r,
        )
        self.failed_cycles_in_a_row = Gauge(
            "kai_scheduler_consecutive_failed_cycles",
            "Scheduling cycles failed since the last one that succeeded.",
            registry=r,
        )
        self.cycles_abandoned = Counter(
            "kai_scheduler_cycles_abandoned_total",
            "Cycles that lost the Lease midway and dropped the rest of their decisions.",
            registry=r,
        )
        self.is_leader = Gauge(
            "kai_leader", "1 while this replica holds the scheduling lease.", registry=r
        )
        self.relists = Gauge(
            "kai_cache_relists", "Full relists done by the watch cache.", registry=r
        )
        self.events_dropped = Gauge(
            "kai_events_dropped", "Events not sent because a cycle hit the event limit.", registry=r
        )

    def leading(self, leading: bool) -> None:
        """Whether this replica holds the Lease; one that stops leading stops running cycles,
        so the series of what the last cycle saw are dropped rather than left frozen."""
        self.is_leader.set(1 if leading else 0)
        if not leading:
            for gauge in self._last_cycle_gauges:
                gauge.clear()

    @property
    def _last_cycle_gauges(self) -> tuple[Gauge, ...]:
        return (
            self.queue_deserved_gpus,
            self.queue_allocated_gpus,
            self.queue_fair_share_gpu,
            self.pending_pod_groups,
        )

    def record_cycle(
        self, timings: Mapping[str, float], elapsed: float, relists: int, events_dropped: int
    ) -> None:
        """A cycle that finished: its latency in total and per step (seconds), and the
        cache's and event recorder's running totals."""
        self.cycles.inc()
        self.e2e_latency.observe(elapsed * 1000)
        for step, seconds in timings.items():
            self.action_latency.labels(step).observe(seconds * 1000)
        self.relists.set(relists)
        self.events_dropped.set(events_dropped)

    def record_binds(self, bound: int, failed: int, unknown: int) -> None:
        """One cycle's bind attempts by outcome (`unknown`: the answer was lost)."""
        self.binds.labels("bound").inc(bound)
        self.binds.labels("failed").inc(failed)
        self.binds.labels("unknown").inc(unknown)

    def record_pending(
        self, decisions: Mapping[str, GroupDecision], changes: DecisionChanges = NO_ACCOUNT
    ) -> None:
        """How many groups wait, per queue and reason, as the cycle decided (all of its
        groups, also those whose status a burst defers). A reason that no group has any
        more loses its series instead of staying at its last count. `changes`: which
        decisions are new since the last cycle's; when those were the last counted, only
        the new ones are counted again."""
        told, last = changes.keys_since(self._pending_read), self._pending_read
        self._pending_read = decisions
        if told is None or last is None:
            counts = self._pending_counts = Tally(
                filter(None, map(_pending_series, decisions.values()))
            )
        else:
            counts = self._pending_counts
            for key in told:
                before, after = last.get(key), decisions.get(key)
                if before is not None and (series := _pending_series(before)) is not None:
                    counts[series] -= 1
                    if not counts[series]:
                        del counts[series]
                if after is not None and (series := _pending_series(after)) is not None:
                    counts[series] += 1
        self.pending_pod_groups.clear()
        for (queue, reason), count in counts.items():
            self.pending_pod_groups.labels(queue, reason).set(count)

    def evicted(self, pod_group: str, namespace: str) -> None:
        self.evicted_pods.labels(pod_group, namespace).inc()
        self._evicted_groups.add((pod_group, namespace))

    def forget_pod_groups(self, present: Collection[str]) -> None:
        """Drop the series of PodGroups that are gone ("namespace/name" keys of those left)."""
        for name, namespace in list(self._evicted_groups):
            if f"{namespace}/{name}" not in present:
                self.evicted_pods.remove(name, namespace)
                self._evicted_groups.discard((name, namespace))

    @property
    def pod_group_series(self) -> int:
        """How many PodGroups have a series (memory that must shrink when they go)."""
        return len(self._evicted_groups)

    def record_queues(self, shares: Mapping[str, QueueShare]) -> None:
        for gauge in (
            self.queue_deserved_gpus,
            self.queue_allocated_gpus,
            self.queue_fair_share_gpu,
        ):
            gauge.clear()
        for name, share in shares.items():
            self.queue_deserved_gpus.labels(name).set(_number(share.deserved.gpu))
            self.queue_allocated_gpus.labels(name).set(_number(share.allocated.gpu))
            self.queue_fair_share_gpu.labels(name).set(_number(share.fair_share.gpu))


def _pending_series(decision: GroupDecision) -> tuple[str, str] | None:
    """The (queue, reason) a waiting group counts under; None for a scheduled one."""
    return None if decision.scheduled else (decision.queue, decision.reason or "Unknown")


def _number(value: Fraction) -> float:
    return -1.0 if value == UNLIMITED else float(value)
