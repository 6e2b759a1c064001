"""Reclaim's rules between queues, in exact arithmetic (kai-semantics §8.3, §10.7).

The reclaimer's queue must stay within its fair share. Taken chunk by chunk, every
chunk must leave the victim's side of the queue tree above its allocatable share
(MaintainFairShare) or, while the reclaimer's side fits its deserved quota, above its
deserved quota (GuaranteeDeservedQuota). And at every level of the reclaimer's path
it may not end more saturated than a sibling it takes from, which stops ping-pong.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

from kai.engine.budget import NON_PREEMPTIBLE_OVER_QUOTA, OVER_LIMIT
from kai.engine.evictions.decisions import GUARANTEE_DESERVED_QUOTA, MAINTAIN_FAIR_SHARE
from kai.engine.evictions.minruntime import path_from_root
from kai.engine.evictions.options import Evicted, Verdict, VictimOption
from kai.engine.evictions.preemptors import Preemptor
from kai.engine.evictions.state import EvictionState
from kai.engine.model import UNLIMITED
from kai.engine.resources import NO_RESOURCES, RESOURCE_NAMES, ResourceName, Resources


def can_reclaim(state: EvictionState, preemptor: Preemptor) -> bool:
    """KAI's CanReclaimResources: the queue stays within its fair share with the request."""
    share = state.inputs.shares.get(preemptor.queue)
    if share is None:
        return False
    after = state.ledger.allocated.get(preemptor.queue, NO_RESOURCES) + preemptor.request
    if not after.fits_in(share.fair_share):
        return False
    if preemptor.gang.group.preemptible:
        return True
    queue = state.inputs.queues[preemptor.queue]
    after_np = state.ledger.allocated_np.get(preemptor.queue, NO_RESOURCES) + preemptor.request
    return _within_deserved(after_np, share.deserved, queue_quota_unlimited(state, queue.name))


def beyond_reclaim(state: EvictionState, preemptor: Preemptor) -> bool:
    """Whether the request breaks a cap that no reclaim lifts: a limit of the reclaimer's own
    queue (reclaim takes only from other queues) or quota for non-preemptible work (victims
    are preemptible). A limit of an ancestor may be met once victims beneath it leave, so it
    does not stop reclaim: KAI's eligibility looks at fair share alone (§8.3), and the
    victim check (`rules.check`) holds every limit with the victims gone."""
    group = preemptor.gang.group
    ledger = state.ledger
    quota = NON_PREEMPTIBLE_OVER_QUOTA
    if ledger.check(group.queue, preemptor.request, group.preemptible, only=quota) is not None:
        return True
    own = ledger.ancestry(group.queue)[0]
    return any(
        cap.reason == OVER_LIMIT and cap.room < preemptor.request.get(cap.resource)
        for cap in ledger.caps(own)
    )


def reclaim_verdict(
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
    held = state.ledger.allocated.get(victim_side, NO_RESOURCES)
    taken = sum((amount for amount, _ in chunks), Resources())
    allocatable = state.allocatable(victim_side)
    threshold = side_threshold(state, preemptor, reclaimer_side, victim_side)
    last = next(
        (i for i, (amount, _) in enumerate(chunks) if above(held - taken + amount, threshold)),
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
    reclaimer_after = state.ledger.allocated.get(reclaimer_side, NO_RESOURCES) + preemptor.request
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


def above(amount: Resources, threshold: Mapping[ResourceName, Fraction]) -> bool:
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
        held = state.ledger.allocated.get(level.name, NO_RESOURCES) - freed.get(
            level.name, Resources()
        )
        after = held + preemptor.request
        for sibling in sorted(freed):
            if sibling == level.name or queues[sibling].parent != level.parent:
                continue
            sibling_held = state.ledger.allocated.get(sibling, NO_RESOURCES) - freed[sibling]
            for name in sorted(asked | involved_by_queue.get(sibling, set())):
                mine = saturation(after.get(name), shares[level.name].fair_share.get(name))
                sibling_fair = shares[sibling].fair_share.get(name)
                theirs = saturation(sibling_held.get(name), sibling_fair)
                if _more_saturated(mine, theirs, sibling_fair, multiplier):
                    return (
                        f"queue {level.name} would be more saturated in {name} than its sibling "
                        f"{sibling} it takes from"
                    )
        if not preemptor.gang.group.preemptible:
            np_after = state.ledger.allocated_np.get(level.name, NO_RESOURCES) + preemptor.request
            if not _within_deserved(
                np_after, shares[level.name].deserved, queue_quota_unlimited(state, level.name)
            ):
                return f"queue {level.name} would hold non-preemptible work over its deserved quota"
    return None


def saturation_forbids_all(
    state: EvictionState, preemptor: Preemptor, options: Sequence[VictimOption]
) -> bool:
    """True when `_saturation_problem` refuses every victim set that takes any of these.

    Each victim lies under the sibling where its path from the root parts from the
    reclaimer's: a pair of siblings, the reclaimer's side and the victim's. A pair refuses
    when the reclaimer's side, holding what it holds now and the request, would be more
    saturated than the victim's side holding all it holds now, in a resource the request
    asks for. Take any victim set and, of the pairs it touches, the one lowest in the
    tree: nothing the set takes is beneath that pair's reclaimer side (a victim there would
    part from the reclaimer lower still), so that side holds what it holds now, while the
    victim's side holds less than now. If every pair refuses, so does the rule, for every
    set. At 1,000 nodes a third of reclaim's attempts were refused so, each after a victim
    search and a model.
    """
    shares = state.inputs.shares
    multiplier = state.config.evictions.reclaimer_saturation_multiplier
    asked = [name for name, value in preemptor.request.items() if value > 0]
    for mine, theirs in sorted(
        {leveled(state, preemptor.queue, queue) for queue in {o.gang.queue for o in options}}
    ):
        after = state.ledger.allocated.get(mine, NO_RESOURCES) + preemptor.request
        held = state.ledger.allocated.get(theirs, NO_RESOURCES)
        if not any(
            _more_saturated(
                saturation(after.get(name), shares[mine].fair_share.get(name)),
                saturation(held.get(name), shares[theirs].fair_share.get(name)),
                shares[theirs].fair_share.get(name),
                multiplier,
            )
            for name in asked
        ):
            return False
    return True


def _more_saturated(
    mine: Fraction | None, theirs: Fraction | None, sibling_fair: Fraction, multiplier: Fraction
) -> bool:
    """The reclaimer, over its fair share, ends at least as saturated (times the multiplier)
    as the sibling it takes from; None stands for infinity."""
    return (
        (mine is None or mine > 1)
        and sibling_fair > 0
        and (mine is None or (theirs is not None and mine * multiplier >= theirs))
    )


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
