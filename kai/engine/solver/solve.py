"""Run the CP-SAT model: warm-started from the greedy answer, time-boxed, deterministic, stage by stage.

Determinism: CP-SAT's interleaved search is reproducible for a fixed number of
workers, and the search stops on a deterministic work budget before the wall-clock
limit in all but overloaded runs, so the same snapshot gives the same decisions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ortools.sat.python import cp_model
from ortools.sat.python import cp_model_helper as helper

from kai.engine.capacity import NodeCapacity
from kai.engine.greedy import AllocationOutcome
from kai.engine.solver.lexicographic import stages
from kai.engine.solver.model import AllocationModel
from kai.engine.solver.shapes import NodeClass

GREEDY_PROVED = "greedy-proved"
"""The status when the first stage proved that no answer does better on it than the greedy
one it was hinted with, and the later stages were not run (see `solve`)."""

_FIRST_STAGE_SHARE = 0.6
_DETERMINISTIC_TIME_PER_SECOND = 0.5
_MIN_STAGE_WORK = 0.02
"""Deterministic seconds every stage gets at least, so that every tier is optimised."""
_WALL_RESERVE_PER_STAGE = 0.03


@dataclass
class SolverAnswer:
    values: dict[int, int]  # variable index -> value
    status: str
    stages_solved: int
    stages_planned: int = 0
    objective_bounds: list[float] = field(default_factory=list)
    wall_seconds: float = 0.0

    def value(self, var: cp_model.IntVar) -> int:
        return self.values.get(var.index, 0)


Run = Callable[[cp_model.CpModel, helper.SatParameters], helper.CpSolverResponse | None]
"""How a stage is solved: in this process, or in a child (`isolated`); None: no response."""


def in_process(
    model: cp_model.CpModel, parameters: helper.SatParameters
) -> helper.CpSolverResponse:
    """The response of solving `model` here, on the calling thread (the child's solve too)."""
    solver = cp_model.CpSolver()
    solver.parameters.copy_from(parameters)
    solver.solve(model)
    return solver.response_proto


def solve(
    allocation: AllocationModel,
    time_limit: float,
    workers: int,
    seed: int,
    run: Run = in_process,
    wall_factor: float = 1.0,
) -> SolverAnswer | None:
    """Optimise stage by stage; None when not even the first stage found a feasible answer.

    Each stage stops on its share of a deterministic work budget (reproducible, whatever
    the machine's load), and every stage gets a share, so no tier is left unoptimised by an
    earlier one using up the time. The wall-clock limit is the backstop: each stage may run
    only until the cycle's limit (times `wall_factor`, see `EngineConfig.reproducible`)
    less a small reserve for the stages after it. A stage's
    optimum is fixed with the integer value of its objective (folded tiers exceed 2^53,
    where the solver's float objective is inexact).

    When the first stage is solved to optimality at the value of the greedy answer it was
    hinted with, the later stages are not run (`GREEDY_PROVED`). The first stage holds KAI's
    order over the attempts from the greedy pass's first refusal on, so no answer satisfies
    an attempt there that greedy's does not; the later stages could only gain attempts past
    that window, on a rank-weighted tier the cycle re-checks exactly, or placement, where a
    tie keeps greedy's answer anyway. On the engine benchmark they never made the answer
    better than greedy's at 500 nodes or more and took 0.5-0.9 s of every cycle.
    """
    model = allocation.model
    answer: SolverAnswer | None = None
    plan = stages(allocation.tiers) or []
    wall_left = time_limit * wall_factor
    work_left = time_limit * _DETERMINISTIC_TIME_PER_SECOND
    for position, stage in enumerate(plan):
        later = len(plan) - position - 1
        share = _FIRST_STAGE_SHARE if position == 0 and later else 1.0 / (later + 1)
        params = helper.SatParameters()
        params.max_deterministic_time = max(_MIN_STAGE_WORK, work_left * share)
        params.max_time_in_seconds = max(0.05, wall_left - later * _WALL_RESERVE_PER_STAGE)
        params.num_workers = max(1, workers)
        params.interleave_search = workers > 1
        params.random_seed = seed
        params.log_search_progress = False
        # Probing costs more presolve time than a one-second cycle
        # has at 1,000 nodes; without them the hinted answer is found at once.
        params.cp_model_probing_level = 0
        # At 5,000 nodes the presolve's search for overlapping linear constraints took the
        # whole first stage's work budget, so the solver stopped after presolve with no
        # answer, though the greedy hint it had checked was complete and feasible. Without
        # it every stage there is proved optimal; at 100 and 1,000 nodes nothing changes.
        params.find_big_linear_overlap = False
        # One presolve pass, not three: the first stage is mostly presolve, which counts no
        # deterministic time (0.40 s of wall at 5,000 nodes, 0.18 s with one pass, proved
        # optimal either way).
        params.max_presolve_iterations = 1
        objective = stage.objective()
        model.maximize(objective)
        hinted = _objective_at_hint(model) if position == 0 else None
        response = run(model, params)
        if response is None:  # the child solving it died or hung: what earlier stages found stands
            break
        wall_left -= response.wall_time
        work_left -= response.deterministic_time
        if response.status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            break
        solution = list(response.solution)  # the value of each variable, by index
        values = dict(enumerate(solution))
        bounds = [*answer.objective_bounds] if answer else []
        bounds.append(response.best_objective_bound)
        answer = SolverAnswer(
            values,
            helper.CpSolverStatus(response.status).name,
            position + 1,
            len(plan),
            bounds,
            (answer.wall_seconds if answer else 0.0) + response.wall_time,
        )
        if later and hinted is not None and _proved_no_better(model, response, hinted):
            answer.status = GREEDY_PROVED
            break
        model.add(objective >= int(helper.ResponseHelper.value(response, objective)))
        model.clear_hints()  # type: ignore[no-untyped-call]  # untyped in ortools' stubs
        _hint(model, list(range(len(solution))), solution)
        if wall_left <= 0.05:
            break
    return answer


def _objective_at_hint(model: cp_model.CpModel) -> int | None:
    """The objective's value (as the proto holds it) at the hint, the greedy answer before the
    first stage; None when the hint leaves a variable of the objective out."""
    hint = dict(zip(model.proto.solution_hint.vars, model.proto.solution_hint.values, strict=True))
    return _objective_at(model, hint.get)


def _objective_at(model: cp_model.CpModel, value_of: Callable[[int], int | None]) -> int | None:
    """The objective's terms summed as Python ints: folded stages pass 2**53, where floats
    round (the offset, a float and the same for any assignment, is left out)."""
    objective = model.proto.objective
    total = 0
    for ref, coefficient in zip(objective.vars, objective.coeffs, strict=True):
        value = value_of(ref if ref >= 0 else -ref - 1)
        if value is None:
            return None
        total += coefficient * (value if ref >= 0 else 1 - value)
    return total


def _proved_no_better(
    model: cp_model.CpModel, response: helper.CpSolverResponse, hinted: int
) -> bool:
    """The stage was solved to optimality and its optimum is the hint's own value."""
    if response.status != cp_model.OPTIMAL:
        return False
    solution = response.solution
    return _objective_at(model, lambda index: solution[index]) == hinted


def _hint(model: cp_model.CpModel, indexes: list[int], values: list[int]) -> None:
    """Hint the variables at these indexes with these values, one extend of the proto each:
    `add_hint` per variable was a tenth of a trace cycle's model at 50,000 variables. The
    variables hinted here are plain ones (no negated literal), which `add_hint` writes the
    same way."""
    model.proto.solution_hint.vars.extend(indexes)
    model.proto.solution_hint.values.extend(values)


def selection_of(
    allocation: AllocationModel, outcome: AllocationOutcome
) -> list[tuple[cp_model.IntVar, int]]:
    """What an answer chose, as the model's variables: each gang's admission and how many
    elastic pods of each shape it placed. Placements aside, it fixes the answer's attempts
    in KAI's order, GPUs and pods."""
    data = allocation.data
    admitted = set(outcome.admitted)
    chosen = [(var, int(key in admitted)) for key, var in allocation.admit.items()]
    elastic_keys = {p.key for g in data.gangs for p in g.elastic}
    elastic_placed = Counter(
        (p.pod.group, data.shape_index[p.pod.key])
        for p in outcome.placements.values()
        if p.pod.key in elastic_keys
    )
    chosen += [(var, elastic_placed[key]) for key, var in allocation.elastic.items()]
    return chosen


def add_greedy_hint(
    allocation: AllocationModel,
    outcome: AllocationOutcome,
    capacity: Mapping[str, NodeCapacity],
    class_of_node: Mapping[str, NodeClass],
) -> None:
    """Hint the solver with the greedy answer, so that its first solution is at least that good."""
    data = allocation.data
    hints = selection_of(allocation, outcome)
    value_of = {var.index: value for var, value in hints}
    per_gang: Counter[str] = Counter()
    for (gang, _), var in allocation.elastic.items():
        per_gang[gang] += value_of[var.index]
    for var, gang, elastic in allocation.offer_vars:
        hints.append((var, int(per_gang.get(gang, 0) >= elastic)))
    per_class_shape: Counter[tuple[int, int]] = Counter()
    by_node: dict[str, list[tuple[int, tuple[str, ...]]]] = {}
    for placement in outcome.placements.values():
        node_class = class_of_node.get(placement.node)
        shape_id = data.shape_index.get(placement.pod.key)
        if node_class is None or shape_id is None:
            continue
        per_class_shape[node_class.index, shape_id] += 1
        by_node.setdefault(placement.node, []).append((shape_id, placement.gpu_groups))
    for class_and_shape, var in allocation.count.items():
        hints.append((var, per_class_shape.get(class_and_shape, 0)))
    for same, _, wanted in allocation.kai_kept:
        hints.append((same, wanted))
    hints.extend(allocation.order_hints)
    for choice, pick, held in allocation.picks:
        domains = {
            choice.domain_of_class.get(class_of_node[p.node].index)
            for p in outcome.placements.values()
            if p.pod.group == choice.gang
            and data.shape_index.get(p.pod.key) in choice.shapes
            and p.node in class_of_node
        }
        one = next(iter(domains)) if len(domains) == 1 else None
        for domain, var in pick.items():
            hints.append((var, int(domain == one)))
        if held is not None:
            hints.append((held, int(one is not None)))
    _hint_patterns(allocation, by_node, capacity, class_of_node, hints)
    _hint(allocation.model, [var.index for var, _ in hints], [int(v) for _, v in hints])


def _hint_patterns(
    allocation: AllocationModel,
    by_node: Mapping[str, list[tuple[int, tuple[str, ...]]]],
    capacity: Mapping[str, NodeCapacity],
    class_of_node: Mapping[str, NodeClass],
    hints: list[tuple[cp_model.IntVar, int]],
) -> None:
    shapes = allocation.data.shapes
    node_counts: Counter[tuple[int, tuple[int, ...]]] = Counter()
    device_counts: Counter[tuple[int, int, tuple[int, ...]]] = Counter()  # slot -1 = new device
    for node, placed in by_node.items():
        node_class = class_of_node[node]
        patterns = allocation.patterns.get(node_class.index)
        if patterns is None:
            continue
        before = capacity[node].shared
        items = [0] * len(patterns.node_items)
        devices: dict[str, list[int]] = {}
        for shape_id, groups in placed:
            shape = shapes[shape_id]
            if shape.whole:
                items[patterns.node_items.index(("whole", shape.whole))] += 1
            for group in groups:
                devices.setdefault(group, []).append(shape.device_mib(node_class.device_memory_mib))
        new_devices = [g for g in devices if g not in before]
        if new_devices:
            items[patterns.node_items.index(("shared", 0))] += len(new_devices)
        node_counts[node_class.index, tuple(items)] += 1
        slots = {
            group: slot for slot, (_, group) in enumerate(node_class.device_free(capacity[node]))
        }
        for group, sizes in devices.items():
            vector = tuple(sizes.count(size) for size in patterns.device_sizes)
            device_counts[node_class.index, slots.get(group, -1), vector] += 1
    for index, patterns in allocation.patterns.items():
        for pattern, var in zip(patterns.node_patterns or [], patterns.node_vars, strict=False):
            hints.append((var, node_counts.get((index, pattern), 0)))
        for pattern, var in zip(patterns.device_patterns or [], patterns.device_vars, strict=False):
            hints.append((var, device_counts.get((index, -1, pattern), 0)))
        for slot, (slot_patterns, slot_vars) in enumerate(
            zip(patterns.existing_patterns, patterns.existing_vars, strict=True)
        ):
            for pattern, var in zip(slot_patterns, slot_vars, strict=True):
                hints.append((var, device_counts.get((index, slot, pattern), 0)))
