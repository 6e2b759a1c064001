"""The grouper keeps a written plan until the cache shows both halves: pod and PodGroup.

The pod's annotation and the PodGroup arrive by different watches. Dropping the plan
when the annotation shows, while the PodGroup watch lags, left a bound pod whose
group the snapshot lacked: its GPUs counted toward no queue, and the queue was given
more than its limit (the soak's "running pods hold 17 GPUs, limit 16").
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from kai.api.constants import default_priority_classes
from kai.kube.owners import OwnerReader
from kai.operator.cache import ClusterView
from kai.operator.events import EventRecorder
from kai.operator.group_writes import Written
from kai.operator.pod_grouper import PodGrouper


def _pod(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "uid": "uid-p", "resourceVersion": "1",
                     "labels": {"kai.scheduler/queue": "q"}, "annotations": annotations or {}},
        "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c"}]},
        "status": {"phase": "Pending"},
    }  # fmt: skip


def _view(pod: dict[str, Any], pod_groups: dict[str, Any]) -> ClusterView:
    empty: MappingProxyType[str, Any] = MappingProxyType({})
    pods = MappingProxyType({"ns/p": pod})
    return ClusterView(empty, pods, empty, MappingProxyType(pod_groups), empty, empty, 1)


async def test_a_written_plan_stays_until_the_cache_shows_its_pod_group_too() -> None:
    grouper = PodGrouper(None, OwnerReader(None), EventRecorder(None, "t"), "kai-res", 4)  # type: ignore[arg-type]
    classes = default_priority_classes()
    (plan,) = (await grouper.plan(_view(_pod(), {}), classes)).new.values()
    grouper._settle("ns/p", "uid-p", plan, Written.ALL)  # the group and the bind went out
    group_key = f"{plan.namespace}/{plan.name}"
    annotated = _pod({"pod-group-name": plan.name})

    lagging = await grouper.plan(_view(annotated, {}), classes)  # the PodGroup watch lags
    assert set(lagging.schedulable()) == {"ns/p"}

    caught_up = await grouper.plan(_view(annotated, {group_key: plan.manifest}), classes)
    assert caught_up.schedulable() == {}
    assert grouper.remembered == 0


async def test_the_grouper_copies_the_configured_node_pool_label_onto_the_group() -> None:
    """`--node-pool-label` reaches the grouper: the pod's pool under that key is the group's."""
    grouper = PodGrouper(None, OwnerReader(None), EventRecorder(None, "t"), "kai-res", 4,  # type: ignore[arg-type]
                         node_pool_label="example.com/pool")  # fmt: skip
    pod = _pod()
    pod["metadata"]["labels"]["example.com/pool"] = "a"
    (plan,) = (await grouper.plan(_view(pod, {}), default_priority_classes())).new.values()
    assert plan.manifest["metadata"]["labels"]["example.com/pool"] == "a"


async def test_a_plan_whose_binds_are_still_going_out_is_not_planned_again() -> None:
    """While a burst's cycle binds, the next one plans (kai.operator.loop): the pods that
    cycle grouped count as grouped, by their plans, and are not first in line again."""
    grouper = PodGrouper(None, OwnerReader(None), EventRecorder(None, "t"), "kai-res", 4)  # type: ignore[arg-type]
    classes = default_priority_classes()
    (plan,) = (await grouper.plan(_view(_pod(), {}), classes)).new.values()
    meanwhile = await grouper.plan(_view(_pod(), {}), classes, in_flight={"ns/p": plan})
    assert meanwhile.new == {} and meanwhile.schedulable() == {"ns/p": plan}
    after = await grouper.plan(_view(_pod(), {}), classes)  # its group refused: planned again
    assert set(after.new) == {"ns/p"}


async def test_the_cycle_that_takes_on_the_rest_of_a_burst_says_it_ends_it() -> None:
    """So its group creates wait for its binds (kai.operator.group_writes), even while the
    cycle before still binds and owes no group yet."""
    grouper = PodGrouper(None, OwnerReader(None), EventRecorder(None, "t"), "kai-res", 4, 1)  # type: ignore[arg-type]
    classes = default_priority_classes()
    second = _pod()
    second["metadata"].update(name="q", uid="uid-q")
    empty: MappingProxyType[str, Any] = MappingProxyType({})
    pods = MappingProxyType({"ns/p": _pod(), "ns/q": second})
    view = ClusterView(empty, pods, empty, empty, empty, empty, 1)
    first = await grouper.plan(view, classes)
    assert (set(first.new), first.burst_continues, first.ends_burst) == ({"ns/p"}, True, False)
    rest = await grouper.plan(view, classes, in_flight=dict(first.new))
    assert (set(rest.new), rest.burst_continues, rest.ends_burst) == ({"ns/q"}, False, True)
    after = await grouper.plan(view, classes, in_flight={**first.new, **rest.new})
    assert (after.new, after.ends_burst) == ({}, False)
