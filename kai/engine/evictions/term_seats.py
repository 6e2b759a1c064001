"""Seats for a preemptor, or consolidation's moved pods, that inter-pod terms concern:
their terms kept.

The eviction actions seat a preemptor's pods on the room its victims leave. For a gang
the terms concern (its own, or another pod's that selects it) that seating must read
them, or a replica that must avoid its siblings could be seated beside one. Here its pods
are seated one by one where the required terms hold (`kai.engine.pod_affinity`), on the
nodes the preferred terms score highest among those, beside:

- every pod on a node but those leaving: the decision's victims (when the search knows
  them; otherwise they count as staying, which keeps an anti-affinity term conservative)
  and the cycle's earlier victims;
- this cycle's bindings and the seats of the cycle's earlier eviction decisions;
- the preemptor's pods seated before it.

The look at the next cycle reads the terms without the victims too (`next_cycle`). A
topology-constrained preemptor is seated so within each candidate domain
(`topology_seats`). The victim model (CP-SAT) does not see the terms, so such a
preemptor's victims are chosen by the greedy search alone, and its seats are not moved to
idle room afterwards.

A gang with an affinity term of its own (a pod it must be near) preempts too: its seats
count on the pods its terms select staying where they are, so once a decision seats it,
no later decision of the cycle takes or moves those pods (`EvictionState.anchored`), and
the validator reads every seat's terms again once all the cycle's victims are gone.
Evictions only ever open an anti-affinity term's domains, so a seat kept apart stays
kept apart.

Consolidation moves such pods as KAI does, whose node order holds the pod-affinity
score: each moved pod is seated the same way (`seat_moves`), beside the decision's
preemptor seats and the pods moved before it, and later decisions read it at its new
node (`EvictionState.placed_for_terms`), so their seats and moves keep its terms and it
keeps theirs. Before, consolidation moved no pod a term concerns, not even one that only
prefers to be apart, which many charts write.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Mapping, Sequence

from kai.engine.evictions.preemptors import Preemptor
from kai.engine.evictions.room import Meter, Overlay, Seat, own_devices_first, seat_all, size_order
from kai.engine.evictions.state import EvictionState
from kai.engine.greedy import PodPlacement
from kai.engine.model import Pod
from kai.engine.pod_affinity import Eligible, PodAffinity


def bound_by_terms(state: EvictionState, pods: Iterable[Pod]) -> bool:
    """Whether an inter-pod term, required or preferred, concerns where any of these pods
    (a preemptor's, or the victims consolidation moves) may go."""
    affinity = state.inputs.pod_affinity
    return affinity is not None and any(map(affinity.concerns, pods))


def seat_by_terms(
    state: EvictionState,
    preemptor: Preemptor,
    room: Overlay,
    nodes: Iterable[str],
    meter: Meter | None = None,
    leaving: Collection[str] = (),
) -> list[Seat] | None:
    """The preemptor's pods seated on `nodes` where the terms hold once the pods `leaving`
    (by key: the decision's victims) are gone, or None; `room` keeps the seats taken."""
    return _seat_in_turn(state, preemptor.pods, room, list(nodes), leaving, [], meter)


def seat_moves(
    state: EvictionState,
    moving: Sequence[Pod],
    room: Overlay,
    beside: Sequence[Seat],
    meter: Meter | None = None,
) -> list[Seat] | None:
    """Consolidation's moved pods, some of which terms concern, seated one by one (largest
    first) where the terms hold once they and the cycle's earlier victims have left,
    beside the decision's preemptor seats (`beside`), those seated before them, this
    cycle's bindings and earlier decisions' seats; or None. A pod that is seated back on
    its own node stays where it runs."""
    mates = [PodPlacement(pod, node, groups) for pod, node, groups in beside]
    gone = [pod.key for pod in moving]
    in_turn = sorted(moving, key=size_order)
    return _seat_in_turn(state, in_turn, room, list(room.keys()), gone, mates, meter, moving=True)


def _seat_in_turn(
    state: EvictionState,
    pods: Sequence[Pod],
    room: Overlay,
    nodes: list[str],
    gone: Collection[str],
    mates: list[PodPlacement],
    meter: Meter | None,
    moving: bool = False,
) -> list[Seat] | None:
    """`pods` seated one by one, each beside `mates` and the pods seated before it, with
    the terms read once the cycle's earlier victims and the pods `gone` have left."""
    terms = state.inputs.pod_affinity
    assert terms is not None
    affinity = terms.without([*state.evicted, *gone])
    placed = state.placed_for_terms()
    seats: list[Seat] = []
    for pod in pods:
        found = _seat_one(state, affinity, pod, room, nodes, placed, mates, meter, moving)
        if found is None:
            return None
        seats.append(found)
        mates.append(PodPlacement(pod, found[1], found[2]))
    return seats


def _seat_one(
    state: EvictionState,
    affinity: PodAffinity,
    pod: Pod,
    room: Overlay,
    nodes: list[str],
    placed: Mapping[str, PodPlacement],
    mates: list[PodPlacement],
    meter: Meter | None,
    moving: bool = False,
) -> Seat | None:
    """`moving`: a running pod re-placed by consolidation, which takes its own shared
    devices again if it is seated back on its node (`move_victims`)."""
    allowed = affinity.restrict(pod, state.inputs.eligible_for(pod), placed, mates)
    tiers = affinity.tiers_within(pod, allowed, placed, mates)
    nominated = pod.nominated_node
    if nominated is not None:  # KAI's nominated node outranks the terms' scores
        tiers = [lambda name: name == nominated and allowed(name), *tiers]
    for tier in tiers:
        found = seat_all(
            [pod],
            room,
            nodes,
            functools.partial(_constant, tier),
            state.config.placement_strategy,
            meter,
            own_devices_first if moving else None,
            ranked=None if moving else state.ranked_room(),
        )
        if found is not None:
            return found[0]
    return None


def _constant(allowed: Eligible, _: Pod) -> Eligible:
    """`seat_all`'s eligibility for the one pod it seats here."""
    return allowed
