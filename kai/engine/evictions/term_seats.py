"""Seats for a preemptor whose pods inter-pod anti-affinity concerns: its terms kept.

Before this, such a gang was no preemptor at all: the eviction actions seat pods without
the terms, and a high-priority replica that must avoid its siblings could have been seated
beside one. Now it may preempt and reclaim, seated here pod by pod where the terms hold
beside (`kai.engine.pod_affinity`):

- every pod on a node, the victims too: a victim's room is free once it leaves, but an
  anti-affinity term that it matches still closes its domain here. That is conservative
  (the pod waits rather than count on a victim leaving), never wrong;
- this cycle's bindings and the seats of the cycle's earlier eviction decisions;
- the preemptor's pods seated before it.

A topology-constrained preemptor is seated so within each candidate domain
(`topology_seats`). A gang with an affinity term of its own (a pod it must be near) is
still no preemptor: a victim could be the pod it wants, and it is gone by the time the
gang binds. The victim model (CP-SAT) does not see the terms, so such a preemptor's
victims are chosen by the greedy search alone, and its seats are not moved to idle room
afterwards.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kai.engine.evictions.preemptors import Preemptor
from kai.engine.evictions.room import Meter, Overlay, Seat, seat_all
from kai.engine.evictions.state import EvictionState
from kai.engine.gangs import GangRequest
from kai.engine.greedy import PodPlacement
from kai.engine.model import Pod
from kai.engine.pod_affinity import PodAffinity


def wants_a_pod(gang: GangRequest) -> bool:
    """Whether a pod of the gang has an affinity term of its own: no preemptor then."""
    return any(not term.anti for pod in (*gang.core, *gang.elastic) for term in pod.pod_terms)


def bound_by_terms(state: EvictionState, preemptor: Preemptor) -> bool:
    """Whether an inter-pod term concerns where the preemptor's pods may go."""
    affinity = state.inputs.pod_affinity
    return affinity is not None and any(map(affinity.concerns, preemptor.pods))


def seat_by_terms(
    state: EvictionState,
    preemptor: Preemptor,
    room: Overlay,
    nodes: Iterable[str],
    meter: Meter | None = None,
) -> list[Seat] | None:
    """The preemptor's pods seated on `nodes` where the terms hold, or None; `room` keeps
    the seats taken."""
    affinity = state.inputs.pod_affinity
    assert affinity is not None
    placed = state.placed_for_terms()
    usable = list(nodes)
    seats: list[Seat] = []
    mates: list[PodPlacement] = []
    for pod in preemptor.pods:
        found = _seat_one(state, affinity, pod, room, usable, placed, mates, meter)
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
) -> Seat | None:
    allowed = affinity.restrict(pod, state.inputs.eligible_for(pod), placed, mates)
    found = seat_all(
        [pod],
        room,
        nodes,
        lambda _: allowed,
        state.config.placement_strategy,
        meter,
        ranked=state.ranked_room(),
    )
    return None if found is None else found[0]
