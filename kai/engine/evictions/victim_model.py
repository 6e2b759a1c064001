"""The CP-SAT model of one eviction choice: which pods to evict so that a pending gang fits, at least disruption.

Decisions: one boolean per victim gang (evicted whole), and for a gang running
above its minimum one boolean per pod (its surplus may go one by one); how many of
the preemptor's pods of each shape wait on each node; for consolidation, how many
of the moved pods of each shape go to each node. Constraints: per node, the pods
seated there fit the free room plus what the victims on it leave (a shared device
counts as a whole GPU again once every pod on it goes); gangs stay whole or above
their minimum; the preemptor's queues stay within their limits; for reclaim, KAI's
per-chunk rules and the sibling-saturation check, as linear constraints. The
objective is lexicographic: fewest evicted GPUs, then the lowest priorities, then
the most recently started.

Amounts are scaled to integers; the decoded answer is re-seated and re-checked by
the rules in exact arithmetic, so a rounding slip costs an answer, never a wrong one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import ceil, floor

from ortools.sat.python import cp_model

from kai.engine.capacity import NodeCapacity
from kai.engine.evictions.decisions import Action
from kai.engine.evictions.greedy_search import preemptor_nodes, seat_elsewhere
from kai.engine.evictions.room import Overlay, Seat, release, seat_all
from kai.engine.evictions.rules import (
    Preemptor,
    VictimOption,
    check,
    leveled,
    side_threshold,
)
from kai.engine.evictions.scenario import PodCost, Scenario
from kai.engine.evictions.state import EvictionState
from kai.engine.model import UNLIMITED, Placement, Pod
from kai.engine.resources import RESOURCE_NAMES, ResourceName, Resources
from kai.engine.solver.lexicographic import Stage, Tier

_MIB = 2**20
_RULE_UNITS: dict[ResourceName, Fraction] = {
    "gpu": Fraction(1000),  # thousandths of a GPU
    "cpu": Fraction(1),  # millicores
    "memory": Fraction(1, 2**26),  # 64 MiB: products of two amounts stay far from 2**63
}
_MAX_WEIGHT = 2**61
_DETERMINISTIC_TIME_PER_SECOND = 0.5

ShapeKey = tuple[int, Fraction, Fraction, frozenset[str]]


@dataclass(frozen=True)
class Answer:
    scenario: Scenario | None
    wall_seconds: float
    status: str


def cp_sat_search(
    state: EvictionState,
    action: Action,
    preemptor: Preemptor,
    options: Sequence[VictimOption],
    costs: Mapping[str, PodCost],
    hint: Scenario | None,
    time_limit: float,
) -> Answer:
    """The least disruptive valid scenario the solver finds within `time_limit`, if any.

    Fractional preemptor pods are left to the greedy search (the model counts whole GPUs).
    """
    if any(pod.gpu.is_fractional for pod in preemptor.pods) or time_limit <= 0:
        return Answer(None, 0.0, "not-modelled")
    built = _VictimModel(state, action, preemptor, options, costs)
    if not built.nodes:
        return Answer(None, 0.0, "no-room")
    if hint is not None:
        built.add_hint(hint)
    solver = cp_model.CpSolver()
    params = solver.parameters
    workers = max(1, state.config.solver_workers)
    params.max_time_in_seconds = time_limit
    params.max_deterministic_time = time_limit * _DETERMINISTIC_TIME_PER_SECOND
    params.num_workers = workers
    params.interleave_search = workers > 1
    params.random_seed = state.config.random_seed
    status = solver.solve(built.model)
    name = solver.status_name(status)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return Answer(None, solver.wall_time, name)
    return Answer(built.decode(solver), solver.wall_time, name)


class _VictimModel:
    def __init__(
        self,
        state: EvictionState,
        action: Action,
        preemptor: Preemptor,
        options: Sequence[VictimOption],
        costs: Mapping[str, PodCost],
    ) -> None:
        self.state, self.action, self.preemptor = state, action, preemptor
        self.options = {option.gang.key: option for option in options}
        self.costs = costs
        self.model = cp_model.CpModel()
        self.eligible_nodes = preemptor_nodes(state, preemptor)
        self.shape_of = _ShapeIndex(state)
        self.shapes: dict[ShapeKey, list[Pod]] = defaultdict(list)
        for pod in preemptor.pods:
            self.shapes[self.shape_of(pod)].append(pod)
        self.shape_keys = list(self.shapes)
        self.victims_on: dict[str, list[Pod]] = defaultdict(list)
        self.pod_group: dict[str, str] = {}
        for option in options:
            for pod in option.gang.pods:
                self.victims_on[pod.node or ""].append(pod)
                self.pod_group[pod.key] = option.gang.key
        self.under: dict[str, list[str]] = defaultdict(list)  # queue -> candidate pods beneath
        self.nodes = self._relevant_nodes()
        self.evict: dict[str, cp_model.IntVar] = {}  # pod -> its eviction literal
        self.whole: dict[str, cp_model.IntVar] = {}  # gang -> evicted whole
        self.place: dict[tuple[int, str], cp_model.IntVar] = {}  # (shape, node) -> pods
        self.move: dict[tuple[int, str], cp_model.IntVar] = {}  # (moved shape, node) -> pods
        self.moved_shapes: list[list[Pod]] = []
        self.freed_device: dict[tuple[str, str], cp_model.IntVar] = {}
        if not self.nodes:
            return
        self._add_victims()
        for pod_key in self.evict:
            for queue in self._ancestry(self.pod_group[pod_key]):
                self.under[queue].append(pod_key)
        self._add_placement()
        if action is Action.CONSOLIDATE:
            self._add_moves()
        self._add_capacity()
        if action is not Action.CONSOLIDATE:
            self._add_limits()
        if action is Action.RECLAIM:
            self._add_reclaim_rules()
        self._add_objective()

    # -- nodes and shapes ----------------------------------------------------------------
    def _relevant_nodes(self) -> list[str]:
        """Nodes where at least one preemptor pod could fit if every candidate victim there left."""
        relevant = []
        for name in sorted(self.eligible_nodes):
            potential = self._potential(name)
            if any(
                name in nodes and _fits_amounts(potential, whole, cpu, memory)
                for (whole, cpu, memory, nodes) in self.shapes
            ):
                relevant.append(name)
        return relevant

    def _potential(self, name: str) -> tuple[int, Fraction, Fraction, int]:
        cap = self.state.future[name]
        victims = self.victims_on.get(name, [])
        keys = {pod.key for pod in victims}
        freeable = sum(
            1
            for device in cap.shared
            if self.state.occupants.get((name, device), set()) <= keys
            and self.state.occupants.get((name, device))
        )
        return (
            cap.whole_gpus + sum(p.gpu.whole for p in victims) + freeable,
            cap.cpu + sum((p.request.cpu for p in victims), Fraction(0)),
            cap.memory + sum((p.request.memory for p in victims), Fraction(0)),
            cap.pods + len(victims),
        )

    # -- variables -------------------------------------------------------------------------
    def _add_victims(self) -> None:
        model = self.model
        relevant = set(self.nodes)
        for key, option in sorted(self.options.items()):
            gang = option.gang
            if not any(pod.node in relevant for pod in gang.pods):
                continue  # evicting it would free nothing the preemptor can use
            if not gang.elastic:
                if not option.whole_allowed:
                    continue
                var = model.new_bool_var(f"evict[{key}]")
                self.whole[key] = var
                for pod in gang.pods:
                    self.evict[pod.key] = var
                continue
            whole = model.new_bool_var(f"whole[{key}]") if option.whole_allowed else None
            if whole is not None:
                self.whole[key] = whole
            for pod in gang.pods:
                var = model.new_bool_var(f"evict[{pod.key}]")
                self.evict[pod.key] = var
                if whole is not None:
                    model.add(var >= whole)
            for keys, most in gang.surplus_limits():
                chosen = sum(self.evict[k] for k in sorted(keys))
                room = max(0, most) + (len(keys) * whole if whole is not None else 0)
                model.add(chosen <= room)

    def _add_placement(self) -> None:
        for index, (whole, cpu, memory, nodes) in enumerate(self.shapes):
            count = len(self.shapes[whole, cpu, memory, nodes])
            terms = []
            for name in self.nodes:
                if name not in nodes:
                    continue
                most = _fit_count(self._potential(name), whole, cpu, memory, count)
                if most <= 0:
                    continue
                var = self.model.new_int_var(0, most, f"place[{index},{name}]")
                self.place[index, name] = var
                terms.append(var)
            self.model.add(sum(terms) == count)

    def _add_moves(self) -> None:
        """Consolidation: every evicted pod is seated again, counted by shape per node."""
        by_shape: dict[ShapeKey, list[Pod]] = defaultdict(list)
        for key in sorted(self.options):
            for pod in self.options[key].gang.pods:
                if pod.key in self.evict:
                    by_shape[self.shape_of(pod)].append(pod)
        for index, ((whole, cpu, memory, nodes), pods) in enumerate(by_shape.items()):
            self.moved_shapes.append(pods)
            terms = []
            for name in sorted(nodes):
                most = _fit_count(self._potential(name), whole, cpu, memory, len(pods))
                if most <= 0:
                    continue
                var = self.model.new_int_var(0, most, f"move[{index},{name}]")
                self.move[index, name] = var
                terms.append(var)
            self.model.add(sum(terms) == sum(self.evict[pod.key] for pod in pods))
        touched = []
        for key in sorted(self.options):
            literals = _distinct(
                self.evict[pod.key] for pod in self.options[key].gang.pods if pod.key in self.evict
            )
            if literals:
                any_var = self.model.new_bool_var(f"touched[{key}]")
                for literal in literals:
                    self.model.add(any_var >= literal)
                touched.append(any_var)
        self.model.add(sum(touched) <= self.state.config.evictions.max_consolidation_preemptees)

    def _add_capacity(self) -> None:
        model, state = self.model, self.state
        moved_targets = {name for (_, name) in self.move}
        for name in sorted(set(self.nodes) | moved_targets):
            cap = state.future[name]
            seated: dict[str, list[cp_model.LinearExprT]] = defaultdict(list)
            for (index, node), var in self.place.items():
                if node == name:
                    whole, cpu, memory, _ = self.shape_keys[index]
                    _add_demand(seated, var, whole, cpu, memory)
            for (index, node), var in self.move.items():
                if node == name:
                    pod = self.moved_shapes[index][0]
                    _add_demand(seated, var, pod.gpu.whole, pod.request.cpu, pod.request.memory)
            if not seated:
                continue
            freed: dict[str, list[cp_model.LinearExprT]] = defaultdict(list)
            for pod in self.victims_on.get(name, []):
                leaves = self.evict.get(pod.key)
                if leaves is None:
                    continue
                freed["gpu"].append(pod.gpu.whole * leaves)
                freed["cpu"].append(floor(pod.request.cpu) * leaves)
                freed["memory"].append(floor(pod.request.memory / _MIB) * leaves)
                freed["pods"].append(leaves)
            freed["gpu"] += self._freed_devices(name, cap)
            supply = {
                "gpu": cap.whole_gpus,
                "cpu": floor(cap.cpu),
                "memory": floor(cap.memory / _MIB),
                "pods": cap.pods,
            }
            for resource, demand in seated.items():
                model.add(sum(demand) <= supply[resource] + sum(freed[resource]))

    def _freed_devices(self, name: str, cap: NodeCapacity) -> list[cp_model.LinearExprT]:
        """A shared device whose every pod is evicted counts as a whole idle GPU."""
        freed: list[cp_model.LinearExprT] = []
        for device in sorted(cap.shared):
            holders = self.state.occupants.get((name, device), set())
            if not holders or any(key not in self.evict for key in holders):
                continue
            var = self.model.new_bool_var(f"freed[{name},{device}]")
            for key in sorted(holders):
                self.model.add(var <= self.evict[key])
            self.freed_device[name, device] = var
            freed.append(var)
        return freed

    def _add_limits(self) -> None:
        """The preemptor's queues stay within their limits once the victims have left."""
        state, request = self.state, self.preemptor.request
        for queue in state.ledger.ancestry(self.preemptor.queue):
            held = state.ledger.allocated.get(queue.name, Resources())
            for name in RESOURCE_NAMES:
                limit = queue.resource(name).limit
                if limit == UNLIMITED or not request.get(name):
                    continue
                excess = held.get(name) + request.get(name) - limit
                if excess <= 0:
                    continue
                freed = self._freed_under(queue.name, name, up=False)
                self.model.add(freed >= _scaled(name, excess, up=True))

    def _freed_under(self, queue: str, name: ResourceName, up: bool) -> cp_model.LinearExprT:
        """Scaled amount of a resource the evicted pods under a queue free."""
        terms: list[cp_model.LinearExprT] = []
        for pod_key in self.under.get(queue, []):
            amount = self.state.usage[pod_key].get(name)
            if amount:
                terms.append(_scaled(name, amount, up) * self.evict[pod_key])
        return sum(terms)

    # -- reclaim rules ---------------------------------------------------------------------
    def _add_reclaim_rules(self) -> None:
        state, preemptor = self.state, self.preemptor
        sides: dict[str, list[str]] = defaultdict(list)  # victim side -> gangs under it
        reclaimer_side: dict[str, str] = {}
        for key in sorted(self.options):
            if not any(pod.key in self.evict for pod in self.options[key].gang.pods):
                continue
            mine, theirs = leveled(state, preemptor.queue, self.options[key].gang.queue)
            sides[theirs].append(key)
            reclaimer_side[theirs] = mine
        for side, gangs in sorted(sides.items()):
            self._add_side_rule(side, reclaimer_side[side], gangs)
        self._add_saturation_rules()

    def _add_side_rule(self, side: str, reclaimer_side: str, gangs: list[str]) -> None:
        """Some chosen chunk can be taken last while the side is still above its threshold."""
        model, state = self.model, self.state
        threshold = side_threshold(state, self.preemptor, reclaimer_side, side)
        held = state.ledger.allocated.get(side, Resources())
        chunks: list[tuple[cp_model.IntVar, Resources]] = []
        literals: list[cp_model.IntVar] = []
        for key in gangs:
            gang = self.options[key].gang
            if key in self.whole:
                core = gang.core if gang.elastic else gang.pods
                chunks.append((self.whole[key], self._usage(core)))
            if gang.elastic:
                chunks += [(self.evict[pod.key], self._usage((pod,))) for pod in gang.pods]
            literals += [self.evict[pod.key] for pod in gang.pods]
        last = [model.new_bool_var(f"last[{side},{i}]") for i in range(len(chunks))]
        for flag, (chosen, _) in zip(last, chunks, strict=True):
            model.add(flag <= chosen)
        model.add(sum(last) <= 1)
        for literal in _distinct(literals):
            model.add(literal <= sum(last))
        above: list[cp_model.IntVar] = []
        for name, bound in sorted(threshold.items()):
            flag = model.new_bool_var(f"above[{side},{name}]")
            taken = sum(
                _scaled(name, state.usage[pod.key].get(name), True) * self.evict[pod.key]
                for key in gangs
                for pod in self.options[key].gang.pods
                if state.usage[pod.key].get(name)
            )
            kept_last = sum(
                _scaled(name, amount.get(name), False) * flag_last
                for flag_last, (_, amount) in zip(last, chunks, strict=True)
                if amount.get(name)
            )
            model.add(
                _scaled(name, held.get(name), False) - taken + kept_last
                >= _scaled(name, bound, True) + 1
            ).only_enforce_if(flag)
            above.append(flag)
        model.add(sum(above) >= sum(last))

    def _add_saturation_rules(self) -> None:
        """At each level of the reclaimer's path, no touched sibling may end up less saturated."""
        model, state, preemptor = self.model, self.state, self.preemptor
        shares, queues = state.inputs.shares, state.inputs.queues
        multiplier = state.config.evictions.reclaimer_saturation_multiplier
        under = self.under
        asked = {name for name, value in preemptor.request.items() if value > 0}
        for level in state.ledger.ancestry(preemptor.queue):
            fair = shares[level.name].fair_share
            held = state.ledger.allocated.get(level.name, Resources()) + preemptor.request
            for sibling in sorted(under):
                if sibling == level.name or queues[sibling].parent != level.parent:
                    continue
                touched = model.new_bool_var(f"touched[{level.name},{sibling}]")
                for pod_key in under[sibling]:
                    model.add(touched >= self.evict[pod_key])
                involved = set(asked)
                for pod_key in under[sibling]:
                    involved |= {n for n, v in state.usage[pod_key].items() if v > 0}
                sibling_fair = shares[sibling].fair_share
                sibling_held = state.ledger.allocated.get(sibling, Resources())
                for name in sorted(involved):
                    if sibling_fair.get(name) <= 0:
                        continue
                    mine = _scaled(name, held.get(name), False) - self._freed_under(
                        level.name, name, up=False
                    )
                    theirs = _scaled(name, sibling_held.get(name), False) - self._freed_under(
                        sibling, name, up=True
                    )
                    fair_mine = _scaled(name, fair.get(name), False)
                    fair_theirs = _scaled(name, sibling_fair.get(name), False)
                    if fair_mine <= 0:  # any holding is infinitely saturated
                        model.add(mine <= 0).only_enforce_if(touched)
                        continue
                    over = model.new_bool_var(f"over[{level.name},{sibling},{name}]")
                    model.add(mine <= fair_mine).only_enforce_if(over.Not())
                    # mine/fair_mine * multiplier < theirs/fair_theirs, cross-multiplied.
                    model.add(
                        mine * multiplier.numerator * fair_theirs
                        <= theirs * fair_mine * multiplier.denominator - 1
                    ).only_enforce_if([over, touched])

    # -- objective -------------------------------------------------------------------------
    def _add_objective(self) -> None:
        by_var: dict[int, tuple[cp_model.IntVar, list[PodCost]]] = {}
        for pod_key, var in self.evict.items():
            by_var.setdefault(var.index, (var, []))[1].append(self.costs[pod_key])
        items = list(by_var.values())
        tiers = []
        for field in ("gpus", "priority", "recency"):
            weights = [sum(getattr(c, field) for c in costs) for _, costs in items]
            bound = sum(weights)
            tiers.append(
                Tier(field, sum(w * v for w, (v, _) in zip(weights, items, strict=True)), bound)
            )
        while len(tiers) > 1 and _span(tiers) >= _MAX_WEIGHT:
            tiers.pop()  # the least important tier gives way; exact comparison happens later
        self.model.minimize(Stage(tuple(tiers)).objective())

    def add_hint(self, hint: Scenario) -> None:
        evicted = {pod for pods in hint.evicted.values() for pod in pods}
        hinted: set[int] = set()
        for key, var in self.whole.items():
            whole = len(hint.evicted.get(key, ())) == len(self.options[key].gang.pods)
            self.model.add_hint(var, int(whole))
            hinted.add(var.index)
        for pod_key, var in self.evict.items():
            if var.index not in hinted:
                self.model.add_hint(var, int(pod_key in evicted))
                hinted.add(var.index)
        counts: dict[tuple[int, str], int] = defaultdict(int)
        index_of = {key: i for i, key in enumerate(self.shape_keys)}
        for pod, node, _ in hint.seats:
            counts[index_of[self.shape_of(pod)], node] += 1
        for slot, var in self.place.items():
            self.model.add_hint(var, counts.get(slot, 0))

    # -- decoding --------------------------------------------------------------------------
    def decode(self, solver: cp_model.CpSolver) -> Scenario | None:
        state = self.state
        evicted: dict[str, set[str]] = defaultdict(set)
        for pod_key, var in self.evict.items():
            if solver.value(var):
                evicted[self.pod_group[pod_key]].add(pod_key)
        room = Overlay(state.future)
        leaving: list[Pod] = []
        for key, pods in evicted.items():
            for pod in self.options[key].gang.pods:
                if pod.key in pods:
                    assert pod.node is not None
                    release(room.writable(pod.node), pod, pod.gpu_groups)
                    leaving.append(pod)
        seats = self._seat(solver, room)
        if seats is None:
            return None
        moves: list[Seat] = []
        if self.action is Action.CONSOLIDATE:
            found = seat_elsewhere(state, leaving, room)
            if found is None:
                return None
            moves = found
        frozen = {key: frozenset(pods) for key, pods in evicted.items()}
        verdict = check(state, self.action, self.preemptor, self.options, frozen)
        if not verdict.ok:
            return None
        return Scenario(frozen, tuple(seats), tuple(moves), verdict, "cp-sat")

    def _seat(self, solver: cp_model.CpSolver, room: Overlay) -> list[Seat] | None:
        """The preemptor's pods where the solver counted them, or anywhere they fit if that fails."""
        trial = Overlay(room)
        seats: list[Seat] = []
        for index, key in enumerate(self.shape_keys):
            waiting = list(self.shapes[key])
            for (shape, node), var in sorted(self.place.items()):
                if shape != index:
                    continue
                for _ in range(solver.value(var)):
                    pod = waiting.pop()
                    cap = trial.writable(node)
                    if not cap.fits(pod):
                        return self._seat_anywhere(room)
                    seats.append((pod, node, cap.take(pod)))
        if len(seats) != len(self.preemptor.pods):
            return self._seat_anywhere(room)
        room.changed.update(trial.changed)
        return seats

    def _seat_anywhere(self, room: Overlay) -> list[Seat] | None:
        state = self.state
        return seat_all(
            self.preemptor.pods,
            room,
            self.nodes,
            state.inputs.eligible_for,
            state.config.placement_strategy,
        )

    # -- helpers ---------------------------------------------------------------------------
    def _ancestry(self, gang_key: str) -> list[str]:
        queue = self.state.groups[gang_key].queue
        return [q.name for q in self.state.ledger.ancestry(queue)]

    def _usage(self, pods: Sequence[Pod]) -> Resources:
        return sum((self.state.usage[pod.key] for pod in pods), Resources())


class _ShapeIndex:
    """A pod's shape for the model: its requests and the nodes it may use (computed once per placement)."""

    def __init__(self, state: EvictionState) -> None:
        self._state = state
        self._nodes: dict[Placement, frozenset[str]] = {}

    def __call__(self, pod: Pod) -> ShapeKey:
        nodes = self._nodes.get(pod.placement)
        if nodes is None:
            allowed = self._state.inputs.eligible_for(pod)
            nodes = self._nodes[pod.placement] = frozenset(
                name for name in self._state.future if allowed(name)
            )
        return (pod.gpu.whole, pod.request.cpu, pod.request.memory, nodes)


def _distinct(literals: Iterable[cp_model.IntVar]) -> list[cp_model.IntVar]:
    """Each variable once (CP-SAT variables overload ==, so sets of them are not safe)."""
    seen: dict[int, cp_model.IntVar] = {}
    for literal in literals:
        seen.setdefault(literal.index, literal)
    return list(seen.values())


def _fits_amounts(
    potential: tuple[int, Fraction, Fraction, int], whole: int, cpu: Fraction, memory: Fraction
) -> bool:
    gpus, free_cpu, free_memory, slots = potential
    return slots >= 1 and whole <= gpus and cpu <= free_cpu and memory <= free_memory


def _fit_count(
    potential: tuple[int, Fraction, Fraction, int],
    whole: int,
    cpu: Fraction,
    memory: Fraction,
    most: int,
) -> int:
    gpus, free_cpu, free_memory, slots = potential
    count = min(most, slots)
    if whole:
        count = min(count, gpus // whole)
    if cpu:
        count = min(count, floor(free_cpu / cpu))
    if memory:
        count = min(count, floor(free_memory / memory))
    return max(0, count)


def _add_demand(
    seated: dict[str, list[cp_model.LinearExprT]],
    var: cp_model.IntVar,
    whole: int,
    cpu: Fraction,
    memory: Fraction,
) -> None:
    seated["pods"].append(var)
    if whole:
        seated["gpu"].append(whole * var)
    if cpu:
        seated["cpu"].append(ceil(cpu) * var)
    if memory:
        seated["memory"].append(ceil(memory / _MIB) * var)


def _scaled(name: ResourceName, value: Fraction, up: bool) -> int:
    amount = value * _RULE_UNITS[name]
    return ceil(amount) if up else floor(amount)


def _span(tiers: Sequence[Tier]) -> int:
    span = 1
    for tier in tiers:
        span *= tier.bound + 1
    return span
