"""The CP-SAT model of one eviction choice: which pods to evict so that a pending gang fits, at least disruption.

Decisions: one boolean per victim gang (evicted whole), and for a gang running
above its minimum one boolean per pod (its surplus may go one by one); how many of
the preemptor's pods of each shape wait on each node; for consolidation, how many
of the moved pods of each shape go to each node. Constraints: per node, the pods
seated there fit the free room plus what the victims on it leave (a shared device
counts as a whole GPU again once every pod on it goes); gangs stay whole or above
their minimum; the preemptor's queues stay within their limits; for reclaim, KAI's
per-chunk rules and the sibling-saturation check (`reclaim_model`). The
objective is the victim order's disruption (`victim_order`), lexicographically: the
least protected victim class that suffices, then fewest evicted GPUs, fewest pods,
the least protected classes, and the earliest places in KAI's victim order.

Amounts are scaled to integers; the decoded answer is re-seated and re-checked by
the rules in exact arithmetic, so a rounding slip costs an answer, never a wrong one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ortools.sat.python import cp_model

from kai.engine import scalars
from kai.engine.budget import OVER_LIMIT
from kai.engine.capacity import NodeCapacity
from kai.engine.evictions.budget import SearchBudget
from kai.engine.evictions.cp_terms import Derivation, Value, all_of, any_of, distinct, scaled
from kai.engine.evictions.decisions import Action
from kai.engine.evictions.greedy_search import move_victims, preemptor_nodes
from kai.engine.evictions.options import VictimOption
from kai.engine.evictions.preemptors import Preemptor
from kai.engine.evictions.reclaim_model import add_reclaim_rules
from kai.engine.evictions.room import Overlay, Seat, release
from kai.engine.evictions.rules import check
from kai.engine.evictions.scenario import Scenario
from kai.engine.evictions.state import EvictionState
from kai.engine.evictions.topology_seats import seat_preemptor, seats_keep_topology
from kai.engine.evictions.victim_order import PodCost, VictimOrder
from kai.engine.model import REPRODUCIBLE_WALL_FACTOR, Placement, Pod
from kai.engine.resources import ResourceName, Resources
from kai.engine.scalars import Scalars
from kai.engine.solver.lean import LeanCpModel
from kai.engine.solver.lexicographic import Stage, Tier

_MIB = 2**20
_MAX_WEIGHT = 2**61
_NEVER = 2**31
MODEL_NODES_PER_POD = 4
MODEL_NODES_EXTRA = 8
"""On a large cluster a model covers this many nodes per preemptor pod, plus a few."""
_DETERMINISTIC_TIME_PER_SECOND = 0.5
"""A victim model's time is CP-SAT's deterministic time, at this much per budgeted second:
its limit, and what the eviction budget is charged, so the same snapshot builds and solves
the same models on a loaded machine as on a quiet one."""
_WALL_BACKSTOP = 3.0
"""A model's wall-clock limit, as a multiple of its budgeted seconds: the backstop for a
machine several times slower than the deterministic count expects."""

ShapeKey = tuple[int, int, int, frozenset[str], Scalars]
"""Whole GPUs, millicores and bytes (rounded up), the nodes the pod may use, and the
scalar resources it asks for (`kai.engine.scalars`)."""
Room = tuple[int, int, int, int, dict[str, int]]
"""Whole GPUs, millicores, bytes (rounded down), pod slots and free scalar resources."""


@dataclass(frozen=True)
class Answer:
    scenario: Scenario | None
    work_seconds: float  # the solve's deterministic time, in budgeted seconds
    status: str


def _charged(
    status: cp_model.CpSolverStatus, deterministic_time: float, time_limit: float
) -> float:
    """The budgeted seconds a solve costs: its deterministic time when it ended the search
    (OPTIMAL, INFEASIBLE), its whole limit when a limit cut it short. A search cut short
    by the wall-clock backstop reports less deterministic time than one cut by its
    deterministic limit (none at all when it was still loading), and that difference went
    on into the budget of every later model: at 5,000 nodes under two CPU hogs a model
    stopped UNKNOWN on the clock with 0.0 deterministic seconds, where a quiet machine's
    stopped UNKNOWN on its limit with 0.0118, and the cycle evicted 42 pods against 44."""
    if status in (cp_model.OPTIMAL, cp_model.INFEASIBLE):
        return min(deterministic_time / _DETERMINISTIC_TIME_PER_SECOND, time_limit)
    return time_limit


def cp_sat_search(
    state: EvictionState,
    action: Action,
    preemptor: Preemptor,
    options: Sequence[VictimOption],
    order: VictimOrder,
    hint: Scenario | None,
    budget: SearchBudget,
    models_left: int,
) -> Answer:
    """The least disruptive valid scenario the solver finds within the budget, if any.

    Fractional preemptor pods are left to the greedy search (the model counts whole GPUs).
    Building the model is charged to the budget by its size; solving, by time: an even share
    of what is left among the `models_left` preemptors still to come in this action.
    """
    if any(pod.gpu.is_fractional for pod in preemptor.pods):
        return Answer(None, 0.0, "not-modelled")
    victims = sum(len(option.gang.pods) for option in options)
    size = len(state.future) * (2 if action is Action.CONSOLIDATE else 1) + victims
    if not budget.may_model(size, models_left):
        return Answer(None, 0.0, "over-budget")
    time_limit = budget.model_seconds(models_left)
    budget.spend_model(size)
    built = VictimModel(state, action, preemptor, options, order, hint)
    if not built.nodes:
        return Answer(None, 0.0, "no-room")
    if hint is not None:
        built.add_hint(hint)
    solver = cp_model.CpSolver()
    params = solver.parameters
    params.max_time_in_seconds = time_limit * (
        REPRODUCIBLE_WALL_FACTOR if state.config.reproducible else _WALL_BACKSTOP
    )
    params.max_deterministic_time = time_limit * _DETERMINISTIC_TIME_PER_SECOND
    # One worker, whatever `solver_workers` gives the allocation model: starting a second
    # cost more than it searched. The 51 victim models of a 1,000-node engine benchmark
    # cycle, solved again each way, ended with the same status and objective, in 0.05 s of
    # wall time in all against 0.18 s with two workers; of the 21 of the eviction
    # benchmark's 1,000-node cycle, one that two workers left FEASIBLE at its limit was
    # proved optimal, with a better objective, in a twentieth of the deterministic time.
    params.num_workers = 1
    params.random_seed = state.config.random_seed
    # A victim model is small (tens to hundreds of variables) and its presolve cost more
    # than its search: at 1,000 nodes three of nine models stopped in presolve, UNKNOWN,
    # at their time limit, and presolve reports none of its time as deterministic time.
    # Without it every one is solved, most proved optimal in 0.02 s.
    params.cp_model_presolve = False
    # Nor is looking for symmetries worth it on a model this small: the victim models of
    # the 1,000-node benchmarks found the same solutions without, in 85% of the time.
    params.symmetry_level = 0
    status = solver.solve(built.model)
    name = solver.status_name(status)
    work = _charged(status, solver.response_proto.deterministic_time, time_limit)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return Answer(None, work, name)
    return Answer(built.decode(solver), work, name)


class VictimModel:
    def __init__(
        self,
        state: EvictionState,
        action: Action,
        preemptor: Preemptor,
        options: Sequence[VictimOption],
        order: VictimOrder,
        hint: Scenario | None,
    ) -> None:
        self.state, self.action, self.preemptor = state, action, preemptor
        self.options = {option.gang.key: option for option in options}
        self.order = order
        self.model = LeanCpModel()
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
        self._potentials: dict[str, Room] = {}
        self._units: dict[tuple[str, ResourceName, bool], int] = {}  # pod usage, scaled
        # Variables whose value follows from the others: hinted by evaluating these rules.
        self.derived: list[tuple[cp_model.IntVar, Derivation]] = []
        self.nodes = self._relevant_nodes(hint)
        self.evict: dict[str, cp_model.IntVar] = {}  # pod -> its eviction literal
        self.whole: dict[str, cp_model.IntVar] = {}  # gang -> evicted whole
        self.place: dict[tuple[int, str], cp_model.IntVar] = {}  # (shape, node) -> pods
        self.move: dict[tuple[int, str], cp_model.IntVar] = {}  # (moved shape, node) -> pods
        self.moved_shapes: list[list[Pod]] = []
        self.freed_device: dict[tuple[str, str], cp_model.IntVar] = {}
        self.most: dict[int, int] = {}  # variable index -> its upper bound (placements, moves)
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
            add_reclaim_rules(self)
        self._add_objective()

    # -- nodes and shapes ----------------------------------------------------------------
    def _relevant_nodes(self, hint: Scenario | None) -> list[str]:
        """Nodes where a preemptor pod could fit if every candidate victim there left.

        On a large cluster only the nodes cheapest to free are kept (with those the hint
        uses): the model is exact over them, and small enough to solve within a cycle.
        """
        smallest = min(shape[0] for shape in self.shapes)
        # Where a pod could fit: nodes with victims, and nodes with its idle GPUs already
        # (on a busy cluster few, taken from the kept ranking instead of asking every node).
        idle = self.state.ranked_room().with_idle(smallest) if smallest > 0 else None
        possible = (
            self.eligible_nodes.intersection(self.victims_on).union(
                name for _, name in idle if name in self.eligible_nodes
            )
            if idle is not None
            else self.eligible_nodes
        )
        fitting = [
            name
            for name in sorted(possible)
            if any(
                name in nodes and _fits_amounts(self._potential(name), whole, cpu, memory, asks)
                for (whole, cpu, memory, nodes, asks) in self.shapes
            )
        ]
        most = MODEL_NODES_PER_POD * len(self.preemptor.pods) + MODEL_NODES_EXTRA
        if len(fitting) <= most:
            return fitting
        kept: set[str] = set()
        if hint is not None:
            kept |= {node for _, node, _ in hint.seats}
            kept |= {pod.node or "" for key in hint.evicted for pod in self.options[key].gang.pods}
        size = max(pod.gpu.whole for pod in self.preemptor.pods)
        for name in sorted(fitting, key=lambda name: (self._freeing_cost(name, size), name)):
            if len(kept) >= most:
                break
            kept.add(name)
        return sorted(kept.intersection(fitting))

    def _freeing_cost(self, name: str, size: int) -> int:
        """Fewest GPUs to evict (whole gangs counted whole) for `size` free GPUs on the node."""
        missing = size - self.state.future[name].whole_gpus
        if missing <= 0:
            return 0
        best: dict[int, int] = {0: 0}  # GPUs freed here -> least GPUs evicted for it
        for pod in self.victims_on.get(name, []):
            option = self.options[self.pod_group[pod.key]]
            gang = option.gang
            cost = pod.gpu.whole if gang.elastic else sum(p.gpu.whole for p in gang.pods)
            for freed, spent in list(best.items()):
                total = min(missing, freed + pod.gpu.whole)
                if spent + cost < best.get(total, _NEVER):
                    best[total] = spent + cost
        return best.get(missing, _NEVER)

    def _potential(self, name: str) -> Room:
        """GPUs, cpu, memory, pod slots and scalar resources the node would have free if all
        its candidates left."""
        found = self._potentials.get(name)
        if found is None:
            found = self._potentials[name] = self._compute_potential(name)
        return found

    def _compute_potential(self, name: str) -> Room:
        cap = self.state.future[name]
        gpus, cpu, memory, slots = cap.whole_gpus, cap.cpu, cap.memory, cap.pods
        free = dict(cap.scalars)
        victims = self.victims_on.get(name)
        if victims:
            keys = {pod.key for pod in victims}
            for device in cap.shared:
                holders = self.state.occupants.get((name, device))
                gpus += bool(holders) and holders is not None and holders <= keys
            for pod in victims:  # what a leaving pod gives back, exactly as it was taken
                gpus += pod.gpu.whole
                cpu += pod.cpu_millis
                memory += pod.memory_bytes
                scalars.give_back(free, pod.scalars)
            slots += len(victims)
        return (gpus, cpu, memory, slots, free)

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
        for index, (shape, pods) in enumerate(self.shapes.items()):
            whole, cpu, memory, nodes, asks = shape
            count = len(pods)
            terms = []
            for name in self.nodes:
                if name not in nodes:
                    continue
                most = _fit_count(self._potential(name), whole, cpu, memory, asks, count)
                if most <= 0:
                    continue
                var = self.model.new_int_var(0, most, f"place[{index},{name}]")
                self.place[index, name] = var
                self.most[var.index] = most
                terms.append(var)
            self.model.add(sum(terms) == count)

    def _add_moves(self) -> None:
        """Consolidation: every evicted pod is seated again, counted by shape per node."""
        by_shape: dict[ShapeKey, list[Pod]] = defaultdict(list)
        for key in sorted(self.options):
            for pod in self.options[key].gang.pods:
                if pod.key in self.evict:
                    by_shape[self.shape_of(pod)].append(pod)
        relevant = set(self.nodes)
        for index, ((whole, cpu, memory, nodes, asks), pods) in enumerate(by_shape.items()):
            self.moved_shapes.append(pods)
            terms = []
            for name in sorted(nodes):
                # A moved pod goes where there are GPUs for it now, or where other victims
                # leave room. A shared device with room counts for a share: counting only
                # a share's cores and memory, a moved half GPU could go to 815 of 1,000
                # nodes, most of a consolidation model's build.
                cap = self.state.future[name]
                if name not in relevant and not any(cap.has_gpus_for(pod) for pod in pods):
                    continue
                most = _fit_count(self._potential(name), whole, cpu, memory, asks, len(pods))
                if most <= 0:
                    continue
                var = self.model.new_int_var(0, most, f"move[{index},{name}]")
                self.move[index, name] = var
                self.most[var.index] = most
                terms.append(var)
            self.model.add(sum(terms) == sum(self.evict[pod.key] for pod in pods))
        touched = []
        for key in sorted(self.options):
            literals = distinct(
                self.evict[pod.key] for pod in self.options[key].gang.pods if pod.key in self.evict
            )
            if literals:
                any_var = self.model.new_bool_var(f"touched[{key}]")
                for literal in literals:
                    self.model.add(any_var >= literal)
                touched.append(any_var)
                self.derived.append((any_var, any_of(literals)))
        self.model.add(sum(touched) <= self.state.config.evictions.max_consolidation_preemptees)

    def _add_capacity(self) -> None:
        """Per node and resource: what is seated there fits the free room plus what leaves.

        A row is written only where the most that could be seated there exceeds the free
        room: at 1,000 nodes three rows in four (pod slots, memory, most CPU) could not
        bind, and the 51 models of a cycle kept the same answers with 2,889 constraints in
        all instead of 12,126. Each row is one weighted sum of (variable, coefficient)
        terms, the freed ones negated: built up with `+` as expressions, they were most of
        a model's build."""
        model, state = self.model, self.state
        seated_on: dict[str, dict[str, Terms]] = defaultdict(lambda: defaultdict(_terms))
        for (index, node), var in self.place.items():
            whole, cpu, memory, _, asks = self.shape_keys[index]
            _add_demand(seated_on[node], var, whole, cpu, memory, asks)
        for (index, node), var in self.move.items():
            pod = self.moved_shapes[index][0]
            _add_demand(
                seated_on[node], var, pod.gpu.whole, pod.cpu_millis, pod.memory_bytes, pod.scalars
            )
        for name in sorted(seated_on):
            cap = state.future[name]
            seated = seated_on[name]
            leaving: list[tuple[cp_model.IntVar, Pod]] = []
            for pod in self.victims_on.get(name, []):
                leaves = self.evict.get(pod.key)
                if leaves is not None:
                    leaving.append((leaves, pod))
            devices = self._freed_devices(name, cap)
            supply = {
                **cap.scalars,
                "gpu": cap.whole_gpus,
                "cpu": cap.cpu,
                "memory": cap.memory // _MIB,
                "pods": cap.pods,
            }
            for resource, (variables, coefficients) in seated.items():
                most = sum(
                    c * self.most[v.index] for v, c in zip(variables, coefficients, strict=True)
                )
                if most <= supply.get(resource, 0):
                    continue  # holds however many are seated
                for leaves, pod in leaving:
                    variables.append(leaves)
                    coefficients.append(-_freed_amount(pod, resource))
                if resource == "gpu":
                    variables.extend(devices)
                    coefficients.extend([-1] * len(devices))
                model.add(
                    cp_model.LinearExpr.weighted_sum(variables, coefficients)
                    <= supply.get(resource, 0)
                )

    def _freed_devices(self, name: str, cap: NodeCapacity) -> list[cp_model.IntVar]:
        """A shared device whose every pod is evicted counts as a whole idle GPU."""
        freed: list[cp_model.IntVar] = []
        for device in sorted(cap.shared):
            holders = self.state.occupants.get((name, device), set())
            if not holders or any(key not in self.evict for key in holders):
                continue
            var = self.model.new_bool_var(f"freed[{name},{device}]")
            literals = [self.evict[key] for key in sorted(holders)]
            for literal in literals:
                self.model.add(var <= literal)
            self.freed_device[name, device] = var
            self.derived.append((var, all_of(literals)))
            freed.append(var)
        return freed

    def _add_limits(self) -> None:
        """The preemptor's queues stay within their limits once the victims have left."""
        state, request = self.state, self.preemptor.request
        for queue in state.ledger.ancestry(self.preemptor.queue):
            for cap in state.ledger.caps(queue):
                excess = request.get(cap.resource) - cap.room
                if cap.reason != OVER_LIMIT or not request.get(cap.resource) or excess <= 0:
                    continue
                freed = self.freed_under(queue.name, cap.resource, up=False)
                self.model.add(freed >= scaled(cap.resource, excess, up=True))

    def freed_under(self, queue: str, name: ResourceName, up: bool) -> cp_model.LinearExprT:
        """Scaled amount of a resource the evicted pods under a queue free."""
        return sum(coefficient * var for coefficient, var in self.freed_terms(queue, name, up))

    def freed_terms(
        self, queue: str, name: ResourceName, up: bool
    ) -> list[tuple[int, cp_model.IntVar]]:
        terms: list[tuple[int, cp_model.IntVar]] = []
        for pod_key in self.under.get(queue, []):
            amount = self.state.usage[pod_key].get(name)
            if amount:
                terms.append((self.pod_units(pod_key, name, up), self.evict[pod_key]))
        return terms

    # -- objective -------------------------------------------------------------------------
    def _add_objective(self) -> None:
        """The victim order's disruption (`victim_order`), tier by tier: the latest class
        taken from, GPUs, pods, classes weighted by GPUs, places in the order."""
        pods = {pod.key: pod for option in self.options.values() for pod in option.gang.pods}
        by_var: dict[int, tuple[cp_model.IntVar, list[PodCost]]] = {}
        for pod_key, var in self.evict.items():
            cost = self.order.cost(pods[pod_key])
            by_var.setdefault(var.index, (var, []))[1].append(cost)
        items = list(by_var.values())
        top = max((c.klass for _, costs in items for c in costs), default=0)
        latest = self.model.new_int_var(0, top, "latest_class")
        literals: list[tuple[int, cp_model.IntVar]] = []
        for var, costs in items:
            klass = max(c.klass for c in costs)
            if klass:
                self.model.add(latest >= klass * var)
                literals.append((klass, var))
        self.derived.append((latest, _latest(literals)))
        tiers = [Tier("class", latest, top)]
        per_var: dict[str, Callable[[list[PodCost]], int]] = {
            "gpus": lambda costs: sum(c.gpus for c in costs),
            "pods": len,
            "weighted": lambda costs: sum((c.gpus + 1) * c.klass for c in costs),
            "position": lambda costs: sum(c.position for c in costs),
        }
        for name, weigh in per_var.items():
            weights = [weigh(costs) for _, costs in items]
            expr = sum(w * v for w, (v, _) in zip(weights, items, strict=True))
            tiers.append(Tier(name, expr, sum(weights)))
        while len(tiers) > 1 and _span(tiers) >= _MAX_WEIGHT:
            tiers.pop()  # the least important tier gives way; exact comparison happens later
        self.model.minimize(Stage(tuple(tiers)).objective())

    def add_hint(self, hint: Scenario) -> None:
        """Hint every variable with the given scenario, so the solver starts from a solution."""
        values: dict[int, int] = {}
        evicted = {pod for pods in hint.evicted.values() for pod in pods}
        for key, var in self.whole.items():
            values[var.index] = int(
                len(hint.evicted.get(key, ())) == len(self.options[key].gang.pods)
            )
        for pod_key, var in self.evict.items():
            values.setdefault(var.index, int(pod_key in evicted))
        index_of = {key: i for i, key in enumerate(self.shape_keys)}
        placed: dict[tuple[int, str], int] = defaultdict(int)
        for pod, node, _ in hint.seats:
            placed[index_of[self.shape_of(pod)], node] += 1
        for slot, var in self.place.items():
            values[var.index] = placed.get(slot, 0)
        moved_index = {pod.key: i for i, pods in enumerate(self.moved_shapes) for pod in pods}
        moved: dict[tuple[int, str], int] = defaultdict(int)
        for pod, node, _ in hint.moves:
            if pod.key in moved_index:
                moved[moved_index[pod.key], node] += 1
        for slot, var in self.move.items():
            values[var.index] = moved.get(slot, 0)

        def value(var: cp_model.IntVar) -> int:
            return values.get(var.index, 0)

        for var, derivation in self.derived:
            values[var.index] = derivation(value)
        for index, hinted in sorted(values.items()):
            self.model.add_hint(self.model.get_int_var_from_proto_index(index), hinted)

    # -- decoding --------------------------------------------------------------------------
    def decode(self, solver: cp_model.CpSolver) -> Scenario | None:
        state = self.state
        evicted: dict[str, set[str]] = defaultdict(set)
        for pod_key, var in self.evict.items():
            if solver.value(var):
                evicted[self.pod_group[pod_key]].add(pod_key)
        room = Overlay(state.future)
        for key, pods in evicted.items():
            for pod in self.options[key].gang.pods:
                if pod.key in pods:
                    assert pod.node is not None
                    release(room.writable(pod.node), pod, pod.gpu_groups)
        seats = self._seat(solver, room)
        if seats is None:
            return None
        frozen = {key: frozenset(pods) for key, pods in evicted.items()}
        verdict = check(state, self.action, self.preemptor, self.options, frozen)
        if not verdict.ok:
            return None
        moves: list[Seat] = []
        if self.action is Action.CONSOLIDATE:
            found = move_victims(state, self.options, frozen, room, seats)
            if found is None or not found[1]:
                return None
            frozen, moves = found
        return Scenario(frozen, tuple(seats), tuple(moves), verdict, "cp-sat")

    def _seat(self, solver: cp_model.CpSolver, room: Overlay) -> list[Seat] | None:
        """The preemptor's pods seated on the freed room by KAI's node order, as the greedy
        search would seat them; where that fails, where the solver counted them.

        Seating by node order makes the answer depend only on the chosen victims, not on
        which of several equal placements the solver happened to report.
        """
        trial = Overlay(room)
        by_order = self._seat_anywhere(trial)
        if by_order is not None:
            room.changed.update(trial.changed)
            return by_order
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
                        return None
                    seats.append((pod, node, cap.take(pod)))
        if len(seats) != len(self.preemptor.pods):
            return None
        if not seats_keep_topology(self.state, self.preemptor, seats):
            return None
        room.changed.update(trial.changed)
        return seats

    def _seat_anywhere(self, room: Overlay) -> list[Seat] | None:
        return seat_preemptor(self.state, self.preemptor, room, self.nodes)

    # -- helpers ---------------------------------------------------------------------------
    def _ancestry(self, gang_key: str) -> list[str]:
        queue = self.state.groups[gang_key].queue
        return [q.name for q in self.state.ledger.ancestry(queue)]

    def usage_of(self, pods: Sequence[Pod]) -> Resources:
        return sum((self.state.usage[pod.key] for pod in pods), Resources())

    def pod_units(self, pod_key: str, name: ResourceName, up: bool) -> int:
        """A pod's usage of one resource in the rules' integer units."""
        key = (pod_key, name, up)
        units = self._units.get(key)
        if units is None:
            units = self._units[key] = scaled(name, self.state.usage[pod_key].get(name), up)
        return units


class _ShapeIndex:
    """A pod's shape for the model: its requests and the nodes it may use (computed once per placement)."""

    def __init__(self, state: EvictionState) -> None:
        self._state = state
        self._nodes: dict[Placement, frozenset[str]] = {}

    def __call__(self, pod: Pod) -> ShapeKey:
        nodes = self._nodes.get(pod.placement)
        if nodes is None:
            eligible = self._state.inputs.eligible_for.nodes_for(pod)
            nodes = self._nodes[pod.placement] = eligible.intersection(self._state.future)
        return (pod.gpu.whole, pod.cpu_millis, pod.memory_bytes, nodes, pod.scalars)


def _fits_amounts(potential: Room, whole: int, cpu: int, memory: int, asks: Scalars) -> bool:
    gpus, free_cpu, free_memory, slots, free = potential
    return (
        slots >= 1
        and whole <= gpus
        and cpu <= free_cpu
        and memory <= free_memory
        and scalars.shortage(asks, free) is None
    )


def _fit_count(
    potential: Room,
    whole: int,
    cpu: int,
    memory: int,
    asks: Scalars,
    most: int,
) -> int:
    gpus, free_cpu, free_memory, slots, free = potential
    count = min(most, slots)
    for name, amount in asks:
        count = min(count, free.get(name, 0) // amount)
    if whole:
        count = min(count, gpus // whole)
    if cpu:
        count = min(count, free_cpu // cpu)
    if memory:
        count = min(count, free_memory // memory)
    return max(0, count)


Terms = tuple[list[cp_model.IntVar], list[int]]
"""A linear sum as its variables and their coefficients, in step."""


def _terms() -> Terms:
    return [], []


def _add_demand(
    seated: dict[str, Terms],
    var: cp_model.IntVar,
    whole: int,
    cpu: int,
    memory: int,
    asks: Scalars,
) -> None:
    for resource, amount in (
        ("pods", 1),
        ("gpu", whole),
        ("cpu", cpu),
        ("memory", -(-memory // _MIB)),
        *asks,
    ):
        if amount:
            variables, coefficients = seated[resource]
            variables.append(var)
            coefficients.append(amount)


def _freed_amount(pod: Pod, resource: str) -> int:
    """What a leaving pod gives back of a resource, in the model's units (memory in MiB, down)."""
    if resource == "gpu":
        return pod.gpu.whole
    if resource == "cpu":
        return pod.cpu_millis
    if resource == "memory":
        return pod.memory_bytes // _MIB
    if resource == "pods":
        return 1
    return dict(pod.scalars).get(resource, 0)  # a scalar resource, by its name


def _latest(literals: Sequence[tuple[int, cp_model.IntVar]]) -> Derivation:
    def derive(value: Value) -> int:
        return max((klass for klass, var in literals if value(var)), default=0)

    return derive


def _span(tiers: Sequence[Tier]) -> int:
    span = 1
    for tier in tiers:
        span *= tier.bound + 1
    return span
