"""Prometheus series of PodGroups and queues that are gone are dropped, so /metrics does not grow;
pending groups are counted by queue and reason; a replica that loses the Lease drops what its
last cycle saw, so a dashboard does not show a former leader's numbers frozen."""

from __future__ import annotations

import random
from fractions import Fraction

from kai.engine.decision_changes import NO_ACCOUNT, DecisionChanges
from kai.engine.fairshare import QueueShare
from kai.engine.group_decision import GroupDecision
from kai.engine.resources import Resources
from kai.operator.loop import SchedulingLoop
from kai.operator.metrics import Metrics
from tests.unit.operator.partial_loop import loop_reaching, stand_in


def _series(metrics: Metrics, name: str) -> list[dict[str, str]]:
    return [
        sample.labels
        for family in metrics.registry.collect()
        for sample in family.samples
        if sample.name == name
    ]


def test_eviction_series_of_deleted_pod_groups_are_removed() -> None:
    metrics = Metrics()
    metrics.evicted("train", "ns")
    metrics.evicted("serve", "ns")
    assert len(_series(metrics, "pod_group_evicted_pods_total")) == 2

    metrics.forget_pod_groups({"ns/serve"})

    assert _series(metrics, "pod_group_evicted_pods_total") == [
        {"pod_group": "serve", "namespace": "ns"}
    ]
    assert metrics.pod_group_series == 1
    metrics.forget_pod_groups(set())
    assert metrics.pod_group_series == 0 and not _series(metrics, "pod_group_evicted_pods_total")


def test_queue_series_follow_the_queues_that_exist() -> None:
    metrics = Metrics()
    share = _one_share()
    metrics.record_queues({"a": share, "b": share})
    metrics.record_queues({"b": share})
    assert _series(metrics, "queue_allocated_gpus") == [{"queue_name": "b"}]


def _decision(key: str, queue: str, reason: str | None) -> GroupDecision:
    return GroupDecision(key, queue, reason is None, reason, "")


def _pending(metrics: Metrics) -> dict[tuple[str, str], float]:
    return {
        (sample.labels["queue_name"], sample.labels["reason"]): sample.value
        for family in metrics.registry.collect()
        for sample in family.samples
        if sample.name == "kai_pending_pod_groups"
    }


def test_pending_groups_are_counted_by_queue_and_reason_and_cleared_reasons_go() -> None:
    metrics = Metrics()
    metrics.record_pending(
        {
            "ns/a": _decision("ns/a", "team", "OverLimit"),
            "ns/b": _decision("ns/b", "team", "OverLimit"),
            "ns/c": _decision("ns/c", "team", "Unschedulable"),
            "ns/d": _decision("ns/d", "other", "NotEnoughPods"),
            "ns/e": _decision("ns/e", "other", None),  # scheduled: not pending
        }
    )
    assert _pending(metrics) == {
        ("team", "OverLimit"): 2,
        ("team", "Unschedulable"): 1,
        ("other", "NotEnoughPods"): 1,
    }

    metrics.record_pending({"ns/a": _decision("ns/a", "team", "Unschedulable")})

    assert _pending(metrics) == {("team", "Unschedulable"): 1}


def test_pending_groups_told_which_decisions_are_new_count_as_a_full_count() -> None:
    """Each cycle's engine names the decisions it made anew since the last cycle's
    (`DecisionChanges`); the counts brought up to date from those alone equal a count of
    every decision, also when the account is of another mapping (read all again)."""
    told_any = 0
    for seed in range(30):
        rng = random.Random(seed)
        told, fresh = Metrics(), Metrics()
        last: dict[str, GroupDecision] = {}
        for _ in range(40):
            decisions = dict(last)
            changed = set()
            for _ in range(rng.randint(0, 4)):
                key = f"ns/g{rng.randrange(12)}"
                changed.add(key)
                if rng.random() < 0.2:
                    decisions.pop(key, None)
                    continue
                reason = rng.choice((None, "OverLimit", "Unschedulable"))
                decisions[key] = _decision(key, rng.choice(("a", "b")), reason)
            since: dict[str, GroupDecision] = last if rng.random() < 0.8 else dict(last)
            told_any += since is last
            told.record_pending(decisions, DecisionChanges(since, frozenset(changed)))
            fresh.record_pending(decisions)
            assert _pending(told) == _pending(fresh), seed
            last = decisions
    assert told_any > 800


def _one_share() -> QueueShare:
    one = Resources.of(Fraction(1), 0, 0)
    return QueueShare(one, one, one, one, one, one)


def test_losing_the_lease_drops_what_the_last_cycle_saw_but_keeps_the_totals() -> None:
    metrics = Metrics()
    metrics.leading(True)
    metrics.record_queues({"team": _one_share()})
    metrics.record_pending({"ns/a": _decision("ns/a", "team", "OverLimit")})
    metrics.record_cycle({"allocate": 0.01}, 0.02, relists=1, events_dropped=0)

    metrics.leading(False)

    for name in ("queue_allocated_gpus", "queue_deserved_gpus", "queue_fair_share_gpu"):
        assert _series(metrics, name) == []
    assert _pending(metrics) == {}
    assert metrics.registry.get_sample_value("kai_leader") == 0
    assert metrics.registry.get_sample_value("kai_cycles_total") == 1
    assert metrics.registry.get_sample_value("kai_cache_relists") == 1


def _loop(metrics: Metrics, leading: list[bool]) -> SchedulingLoop:
    return loop_reaching(  # only what `_record` reads is given
        cache=stand_in(relists=2),
        events=stand_in(dropped=0),
        metrics=metrics,
        period_seconds=1.0,
        is_leader=lambda: leading[0],
    )


def test_a_cycle_that_ends_after_the_lease_is_lost_does_not_bring_the_queues_back() -> None:
    metrics = Metrics()
    leading = [True]
    loop = _loop(metrics, leading)
    shares = {"team": _one_share()}
    decisions = {"ns/a": _decision("ns/a", "team", "OverLimit")}
    loop._record({"allocate": 0.01}, 0.02, shares, decisions, NO_ACCOUNT)
    assert _series(metrics, "queue_allocated_gpus") == [{"queue_name": "team"}]
    assert _pending(metrics) == {("team", "OverLimit"): 1}

    leading[0] = False
    metrics.leading(False)
    loop._record(
        {"allocate": 0.01}, 0.02, shares, decisions, NO_ACCOUNT
    )  # the cycle in flight ends

    assert _series(metrics, "queue_allocated_gpus") == [] and _pending(metrics) == {}
    assert metrics.registry.get_sample_value("kai_cycles_total") == 2
