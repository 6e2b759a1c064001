"""The CP-SAT model of one allocation cycle.

Decisions: which gangs are admitted (one boolean per gang: all its core pods or
none), how many elastic pods each gets, how many pods of each shape go to each node
class, and how many nodes (or shared devices) of each class take each packing
pattern. Constraints: gang linking, exact GPU packing through patterns, per-class
CPU / memory / pod / scalar-resource totals, queue limits and non-preemptible quota at every
ancestor. The objective is lexicographic: gangs in KAI's order first (the order the
greedy pass offered them, which already holds queue priority, hierarchical fair
share and job order), then elastic pods, then fewer shared devices opened, then
placement quality (bin-packing or spread).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from ortools.sat.python import cp_model

from kai.engine.budget import QueueBudget
from kai.engine.gangs import GangRequest, pod_resources
from kai.engine.model import PlacementStrategy, Queue
from kai.engine.resources import ResourceName, Resources
from kai.engine.solver.lean import LeanCpModel
from kai.engine.solver.lexicographic import Tier
from kai.engine.solver.patterns import enumerate_patterns
from kai.engine.solver.shapes import NodeClass, Shape

OBJECTIVE_GPU_UNITS = 100  # the objective counts hundredths of a GPU
ORDER_WINDOW = 60
"""Attempts ranked one tier each: 60 one-bit tiers fold into a single 64-bit solver stage."""
_UNITS: dict[ResourceName, int] = {"gpu": 1000, "cpu": 1, "memory": 1}
_MEMORY_UNIT = 2**20  # memory constraints in MiB keep coefficients small


def ranked_attempts(offers: Sequence[tuple[str, int]], gangs: Sequence[GangRequest]) -> list[int]:
    """Where in `offers` the attempts the model ranks are: a modelled gang's core (if it has
    one) and its elastic pods (if it has some); attempts of gangs it does not take are not
    ranked."""
    cores = {gang.key for gang in gangs if gang.core}
    growing = {gang.key for gang in gangs if gang.elastic}
    return [
        position
        for position, (gang, elastic) in enumerate(offers)
        if (gang in growing if elastic else gang in cores)
    ]


def order_window(accepted: Sequence[bool]) -> range:
    """Where, among the attempts the model ranks (greedy's answer to each in `accepted`), its
    first stage looks: ORDER_WINDOW attempts from greedy's first refusal on. Those before are
    fixed, those after share one rank-weighted tier (`AllocationModel._add_order_tiers`)."""
    first = next((i for i, ok in enumerate(accepted) if not ok), len(accepted))
    return range(first, min(first + ORDER_WINDOW, len(accepted)))


def scalar_units(shapes: Sequence[Shape]) -> dict[str, int]:
    """Per scalar resource, the greatest common divisor of what the shapes ask for. Counted
    in it, a class's sum stays exact (each side a multiple of it, the free amount rounded
    down) and within 64 bits: in thousandths of a byte, the ephemeral storage of 200 nodes
    of 64 TiB each is past 2**63."""
    units: dict[str, int] = {}
    for shape in shapes:
        for name, amount in shape.scalars:
            units[name] = math.gcd(units.get(name, 0), amount)
    return units


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def _floor(value: Fraction) -> int:
    return value.numerator // value.denominator


def scaled(name: ResourceName, value: Fraction, up: bool) -> int:
    """A resource amount in the model's integer units, rounded against the constraint."""
    unit = Fraction(_UNITS[name], _MEMORY_UNIT) if name == "memory" else Fraction(_UNITS[name])
    return _ceil(value * unit) if up else _floor(value * unit)


@dataclass
class ClassPatterns:
    """The pattern variables of one node class."""

    node_items: list[tuple[str, int]]  # ("whole", k) or ("shared", 0)
    node_patterns: list[tuple[int, ...]] | None  # None: pattern cap exceeded, totals only
    node_vars: list[cp_model.IntVar] = field(default_factory=list)
    shared_devices: cp_model.LinearExprT = 0
    device_sizes: list[int] = field(default_factory=list)  # MiB sizes of fractions on this class
    device_patterns: list[tuple[int, ...]] | None = None
    device_vars: list[cp_model.IntVar] = field(default_factory=list)
    existing_patterns: list[list[tuple[int, ...]]] = field(default_factory=list)
    existing_vars: list[list[cp_model.IntVar]] = field(default_factory=list)


@dataclass(frozen=True)
class ModelInput:
    gangs: Sequence[GangRequest]
    classes: Sequence[NodeClass]
    shapes: Sequence[Shape]
    shape_index: Mapping[str, int]  # pod key -> shape
    queues: Mapping[str, Queue]
    budget: QueueBudget
    strategy: PlacementStrategy
    device_strategy: PlacementStrategy  # the fullest shared device first, or the emptiest
    accounting_memory_mib: int
    offers: Sequence[tuple[str, int]]  # the greedy pass's attempts in order: (gang, 0) a core,
    # (gang, n) its n-th elastic pod
    accepted: Sequence[bool]  # which of those attempts the greedy pass satisfied
    kai_placement: Mapping[tuple[int, int], int]  # greedy's pods per (node class, shape)
    domains: Sequence[DomainChoice] = ()  # topology-constrained (sub)groups


@dataclass(frozen=True)
class DomainChoice:
    """One topology-constrained (sub)group: its pods' shapes must all go to node classes of
    one domain of the level (required), or should (preferred: an objective tier)."""

    gang: str
    label: str  # for variable names
    shapes: frozenset[int]
    domain_of_class: Mapping[int, str]  # node class -> its domain id at the level
    allowed: frozenset[str] | None  # the domains its running pods pin it to; None: any
    required: bool


class AllocationModel:
    def __init__(self, data: ModelInput) -> None:
        self.data = data
        self.model = LeanCpModel()
        self.admit: dict[str, cp_model.IntVar] = {}
        self.elastic: dict[tuple[str, int], cp_model.IntVar] = {}
        self.count: dict[tuple[int, int], cp_model.IntVar] = {}
        self.counts_of_class: dict[int, dict[int, cp_model.IntVar]] = defaultdict(dict)
        """The `count` variables of each node class, by shape: a class's constraints and the
        decoder read only their own (scanning every class's was most of the build)."""
        self.count_bound: dict[tuple[int, int], int] = {}
        self.picks: list[
            tuple[DomainChoice, dict[str, cp_model.IntVar], cp_model.IntVar | None]
        ] = []
        self.patterns: dict[int, ClassPatterns] = {}
        self.tiers: list[Tier] = []
        self.offer_vars: list[tuple[cp_model.IntVar, str, int]] = []  # elastic attempts
        self.order_hints: list[tuple[cp_model.IntVar, int]] = []
        """The values the greedy answer gives the order constraints' own variables."""
        self._device_order: list[tuple[int, cp_model.IntVar, int]] = []
        self.kai_kept: list[tuple[cp_model.IntVar, cp_model.IntVar, int]] = []
        self._elastic_by_gang: dict[str, list[cp_model.IntVar]] = {}
        self._gang_terms: dict[str, list[tuple[cp_model.IntVar, Resources, int]]] = defaultdict(
            list
        )
        self._scalar_units = scalar_units(data.shapes)
        self._build()

    # -- construction --------------------------------------------------------------------
    def _build(self) -> None:
        data = self.data
        demand: dict[int, list[tuple[int, cp_model.IntVar]]] = defaultdict(list)
        for gang in data.gangs:
            core_by_shape: dict[int, int] = defaultdict(int)
            for pod in gang.core:
                core_by_shape[data.shape_index[pod.key]] += 1
            admit = None
            if gang.core:
                admit = self.model.new_bool_var(f"admit[{gang.key}]")
                self.admit[gang.key] = admit
                for shape_id, n in core_by_shape.items():
                    demand[shape_id].append((n, admit))
                request = gang.core_request(data.accounting_memory_mib)
                self._gang_terms[gang.key].append((admit, request, 1))
            elastic_by_shape: dict[int, list[Resources]] = defaultdict(list)
            for pod in gang.elastic:
                elastic_by_shape[data.shape_index[pod.key]].append(
                    pod_resources(pod, data.accounting_memory_mib)
                )
            for shape_id, requests in elastic_by_shape.items():
                var = self.model.new_int_var(0, len(requests), f"elastic[{gang.key},{shape_id}]")
                if admit is not None:
                    self.model.add(var <= len(requests) * admit)
                self.elastic[gang.key, shape_id] = var
                demand[shape_id].append((1, var))
                self._gang_terms[gang.key].append((var, requests[0], 0))
        for node_class in data.classes:
            for shape_id, shape in enumerate(data.shapes):
                if shape.eligibility in node_class.eligibility and shape_id in demand:
                    bound = self._max_fit(node_class, shape)
                    if bound == 0:  # never fits there (most classes, on a busy cluster)
                        continue
                    self.count_bound[node_class.index, shape_id] = bound
                    var = self.model.new_int_var(0, bound, f"x[{node_class.index},{shape_id}]")
                    self.count[node_class.index, shape_id] = var
                    self.counts_of_class[node_class.index][shape_id] = var
        placed: dict[int, list[cp_model.IntVar]] = defaultdict(list)
        for (_, shape_id), var in self.count.items():
            placed[shape_id].append(var)
        for shape_id, terms in demand.items():
            self.model.add(
                cp_model.LinearExpr.sum(placed[shape_id])
                == cp_model.LinearExpr.weighted_sum([v for _, v in terms], [n for n, _ in terms])
            )
        for node_class in data.classes:
            self._add_class(node_class)
        self._add_queue_constraints()
        self._add_domains()
        self._add_objective()

    def _max_fit(self, node_class: NodeClass, shape: Shape) -> int:
        per_node = node_class.pods
        if shape.cpu:
            per_node = min(per_node, _floor(node_class.cpu / shape.cpu))
        if shape.memory:
            per_node = min(per_node, _floor(node_class.memory / shape.memory))
        if shape.whole:
            per_node = min(per_node, node_class.whole_gpus // shape.whole)
        most = dict(node_class.scalars_most)
        for name, amount in shape.scalars:
            per_node = min(per_node, most.get(name, 0) // amount)
        return max(0, per_node) * node_class.size

    def _add_class(self, node_class: NodeClass) -> None:
        model, shapes = self.model, self.data.shapes
        counts = self.counts_of_class.get(node_class.index, {})
        if not counts:
            return
        size = node_class.size
        for name, total in (("cpu", node_class.cpu_total), ("memory", node_class.memory_total)):
            resource: ResourceName = "cpu" if name == "cpu" else "memory"
            variables = list(counts.values())
            weights = [
                scaled(resource, shapes[s].cpu if name == "cpu" else shapes[s].memory, True)
                for s in counts
            ]
            model.add(
                cp_model.LinearExpr.weighted_sum(variables, weights)
                <= scaled(resource, Fraction(total), False)
            )
        model.add(cp_model.LinearExpr.sum(list(counts.values())) <= node_class.pods_total)
        for name, total in node_class.scalars_total:
            unit = self._scalar_units[name]
            asking = [
                (var, amount // unit)
                for s, var in counts.items()
                if (amount := dict(shapes[s].scalars).get(name))
            ]
            if asking:
                model.add(
                    cp_model.LinearExpr.weighted_sum([v for v, _ in asking], [a for _, a in asking])
                    <= total // unit
                )

        whole_sizes = sorted({shapes[s].whole for s in counts if shapes[s].whole})
        fraction_sizes = sorted(
            {
                shapes[s].device_mib(node_class.device_memory_mib)
                for s in counts
                if shapes[s].fractional
            }
        )
        items: list[tuple[str, int]] = [("whole", k) for k in whole_sizes]
        if fraction_sizes:
            items.append(("shared", 0))
        weights = [k if kind == "whole" else 1 for kind, k in items]
        node_patterns = enumerate_patterns(weights, node_class.whole_gpus) if items else []
        patterns = ClassPatterns(items, node_patterns, device_sizes=fraction_sizes)
        self.patterns[node_class.index] = patterns
        item_totals: list[cp_model.LinearExprT] = []
        if node_patterns is not None:
            patterns.node_vars = [
                model.new_int_var(0, size, f"y[{node_class.index},{i}]")
                for i in range(len(node_patterns))
            ]
            model.add(sum(patterns.node_vars) <= size)
            for item in range(len(items)):
                item_totals.append(
                    sum(
                        p[item] * v
                        for p, v in zip(node_patterns, patterns.node_vars, strict=True)
                        if p[item]
                    )
                )
        else:
            totals = [
                model.new_int_var(0, size * node_class.whole_gpus, f"t[{node_class.index},{i}]")
                for i in range(len(items))
            ]
            model.add(
                sum(w * t for w, t in zip(weights, totals, strict=True))
                <= size * node_class.whole_gpus
            )
            item_totals = list(totals)
        for item, (kind, k) in enumerate(items):
            if kind == "whole":
                model.add(
                    sum(var for s, var in counts.items() if shapes[s].whole == k)
                    == item_totals[item]
                )
        shared_total: cp_model.LinearExprT = item_totals[-1] if fraction_sizes else 0
        patterns.shared_devices = shared_total
        if fraction_sizes or node_class.residuals:
            self._add_devices(node_class, counts, patterns, fraction_sizes, shared_total)

    def _add_devices(
        self,
        node_class: NodeClass,
        counts: dict[int, cp_model.IntVar],
        patterns: ClassPatterns,
        sizes: list[int],
        shared_total: cp_model.LinearExprT,
    ) -> None:
        model, shapes, memory = self.model, self.data.shapes, node_class.device_memory_mib
        per_size: list[list[cp_model.LinearExprT]] = [[] for _ in sizes]
        # Fractions open a device only where a whole one is idle; without one, only the
        # existing shared devices take them (a busy cluster's classes are nearly all so).
        if sizes and node_class.whole_gpus > 0:
            device_patterns = enumerate_patterns(sizes, memory)
            patterns.device_patterns = device_patterns
            if device_patterns is not None:
                upper = node_class.size * node_class.whole_gpus
                patterns.device_vars = [
                    model.new_int_var(0, upper, f"w[{node_class.index},{i}]")
                    for i in range(len(device_patterns))
                ]
                model.add(sum(patterns.device_vars) == shared_total)
                for i in range(len(sizes)):
                    per_size[i].append(
                        sum(
                            p[i] * v
                            for p, v in zip(device_patterns, patterns.device_vars, strict=True)
                            if p[i]
                        )
                    )
            else:
                totals = [
                    model.new_int_var(
                        0,
                        memory * node_class.size * node_class.whole_gpus,
                        f"f[{node_class.index},{i}]",
                    )
                    for i in range(len(sizes))
                ]
                model.add(
                    sum(m * t for m, t in zip(sizes, totals, strict=True)) <= memory * shared_total
                )
                for i, total in enumerate(totals):
                    per_size[i].append(total)
        for slot, residual in enumerate(node_class.residuals):
            slot_patterns = enumerate_patterns(sizes, residual) if sizes else []
            slot_patterns = slot_patterns or []
            slot_vars = [
                model.new_int_var(0, node_class.size, f"z[{node_class.index},{slot},{i}]")
                for i in range(len(slot_patterns))
            ]
            if slot_vars:
                model.add(sum(slot_vars) <= node_class.size)
            patterns.existing_patterns.append(slot_patterns)
            patterns.existing_vars.append(slot_vars)
            # KAI's device order among a node's shared devices: fullest first when
            # bin-packing (gpupack), emptiest first when spreading; in hundredths of a device.
            held = (
                memory - residual
                if self.data.device_strategy is PlacementStrategy.BINPACK
                else residual
            )
            for pattern, var in zip(slot_patterns, slot_vars, strict=True):
                fill = sum(n * size for n, size in zip(pattern, sizes, strict=True))
                weight = (100 * fill // memory) * (100 * held // memory)
                if weight:
                    self._device_order.append((weight, var, node_class.size))
            for i in range(len(sizes)):
                per_size[i].append(
                    sum(p[i] * v for p, v in zip(slot_patterns, slot_vars, strict=True) if p[i])
                )
        by_size: dict[int, list[cp_model.IntVar]] = defaultdict(list)
        for s, var in counts.items():
            if shapes[s].fractional:
                by_size[shapes[s].device_mib(memory)].append(var)
        for i, mib in enumerate(sizes):
            model.add(sum(by_size[mib]) == sum(per_size[i]))

    def _add_queue_constraints(self) -> None:
        data = self.data
        by_queue: dict[str, list[tuple[cp_model.LinearExprT, Resources, bool]]] = defaultdict(list)
        for gang in data.gangs:
            for var, request, _ in self._gang_terms[gang.key]:
                for queue in data.budget.ancestry(gang.group.queue):
                    by_queue[queue.name].append((var, request, gang.group.preemptible))
        for name, terms in sorted(by_queue.items()):
            for cap in data.budget.caps(data.queues[name]):
                self._cap(terms, cap.resource, cap.room, only_np=not cap.applies_to(True))

    def _cap(
        self,
        terms: list[tuple[cp_model.LinearExprT, Resources, bool]],
        resource: ResourceName,
        room: Fraction,
        only_np: bool,
    ) -> None:
        lhs = [
            scaled(resource, request.get(resource), True) * var
            for var, request, preemptible in terms
            if request.get(resource) and not (only_np and preemptible)
        ]
        if lhs:
            self.model.add(sum(lhs) <= max(0, scaled(resource, room, False)))

    def _add_domains(self) -> None:
        """Each constrained (sub)group picks one domain; its pods go only to that domain's
        classes (classes never straddle domains). Picking jointly for every gang is what
        the greedy pass's domain-by-domain search cannot do."""
        model = self.model
        for choice in self.data.domains:
            admit = self.admit.get(choice.gang)
            if admit is None:
                continue
            ids = sorted(
                {
                    d
                    for d in choice.domain_of_class.values()
                    if choice.allowed is None or d in choice.allowed
                }
            )
            pick = {d: model.new_bool_var(f"in[{choice.label},{d}]") for d in ids}
            held = None if choice.required else model.new_bool_var(f"together[{choice.label}]")
            for (class_id, shape_id), var in self.count.items():
                if shape_id not in choice.shapes:
                    continue
                domain = choice.domain_of_class.get(class_id)
                if domain is None or domain not in pick:
                    if choice.required:
                        model.add(var == 0)
                    elif held is not None:
                        model.add(var == 0).only_enforce_if(held)
                    continue
                bound = self.count_bound[class_id, shape_id]
                if held is None:
                    model.add(var <= bound * pick[domain])
                else:
                    model.add(var <= bound * pick[domain] + bound * (1 - held))
            if held is None:
                model.add(sum(pick.values()) == admit)
            else:
                model.add(sum(pick.values()) == held)
                model.add(held <= admit)
            self.picks.append((choice, pick, held))

    # -- objective -----------------------------------------------------------------------
    def _gpu_units(self, request: Resources) -> int:
        return _ceil(request.gpu * OBJECTIVE_GPU_UNITS)

    def _add_objective(self) -> None:
        self._add_order_tiers()
        elastic_terms, elastic_bound = [], 0
        for gang in self.data.gangs:
            for var, request, is_core in self._gang_terms[gang.key]:
                if not is_core:
                    weight = self._gpu_units(request) + 1
                    elastic_terms.append(weight * var)
                    elastic_bound += weight * len(gang.elastic)
        if elastic_terms:
            self.tiers.append(Tier("elastic pods", sum(elastic_terms), elastic_bound))
        together = [held for _, _, held in self.picks if held is not None]
        if together:
            self.tiers.append(Tier("preferred topology domains kept", sum(together), len(together)))
        self._add_kai_placement_tier()
        self._add_placement_tier()

    def _add_kai_placement_tier(self) -> None:
        """Where the order gains nothing, keep the greedy pass's (KAI's) choice of nodes.

        The greedy pass places pods as KAI's node order does (gpusharingorder, then
        bin-packing or spreading); the solver moves a pod to another node class only to
        satisfy an attempt in KAI's order that the greedy pass refused, so a user sees
        KAI's placements unless kai placed more.
        """
        kept, bound = [], 0
        for key, wanted in sorted(self.data.kai_placement.items()):
            var = self.count.get(key)
            if var is None or wanted <= 0:
                continue
            same = self.model.new_int_var(0, wanted, f"kept[{key[0]},{key[1]}]")
            self.model.add(same <= var)
            self.kai_kept.append((same, var, wanted))
            kept.append(same)
            bound += wanted
        if kept:
            self.tiers.append(Tier("KAI's placements kept", sum(kept), bound))

    def _offer_var(self, gang: str, elastic: int) -> cp_model.IntVar:
        """A boolean that is 1 only if the attempt is satisfied: the core admitted, or at
        least n of the gang's elastic pods placed."""
        if elastic == 0:
            return self.admit[gang]
        placed = self._elastic_by_gang[gang]
        var = self.model.new_bool_var(f"offer[{gang},{elastic}]")
        self.model.add(sum(placed) >= elastic).only_enforce_if(var)
        self.offer_vars.append((var, gang, elastic))
        return var

    def _add_order_tiers(self) -> None:
        """Satisfy the greedy pass's attempts lexicographically, in the order it made them.

        The attempts are KAI's: cores and then elastic pods one at a time, each gang pushed
        back after a success, in the job order of each queue and the queue order across
        them. Keeping that order lexicographically is what keeps KAI's fairness while
        optimising: an earlier attempt (higher queue priority, further below fair share,
        higher job priority, older) is never given up for later ones, however many GPUs they
        bring; a later one gets in before an earlier one only when the earlier one cannot be
        satisfied anyway. The solver's freedom is the packing, and packing better satisfies
        attempts the greedy pass had to refuse. Attempts before greedy's first refusal are
        fixed: nothing earlier can displace them. The next ORDER_WINDOW attempts get one tier
        each (exact lexicographic order); beyond that, a rank-weighted tier keeps the order
        approximately and the cycle's final comparison keeps it exactly. The GPU-weighted
        elastic tier after it covers elastic pods the greedy pass never offered.
        """
        data = self.data
        for (key, _), count in self.elastic.items():
            self._elastic_by_gang.setdefault(key, []).append(count)
        ranked = [
            (self._offer_var(*data.offers[position]), data.accepted[position])
            for position in ranked_attempts(data.offers, data.gangs)
        ]
        at = order_window([accepted for _, accepted in ranked])
        for var, _ in ranked[: at.start]:
            self.model.add(var == 1)
        window = ranked[at.start : at.stop]
        for rank, (var, _) in enumerate(window, start=at.start):
            self.tiers.append(Tier(f"attempt {rank} in KAI's order ({var.name})", var, 1))
        rest = ranked[at.stop :]
        self._no_later_loss_if_window_tied(window, rest)
        if rest:
            terms = [(len(rest) - rank) * var for rank, (var, _) in enumerate(rest)]
            self.tiers.append(
                Tier("later attempts in KAI's order", sum(terms), len(rest) * (len(rest) + 1) // 2)
            )

    def _no_later_loss_if_window_tied(
        self,
        window: Sequence[tuple[cp_model.IntVar, bool]],
        rest: Sequence[tuple[cp_model.IntVar, bool]],
    ) -> None:
        """An answer that satisfies the window's attempts as the greedy pass did must be at
        least as good as greedy's on the later attempts too, in KAI's order: an attempt the
        greedy pass satisfied may go only if an earlier one it refused is satisfied instead.
        The rank-weighted tier alone trades a satisfied attempt for two later ones, an
        answer the cycle's exact comparison throws away: on the 1,000-node benchmark the
        model's answer gave up attempt 457 and 53 more greedy satisfied for 14 it refused.
        An answer better on the window is free.

        `gained` after an attempt is true only if some refused attempt up to it is satisfied
        (a chain of one clause per refused attempt, so the constraint grows with the attempts,
        not with their square)."""
        if not any(accepted for _, accepted in rest):
            return
        as_greedy = [var if accepted else var.Not() for var, accepted in window]
        tied = self.model.new_bool_var("window as greedy")
        self.model.add_bool_or([*(literal.Not() for literal in as_greedy), tied])
        self.order_hints.append((tied, 1))
        gained: list[cp_model.IntVar] = []  # none yet, then the chain's last link
        for var, accepted in rest:
            if accepted:
                self.model.add_bool_or([var, tied.Not(), *gained])
                continue
            link = self.model.new_bool_var(f"gained by {var.name}")
            self.model.add_bool_or([link.Not(), var, *gained])
            self.order_hints.append((link, 0))
            gained = [link]

    def _add_placement_tier(self) -> None:
        # Fill devices already shared before opening new ones (KAI's gpupack and gpusharingorder).
        closed, closed_bound = [], 0
        for node_class in self.data.classes:
            patterns = self.patterns.get(node_class.index)
            if patterns is not None and patterns.device_sizes:
                most = node_class.size * node_class.whole_gpus
                closed.append(most - patterns.shared_devices)
                closed_bound += most
        if closed:
            self.tiers.append(Tier("devices left unshared", sum(closed), closed_bound))
        if self._device_order:
            self.tiers.append(
                Tier(
                    "shared devices in KAI's order",
                    sum(weight * var for weight, var, _ in self._device_order),
                    sum(weight * size for weight, _, size in self._device_order),
                )
            )
        terms, bound = [], 0
        for node_class in self.data.classes:
            patterns = self.patterns.get(node_class.index)
            if patterns is None or not patterns.node_patterns:
                continue
            before = node_class.total_gpus - node_class.whole_gpus
            for pattern, var in zip(patterns.node_patterns, patterns.node_vars, strict=True):
                used = sum(
                    n * k
                    for n, (kind, k) in zip(pattern, patterns.node_items, strict=True)
                    if kind == "whole"
                )
                gain = (before + used) ** 2 - before**2
                if self.data.strategy is PlacementStrategy.SPREAD:
                    gain = node_class.total_gpus**2 - gain
                terms.append(gain * var)
                bound += max(gain, 0) * node_class.size
        if terms:
            self.tiers.append(Tier("placement quality", sum(terms), bound))
