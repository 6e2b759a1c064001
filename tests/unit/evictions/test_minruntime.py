"""Min-runtime lookup up the queue tree (kai-semantics §11.1) and the preemption delay (§11.2)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from kai.engine.evictions.minruntime import (
    preempt_min_runtime,
    preemption_delayed,
    protected,
    reclaim_min_runtime,
)
from kai.engine.model import Queue, ReclaimResolveMethod
from tests.unit.engine.builders import NOW, group, queue

MINUTE = 60.0


def tree() -> dict[str, Queue]:
    """root -> {dept-a (reclaim 10m) -> {p1, p2 (reclaim 5m)}, dept-b -> {p3}}, as in §11.1."""
    queues = [
        dataclasses.replace(queue("dept-a"), reclaim_min_runtime_seconds=10 * MINUTE),
        queue("p1", "dept-a"),
        dataclasses.replace(queue("p2", "dept-a"), reclaim_min_runtime_seconds=5 * MINUTE),
        queue("dept-b"),
        queue("p3", "dept-b"),
    ]
    return {q.name: q for q in queues}


@pytest.mark.parametrize(
    ("reclaimer", "victim", "minutes"),
    [("p1", "p2", 5), ("p2", "p1", 10), ("p3", "p2", 10), ("p2", "p3", 0)],
)
def test_reclaim_lca_table(reclaimer: str, victim: str, minutes: float) -> None:
    found = reclaim_min_runtime(tree(), reclaimer, victim, ReclaimResolveMethod.LCA, 0.0)
    assert found == minutes * MINUTE


def test_reclaim_by_queue_walks_up_from_the_victim() -> None:
    # From another department LCA reads dept-a's 10m; the queue method reads p2's own 5m.
    assert reclaim_min_runtime(tree(), "p3", "p2", ReclaimResolveMethod.QUEUE, 0.0) == 5 * MINUTE
    assert reclaim_min_runtime(tree(), "p3", "p1", ReclaimResolveMethod.QUEUE, 0.0) == 10 * MINUTE
    assert reclaim_min_runtime(tree(), "p1", "p3", ReclaimResolveMethod.QUEUE, 7.0) == 7.0


def test_preempt_walks_up_from_the_victims_queue_to_the_default() -> None:
    queues = tree()
    queues["dept-b"] = dataclasses.replace(queues["dept-b"], preempt_min_runtime_seconds=MINUTE)
    assert preempt_min_runtime(queues, "p3", 0.0) == MINUTE
    assert preempt_min_runtime(queues, "p1", 30.0) == 30.0


def test_only_a_recent_start_protects() -> None:
    young = dataclasses.replace(group("g", "q"), last_start=NOW - timedelta(minutes=1))
    old = dataclasses.replace(group("g", "q"), last_start=NOW - timedelta(hours=2))
    assert protected(young, 10 * MINUTE, NOW)
    assert not protected(old, 10 * MINUTE, NOW)
    assert not protected(group("g", "q"), 10 * MINUTE, NOW)  # never started: unprotected, as KAI
    assert not protected(young, 0.0, NOW)


def test_preemption_delay_counts_from_creation_or_last_eviction() -> None:
    fresh = dataclasses.replace(
        group("g", "q"), created=NOW - timedelta(minutes=1), preemption_delay_seconds=5 * MINUTE
    )
    assert preemption_delayed(fresh, NOW)
    aged = dataclasses.replace(fresh, created=NOW - timedelta(hours=1))
    assert not preemption_delayed(aged, NOW)
    evicted_lately = dataclasses.replace(aged, last_eviction=NOW - timedelta(minutes=2))
    assert preemption_delayed(evicted_lately, NOW)
    assert not preemption_delayed(dataclasses.replace(fresh, preemption_delay_seconds=None), NOW)
