"""A bound pod whose group was never written (its scheduler stopped after the bind) is
planned again, so it counts toward its queue and its group gets written; a bound pod
naming some other group is left alone, and its owners are not read again every cycle.
A group owed by a burst is laid over the cache until the cache shows it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from kai.api.constants import default_priority_classes
from kai.grouping import PodGroupPlan
from kai.kube.owners import OwnerReader
from kai.operator.cache import ClusterView
from kai.operator.events import EventRecorder
from kai.operator.group_writes import Written
from kai.operator.pod_grouper import PodGrouper

CLASSES = default_priority_classes()


def _pod(group: str | None = None, node: str | None = None) -> dict[str, Any]:
    annotations = {"pod-group-name": group} if group else {}
    spec: dict[str, Any] = {"schedulerName": "kai-scheduler", "containers": [{"name": "c"}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "uid": "uid-p", "resourceVersion": "1",
                     "labels": {"kai.scheduler/queue": "q"}, "annotations": annotations},
        "spec": spec,
        "status": {"phase": "Pending"},
    }  # fmt: skip


def _view(pods: dict[str, Any], pod_groups: dict[str, Any] | None = None) -> ClusterView:
    empty: MappingProxyType[str, Any] = MappingProxyType({})
    return ClusterView(
        empty, MappingProxyType(pods), empty, MappingProxyType(pod_groups or {}), empty, empty, 1
    )


class CountingOwners(OwnerReader):
    """The owner reader of an owner-less pod, counting the chains asked for."""

    def __init__(self) -> None:
        super().__init__(None)  # type: ignore[arg-type]  # an owner-less pod reads nothing
        self.chains = 0

    async def chain(self, pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        self.chains += 1
        return await super().chain(pod)


def _grouper(owners: OwnerReader | None = None) -> PodGrouper:
    return PodGrouper(None, owners or OwnerReader(None), EventRecorder(None, "t"), "kai-res", 4)  # type: ignore[arg-type]


async def _own_plan() -> PodGroupPlan:
    (plan,) = (await _grouper().plan(_view({"ns/p": _pod()}), CLASSES)).new.values()
    return plan


async def test_a_bound_pod_whose_own_group_is_missing_is_planned_again() -> None:
    plan = await _own_plan()
    lost = _pod(plan.name, node="n1")
    (again,) = (await _grouper().plan(_view({"ns/p": lost}), CLASSES)).new.values()
    assert (again.name, again.manifest["spec"]) == (plan.name, plan.manifest["spec"])


async def test_a_pod_whose_group_exists_or_is_not_bound_is_not_planned_again() -> None:
    plan = await _own_plan()
    group = {f"ns/{plan.name}": plan.manifest}
    bound_and_grouped = _view({"ns/p": _pod(plan.name, node="n1")}, group)
    waiting_for_its_group = _view({"ns/p": _pod(plan.name)})  # KAI: it waits, unbound
    for view in (bound_and_grouped, waiting_for_its_group):
        assert (await _grouper().plan(view, CLASSES)).new == {}


async def test_a_bound_pod_naming_another_group_is_left_alone_and_not_read_again() -> None:
    owners = CountingOwners()
    grouper = _grouper(owners)
    view = _view({"ns/p": _pod("users-own-group", node="n1")})
    for _ in range(3):
        assert (await grouper.plan(view, CLASSES)).new == {}
    assert owners.chains == 1
    assert grouper.remembered == 1
    await grouper.plan(_view({}), CLASSES)  # the pod is gone: forgotten
    assert grouper.remembered == 0


async def test_an_owed_group_is_laid_over_the_cache_and_written_after_the_burst() -> None:
    grouper = _grouper()
    (plan,) = (await grouper.plan(_view({"ns/p": _pod()}), CLASSES)).new.values()
    grouper._settle("ns/p", "uid-p", plan, Written.GROUP_OWED)  # bound during a burst
    bound = _view({"ns/p": _pod(plan.name, node="n1")})

    during = await grouper.plan(bound, CLASSES)
    assert during.new == {}  # not planned again: the grouper knows the group is owed
    assert during.schedulable() == {"ns/p": plan}
    assert grouper.writes(bound, during)._owed == {f"ns/{plan.name}": plan}

    grouper._settle_owed(f"ns/{plan.name}", True)
    assert grouper.writes(bound, during)._owed == {}
    seen = _view({"ns/p": _pod(plan.name, node="n1")}, {f"ns/{plan.name}": plan.manifest})
    assert (await grouper.plan(seen, CLASSES)).schedulable() == {}
    assert grouper.remembered == 0


async def test_an_owed_group_whose_pod_is_gone_is_not_written() -> None:
    grouper = _grouper()
    (plan,) = (await grouper.plan(_view({"ns/p": _pod()}), CLASSES)).new.values()
    grouper._settle("ns/p", "uid-p", plan, Written.GROUP_OWED)
    plans = await grouper.plan(_view({}), CLASSES)
    assert grouper.writes(_view({}), plans)._owed == {}
    assert grouper.remembered == 0
