"""KAI's victim search, restated: grow the victim set in victim order until the preemptor fits and the rules pass.

The empty set is tried first: room freed by an earlier decision of the cycle may hold the
preemptor already (KAI's search starts from one victim, and takes one it does not need).
Victims are taken one unit at a time: a pod above an elastic gang's minimum, or a
whole gang (kai-semantics §8.6). After each unit that frees room the preemptor could
use, the preemptor is tried on the room the victims leave (and, for consolidation,
the victims on what is left, elsewhere); the first set that seats everything and
passes the action's rules is found; then the set is trimmed to the fewest, smallest
victims of its class (`victim_order` has the order and the costs both searches use).
It is fast and can still over-evict, which is why the CP-SAT model exists; it remains
the model's warm start, its fallback, and the benchmark's baseline.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterator, Mapping, Sequence
from fractions import Fraction

from kai.engine.evictions.budget import SearchBudget
from kai.engine.evictions.decisions import Action
from kai.engine.evictions.options import Verdict, VictimOption
from kai.engine.evictions.preemptors import Preemptor
from kai.engine.evictions.room import (
    Meter,
    Overlay,
    RankedRoom,
    Seat,
    own_devices_first,
    release,
    seat_all,
)
from kai.engine.evictions.rules import check
from kai.engine.evictions.scenario import Scenario
from kai.engine.evictions.state import EvictionState
from kai.engine.evictions.term_seats import bound_by_terms, seat_moves
from kai.engine.evictions.topology_seats import seat_preemptor
from kai.engine.evictions.victim_order import VictimOrder, VictimUnit
from kai.engine.model import Pod
from kai.engine.topology import satisfied


def greedy_search(
    state: EvictionState,
    action: Action,
    preemptor: Preemptor,
    options: Sequence[VictimOption],
    budget: SearchBudget,
    order: VictimOrder | None = None,
) -> Scenario | None:
    """Grow the victim set in victim order, from none, until it works; then keep only what is needed.

    Once a set works, the rest of its victim class (queue and priority) is added too, up
    to as many units again, and then units are dropped, the largest and latest first,
    while the set still works: the fewest, smallest victims of the least protected class.
    """
    order = (
        order if order is not None else VictimOrder(state, options, action is Action.CONSOLIDATE)
    )
    by_key = {option.gang.key: option for option in options}
    eligible = preemptor_nodes(state, preemptor)
    room = Overlay(state.future)
    slots = _Slots(preemptor.pods, room, eligible, state.ranked_room())
    budget.spend(len(eligible))
    useful = set(slots.candidates)  # before any victim leaves
    chosen: dict[str, set[str]] = {}
    if slots.enough():  # room freed earlier this cycle may hold the preemptor already
        found = _try(state, action, preemptor, by_key, chosen, room, slots.candidates, budget)
        if isinstance(found, Scenario):
            return found
    taken: list[VictimUnit] = []
    most = state.config.evictions.max_consolidation_preemptees
    units = order.units()
    for unit in units:
        key = unit.option.gang.key
        if action is Action.CONSOLIDATE and key not in chosen and len(chosen) >= most:
            break
        gang_pods = chosen.setdefault(key, set())
        taken.append(unit)
        for step in _steps(unit, action):
            grew = False
            for pod in step:
                gang_pods.add(pod.key)
                grew |= slots.release(pod)
            if not grew or not slots.enough():
                continue
            if budget.exhausted:
                return None
            found = _try(state, action, preemptor, by_key, chosen, room, slots.candidates, budget)
            if isinstance(found, Scenario):
                trial = _Trial(state, action, preemptor, by_key, eligible, useful, budget)
                extended = _extend(taken, units, unit.klass, action, most)
                return _fewest(trial, order, extended, taken, found)
            if found is not None and found.final:
                return None  # the rules refuse this set and every larger one
    return None


def _steps(unit: VictimUnit, action: Action) -> list[tuple[Pod, ...]]:
    """How a unit's pods leave: at once; for consolidation node by node, in the unit's order.

    Consolidation moves pods and kills none, so a gang's pods need not go together: as in
    KAI, its pods are taken node by node and the rest stay where they run.
    """
    if action is not Action.CONSOLIDATE:
        return [unit.pods]
    by_node: dict[str | None, list[Pod]] = {}
    for pod in unit.pods:
        by_node.setdefault(pod.node, []).append(pod)
    return [tuple(pods) for pods in by_node.values()]


class _Trial:
    """Tries a victim set from scratch: the room it leaves, the seating, the rules.

    The preemptor is seated only on `useful` nodes (those with a place for one of its pods
    before any victim left) and the nodes the set's victims leave: no other node can hold
    one of its pods. Seating on every eligible node instead looked at a thousand nodes per
    trial at 1,000 nodes, and trimming a victim set tries it again and again."""

    def __init__(
        self,
        state: EvictionState,
        action: Action,
        preemptor: Preemptor,
        options: dict[str, VictimOption],
        eligible: set[str],
        useful: set[str],
        budget: SearchBudget,
    ) -> None:
        self.state, self.action, self.preemptor = state, action, preemptor
        self.options, self.eligible, self.budget = options, eligible, budget
        self.useful = useful

    def __call__(self, units: Sequence[VictimUnit]) -> Scenario | Verdict | None:
        room = Overlay(self.state.future)
        chosen: dict[str, set[str]] = {}
        nodes = set(self.useful)
        for unit in units:
            pods = chosen.setdefault(unit.option.gang.key, set())
            for pod in unit.pods:
                pods.add(pod.key)
                release(room.writable(pod.node or ""), pod, pod.gpu_groups)
                if pod.node in self.eligible:
                    nodes.add(pod.node)
        return _try(
            self.state,
            self.action,
            self.preemptor,
            self.options,
            chosen,
            room,
            nodes,
            self.budget,
        )


def _extend(
    taken: list[VictimUnit],
    units: Iterator[VictimUnit],
    klass: int,
    action: Action,
    most: int,
) -> list[VictimUnit]:
    """The working set plus the next units of the same class, at most as many again."""
    extended = list(taken)
    gangs = {unit.option.gang.key for unit in taken}
    for unit in units:
        if unit.klass != klass or len(extended) >= 2 * len(taken):
            break
        key = unit.option.gang.key
        if action is Action.CONSOLIDATE and key not in gangs and len(gangs) >= most:
            break
        gangs.add(key)
        extended.append(unit)
    return extended


def _fewest(
    trial: _Trial,
    order: VictimOrder,
    extended: list[VictimUnit],
    taken: list[VictimUnit],
    found: Scenario,
) -> Scenario:
    """The least disruptive of two trimmings: the working set, dropping units while it stays
    valid; and the extended set, dropping units while the preemptor still fits, then checked."""
    answers = [_drop(trial, taken, found, valid_only=True)]
    if len(extended) > len(taken):
        trimmed = _drop(trial, extended, None, valid_only=False)
        if isinstance(trimmed, Scenario):
            answers.append(trimmed)
    best = answers[0]
    assert isinstance(best, Scenario)
    for answer in answers[1:]:
        if isinstance(answer, Scenario) and order.disruption(answer.evicted) < order.disruption(
            best.evicted
        ):
            best = answer
    return best


_MOST_DROPS = 8
"""Units a trimming tries to drop, largest first. Each try simulates the whole set again;
trying every unit of a large set spent the action's work budget on a few preemptors (at
1,000 nodes reclaim was cut short after 18 of 47 pending gangs)."""


def _drop(
    trial: _Trial,
    units: list[VictimUnit],
    result: Scenario | Verdict | None,
    valid_only: bool,
) -> Scenario | Verdict | None:
    """Drop units, the largest first and, among equals, the latest in victim order, while the
    rest still works (valid, or only seats the preemptor); the last result for what is kept."""
    current = units
    candidates = sorted(units, key=lambda u: (-_gpus(u), -u.position))[:_MOST_DROPS]
    for unit in candidates:
        if trial.budget.exhausted:
            break
        rest = [u for u in current if u is not unit]
        if not rest:
            continue
        smaller = trial(rest)
        if isinstance(smaller, Scenario) or (not valid_only and smaller is not None):
            current, result = rest, smaller
    if result is None or (not valid_only and current is units):
        result = trial(current)
    return result


def _gpus(unit: VictimUnit) -> Fraction:
    return sum((Fraction(pod.gpu.whole) + pod.gpu.portion for pod in unit.pods), Fraction(0))


class _Slots:
    """How many of the preemptor's pods the room could hold, counted by GPUs, kept as victims leave.

    A seating is tried only when a leaving victim added places and every kind of pod
    has enough of them: a necessary condition that costs nothing to keep up to date,
    unlike a trial. A whole-GPU pod needs that many whole GPUs on one node; a
    fractional pod a whole GPU or a shared device with room; a pod without GPUs a slot.
    """

    def __init__(
        self, pods: Sequence[Pod], room: Overlay, eligible: set[str], ranked: RankedRoom
    ) -> None:
        """`room`: a fresh overlay of the room `ranked` ranks."""
        self._room, self._eligible = room, eligible
        self._needed: dict[int, int] = {}  # whole GPUs per pod (-1: fractional) -> pods
        fractional = [pod for pod in pods if pod.gpu.is_fractional]
        self._smallest_fraction = min(fractional, key=_device_share, default=None)
        for pod in pods:
            kind = -1 if pod.gpu.is_fractional else pod.gpu.whole
            self._needed[kind] = self._needed.get(kind, 0) + 1
        self._places = dict.fromkeys(self._needed, 0)
        self.candidates: set[str] = set()
        fewest = min(self._needed)
        # Whole-GPU pods only: a node with fewer idle GPUs than the smallest has no place.
        counted = (
            (name for _, name in ranked.with_idle(fewest) if name in eligible)
            if fewest > 0
            else eligible
        )
        for name in counted:
            self._count(name, +1)

    def release(self, pod: Pod) -> bool:
        """Give the pod's room back; True when that made places for the preemptor's pods."""
        name = pod.node or ""
        before = dict(self._places)
        if name in self._eligible:
            self._count(name, -1)
        release(self._room.writable(name), pod, pod.gpu_groups)
        if name in self._eligible:
            self._count(name, +1)
        return self._places != before

    def enough(self) -> bool:
        return all(self._places[kind] >= n for kind, n in self._needed.items())

    def _count(self, name: str, sign: int) -> None:
        cap = self._room[name]
        if cap.pods <= 0:
            return
        useful = False
        for kind in self._places:
            if kind > 0:
                places = cap.whole_gpus // kind
            elif kind == 0:
                places = cap.pods
            else:
                assert self._smallest_fraction is not None
                memory = cap.node.gpu_memory_mib
                need = self._smallest_fraction.gpu.memory_on(memory)
                places = cap.whole_gpus + sum(
                    1 for used in cap.shared.values() if memory - used >= need
                )
            self._places[kind] += sign * places
            useful |= places > 0
        if useful:
            self.candidates.add(name)


def _try(
    state: EvictionState,
    action: Action,
    preemptor: Preemptor,
    options: dict[str, VictimOption],
    chosen: dict[str, set[str]],
    room: Overlay,
    candidates: set[str],
    meter: Meter,
) -> Scenario | Verdict | None:
    """The scenario if this set of victims works; the rules' refusal, or None if pods do not fit."""
    trial = Overlay(room)
    leaving = {pod for pods in chosen.values() for pod in pods}
    seats = seat_preemptor(state, preemptor, trial, candidates, meter, leaving)
    if seats is None:
        return None
    evicted = {key: frozenset(pods) for key, pods in chosen.items() if pods}
    verdict = check(state, action, preemptor, options, evicted)
    if not verdict.ok:
        return verdict
    moves: list[Seat] = []
    if action is Action.CONSOLIDATE:
        placed = move_victims(state, options, evicted, trial, seats, meter)
        if placed is None or not placed[1]:
            return None
        evicted, moves = placed
    return Scenario(evicted, tuple(seats), tuple(moves), verdict, "greedy")


def without_idle_victims(
    state: EvictionState,
    action: Action,
    preemptor: Preemptor,
    options: Sequence[VictimOption],
    found: Scenario,
    meter: Meter,
) -> Scenario | None:
    """`found` less its victim gangs with no pod leaving a node a preemptor's pod is seated
    on, if the rest still seats the preemptor there and passes the rules; None if it has
    no such victim, or without them it does not work.

    Such a victim frees room nobody takes. The greedy search keeps what it took in victim
    order once its set works, trimming only the largest units, so a small one taken early
    (a fractional pod above an elastic gang's minimum, on another node) stayed: in a run of
    rounds on `bench/churn.py`'s 1,000-node cluster the next cycle bound two such pods back
    where they were, and the preemptor's next pod evicted them again. Looked at only for
    the answer about to be committed: leaving them out inside the search changed which
    sets later looks refused, and cost the 1,000-node engine cycle a fifth more.
    Consolidation's victims are moved, not evicted, and keep its answer."""
    if action is Action.CONSOLIDATE:
        return None
    seated = {node for _, node, _ in found.seats}
    kept: dict[str, set[str]] = {}
    leaving: list[Pod] = []
    for key, evicted in found.evicted.items():
        pods = [pod for pod in state.running[key].pods if pod.key in evicted]
        if any(pod.node in seated for pod in pods):
            kept[key] = set(evicted)
            leaving += pods
    if not kept or len(kept) == len(found.evicted):
        return None
    room = Overlay(state.future)
    for pod in leaving:
        release(room.writable(pod.node or ""), pod, pod.gpu_groups)
    by_key = {option.gang.key: option for option in options}
    leaner = _try(state, action, preemptor, by_key, kept, room, seated, meter)
    if not isinstance(leaner, Scenario):
        return None
    return dataclasses.replace(leaner, answer=found.answer)


def move_victims(
    state: EvictionState,
    options: Mapping[str, VictimOption],
    chosen: Mapping[str, Collection[str]],
    room: Overlay,
    beside: Sequence[Seat],
    meter: Meter | None = None,
) -> tuple[dict[str, frozenset[str]], list[Seat]] | None:
    """Consolidation: re-place every chosen victim pod on what the preemptor left; None if one
    cannot be (consolidation never kills). Returns the pods that really move and their seats.

    The victims are seated like any pending work, in KAI's node order. A pod seated back
    where it runs (its node, and for a fractional pod its shared devices) is not moved at
    all: it keeps running, as in KAI, where a victim re-placed on its own node is restored.
    So a gang at its minimum is chosen whole (its pods leave together or not at all) and
    only the pods that must make room move; the others of the gang stay as they are.
    When an inter-pod term concerns one of them, they are seated by the terms, beside the
    preemptor's seats (`beside`) and each other (`term_seats.seat_moves`).
    """
    leaving = [pod for key in chosen for pod in options[key].gang.pods if pod.key in chosen[key]]
    if bound_by_terms(state, leaving):
        seats = seat_moves(state, leaving, room, beside, meter)
    else:
        seats = seat_all(
            leaving,
            room,
            room.keys(),
            state.inputs.eligible_for,
            state.config.placement_strategy,
            meter,
            own_devices_first,
        )
    if seats is None or not _moves_keep_topology(state, leaving, seats):
        return None
    moved: dict[str, set[str]] = {}
    moves: list[Seat] = []
    for pod, node, groups in seats:
        if node == pod.node and (not pod.gpu.is_fractional or set(groups) == set(pod.gpu_groups)):
            continue  # seated back where it runs: it stays
        moved.setdefault(pod.group, set()).add(pod.key)
        moves.append((pod, node, groups))
    return {key: frozenset(pods) for key, pods in moved.items()}, moves


def _moves_keep_topology(
    state: EvictionState, leaving: Sequence[Pod], seats: Sequence[Seat]
) -> bool:
    """A constrained victim gang is re-placed only inside its domains."""
    topology = state.inputs.topology
    if topology is None:
        return True
    gone = {pod.key for pod in leaving}
    for key in {pod.group for pod in leaving}:
        rules = topology.rules(state.groups[key])
        if not rules.rules:
            continue
        staying = [pod for pod in topology.running(key) if pod.key not in gone]
        if not satisfied(
            rules, staying, [(pod, node) for pod, node, _ in seats if pod.group == key]
        ):
            return False
    return True


def preemptor_nodes(state: EvictionState, preemptor: Preemptor) -> set[str]:
    """Nodes any of the preemptor's pods may use: the union of their eligible sets, taken
    in C (asking each node of each pod was a twentieth of a 1,000-node cycle's searches)."""
    eligible = state.inputs.eligible_for
    allowed: set[str] = set()
    for names in {eligible.nodes_for(pod) for pod in preemptor.pods}:
        allowed |= names
    return allowed.intersection(state.future)


def _device_share(pod: Pod) -> int:
    """Memory one fractional pod takes on a large device: orders fractional pods by size."""
    return pod.gpu.memory_on(_LARGE_DEVICE_MIB)


_LARGE_DEVICE_MIB = 81_920
