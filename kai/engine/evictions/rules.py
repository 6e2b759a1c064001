"""KAI's rules for taking room from running work: who may be a victim, and which victim sets are valid.

Reclaim (between queues) follows the proportion plugin (kai-semantics §8.3, §10.7):
the reclaimer's queue must stay within its fair share; every chunk taken must
leave the victim's side of the queue tree above its fair share (MaintainFairShare)
or, while the reclaimer stays within its deserved quota, above its deserved quota
(GuaranteeDeservedQuota); and the reclaimer may not end up more saturated than a
sibling it takes from, which is what stops reclaim ping-pong. Preempt (within a
queue) takes only strictly lower priority (§8.4). Consolidation moves and never
kills (§8.2). All of them take only preemptible gangs, whole or above their
minimum, and respect min-runtime (§11.1) and the limits of the preemptor's queues.

The search (greedy or CP-SAT) proposes; `check` decides, in exact arithmetic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from kai.engine.evictions.decisions import (
    GUARANTEE_DESERVED_QUOTA,
    LOWER_PRIORITY,
    MAINTAIN_FAIR_SHARE,
    MOVED,
    Action,
)
from kai.engine.evictions.gangs import RunningGang
from kai.engine.evictions.minruntime import (
    path_from_root,
    preempt_min_runtime,
    protected,
    reclaim_min_runtime,
)
from kai.engine.evictions.preemptors import Preemptor
from kai.engine.evictions.state import EvictionState
from kai.engine.model import UNLIMITED, PlacementStrategy
from kai.engine.resources import RESOURCE_NAMES, ResourceName, Resources


@dataclass(frozen=True)
class VictimOption:
    gang: RunningGang
    whole_allowed: bool  # False: min-runtime protects the gang's core; only surplus pods may go


@dataclass(frozen=True)
class Verdict:
    rules: dict[str, str]  # evicted pod -> the rule that allowed it
    problem: str | None = None
    final: bool = False  # the problem stays with any larger victim set

    @property
    def ok(self) -> bool:
        return self.problem is None


Evicted = Mapping[str, frozenset[str]]
"""Victim gang key -> keys of its pods the scenario evicts."""


# -- who may trigger and who may be a victim ------------------------------------------


def can_reclaim(state: EvictionState, preemptor: Preemptor) -> bool:
    """KAI's CanReclaimResources: the queue stays within its fair share with the request."""
    share = state.inputs.shares.get(preemptor.queue)
    if share is None:
        return False
    after = state.ledger.allocated.get(preemptor.queue, Resources()) + preemptor.request
    if not after.fits_in(share.fair_share):
        return False
    if preemptor.gang.group.preemptible:
        return True
    queue = state.inputs.queues[preemptor.queue]
    after_np = state.ledger.allocated_np.get(preemptor.queue, Resources()) + preemptor.request
    return _within_deserved(after_np, share.deserved, queue_quota_unlimited(state, queue.name))


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
    """Running gangs the action may take from for this preemptor, in KAI's victim order."""
    config = state.config.evictions
    now = state.inputs.snapshot.now
    queues = state.inputs.queues
    group = preemptor.gang.group
    options: list[VictimOption] = []
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
            if queue != group.queue and _side_may_give(state, preemptor, queue):
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

    if action is Action.PREEMPT:
        candidates = state.running_in(group.queue)
    elif action is Action.RECLAIM:
        candidates = [
            gang
            for queue in state.running_queues()
            if minimum_for(queue) is not None
            for gang in state.running_in(queue)
        ]
    else:
        candidates = list(state.running.values())
    for gang in candidates:
        victim = gang.group
        if not victim.preemptible or gang.key == preemptor.key:
            continue
        if action is Action.PREEMPT and victim.priority >= group.priority:
            continue
        if action is Action.CONSOLIDATE and any(pod.gpu.is_fractional for pod in gang.pods):
            continue  # shared devices are not moved: their pods stay where they are
        minimum = minimum_for(victim.queue)
        if minimum is None:
            continue
        whole = not protected(victim, minimum, now)
        if whole or gang.elastic:
            options.append(VictimOption(gang, whole))
    if action is Action.CONSOLIDATE:
        options = _near_fitting(state, preemptor, options)
    order = _VictimOrder(state)
    options.sort(key=lambda option: order.key(option.gang))
    return options


CONSOLIDATION_TARGET_NODES = 2
"""Per preemptor pod, how many of the nodes closest to fitting it consolidation looks at."""


def _near_fitting(
    state: EvictionState, preemptor: Preemptor, options: list[VictimOption]
) -> list[VictimOption]:
    """Consolidation looks only at the gangs on the nodes that lack the fewest GPUs for the
    preemptor's largest pod, the way KAI looks only at its first few victim jobs: moving
    gangs off any other node frees less for more disruption.
    """
    size = max(pod.gpu.whole for pod in preemptor.pods)
    movable: dict[str, int] = {}
    for option in options:
        for pod in option.gang.pods:
            movable[pod.node or ""] = movable.get(pod.node or "", 0) + pod.gpu.whole
    check = [state.inputs.eligible_for(pod) for pod in preemptor.pods]
    lacking = []
    for name, gpus in movable.items():
        missing = size - state.future[name].whole_gpus
        if 0 < missing <= gpus and any(eligible(name) for eligible in check):
            lacking.append((missing, name))
    lacking.sort()
    targets = {name for _, name in lacking[: CONSOLIDATION_TARGET_NODES * len(preemptor.pods)]}
    return [o for o in options if any(pod.node in targets for pod in o.gang.pods)]


class _VictimOrder:
    """KAI's reverse order for victims: lowest priority first, then the queue most over its fair
    share (holding anything on a zero share counts as the most over), then the newest start."""

    def __init__(self, state: EvictionState) -> None:
        self._state = state
        self._over: dict[str, tuple[bool, float]] = {}  # float: it only orders

    def key(self, gang: RunningGang) -> tuple[int, bool, float, float, str]:
        if gang.queue not in self._over:
            share = self._state.inputs.shares.get(gang.queue)
            held = self._state.ledger.allocated.get(gang.queue, Resources()).gpu
            ratio = saturation(held, share.fair_share.gpu) if share is not None else Fraction(0)
            self._over[gang.queue] = (ratio is not None, -float(ratio or 0))
        finite, over = self._over[gang.queue]
        started = gang.group.last_start.timestamp() if gang.group.last_start else 0.0
        return (gang.group.priority, finite, over, -started, gang.key)


def _side_may_give(state: EvictionState, preemptor: Preemptor, victim_queue: str) -> bool:
    """KAI's quick victim filter: the victim's side is above what the reclaimer could hold it to."""
    reclaimer_side, victim_side = leveled(state, preemptor.queue, victim_queue)
    remaining = state.ledger.allocated.get(victim_side, Resources())
    return _above(remaining, side_threshold(state, preemptor, reclaimer_side, victim_side))


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
        if not pods or not gang.allows(pods):
            return Verdict({}, f"PodGroup {key} would be left running below its minimum")
        if len(pods) == len(gang.pods) and not option.whole_allowed:
            return Verdict({}, f"PodGroup {key} is protected by min-runtime")
    freed = _freed_by_queue(state, evicted) if action is not Action.CONSOLIDATE else {}
    if action is not Action.CONSOLIDATE:
        problem = _limits_problem(state, preemptor, freed)
        if problem is not None:
            return Verdict({}, problem)
    if action is Action.RECLAIM:
        return _reclaim_verdict(state, preemptor, options, evicted, freed)
    rule = LOWER_PRIORITY if action is Action.PREEMPT else MOVED
    return Verdict({pod: rule for pods in evicted.values() for pod in pods})


def _limits_problem(
    state: EvictionState, preemptor: Preemptor, freed: Mapping[str, Resources]
) -> str | None:
    """The preemptor's queues stay within their limits once the victims have left."""
    for queue in state.ledger.ancestry(preemptor.queue):
        used = state.ledger.allocated.get(queue.name, Resources()) - freed.get(
            queue.name, Resources()
        )
        for name in RESOURCE_NAMES:
            limit = queue.resource(name).limit
            need = preemptor.request.get(name)
            if need and limit != UNLIMITED and used.get(name) + need > limit:
                return f"queue {queue.name} would go over its {name} limit"
    return None


def _freed_by_queue(state: EvictionState, evicted: Evicted) -> dict[str, Resources]:
    """What the evicted pods free, per queue: their leaf queues' and every ancestor's."""
    per_leaf: dict[str, Resources] = {}
    for key, pods in evicted.items():
        leaf = state.groups[key].queue
        amount = sum((state.usage[pod] for pod in pods), per_leaf.get(leaf, Resources()))
        per_leaf[leaf] = amount
    freed: dict[str, Resources] = {}
    for leaf, amount in per_leaf.items():
        for queue in state.ledger.ancestry(leaf):
            freed[queue.name] = freed.get(queue.name, Resources()) + amount
    return freed


def _reclaim_verdict(
    state: EvictionState,
    preemptor: Preemptor,
    options: Mapping[str, VictimOption],
    evicted: Evicted,
    freed: Mapping[str, Resources],
) -> Verdict:
    if not can_reclaim(state, preemptor):
        return Verdict({}, f"queue {preemptor.queue} would go over its fair share", final=True)
    chunks_by_side: dict[str, list[tuple[Resources, tuple[str, ...]]]] = {}
    reclaimer_sides: dict[str, str] = {}
    pairs: dict[str, tuple[str, str]] = {}
    for key in sorted(evicted):
        gang = options[key].gang
        pair = pairs.get(gang.queue)
        if pair is None:
            pair = pairs[gang.queue] = leveled(state, preemptor.queue, gang.queue)
        reclaimer_side, victim_side = pair
        reclaimer_sides[victim_side] = reclaimer_side
        for chunk in gang.chunks(evicted[key]):
            amount = sum((state.usage[pod.key] for pod in chunk), Resources())
            chunks_by_side.setdefault(victim_side, []).append(
                (amount, tuple(pod.key for pod in chunk))
            )
    rules: dict[str, str] = {}
    for side, chunks in sorted(chunks_by_side.items()):
        found = _side_rules(state, preemptor, reclaimer_sides[side], side, chunks)
        if found is None:
            # Taking more from a side never helps it stay above its share: no larger set passes.
            return Verdict(
                {},
                f"queue {side} would fall to its fair share or deserved quota before the last pod",
                final=True,
            )
        rules.update(found)
    problem = _saturation_problem(state, preemptor, freed, evicted)
    return Verdict(rules, problem)


def _side_rules(
    state: EvictionState,
    preemptor: Preemptor,
    reclaimer_side: str,
    victim_side: str,
    chunks: list[tuple[Resources, tuple[str, ...]]],
) -> dict[str, str] | None:
    """Rules per pod if some order of the chunks passes KAI's per-chunk check, else None.

    Each chunk is checked against what the side holds before it is taken, which only
    falls, so the last chunk decides: the order that puts last a chunk that passes
    there passes everywhere.
    """
    held = state.ledger.allocated.get(victim_side, Resources())
    taken = sum((amount for amount, _ in chunks), Resources())
    allocatable = state.allocatable(victim_side)
    threshold = side_threshold(state, preemptor, reclaimer_side, victim_side)
    last = next(
        (i for i, (amount, _) in enumerate(chunks) if _above(held - taken + amount, threshold)),
        None,
    )
    if last is None:
        return None
    ordered = [chunk for i, chunk in enumerate(chunks) if i != last] + [chunks[last]]
    rules: dict[str, str] = {}
    for amount, pods in ordered:
        rule = (
            MAINTAIN_FAIR_SHARE if _above_limitable(held, allocatable) else GUARANTEE_DESERVED_QUOTA
        )
        rules.update(dict.fromkeys(pods, rule))
        held = held - amount
    return rules


def side_threshold(
    state: EvictionState, preemptor: Preemptor, reclaimer_side: str, victim_side: str
) -> dict[ResourceName, Fraction]:
    """Per resource, the amount the victim's side must stay above for a chunk to be taken.

    MaintainFairShare needs it above its allocatable share; GuaranteeDeservedQuota (open
    only while the reclaimer's side fits its deserved quota with the request) above its
    deserved quota. Either will do, so the lower counts. Unlimited amounts are left out:
    nothing is above them.
    """
    shares = state.inputs.shares
    victim_share = shares[victim_side]
    allocatable = state.allocatable(victim_side)
    reclaimer_share = shares[reclaimer_side]
    reclaimer_after = state.ledger.allocated.get(reclaimer_side, Resources()) + preemptor.request
    guarantee = _within_deserved(
        reclaimer_after, reclaimer_share.deserved, queue_quota_unlimited(state, reclaimer_side)
    )
    victim_unlimited = queue_quota_unlimited(state, victim_side)
    threshold: dict[ResourceName, Fraction] = {}
    for name in RESOURCE_NAMES:
        bounds = []
        if allocatable.get(name) != UNLIMITED:
            bounds.append(allocatable.get(name))
        if guarantee and name not in victim_unlimited:
            bounds.append(victim_share.deserved.get(name))
        if bounds:
            threshold[name] = min(bounds)
    return threshold


def queue_quota_unlimited(state: EvictionState, queue: str) -> set[ResourceName]:
    spec = state.inputs.queues[queue]
    return {name for name in RESOURCE_NAMES if spec.resource(name).quota == UNLIMITED}


def _within_deserved(amount: Resources, deserved: Resources, unlimited: set[ResourceName]) -> bool:
    return all(
        name in unlimited or amount.get(name) <= deserved.get(name) for name in RESOURCE_NAMES
    )


def _above(amount: Resources, threshold: Mapping[ResourceName, Fraction]) -> bool:
    return any(amount.get(name) > value for name, value in threshold.items())


def _above_limitable(amount: Resources, allocatable: Resources) -> bool:
    return any(
        allocatable.get(name) != UNLIMITED and amount.get(name) > allocatable.get(name)
        for name in RESOURCE_NAMES
    )


def _saturation_problem(
    state: EvictionState, preemptor: Preemptor, freed: Mapping[str, Resources], evicted: Evicted
) -> str | None:
    """The reclaimer must not end up more saturated than a sibling it takes from (§10.7 c)."""
    queues, shares = state.inputs.queues, state.inputs.shares
    multiplier = state.config.evictions.reclaimer_saturation_multiplier
    involved_by_queue: dict[str, set[ResourceName]] = {}
    for key, pods in evicted.items():
        positive = {name for pod in pods for name, value in state.usage[pod].items() if value > 0}
        for queue in state.ledger.ancestry(state.groups[key].queue):
            involved_by_queue.setdefault(queue.name, set()).update(positive)
    asked = {name for name, value in preemptor.request.items() if value > 0}
    for level in state.ledger.ancestry(preemptor.queue):
        held = state.ledger.allocated.get(level.name, Resources()) - freed.get(
            level.name, Resources()
        )
        after = held + preemptor.request
        for sibling in sorted(freed):
            if sibling == level.name or queues[sibling].parent != level.parent:
                continue
            sibling_held = state.ledger.allocated.get(sibling, Resources()) - freed[sibling]
            for name in sorted(asked | involved_by_queue.get(sibling, set())):
                mine = saturation(after.get(name), shares[level.name].fair_share.get(name))
                sibling_fair = shares[sibling].fair_share.get(name)
                theirs = saturation(sibling_held.get(name), sibling_fair)
                if (
                    (mine is None or mine > 1)
                    and sibling_fair > 0
                    and (mine is None or (theirs is not None and mine * multiplier >= theirs))
                ):
                    return (
                        f"queue {level.name} would be more saturated in {name} than its sibling "
                        f"{sibling} it takes from"
                    )
        if not preemptor.gang.group.preemptible:
            np_after = state.ledger.allocated_np.get(level.name, Resources()) + preemptor.request
            if not _within_deserved(
                np_after, shares[level.name].deserved, queue_quota_unlimited(state, level.name)
            ):
                return f"queue {level.name} would hold non-preemptible work over its deserved quota"
    return None


def saturation(held: Fraction, fair: Fraction) -> Fraction | None:
    """held / fair share; None stands for infinity (something held where the share is 0)."""
    if fair == 0:
        return None if held > 0 else Fraction(0)
    return held / fair


def leveled(state: EvictionState, reclaimer_queue: str, victim_queue: str) -> tuple[str, str]:
    """The two sibling queues where the reclaimer's and the victim's paths from the root part."""
    mine = path_from_root(state.inputs.queues, reclaimer_queue)
    theirs = path_from_root(state.inputs.queues, victim_queue)
    for a, b in zip(mine, theirs, strict=False):
        if a.name != b.name:
            return a.name, b.name
    depth = min(len(mine), len(theirs)) - 1
    return mine[depth].name, theirs[depth].name
