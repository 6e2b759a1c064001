"""What each pending PodGroup asks for this cycle: the gang core that must be placed together, and the elastic rest.

A gang's core is the set of pending pods that brings it (and each of its
sub-groups) up to `minMember`; it is placed whole or not at all. Pods beyond the
minimum are elastic: each may be placed on its own once the core is in. The pods
picked for the core follow KAI's task order (task priority, then age, then name).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction

from kai.engine.model import Pod, PodGroup, PodPhase
from kai.engine.resources import Resources

_EPOCH = datetime(1970, 1, 1).astimezone()


@dataclass(frozen=True)
class GangRequest:
    group: PodGroup
    core: tuple[Pod, ...]  # placed all together, or none of them
    elastic: tuple[Pod, ...]  # each optional, only once the core is placed
    active: int  # pods already bound
    pending: int
    missing: int  # pods the gang still lacks to be ready at all (0 when enough exist)
    # core_request per device size, memoised: queue ordering asks it at every step.
    _core: dict[int, Resources] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def key(self) -> str:
        return self.group.key

    @property
    def needs_core(self) -> bool:
        return bool(self.core)

    def core_request(self, gpu_memory_mib: int) -> Resources:
        """The core's resources; fractional `gpu-memory` counted against the given device size."""
        total = self._core.get(gpu_memory_mib)
        if total is None:
            total = sum((pod_resources(pod, gpu_memory_mib) for pod in self.core), Resources())
            self._core[gpu_memory_mib] = total
        return total


def pod_resources(pod: Pod, gpu_memory_mib: int) -> Resources:
    """A pod's request with its GPU share as queue accounting counts it."""
    gpus = pod.gpu.gpus_on(gpu_memory_mib) if pod.gpu.is_fractional else Fraction(pod.gpu.whole)
    return Resources(gpus, pod.request.cpu, pod.request.memory)


def task_order_key(pod: Pod) -> tuple[int, datetime, str]:
    return (-pod.task_priority, pod.created or _EPOCH, pod.key)


def build_gang_requests(
    groups: Iterable[PodGroup], pods_by_group: Mapping[str, list[Pod]]
) -> list[GangRequest]:
    """One request per PodGroup that has pending pods of ours."""
    requests: list[GangRequest] = []
    for group in groups:
        pods = pods_by_group.get(group.key, [])
        pending = sorted((p for p in pods if p.phase is PodPhase.PENDING), key=task_order_key)
        if not pending:
            continue
        active = [p for p in pods if p.phase.is_active_allocated]
        core = _choose_core(group, active, pending)
        if core is None:
            alive = len(active) + len(pending)
            requests.append(
                GangRequest(group, (), (), len(active), len(pending), group.min_member - alive)
            )
            continue
        core_keys = {p.key for p in core}
        elastic = tuple(p for p in pending if p.key not in core_keys)
        requests.append(GangRequest(group, core, elastic, len(active), len(pending), 0))
    return requests


def _choose_core(group: PodGroup, active: list[Pod], pending: list[Pod]) -> tuple[Pod, ...] | None:
    """The pending pods that satisfy every sub-group minimum and then minMember; None if too few exist."""
    chosen: list[Pod] = []
    taken: set[str] = set()
    active_by_subgroup: dict[str | None, int] = defaultdict(int)
    for pod in active:
        active_by_subgroup[pod.subgroup] += 1
    for subgroup in group.subgroups:
        members = _subgroup_members(group, subgroup.name)
        have = sum(n for name, n in active_by_subgroup.items() if name in members)
        need = subgroup.min_member - have
        if need <= 0:
            continue
        candidates = [p for p in pending if p.subgroup in members and p.key not in taken]
        if len(candidates) < need:
            return None
        for pod in candidates[:need]:
            chosen.append(pod)
            taken.add(pod.key)
    still_needed = group.min_member - len(active) - len(chosen)
    if still_needed > 0:
        rest = [p for p in pending if p.key not in taken]
        if len(rest) < still_needed:
            return None
        chosen.extend(rest[:still_needed])
    return tuple(sorted(chosen, key=task_order_key))


def _subgroup_members(group: PodGroup, name: str) -> set[str | None]:
    """The sub-group and its descendants: a parent sub-group counts the pods of its children."""
    members: set[str | None] = {name}
    changed = True
    while changed:
        changed = False
        for subgroup in group.subgroups:
            if subgroup.parent in members and subgroup.name not in members:
                members.add(subgroup.name)
                changed = True
    return members
