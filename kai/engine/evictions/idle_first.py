"""Where a preemptor's pods wait for their victims: nodes they fit on without an eviction first.

The eviction searches ask only whether a set of victims makes room for a gang, seating its
pods in bin-packing order on the room the victims leave. KAI then places the gang's tasks
on that room with its node scores, in which `nodeavailability` (+100) outranks bin-packing
(at most 9): a node where the task fits in idle capacity, needing no eviction, beats any
node that needs the victims' releasing room (kai-semantics §9). So once a set of victims is
chosen, its preemptor is seated again here, each pod on the first node in
bin-packing order where it fits without anything leaving, else on the first where it fits
once the victims have left; a share goes first to a device already shared, as KAI's
`gpusharingorder` (+1000) outranks availability.

Idle capacity is `EvictionState.idle`: the nodes as they are now, every pod still on them
(Releasing ones and this cycle's victims too), with this cycle's bindings and the seats
that fitted it taken. The victims' room is the constraint; idle is only the preference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kai.engine.capacity import NodeCapacity
from kai.engine.evictions.decisions import Action
from kai.engine.evictions.preemptors import Preemptor
from kai.engine.evictions.room import (
    Overlay,
    Seat,
    fits_as_seated,
    release,
    seating_rank,
    size_order,
)
from kai.engine.evictions.scenario import Scenario
from kai.engine.evictions.state import EvictionState
from kai.engine.evictions.term_seats import bound_by_terms
from kai.engine.evictions.topology_seats import topology_rules
from kai.engine.model import PlacementStrategy, Pod


def idle_first(
    state: EvictionState, action: Action, preemptor: Preemptor, scenario: Scenario
) -> Scenario:
    """The scenario with its preemptor seated idle capacity first, or as it was when that
    cannot apply: consolidation (its moves are seated around the preemptor), a gang with a
    topology constraint (seated domain by domain) or one inter-pod terms concern (seated
    by them), or a seating that does not fit."""
    if (
        action is Action.CONSOLIDATE
        or scenario.moves
        or topology_rules(state, preemptor)
        or bound_by_terms(state, preemptor.pods)
    ):
        return scenario
    full = Overlay(state.future)
    for key, evicted in scenario.evicted.items():
        for pod in state.running[key].pods:
            if pod.key in evicted:
                release(full.writable(pod.node or ""), pod, pod.gpu_groups)
    seats = _seat(state, scenario.seats, full, Overlay(state.idle))
    if seats is None or seats == list(scenario.seats):
        return scenario
    return Scenario(scenario.evicted, tuple(seats), (), scenario.verdict, scenario.answer)


def _seat(
    state: EvictionState,
    searched: Sequence[Seat],
    full: Overlay,
    idle: Overlay,
) -> list[Seat] | None:
    """The pods of `searched` seated again, largest first; None if one does not fit."""
    spread = state.config.placement_strategy is PlacementStrategy.SPREAD
    seats: list[Seat] = []
    for pod in sorted((pod for pod, _, _ in searched), key=size_order):
        node = _first_fit(state, pod, full, idle, spread)
        if node is None:
            return None
        cap = full.writable(node)
        groups = cap.take(pod, cap.shared_candidates(pod) if pod.gpu.is_fractional else None)
        seat = (pod, node, groups)
        if fits_as_seated(idle[node], seat):
            idle.writable(node).take(pod, groups)
        seats.append(seat)
    return seats


def _first_fit(
    state: EvictionState,
    pod: Pod,
    full: Overlay,
    idle: Mapping[str, NodeCapacity],
    spread: bool,
) -> str | None:
    """KAI's best node for the pod: a share on a device already shared, then a node where it
    fits idle, then the first in bin-packing order; None if it fits nowhere."""
    eligible = state.inputs.eligible_for(pod)
    if not pod.gpu.is_fractional:  # in seating order, among the nodes with its GPUs free
        order = state.ranked_room().order(full, set(full), pod.gpu.whole)
        assert order is not None  # `full` overlays the future room the ranking is of
        first = None
        for _, name in order:
            if full[name].fits(pod) and eligible(name):
                if idle[name].fits(pod):
                    return name
                first = first or name
        return first
    best: tuple[bool, bool, tuple[int, str]] | None = None
    for name, cap in full.items():
        if cap.fits(pod) and eligible(name):
            joins = _joins_a_share(cap, pod)
            key = (not joins, not idle[name].fits(pod), seating_rank(cap, name, spread))
            if best is None or key < best:
                best = key
    return None if best is None else best[2][1]


def _joins_a_share(cap: NodeCapacity, pod: Pod) -> bool:
    """A fractional pod fits on a device already shared here (KAI's gpusharingorder)."""
    chosen = cap.shared_candidates(pod)
    return chosen is not None and chosen[:1] != [""]
