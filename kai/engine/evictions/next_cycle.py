"""Whether the next cycle's allocation would undo an eviction: the stability rule of reclaim and preempt.

An eviction frees room for a pending gang, which waits (pipelined) for the victims to
leave. In the next cycle the victims are pending again, and allocation offers room in
KAI's order; if that order puts a victim before the gang it was evicted for, the victim
is bound straight back and the gang is evicted for again a cycle later, for ever. KAI
guards against this by running a virtual allocation over each candidate solution (its
victims, the preemptor and the other pending jobs) before committing it. Here the same
greedy pass the cycle allocates with is run over the room the decision leaves, with the
victims pending and every gang still pending (a sibling queue can take room freed under a
shared parent's limit); a decision whose victims would be re-placed while its preemptor
is still not placed is not made. Gangs pipelined by earlier decisions keep their seats.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import defaultdict
from collections.abc import Collection

from kai.engine.budget import QueueBudget
from kai.engine.evictions.preemptors import Preemptor
from kai.engine.evictions.room import release
from kai.engine.evictions.scenario import Scenario
from kai.engine.evictions.state import EvictionState
from kai.engine.gangs import GangRequest, build_gang_requests, pod_resources
from kai.engine.greedy import AllocationOutcome, KaiOrder, allocate_on_index
from kai.engine.job_order import Offer
from kai.engine.model import Pod, PodPhase
from kai.engine.node_index import NodeIndex
from kai.engine.resources import Resources


def undone_next_cycle(state: EvictionState, preemptor: Preemptor, scenario: Scenario) -> bool:
    """True when the next allocation would re-place a victim before placing the preemptor."""
    index = state.next_cycle_index()
    index.begin()  # rolled back below: the victims' room is given back only in this look ahead
    try:
        return _undone(state, index, preemptor, scenario)
    finally:
        index.rollback()


def _undone(
    state: EvictionState, index: NodeIndex, preemptor: Preemptor, scenario: Scenario
) -> bool:
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
        return False
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
    if preemptor.key not in pending and preemptor.key not in victims:
        gangs.append(preemptor.gang)
    preemptor_pods = [pod.key for pod in preemptor.pods]
    victim_pods = [pod.key for pods in victims.values() for pod in pods]
    victim_gangs = {gang.key: gang for gang in gangs if gang.key in victims}
    untried = set(victims)  # victim gangs not yet offered room
    tried = False
    looked = -1  # how many pods were placed when the victims' chances were last looked at

    def settled(offer: Offer, outcome: AllocationOutcome) -> bool:
        """Stop once the answer is known: the preemptor placed (not undone), or its offer
        failed (its only one: a failed attempt is not pushed back) and either a victim is
        placed or every victim has failed its own only attempt (none can be placed later).
        Nor is it undone once no victim yet to be offered room can be placed at all: the
        victims are looked at again only when something was placed since."""
        nonlocal tried, looked
        placed = outcome.placements
        if any(key in placed for key in preemptor_pods):
            return True
        key = offer.gang.key
        tried = tried or key == preemptor.key
        untried.discard(key)
        victim_placed = any(key in placed for key in victim_pods)
        if tried and (not untried or victim_placed):
            return True
        if victim_placed or len(placed) == looked:
            return False
        looked = len(placed)
        return all(  # a victim with nothing to place is never offered room
            key not in victim_gangs
            or placeable_nowhere(victim_gangs[key], index, ledger, state.order)
            for key in untried
        )

    without = set(victims) | _refused_up_front(state, ledger, preemptor, victims)
    outcome = allocate_on_index(gangs, index, ledger, state.order, settled, pending, without)
    placed = outcome.placements
    preemptor_placed = any(key in placed for key in preemptor_pods)
    victim_placed = any(key in placed for key in victim_pods)
    return victim_placed and not preemptor_placed


def _refused_up_front(
    state: EvictionState, ledger: QueueBudget, preemptor: Preemptor, victims: Collection[str]
) -> set[str]:
    """The pending gangs the next cycle refuses for a queue's cap before it offers room:
    offered here, each would stand for its queue in the order with an ask it cannot have,
    and put the queue behind its siblings (on the 100-node synthetic cluster a queue at its
    limit did, with a 16-pod gang; its victims were bound back the next cycle ahead of
    their reclaimers, every other cycle). One refused before may fit now only under a
    queue victims have left."""
    pending = state.pending_offers()
    freed = set(state.freed)
    for key in victims:
        freed.update(queue.name for queue in ledger.ancestry(state.groups[key].queue))
    memory_mib = state.inputs.memory_mib
    refused: set[str] = set()
    for gang, queues in state.over_caps():
        if gang.key == preemptor.key or gang.key not in pending:
            continue
        group = gang.group
        if queues.isdisjoint(freed) or (
            ledger.check(group.queue, gang.core_request(memory_mib), group.preemptible) is not None
        ):
            refused.add(gang.key)
    return refused


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
        return ledger.check(group.queue, request, group.preemptible) is not None

    def nowhere(pod: Pod) -> bool:
        return index.find(pod, order.eligible_for(pod)) is None

    if gang.core:
        return refused(gang.core_request(memory_mib)) or any(nowhere(pod) for pod in gang.core)
    return all(refused(pod_resources(pod, memory_mib)) or nowhere(pod) for pod in gang.elastic)
