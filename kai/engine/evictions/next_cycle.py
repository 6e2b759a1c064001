"""Whether the next cycle's allocation would place a preemptor: the stability rule of reclaim and preempt.

An eviction frees room for a pending gang, which waits (pipelined) for the victims to
leave. In the next cycle the victims are pending again, and allocation offers room in
KAI's order. If that order puts a victim before the gang it was evicted for, the victim
is bound straight back; if it puts other pending gangs first, they take the room. Either
way the victims left for nothing and the gang evicts again a cycle later. KAI guards
against both by running a virtual allocation over each candidate solution (its victims,
the preemptor and the other pending jobs) and committing it only if the preemptor is
allocated (kai-semantics §8.6). Here the same greedy pass the cycle allocates with is run
over the room the decision leaves, with the victims pending and every gang still pending
(a sibling queue can take room freed under a shared parent's limit); a decision is made
only if the pass places its preemptor. Gangs pipelined by earlier decisions keep their
seats. Consolidation's moves are looked at so too when inter-pod terms concern them
(`actions._Looks.moves`): the moved pods, pending again, may come before the preemptor
and sit where their moves stepped around its seat.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass
from enum import Enum

from kai.engine.budget import QueueBudget
from kai.engine.evictions.preemptors import Preemptor
from kai.engine.evictions.room import release
from kai.engine.evictions.scenario import Scenario
from kai.engine.evictions.state import EvictionState
from kai.engine.evictions.term_seats import bound_by_terms
from kai.engine.gangs import GangRequest, build_gang_requests, pod_resources
from kai.engine.greedy import AllocationOutcome, KaiOrder, allocate_on_index
from kai.engine.job_order import Offer
from kai.engine.model import Pod, PodPhase
from kai.engine.node_index import NodeIndex
from kai.engine.resources import Resources


class NextCycle(Enum):
    """What the look at the next cycle finds for a decision."""

    KEEPS = "keeps"
    """The preemptor is placed: the decision stands."""
    VICTIM_FIRST = "victim-first"
    """The preemptor is not placed, and a victim is placed back: ping-pong."""
    OUTRUN = "outrun"
    """The preemptor is not placed: gangs before it in KAI's order take the room. The
    victims would leave for nothing, and the preemptor would evict again a cycle later."""


@dataclass(frozen=True)
class Look:
    """What one look found, and what it cost."""

    verdict: NextCycle
    first: str | None = None
    """When the preemptor is not placed: the first gang the look placed where a victim
    left (a victim, or the gang that overtook the preemptor)."""
    attempts: int = 0
    """The attempts the look's pass made: its work."""


def next_cycle(state: EvictionState, preemptor: Preemptor, scenario: Scenario) -> Look:
    """Whether the next allocation places the preemptor, and if not, why."""
    index = state.next_cycle_index()
    index.begin()  # rolled back below: the victims' room is given back only in this look ahead
    try:
        return _look(state, index, preemptor, scenario)
    finally:
        index.rollback()


def _look(state: EvictionState, index: NodeIndex, preemptor: Preemptor, scenario: Scenario) -> Look:
    ledger = state.ledger.copy()
    victims: dict[str, list[Pod]] = defaultdict(list)
    for key, evicted in scenario.evicted.items():
        gang = state.running[key]
        for pod in gang.pods:
            if pod.key in evicted and pod.node in index.capacity:
                index.update(
                    pod.node, functools.partial(release, pod=pod, gpu_groups=pod.gpu_groups)
                )
                ledger.add(
                    gang.group.queue, Resources() - state.usage[pod.key], gang.group.preemptible
                )
                victims[key].append(pod)
    if not victims:
        return Look(NextCycle.KEEPS)
    gangs: list[GangRequest] = []
    for key, leaving in victims.items():
        running = state.running[key]
        gone = {pod.key for pod in leaving}
        pods = [
            dataclasses.replace(pod, phase=PodPhase.PENDING, node=None, gpu_groups=())
            if pod.key in gone
            else pod
            for pod in running.pods
        ]
        gangs += build_gang_requests([running.group], {key: pods})
    pending = state.pending_offers()
    gangs += _readmitted(state, ledger, preemptor, victims)
    if preemptor.key not in pending and preemptor.key not in victims:
        gangs.append(preemptor.gang)
    preemptor_pods = [pod.key for pod in preemptor.pods]
    victim_pods = [pod.key for pods in victims.values() for pod in pods]
    # Where inter-pod terms concern the preemptor or a victim, they read as the next cycle
    # will: the victims gone from their nodes (a gang that wants a pod nearby must not
    # count on one that is leaving; a moved pod is pending again, not where it ran), and
    # this cycle's bindings on theirs (a zone a pod bound this cycle closes stays closed).
    termed = bound_by_terms(
        state, [*preemptor.pods, *(p for pods in victims.values() for p in pods)]
    )
    order = state.next_cycle_order(victim_pods) if termed else state.order
    looked = -1  # how many pods were placed when the preemptor's chances were last looked at

    def settled(offer: Offer, outcome: AllocationOutcome) -> bool:
        """Stop once the answer is known: the preemptor placed, or its offer failed (its
        only one: a failed attempt is not pushed back), or it can be placed nowhere any
        more (looked at again only when something was placed since: the pass only takes
        room and adds to what queues hold)."""
        nonlocal looked
        placed = outcome.placements
        if offer.gang.key == preemptor.key or any(pod in placed for pod in preemptor_pods):
            return True
        if len(placed) == looked:
            return False
        looked = len(placed)
        return placeable_nowhere(preemptor.gang, index, ledger, order)

    outcome = allocate_on_index(gangs, index, ledger, order, settled, pending, victims)
    placed, attempts = outcome.placements, len(outcome.offers)
    if any(key in placed for key in preemptor_pods):
        return Look(NextCycle.KEEPS, None, attempts)
    left = {pod.node for pods in victims.values() for pod in pods}
    first = next((p.pod.group for p in placed.values() if p.node in left), None)
    if any(key in placed for key in victim_pods):
        return Look(NextCycle.VICTIM_FIRST, first, attempts)
    return Look(NextCycle.OUTRUN, first, attempts)


def _readmitted(
    state: EvictionState, ledger: QueueBudget, preemptor: Preemptor, victims: Collection[str]
) -> list[GangRequest]:
    """The pending gangs a queue's cap refused that fit under it once these victims leave.

    The next cycle refuses a gang over a cap before it offers room: offered in the look, it
    would stand for its queue in the order with an ask it cannot have, and put the queue
    behind its siblings (on the 100-node synthetic cluster a queue at its limit did, with
    a 16-pod gang; its victims were bound back the next cycle ahead of their reclaimers,
    every other cycle). So `pending_offers` leaves them out, and only a gang whose breaking
    cap's queue victims have left (this cycle or in this decision) is checked again."""
    freed = set(state.freed)
    for key in victims:
        freed.update(queue.name for queue in ledger.ancestry(state.groups[key].queue))
    memory_mib = state.inputs.memory_mib
    found: list[GangRequest] = []
    waiting: set[str] | None = None
    for gang, breaking in state.over_caps():
        if gang.key == preemptor.key or breaking not in freed:
            continue  # nothing left the subtree of the queue whose cap it breaks
        group = gang.group
        if ledger.fits(group.queue, gang.core_request(memory_mib), group.preemptible):
            if waiting is None:  # pipelined by a decision of this cycle: not pending
                waiting = {record.group for record in state.pipelined.values()}
            if gang.key not in waiting:
                found.append(gang)
    return found


def placeable_nowhere(
    gang: GangRequest, index: NodeIndex, ledger: QueueBudget, order: KaiOrder
) -> bool:
    """The pass cannot place any of the gang's pods, now or later in it.

    From here the pass only takes room and adds to what queues hold: a pod that fits on
    no node now never will, and a request over a queue's cap stays over it. A core is
    placed whole or not at all; elastic pods (a gang whose core still runs) one by one."""
    group = gang.group
    memory_mib = order.accounting_memory_mib

    def refused(request: Resources) -> bool:
        return not ledger.fits(group.queue, request, group.preemptible)

    def nowhere(pod: Pod) -> bool:
        return index.find(pod, order.eligible_for(pod)) is None

    if gang.core:
        return refused(gang.core_request(memory_mib)) or any(nowhere(pod) for pod in gang.core)
    return all(refused(pod_resources(pod, memory_mib)) or nowhere(pod) for pod in gang.elastic)
