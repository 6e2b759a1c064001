"""KAI's rules for taking room from running work: who may be a victim, and which victim sets are valid.

All actions take only preemptible gangs, whole or only above their minimum, respect
min-runtime (§11.1) and keep the preemptor's queues within their limits. Preempt
(within a queue) takes only strictly lower priority (§8.4); consolidation moves and
never kills (§8.2); reclaim's rules between queues are in `reclaim_rules` (§10.7).

The search (greedy or CP-SAT) proposes; `check` decides, in exact arithmetic.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta

from kai.engine.budget import OVER_LIMIT
from kai.engine.capacity import NodeCapacity
from kai.engine.evictions.decisions import (
    LOWER_PRIORITY,
    MOVED,
    Action,
)
from kai.engine.evictions.gangs import RunningGang
from kai.engine.evictions.minruntime import (
    preempt_min_runtime,
    protected,
    reclaim_min_runtime,
)
from kai.engine.evictions.options import Evicted, Verdict, VictimOption
from kai.engine.evictions.preemptors import Preemptor
from kai.engine.evictions.reclaim_rules import (
    above,
    leveled,
    reclaim_verdict,
    side_threshold,
)
from kai.engine.evictions.state import EvictionState
from kai.engine.model import PlacementStrategy, Pod
from kai.engine.resources import NO_RESOURCES, Resources
from kai.engine.unhonoured import may_be_moved

# -- who may trigger and who may be a victim ------------------------------------------


def consolidation_on(state: EvictionState) -> bool:
    config = state.config
    return (
        config.evictions.max_consolidation_preemptees > 0
        and config.placement_strategy is not PlacementStrategy.SPREAD
    )


def may_consolidate(state: EvictionState, preemptor: Preemptor) -> bool:
    """Preemptible, and the cluster has the GPUs free (or being freed): a fragmentation problem."""
    return preemptor.gang.group.preemptible and state.free_gpus() >= preemptor.request.gpu


def may_preempt(state: EvictionState, preemptor: Preemptor) -> bool:
    """Its queue runs a preemptible gang of strictly lower priority."""
    lowest = state.lowest_victim_priority(preemptor.queue)
    return lowest is not None and lowest < preemptor.gang.group.priority


def victim_options(
    state: EvictionState, action: Action, preemptor: Preemptor
) -> list[VictimOption]:
    """Running gangs the action may take from for this preemptor, by name."""
    now = state.inputs.snapshot.now
    options: list[VictimOption] = []
    kept = _wanted_in_place(state, preemptor) if action is Action.CONSOLIDATE else set()
    for gang, minimum in _candidates(state, action, preemptor):
        if action is Action.CONSOLIDATE and (
            not may_be_moved(gang.pods) or (kept and any(pod.key in kept for pod in gang.pods))
        ):
            continue
        whole = not protected(gang.group, minimum, now)
        if whole or gang.elastic:
            options.append(VictimOption(gang, whole))
    if action is Action.CONSOLIDATE:
        options = _near_fitting(state, preemptor, options)
    options.sort(key=lambda option: option.gang.key)  # the order victims go in: victim_order
    return options


def _wanted_in_place(state: EvictionState, preemptor: Preemptor) -> set[str]:
    """The pods (by key) the preemptor's required affinity terms select: consolidation
    moves none of them for it. Its seats are found with its victims gone, so a moved pod
    its term selects would read as gone and the preemptor as the first of its set: the
    plan would seat it where nothing it wants is once the pod runs elsewhere
    (`test_consolidation_moves_no_pod_the_preemptor_must_be_near`)."""
    affinity = state.inputs.pod_affinity
    wanting = [pod for pod in preemptor.pods if any(not term.anti for term in pod.pod_terms)]
    if affinity is None or not wanting:
        return set()
    return affinity.wanted_by(wanting, state.placed_for_terms())


def min_runtime_protected(
    state: EvictionState, action: Action, preemptor: Preemptor
) -> list[tuple[str, datetime]]:
    """The gangs the action could take but for min-runtime, with the moment each may go."""
    now = state.inputs.snapshot.now
    found = []
    for gang, minimum in _candidates(state, action, preemptor):
        if protected(gang.group, minimum, now) and gang.group.last_start is not None:
            found.append((gang.key, gang.group.last_start + timedelta(seconds=minimum)))
    return sorted(found, key=lambda item: (item[1], item[0]))


def _candidates(
    state: EvictionState, action: Action, preemptor: Preemptor
) -> Iterator[tuple[RunningGang, float]]:
    """The running preemptible gangs this action may consider, each with its min-runtime."""
    config = state.config.evictions
    queues = state.inputs.queues
    group = preemptor.gang.group
    minimums: dict[str, float | None] = {}  # victim queue -> min-runtime; None: not a victim

    def minimum_for(queue: str) -> float | None:
        if queue in minimums:
            return minimums[queue]
        found: float | None
        if action is Action.PREEMPT:
            found = (
                preempt_min_runtime(queues, queue, config.preempt_min_runtime_seconds)
                if queue == group.queue
                else None
            )
        elif action is Action.RECLAIM:
            found = None
            # A gang whose Queue was deleted while it ran has no share to weigh it against.
            known = queue in queues
            if known and queue != group.queue and _side_may_give(state, preemptor, queue):
                found = reclaim_min_runtime(
                    queues,
                    group.queue,
                    queue,
                    config.reclaim_resolve_method,
                    config.reclaim_min_runtime_seconds,
                )
        else:
            found = 0.0
        minimums[queue] = found
        return found

    if action is Action.PREEMPT:  # pods placed this cycle too (taken back before they bind)
        candidates = state.running_in(group.queue)
    elif action is Action.RECLAIM:
        candidates = state.bound_gangs(
            gang
            for queue in state.running_queues()
            if minimum_for(queue) is not None
            for gang in state.running_in(queue)
        )
    else:  # consolidation moves running pods; the allocation placed its own where it chose
        candidates = state.started_gangs()
    for gang in candidates:
        victim = gang.group
        if not victim.preemptible or gang.key == preemptor.key:
            continue
        if state.anchored and any(pod.key in state.anchored for pod in gang.pods):
            continue  # a seat of this cycle counts on it being where it is
        if action is Action.PREEMPT and victim.priority >= group.priority:
            continue
        minimum = minimum_for(victim.queue)
        if minimum is not None:
            yield gang, minimum


CONSOLIDATION_TARGET_NODES = 2
"""Per preemptor pod, how many of the nodes closest to fitting it consolidation looks at."""


def _near_fitting(
    state: EvictionState, preemptor: Preemptor, options: list[VictimOption]
) -> list[VictimOption]:
    """Consolidation looks only at the gangs on the nodes that lack the fewest devices for one
    more of the preemptor's largest pods, the way KAI looks only at its first few victim jobs: moving
    gangs off any other node frees less for more disruption.

    A device counts as freeable when its every user may move: a whole GPU of a movable
    pod, or a shared device all of whose pods are movable. A fractional preemptor needs
    one device with room for it: a node lacks one if none has the room now, and can get
    one by freeing a device or by moving movable pods off a shared one.
    """
    size = max(pod.gpu.whole for pod in preemptor.pods)
    fractions = [pod for pod in preemptor.pods if pod.gpu.is_fractional]
    movable: dict[str, list[Pod]] = {}
    for option in options:
        for pod in option.gang.pods:
            movable.setdefault(pod.node or "", []).append(pod)
    check = [state.inputs.eligible_for(pod) for pod in preemptor.pods]
    lacking = []
    for name, pods in movable.items():
        if not any(eligible(name) for eligible in check):
            continue
        cap = state.future[name]
        freeable, room_made = _freeable(state, cap, pods, fractions)
        # GPUs the node lacks to hold one more of the largest pods than it holds now.
        held = cap.whole_gpus // size if size else 0
        missing = size - cap.whole_gpus % size if size and held < len(preemptor.pods) else 0
        if size == 0 and fractions:
            missing = 0 if any(cap.fits(pod) for pod in fractions) else 1
            freeable = freeable + room_made
        if 0 < missing <= freeable:
            lacking.append((missing, name))
    lacking.sort()
    targets = {name for _, name in lacking[: CONSOLIDATION_TARGET_NODES * len(preemptor.pods)]}
    return [o for o in options if any(pod.node in targets for pod in o.gang.pods)]


def _freeable(
    state: EvictionState, cap: NodeCapacity, pods: list[Pod], fractions: list[Pod]
) -> tuple[int, int]:
    """Devices on the node that moving these pods frees; and shared devices it would make
    room on for the smallest fractional preemptor pod without freeing them."""
    whole = sum(pod.gpu.whole for pod in pods)
    keys = {pod.key for pod in pods}
    moving: dict[str, int] = {}
    for pod in pods:
        if pod.gpu.is_fractional:
            for device in pod.gpu_groups:
                moving[device] = moving.get(device, 0) + pod.gpu.memory_on(cap.node.gpu_memory_mib)
    freed = made = 0
    memory = cap.node.gpu_memory_mib
    need = min((pod.gpu.memory_on(memory) for pod in fractions), default=memory)
    for device, used in cap.shared.items():
        holders = state.occupants.get((cap.name, device), set())
        if holders and holders <= keys:
            freed += 1
        elif device in moving and used - moving[device] + need <= memory:
            made += 1
    return whole + freed, made


def _side_may_give(state: EvictionState, preemptor: Preemptor, victim_queue: str) -> bool:
    """KAI's quick victim filter: the victim's side is above what the reclaimer could hold it to."""
    reclaimer_side, victim_side = leveled(state, preemptor.queue, victim_queue)
    remaining = state.ledger.allocated.get(victim_side, NO_RESOURCES)
    return above(remaining, side_threshold(state, preemptor, reclaimer_side, victim_side))


# -- checking a scenario ---------------------------------------------------------------


def check(
    state: EvictionState,
    action: Action,
    preemptor: Preemptor,
    options: Mapping[str, VictimOption],
    evicted: Evicted,
) -> Verdict:
    """Whether the action may evict exactly these pods for this preemptor, and under which rule."""
    for key, pods in evicted.items():
        option = options.get(key)
        if option is None:
            return Verdict({}, f"PodGroup {key} is not a victim this action may take")
        gang = option.gang
        # Consolidation re-places every pod it takes, so a gang keeps all its pods.
        if not pods or (action is not Action.CONSOLIDATE and not gang.allows(pods)):
            return Verdict({}, f"PodGroup {key} would be left running below its minimum")
        if len(pods) == len(gang.pods) and not option.whole_allowed:
            return Verdict({}, f"PodGroup {key} is protected by min-runtime")
    freed = _freed_by_queue(state, evicted) if action is not Action.CONSOLIDATE else {}
    if action is not Action.CONSOLIDATE:
        problem = _limits_problem(state, preemptor, freed)
        if problem is not None:
            return Verdict({}, problem)
    if action is Action.RECLAIM:
        return reclaim_verdict(state, preemptor, options, evicted, freed)
    rule = LOWER_PRIORITY if action is Action.PREEMPT else MOVED
    return Verdict({pod: rule for pods in evicted.values() for pod in pods})


def _limits_problem(
    state: EvictionState, preemptor: Preemptor, freed: Mapping[str, Resources]
) -> str | None:
    """The preemptor's queues stay within their limits once the victims have left."""
    for queue in state.ledger.ancestry(preemptor.queue):
        for cap in state.ledger.caps(queue):
            need = preemptor.request.get(cap.resource)
            room = cap.room + freed.get(queue.name, NO_RESOURCES).get(cap.resource)
            if cap.reason == OVER_LIMIT and need and need > room:
                return f"queue {queue.name} would go over its {cap.resource} limit"
    return None


def _freed_by_queue(state: EvictionState, evicted: Evicted) -> dict[str, Resources]:
    """What the evicted pods free, per queue: their leaf queues' and every ancestor's."""
    per_leaf: dict[str, Resources] = {}
    for key, pods in evicted.items():
        leaf = state.groups[key].queue
        amount = sum((state.usage[pod] for pod in pods), per_leaf.get(leaf, NO_RESOURCES))
        per_leaf[leaf] = amount
    freed: dict[str, Resources] = {}
    for leaf, amount in per_leaf.items():
        for queue in state.ledger.ancestry(leaf):
            freed[queue.name] = freed.get(queue.name, NO_RESOURCES) + amount
    return freed
