"""Running gangs as victims: which of their pods may be evicted together, and in which chunks.

A gang is evicted whole, or (when it runs more pods than its minimum) loses pods
above its minimum one at a time; it never drops below its minimum and keeps
running (kai-semantics §8.6). KAI's reclaim rules count an eviction chunk by chunk:
each surplus pod is one chunk and a gang's core (its minimum) is one more.

The pods this cycle's allocation placed count as their gang's, as KAI's allocated
tasks do in its later actions, and preempt may take them back before they bind,
instead of evicting them a cycle after they started. Reclaim taking back the allocation's
placements too was measured and left out (docs/benchmarks.md): every placed gang of a
queue above its fair share became an option of its victim models, which cost the
1,000-node cycle up to 0.4 s more, and the fewer evictions it seemed to bring over ten
simulated rounds were its search budget's. What consolidation pipelined for its
preemptors (a few gangs a cycle) reclaim and preempt may take back
(`EvictionState.promised`); consolidation moves running pods only.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from kai.engine.gangs import task_order_key
from kai.engine.model import Pod, PodGroup, SubGroup
from kai.engine.subgroups import holds


@dataclass(frozen=True)
class RunningGang:
    group: PodGroup
    pods: tuple[Pod, ...]  # bound or placed this cycle, not evicted, in KAI's task order

    @property
    def key(self) -> str:
        return self.group.key

    @property
    def queue(self) -> str:
        return self.group.queue

    @property
    def elastic(self) -> bool:
        """Runs more pods than its minimum, so some may go while the gang keeps running."""
        return len(self.pods) > self.group.min_member

    @property
    def core(self) -> tuple[Pod, ...]:
        """The pods that keep the gang at its minimum: the first minMember in task order."""
        return self.pods[: self.group.min_member]

    def surplus_limits(self) -> list[tuple[frozenset[str], int]]:
        """(pod keys, how many of them may go) for the gang and each sub-group, when not evicted whole."""
        limits = [(frozenset(p.key for p in self.pods), len(self.pods) - self.group.min_member)]
        for subgroup in self.group.subgroups:
            members = subgroup_members(self.group.subgroups, subgroup)
            keys = frozenset(p.key for p in self.pods if p.subgroup in members)
            limits.append((keys, len(keys) - subgroup.min_member))
        return limits

    def allows(self, evicted: Collection[str]) -> bool:
        """Whole gang, or what leaves the rest a whole gang (`kai.engine.subgroups.holds`):
        surplus pods, or with `minSubGroup` whole sub-groups beyond those it needs."""
        if len(evicted) == len(self.pods):
            return True
        return holds(self.group, [pod for pod in self.pods if pod.key not in evicted])

    def without(self, keys: Collection[str]) -> RunningGang | None:
        """The gang without these pods; None if it has no other."""
        pods = tuple(pod for pod in self.pods if pod.key not in keys)
        return RunningGang(self.group, pods) if pods else None

    def chunks(self, evicted: Collection[str]) -> list[tuple[Pod, ...]]:
        """The eviction in KAI's chunks: each surplus pod alone, then the core as one."""
        chosen = [pod for pod in self.pods if pod.key in evicted]
        if len(chosen) < len(self.pods):
            return [(pod,) for pod in chosen]  # surplus pods only
        core = self.core
        core_keys = {pod.key for pod in core}
        surplus: list[tuple[Pod, ...]] = [(pod,) for pod in chosen if pod.key not in core_keys]
        return [*surplus, core] if core else surplus


def subgroup_members(subgroups: Iterable[SubGroup], root: SubGroup) -> set[str | None]:
    """A sub-group's name and its descendants': a parent counts the pods of its children."""
    items = list(subgroups)
    members: set[str | None] = {root.name}
    grew = True
    while grew:
        grew = False
        for item in items:
            if item.parent in members and item.name not in members:
                members.add(item.name)
                grew = True
    return members


def running_gangs(
    groups: Iterable[PodGroup], pods: Iterable[Pod], placed: Iterable[Pod] = ()
) -> dict[str, RunningGang]:
    """Gangs with bound pods of ours, keyed by PodGroup. `placed`: the pods this cycle's
    allocation placed, each with its node and devices, which count as their gang's pods."""
    by_group: dict[str, list[Pod]] = {}
    for pod in pods:
        if pod.phase.is_active_allocated and pod.scheduler_is_ours and pod.node is not None:
            by_group.setdefault(pod.group, []).append(pod)
    for pod in placed:
        by_group.setdefault(pod.group, []).append(pod)
    return {
        group.key: RunningGang(group, tuple(sorted(by_group[group.key], key=task_order_key)))
        for group in groups
        if group.key in by_group
    }
