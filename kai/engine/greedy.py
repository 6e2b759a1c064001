"""The greedy allocation pass: KAI's allocate action, gang by gang in queue order, first fit by node preference.

It is fast and always feasible, so it serves three purposes: the solver's hint
(the solver starts from this answer and only improves on it), the fallback when
the solver finds nothing in time, and the baseline the benchmark compares against.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kai.engine.budget import QueueBudget, Refusal
from kai.engine.gangs import GangRequest, pod_resources
from kai.engine.model import Pod
from kai.engine.node_index import NodeIndex

UNSCHEDULABLE = "Unschedulable"


@dataclass(frozen=True)
class PodPlacement:
    pod: Pod
    node: str
    gpu_groups: tuple[str, ...]


@dataclass
class AllocationOutcome:
    placements: dict[str, PodPlacement] = field(default_factory=dict)  # pod key -> placement
    admitted: list[str] = field(default_factory=list)  # gang keys whose core was placed, in order
    refusals: dict[str, Refusal] = field(
        default_factory=dict
    )  # gang key -> why its core was not placed
    offered: list[str] = field(default_factory=list)
    """Gang keys with a core, in the order KAI's queue order offered them resources.

    The order depends on what was admitted before (queues re-rank after each admission),
    so it is recorded as it happened: the solver keeps this order and improves only the
    packing within it.
    """


def greedy_allocate(
    gangs: Iterable[GangRequest],
    index: NodeIndex,
    budget: QueueBudget,
    eligible_for: Callable[[Pod], Callable[[str], bool]],
    accounting_memory_mib: int,
) -> AllocationOutcome:
    """Place each gang's core whole or not at all, then its elastic pods one by one.

    `gangs` may be a lazy iterator that re-ranks queues as `budget` changes.
    """
    outcome = AllocationOutcome()
    for gang in gangs:
        if gang.core:
            outcome.offered.append(gang.key)
            if not _place_core(gang, index, budget, eligible_for, accounting_memory_mib, outcome):
                continue
            outcome.admitted.append(gang.key)
        for pod in gang.elastic:
            _place_elastic(gang, pod, index, budget, eligible_for, accounting_memory_mib, outcome)
    return outcome


def _place_core(
    gang: GangRequest,
    index: NodeIndex,
    budget: QueueBudget,
    eligible_for: Callable[[Pod], Callable[[str], bool]],
    accounting_memory_mib: int,
    outcome: AllocationOutcome,
) -> bool:
    group = gang.group
    request = gang.core_request(accounting_memory_mib)
    refusal = budget.check(group.queue, request, group.preemptible)
    if refusal is not None:
        outcome.refusals[gang.key] = refusal
        return False
    index.begin()
    placed: list[PodPlacement] = []
    for pod in gang.core:
        node = index.find(pod, eligible_for(pod))
        if node is None:
            index.rollback()
            outcome.refusals[gang.key] = Refusal(
                UNSCHEDULABLE,
                f"resources were found for {len(placed)} pods while {len(gang.core)} are required "
                f"to reach minMember {group.min_member}",
            )
            return False
        placed.append(PodPlacement(pod, node, index.take(node, pod)))
    index.commit()
    budget.add(group.queue, request, group.preemptible)
    for placement in placed:
        outcome.placements[placement.pod.key] = placement
    return True


def _place_elastic(
    gang: GangRequest,
    pod: Pod,
    index: NodeIndex,
    budget: QueueBudget,
    eligible_for: Callable[[Pod], Callable[[str], bool]],
    accounting_memory_mib: int,
    outcome: AllocationOutcome,
) -> None:
    group = gang.group
    request = pod_resources(pod, accounting_memory_mib)
    if budget.check(group.queue, request, group.preemptible) is not None:
        return
    node = index.find(pod, eligible_for(pod))
    if node is None:
        return
    outcome.placements[pod.key] = PodPlacement(pod, node, index.take(node, pod))
    budget.add(group.queue, request, group.preemptible)
