"""What each pending PodGroup asks for this cycle: the gang core that must be placed together, and the elastic rest.

A gang's core is the set of pending pods that brings it (and its sub-groups, with
`minSubGroup`) up to its minimum, as `kai.engine.subgroups` chooses them; it is placed
whole or not at all. Pods beyond the minimum are elastic: each may be placed on its
own once the core is in. The pods follow KAI's task order (task priority, then age,
then name).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from kai.engine.model import Pod, PodGroup, PodPhase
from kai.engine.resources import Resources, ResourceSum
from kai.engine.subgroups import choose

_EPOCH = datetime(1970, 1, 1).astimezone()


@dataclass(frozen=True)
class GangRequest:
    group: PodGroup
    core: tuple[Pod, ...]  # placed all together, or none of them
    elastic: tuple[Pod, ...]  # each optional, only once the core is placed
    active: int  # pods already bound
    pending: int
    missing: int  # pods the gang still lacks to be ready at all (0 when enough exist)
    growth: bool = False
    """The core is a whole extra sub-group of a gang that already runs at its minimum:
    the gang is scheduled whether or not the core fits, and it comes after new gangs."""
    # core_request per device size, memoised: queue ordering asks it at every step.
    _core: dict[int, Resources] = field(default_factory=dict, init=False, repr=False, compare=False)
    key: str = field(init=False, repr=False, compare=False)
    """The PodGroup's key, a field: the passes over pending gangs read it at every step."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", self.group.key)

    @property
    def needs_core(self) -> bool:
        return bool(self.core)

    def core_request(self, gpu_memory_mib: int) -> Resources:
        """The core's resources; fractional `gpu-memory` counted against the given device size."""
        total = self._core.get(gpu_memory_mib)
        if total is None:
            summed = ResourceSum()
            for pod in self.core:
                summed.add(pod_resources(pod, gpu_memory_mib))
            total = self._core[gpu_memory_mib] = summed.total()
        return total


def left_to_place(request: GangRequest, placed: Container[str]) -> GangRequest | None:
    """What of `request` still waits once the pods in `placed` are placed: all of it if
    none is; once its core is, the elastic pods left over, asked as of a gang that runs at
    its minimum (KAI's reclaim and preempt take the pending tasks of a job that allocate
    placed in part, in the same cycle, kai-semantics §8); nothing once every pod is."""
    if not any(pod.key in placed for pod in (*request.core, *request.elastic)):
        return request
    left = tuple(pod for pod in request.elastic if pod.key not in placed)
    if not left:
        return None
    return dataclasses.replace(request, core=(), elastic=left, growth=False)


def pod_resources(pod: Pod, gpu_memory_mib: int) -> Resources:
    """A pod's request with its GPU share as queue accounting counts it."""
    if pod.whole_request is not None:
        return pod.whole_request
    return Resources(pod.gpu.gpus_on(gpu_memory_mib), pod.request.cpu, pod.request.memory)


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
        choice = choose(group, active, pending, group.min_member if group.subgroups else 0)
        if choice is None:
            alive = len(active) + len(pending)
            requests.append(
                GangRequest(
                    group, (), (), len(active), len(pending), max(1, group.min_member - alive)
                )
            )
            continue
        core = tuple(sorted(choice.core, key=task_order_key))
        requests.append(
            GangRequest(
                group, core, choice.elastic, len(active), len(pending), 0, growth=choice.growth
            )
        )
    return requests
