"""Prometheus series of PodGroups and queues that are gone are dropped, so /metrics does not grow."""

from __future__ import annotations

from fractions import Fraction

from kai.engine.fairshare import QueueShare
from kai.engine.resources import Resources
from kai.operator.metrics import Metrics


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
    one = Resources.of(Fraction(1), 0, 0)
    share = QueueShare(one, one, one, one, one, one)
    metrics.record_queues({"a": share, "b": share})
    metrics.record_queues({"b": share})
    assert _series(metrics, "queue_allocated_gpus") == [{"queue_name": "b"}]
