"""The eviction actions in KAI's order, after allocation: pipelining, consolidation, reclaim, preempt, stale gangs.

Each action walks the gangs allocation left pending, in KAI's job order (queues
re-ranked after every decision), and for each one that may trigger the action looks
for victims: the greedy search first, then the CP-SAT model warm-started from it,
within the cycle's solver budget. The least disruptive valid answer is re-checked by
the independent validator and committed; the next gang sees its effects. A gang
whose twin (same queue, priority and placement) already failed with a smaller ask
is not searched again in the same action (KAI's scheduling-signature shortcut).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction

from kai.engine.evictions.decisions import (
    Action,
    Eviction,
    EvictionDecision,
    GroupStamps,
    PipelinedPod,
)
from kai.engine.evictions.greedy_search import greedy_search, preemptor_nodes
from kai.engine.evictions.minruntime import preemption_delayed
from kai.engine.evictions.room import Overlay, Seat, seat_all
from kai.engine.evictions.rules import (
    Preemptor,
    VictimOption,
    can_reclaim,
    consolidation_on,
    may_consolidate,
    victim_options,
)
from kai.engine.evictions.scenario import Scenario, disruption, pod_costs
from kai.engine.evictions.stale import stale_gangs
from kai.engine.evictions.stamps import cycle_stamps
from kai.engine.evictions.state import EvictionInputs, EvictionState
from kai.engine.evictions.victim_model import cp_sat_search
from kai.engine.gangs import GangRequest
from kai.engine.job_order import ordered_gangs
from kai.engine.model import Placement, PodPhase
from kai.engine.resources import Resources
from kai.engine.validator import EvictionAudit, ProposedBinding

PIPELINED = "Pipelined"
"""Reason of a gang that waits, unbound, on capacity still being freed."""

_MODEL_SHARE = 0.5  # at most this share of what is left of the budget goes to one model


@dataclass(frozen=True)
class EvictionReport:
    cp_sat_answers: int  # committed decisions whose victims the CP-SAT model chose
    greedy_answers: int
    solver_seconds: float
    validator_violations: int


@dataclass(frozen=True)
class EvictionOutcome:
    decisions: tuple[EvictionDecision, ...]
    evictions: tuple[Eviction, ...]
    pipelined: tuple[PipelinedPod, ...]
    waiting: dict[str, str]  # pipelined gang -> why it waits, in words
    stamps: dict[str, GroupStamps]
    report: EvictionReport


@dataclass
class _Budget:
    seconds: float
    spent: float = 0.0
    cp_sat: int = 0
    greedy: int = 0
    violations: int = 0

    def per_model(self) -> float:
        return max(0.0, self.seconds - self.spent) * _MODEL_SHARE


def run_evictions(inputs: EvictionInputs) -> EvictionOutcome:
    config = inputs.config
    limit = config.evictions.time_limit_seconds
    budget = _Budget(config.time_limit_seconds if limit is None else limit)
    state = EvictionState.start(inputs)
    audit = EvictionAudit(
        inputs.snapshot,
        config,
        [ProposedBinding(p.pod.key, p.node, p.gpu_groups) for p in inputs.placements.values()],
    )
    waiting = [gang for gang in inputs.unplaced if gang.core or gang.elastic]
    if any(pod.phase is PodPhase.RELEASING for pod in inputs.snapshot.pods):
        waiting = _pipeline_on_releasing(state, audit, waiting, budget)
    for action in (Action.CONSOLIDATE, Action.RECLAIM, Action.PREEMPT):
        if action is Action.CONSOLIDATE and not consolidation_on(state):
            continue
        waiting = _run_action(state, audit, action, waiting, budget)
    placed = set(inputs.placements) | set(state.pipelined)
    stale = stale_gangs(
        inputs.snapshot.pod_groups,
        inputs.snapshot.pods,
        placed,
        state.evicted,
        config.evictions.staleness_grace_seconds,
        inputs.snapshot.now,
    )
    for decision in stale.decisions:
        _commit(state, audit, decision, (), budget)
    evicted = {key: record.group for key, record in state.evicted.items()}
    bound = {key: placement.pod.group for key, placement in inputs.placements.items()}
    return EvictionOutcome(
        tuple(state.decisions),
        tuple(sorted(state.evicted.values(), key=lambda e: e.pod)),
        tuple(sorted(state.pipelined.values(), key=lambda p: p.pod)),
        _waiting_messages(state),
        cycle_stamps(inputs.snapshot, bound, evicted, stale.stale_since),
        EvictionReport(budget.cp_sat, budget.greedy, budget.spent, budget.violations),
    )


def _pipeline_on_releasing(
    state: EvictionState, audit: EvictionAudit, waiting: list[GangRequest], budget: _Budget
) -> list[GangRequest]:
    """Allocate's pipelining: a gang that fits once Releasing pods are gone waits there, whole."""
    still: list[GangRequest] = []
    for gang in _in_order(state, waiting):
        preemptor = Preemptor.of(gang, state.inputs.memory_mib)
        group = gang.group
        if state.ledger.check(group.queue, preemptor.request, group.preemptible) is not None:
            still.append(gang)
            continue
        room = Overlay(state.future)
        seats = seat_all(
            preemptor.pods,
            room,
            preemptor_nodes(state, preemptor),
            state.inputs.eligible_for,
            state.config.placement_strategy,
        )
        if seats is None:
            still.append(gang)
            continue
        decision = EvictionDecision(None, gang.key, (), _pipelined(seats), "rule")
        if not _commit(state, audit, decision, seats, budget):
            still.append(gang)
    return still


def _run_action(
    state: EvictionState,
    audit: EvictionAudit,
    action: Action,
    waiting: list[GangRequest],
    budget: _Budget,
) -> list[GangRequest]:
    still: list[GangRequest] = []
    failed: dict[tuple[object, ...], list[list[Resources]]] = {}
    for gang in _in_order(state, waiting):
        preemptor = Preemptor.of(gang, state.inputs.memory_mib)
        signature = _signature(gang)
        if not _may_trigger(state, action, preemptor) or _known_to_fail(
            failed.get(signature, []), preemptor
        ):
            still.append(gang)
            continue
        options = victim_options(state, action, preemptor)
        chosen = _choose(state, action, preemptor, options, budget) if options else []
        for scenario in chosen:
            decision = _decision(state, action, preemptor, scenario)
            if _commit(state, audit, decision, [*scenario.seats, *scenario.moves], budget):
                if scenario.answer == "cp-sat":
                    budget.cp_sat += 1
                else:
                    budget.greedy += 1
                break
        else:
            failed.setdefault(signature, []).append(_sizes(preemptor))
            still.append(gang)
    return still


def _may_trigger(state: EvictionState, action: Action, preemptor: Preemptor) -> bool:
    if not preemptor.pods or preemption_delayed(preemptor.gang.group, state.inputs.snapshot.now):
        return False
    group = preemptor.gang.group
    refusal = state.ledger.check(group.queue, preemptor.request, group.preemptible)
    if action is Action.CONSOLIDATE:
        return refusal is None and may_consolidate(state, preemptor)
    if action is Action.RECLAIM:
        return refusal is None and can_reclaim(state, preemptor)
    # Preempt may free room under the queue's own limit, so only a quota refusal stops it.
    return refusal is None or refusal.reason != "NonPreemptibleOverQuota"


def _choose(
    state: EvictionState,
    action: Action,
    preemptor: Preemptor,
    options: Sequence[VictimOption],
    budget: _Budget,
) -> list[Scenario]:
    """Valid scenarios, least disruptive first: the CP-SAT model's and the greedy search's."""
    greedy = greedy_search(state, action, preemptor, options)
    costs = pod_costs(state, options)
    answer = cp_sat_search(state, action, preemptor, options, costs, greedy, budget.per_model())
    budget.spent += answer.wall_seconds
    found = [s for s in (answer.scenario, greedy) if s is not None]
    return sorted(found, key=lambda s: (disruption(s, costs), s.answer != "cp-sat"))


def _decision(
    state: EvictionState, action: Action, preemptor: Preemptor, scenario: Scenario
) -> EvictionDecision:
    evictions = tuple(
        Eviction(
            pod.key, key, pod.node or "", action, scenario.verdict.rules[pod.key], preemptor.key
        )
        for key in sorted(scenario.evicted)
        for pod in state.running[key].pods
        if pod.key in scenario.evicted[key]
    )
    return EvictionDecision(
        action,
        preemptor.key,
        evictions,
        _pipelined([*scenario.seats, *scenario.moves]),
        scenario.answer,
    )


def _commit(
    state: EvictionState,
    audit: EvictionAudit,
    decision: EvictionDecision,
    seats: Sequence[Seat],
    budget: _Budget,
) -> bool:
    problems = audit.check(decision)
    if problems:
        budget.violations += len(problems)
        return False
    audit.commit(decision)
    state.commit(decision, seats)
    return True


def _pipelined(seats: Sequence[Seat]) -> tuple[PipelinedPod, ...]:
    return tuple(PipelinedPod(pod.key, pod.group, node, groups) for pod, node, groups in seats)


def _in_order(state: EvictionState, gangs: list[GangRequest]) -> Iterator[GangRequest]:
    inputs = state.inputs
    return ordered_gangs(
        gangs,
        inputs.queues,
        inputs.shares,
        lambda name: state.ledger.allocated.get(name, Resources()),
        lambda gang: Preemptor.of(gang, inputs.memory_mib).request,
        inputs.total,
    )


def _signature(gang: GangRequest) -> tuple[object, ...]:
    group = gang.group
    placements: tuple[Placement, ...] = tuple(sorted({p.placement for p in gang.core}, key=repr))
    return (group.queue, group.priority, group.preemptible, placements)


def _sizes(preemptor: Preemptor) -> list[Resources]:
    return sorted(
        (
            Resources(Fraction(p.gpu.whole) + p.gpu.portion, p.request.cpu, p.request.memory)
            for p in preemptor.pods
        ),
        key=lambda r: (r.gpu, r.cpu, r.memory),
        reverse=True,
    )


def _known_to_fail(failures: list[list[Resources]], preemptor: Preemptor) -> bool:
    """An ask at least as large, pod for pod, as one that already failed fails too."""
    mine = _sizes(preemptor)
    return any(
        len(mine) >= len(failed) and all(f.fits_in(m) for f, m in zip(failed, mine, strict=False))
        for failed in failures
    )


def _waiting_messages(state: EvictionState) -> dict[str, str]:
    messages: dict[str, str] = {}
    for decision in state.decisions:
        if decision.preemptor is None:
            continue
        victims = len(decision.evictions)
        if decision.action is None:
            reason = "Releasing pods still hold the room it is placed on"
        else:
            reason = f"{victims} pods evicted by {decision.action.value} are still leaving"
        pods = sum(1 for record in decision.pipelined if record.group == decision.preemptor)
        messages[decision.preemptor] = (
            f"{pods} pods pipelined: {reason}; the gang binds as a whole once they have left"
        )
    return messages
