"""Seating a topology-constrained preemptor on the room its victims leave: one domain at a time.

The eviction searches ask whether a set of victims makes room for a pending gang. For
a gang with a `topologyConstraint` the room must be inside one domain of its level,
so its pods are seated domain by domain in KAI's candidate order (the group's own
constraint; sub-group constraints are then checked on the seats), and a seating that
breaks a required level is no room at all. Without this, an eviction could free
capacity the gang may not use, and the victims would be evicted for nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from kai.engine.evictions.preemptors import Preemptor
from kai.engine.evictions.room import Meter, Overlay, Seat, seat_all
from kai.engine.evictions.state import EvictionState
from kai.engine.evictions.term_seats import bound_by_terms, seat_by_terms
from kai.engine.topology import GroupRules, candidates, satisfied


def topology_rules(state: EvictionState, preemptor: Preemptor) -> GroupRules | None:
    """The preemptor's topology rules, or None when it has none to keep."""
    topology = state.inputs.topology
    rules = topology.rules(preemptor.gang.group) if topology is not None else None
    return rules if rules is not None and (rules.rules or rules.problem) else None


def seat_preemptor(
    state: EvictionState,
    preemptor: Preemptor,
    room: Overlay,
    nodes: Iterable[str],
    meter: Meter | None = None,
    leaving: Collection[str] = (),
) -> list[Seat] | None:
    """The preemptor's pods seated on `nodes` within its topology, or None; `room` keeps
    the seats taken when they are found. `leaving`: the pods the seats' room is freed of
    (by key), which inter-pod terms read as gone."""
    inputs = state.inputs
    strategy = state.config.placement_strategy
    topology = inputs.topology
    rules = topology_rules(state, preemptor)
    termed = bound_by_terms(state, preemptor.pods)
    if rules is None and termed:
        return seat_by_terms(state, preemptor, room, nodes, meter, leaving)
    if rules is None:
        return seat_all(
            preemptor.pods,
            room,
            nodes,
            inputs.eligible_for,
            strategy,
            meter,
            ranked=state.ranked_room(),
        )
    if rules.problem is not None:
        return None
    assert topology is not None
    running = topology.running(preemptor.key)
    usable = frozenset(nodes)
    own = rules.rules.get(None)
    options = [usable]
    if own is not None:
        found, _ = candidates(
            own, preemptor.pods, room, usable, [p.node for p in running if p.node]
        )
        options = [candidate.nodes for candidate in found]
    for option in options:
        trial = Overlay(room)
        seats = (
            seat_by_terms(state, preemptor, trial, option, meter, leaving)
            if termed
            else seat_all(
                preemptor.pods,
                trial,
                option,
                inputs.eligible_for,
                strategy,
                meter,
                ranked=state.ranked_room(),
            )
        )
        if seats is not None and satisfied(rules, running, [(pod, node) for pod, node, _ in seats]):
            room.changed.update(trial.changed)
            return seats
    return None


def seats_keep_topology(state: EvictionState, preemptor: Preemptor, seats: Iterable[Seat]) -> bool:
    """Whether seats found some other way keep the preemptor's required levels."""
    topology = state.inputs.topology
    if topology is None:
        return True
    rules = topology.rules(preemptor.gang.group)
    if rules.problem is not None:
        return False
    return satisfied(
        rules, topology.running(preemptor.key), [(pod, node) for pod, node, _ in seats]
    )
