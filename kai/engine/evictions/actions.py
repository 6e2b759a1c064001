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

import dataclasses
import pickle
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from typing import Protocol

from kai.engine.budget import NON_PREEMPTIBLE_OVER_QUOTA
from kai.engine.evictions.budget import CONSOLIDATION_SHARE, LOOK_OFFER_WORK, SearchBudget
from kai.engine.evictions.decisions import (
    Action,
    Eviction,
    EvictionDecision,
    GroupStamps,
    PipelinedPod,
)
from kai.engine.evictions.greedy_search import (
    greedy_search,
    preemptor_nodes,
    without_idle_victims,
)
from kai.engine.evictions.idle_first import idle_first
from kai.engine.evictions.minruntime import preemption_delay_end, preemption_delayed
from kai.engine.evictions.next_cycle import Look, NextCycle, next_cycle
from kai.engine.evictions.options import VictimOption
from kai.engine.evictions.preemptors import Preemptor
from kai.engine.evictions.reclaim_rules import (
    beyond_reclaim,
    can_reclaim,
    saturation_forbids_all,
)
from kai.engine.evictions.room import Overlay, Seat
from kai.engine.evictions.rules import (
    consolidation_on,
    may_consolidate,
    may_preempt,
    min_runtime_protected,
    victim_options,
)
from kai.engine.evictions.scenario import Scenario
from kai.engine.evictions.stale import stale_gangs
from kai.engine.evictions.stamps import cycle_stamps
from kai.engine.evictions.state import EvictionInputs, EvictionState
from kai.engine.evictions.term_seats import bound_by_terms
from kai.engine.evictions.topology_seats import seat_preemptor
from kai.engine.evictions.victim_order import VictimOrder
from kai.engine.forked import Child
from kai.engine.gangs import GangRequest
from kai.engine.job_order import ordered_gangs
from kai.engine.model import EngineConfig, Placement
from kai.engine.resources import NO_RESOURCES
from kai.engine.validator import EvictionAudit, ProposedBinding

PIPELINED = "Pipelined"
"""Reason of a gang that waits, unbound, on capacity still being freed."""

DEFAULT_SOLVER_SHARE = 0.5
"""Unless configured, victim models share half the allocation solver's time limit per cycle."""

EVICTIONS_ANSWER_SECONDS = 30.0
"""How long the eviction actions may take in their child before it is killed: a healthy
run took under 3 s at 5,000 nodes, with victim models sharing half a second."""


@dataclass(frozen=True)
class EvictionReport:
    cp_sat_answers: int  # committed decisions whose victims the CP-SAT model chose
    greedy_answers: int
    solver_seconds: float  # the victim models' deterministic time, in budgeted seconds
    validator_violations: int  # answers the audit rejected (each one is an engine bug)
    work: int  # nodes looked at by the searches
    cut_short: tuple[str, ...]  # actions that ran out of budget; their other gangs wait


@dataclass(frozen=True)
class EvictionOutcome:
    decisions: tuple[EvictionDecision, ...]
    evictions: tuple[Eviction, ...]
    pipelined: tuple[PipelinedPod, ...]
    waiting: dict[str, str]  # pipelined gang -> why it waits, in words
    held_back: dict[str, str]  # pending gang -> what kept it from evicting, in words
    stamps: dict[str, GroupStamps]
    report: EvictionReport
    taken_back: tuple[Eviction, ...] = ()
    """Pods the allocation placed this cycle that preempt took for its preemptor before they
    bind, and pods consolidation pipelined that reclaim or preempt took: not bound, and not
    evicted (nothing was started, nothing is deleted)."""


@dataclass
class _Tally:
    cp_sat: int = 0
    greedy: int = 0
    violations: int = 0
    solver_seconds: float = 0.0
    work: int = 0
    cut_short: list[str] = field(default_factory=list)  # actions whose budget ran out


_ACTIONS = (Action.CONSOLIDATE, Action.RECLAIM, Action.PREEMPT)


def run_evictions(inputs: EvictionInputs) -> EvictionOutcome:
    """The eviction actions' decisions for this cycle.

    With `EngineConfig.isolate_solver`, when victim models may be built, the actions run in
    a forked child (`kai.engine.forked`): an OR-Tools abort in a model then ends
    the child, not the scheduler, and the actions run again here without models, on the
    greedy victim search's answers alone. The child's decisions are audited here, one by
    one, before they are used (`EvictionsUnderway.outcome`).
    """
    return EvictionsUnderway(inputs).outcome()


class EvictionsUnderway:
    """The eviction actions, started now and read later: the cycle starts them on the
    greedy answer before the allocation solver runs, and reads them if the solver keeps
    that answer (`kai.engine.cycle`).

    In a forked child (see `run_evictions`) they run while the parent goes on; otherwise
    they run when their outcome is first asked for. `stop` gives them up.
    """

    def __init__(self, inputs: EvictionInputs) -> None:
        self._inputs = inputs
        self._child: Child | None = None
        if inputs.config.isolate_solver and _may_model(inputs):
            self._child = Child(
                lambda: pickle.dumps(_run_evictions(inputs, _Unaudited())),
                EVICTIONS_ANSWER_SECONDS,
            )

    def outcome(self) -> EvictionOutcome:
        """The child's decisions, each audited here in order (the audit is built while the
        child works: it was a twentieth of the child's time at 1,000 nodes). Should the
        audit reject one, the actions decide again in another child with each decision
        audited before it is committed, as without a child; where a child dies, here
        without victim models."""
        inputs = self._inputs
        if self._child is None:
            return _run_evictions(inputs, _LazyAudit(inputs))
        audit = _LazyAudit(inputs)
        audit.get()
        found = _read(self._child)
        if found is not None and all(_audited(audit, decision) for decision in found.decisions):
            return found
        if found is not None:
            again = _read(
                Child(
                    lambda: pickle.dumps(_run_evictions(inputs, _LazyAudit(inputs))),
                    EVICTIONS_ANSWER_SECONDS,
                )
            )
            if again is not None:
                return again
        return _run_evictions(_without_models(inputs), _LazyAudit(inputs))

    def stop(self) -> None:
        if self._child is not None:
            self._child.stop()


def _read(child: Child) -> EvictionOutcome | None:
    """The outcome the child wrote; None if it died, failed or did not answer in time."""
    found = child.answer()
    if found is None:
        return None
    outcome: EvictionOutcome = pickle.loads(found)  # written by our own child
    return outcome


def _without_models(inputs: EvictionInputs) -> EvictionInputs:
    """The same inputs with no solver time for victim models: the greedy search alone."""
    config = inputs.config
    greedy_only = dataclasses.replace(config.evictions, time_limit_seconds=0.0)
    return dataclasses.replace(inputs, config=dataclasses.replace(config, evictions=greedy_only))


def _solver_seconds(config: EngineConfig) -> float:
    limit = config.evictions.time_limit_seconds
    return config.time_limit_seconds * DEFAULT_SOLVER_SHARE if limit is None else limit


def _may_model(inputs: EvictionInputs) -> bool:
    """Victim models may be built this cycle: solver time for them, and gangs waiting."""
    return _solver_seconds(inputs.config) > 0 and any(
        gang.core or gang.elastic for gang in inputs.unplaced
    )


def _run_evictions(inputs: EvictionInputs, audit: _Audit) -> EvictionOutcome:
    config = inputs.config
    seconds = _solver_seconds(config)
    tally = _Tally()
    state = EvictionState.start(inputs)
    waiting = [gang for gang in inputs.unplaced if gang.core or gang.elastic]
    now, stuck_after = inputs.snapshot.now, config.evictions.stuck_in_releasing_seconds
    if waiting and any(pod.frees_room(now, stuck_after) for pod in inputs.snapshot.pods):
        waiting = _pipeline_on_releasing(state, audit, waiting, tally)
    carried = 0.0  # solver time an action leaves unused goes to the next
    held_back = _delayed(state, waiting)
    for position, action in enumerate(_ACTIONS):
        if not waiting or not state.has_victims():
            break
        if action is Action.CONSOLIDATE and not consolidation_on(state):
            continue
        budget = SearchBudget(seconds * (position + 1) / len(_ACTIONS) - carried)
        if action is Action.CONSOLIDATE:
            budget.search_work //= CONSOLIDATION_SHARE
            budget.model_work //= CONSOLIDATION_SHARE
        waiting = _run_action(state, audit, action, waiting, budget, tally, held_back)
        carried += budget.solver_spent
        tally.solver_seconds += budget.solver_spent
        tally.work += budget.search_spent + budget.model_spent
    taken_back = {
        key: e
        for key, e in state.evicted.items()
        if key in inputs.placements or key in state.promised
    }
    placed = (set(inputs.placements) - set(taken_back)) | set(state.pipelined)
    stale = stale_gangs(
        state.may_be_stale,
        state.pods_of,
        placed,
        state.evicted,
        config.evictions.staleness_grace_seconds,
        inputs.snapshot.now,
    )
    for decision in stale.decisions:
        _commit(state, audit, decision, (), tally)
    evicted = {key: record.group for key, record in state.evicted.items() if key not in taken_back}
    bound = {
        key: placement.pod.group
        for key, placement in inputs.placements.items()
        if key not in taken_back
    }
    return EvictionOutcome(
        tuple(state.decisions),
        tuple(sorted((state.evicted[key] for key in evicted), key=lambda e: e.pod)),
        tuple(sorted(state.pipelined.values(), key=lambda p: p.pod)),
        _waiting_messages(state),
        held_back,
        cycle_stamps(
            inputs.snapshot.now, state.groups, state.pods_of, bound, evicted, stale.stale_since
        ),
        EvictionReport(
            tally.cp_sat,
            tally.greedy,
            tally.solver_seconds,
            tally.violations,
            tally.work,
            tuple(tally.cut_short),
        ),
        tuple(sorted(taken_back.values(), key=lambda e: e.pod)),
    )


class _Audit(Protocol):
    def check(self, decision: EvictionDecision) -> list[str]: ...

    def commit(self, decision: EvictionDecision) -> None: ...


class _LazyAudit:
    """The validator's audit, built only if some decision is to be checked."""

    def __init__(self, inputs: EvictionInputs) -> None:
        self._inputs = inputs
        self._audit: EvictionAudit | None = None

    def get(self) -> EvictionAudit:
        if self._audit is None:
            inputs = self._inputs
            bound = [
                ProposedBinding(p.pod.key, p.node, p.gpu_groups) for p in inputs.placements.values()
            ]
            self._audit = EvictionAudit(inputs.snapshot, inputs.config, bound, inputs.shares)
        return self._audit

    def check(self, decision: EvictionDecision) -> list[str]:
        return self.get().check(decision)

    def commit(self, decision: EvictionDecision) -> None:
        self.get().commit(decision)


class _Unaudited:
    """No audit in the actions' child: the parent audits every decision it reads, in order
    (`EvictionsUnderway.outcome`), and decides again if the audit rejects one."""

    def check(self, decision: EvictionDecision) -> list[str]:
        return []

    def commit(self, decision: EvictionDecision) -> None:
        return None


def _audited(audit: _Audit, decision: EvictionDecision) -> bool:
    """Check the decision after those committed before it; commit it if it passes."""
    if audit.check(decision):
        return False
    audit.commit(decision)
    return True


def _pipeline_on_releasing(
    state: EvictionState, audit: _Audit, waiting: list[GangRequest], tally: _Tally
) -> list[GangRequest]:
    """Allocate's pipelining: a gang that fits once Releasing pods are gone waits there, whole."""
    still: list[GangRequest] = []
    for gang in _in_order(state, waiting):
        preemptor = state.preemptor(gang)
        group = gang.group
        if state.ledger.check(group.queue, preemptor.request, group.preemptible) is not None:
            still.append(gang)
            continue
        room = Overlay(state.future)
        seats = seat_preemptor(state, preemptor, room, preemptor_nodes(state, preemptor))
        if seats is None:
            still.append(gang)
            continue
        decision = EvictionDecision(None, gang.key, (), _pipelined(seats), "rule")
        if not _commit(state, audit, decision, seats, tally):
            still.append(gang)
    return still


def _run_action(
    state: EvictionState,
    audit: _Audit,
    action: Action,
    waiting: list[GangRequest],
    budget: SearchBudget,
    tally: _Tally,
    held_back: dict[str, str],
) -> list[GangRequest]:
    still: list[GangRequest] = []
    hopeful: list[GangRequest] = []
    for gang in waiting:  # a cheap look first, so the ordering walks only gangs that may trigger
        triggers = _may_trigger(state, action, state.preemptor(gang))
        (hopeful if triggers else still).append(gang)
    failed: dict[tuple[object, ...], list[list[Size]]] = {}
    left = len(hopeful)
    for gang in _in_order(state, hopeful):
        left -= 1
        if budget.exhausted:  # the rest wait for the next cycle
            if action.value not in tally.cut_short:
                tally.cut_short.append(action.value)
            still.append(gang)
            continue
        preemptor = state.preemptor(gang)
        signature = _signature(action, gang)
        if not _may_trigger(state, action, preemptor) or _known_to_fail(
            failed.get(signature, []), preemptor
        ):
            still.append(gang)
            continue
        options = victim_options(state, action, preemptor)
        if (
            action is Action.RECLAIM
            and options
            and saturation_forbids_all(state, preemptor, options)
        ):
            options = []  # no victim set passes: the search looks only at the room already free
        scanned = state.running_in(preemptor.queue) if action is Action.PREEMPT else state.running
        budget.spend(len(scanned))  # looking through the running gangs is work too
        looks = _Looks(state, preemptor, budget, moves=action is Action.CONSOLIDATE)
        chosen = _choose(state, action, preemptor, options, budget, left + 1, looks)
        committed = False
        for found in chosen:
            if looks is not None and looks.refuses(found):
                continue  # the next cycle would not place the preemptor
            leaner = without_idle_victims(state, action, preemptor, options, found, budget)
            if leaner is not None and looks is not None and looks.refuses(leaner):
                leaner = None  # without them a gang ahead of the preemptor takes its room
            scenario = idle_first(state, action, preemptor, leaner or found)
            decision = _decision(state, action, preemptor, scenario)
            if _commit(state, audit, decision, [*scenario.seats, *scenario.moves], tally):
                if scenario.answer == "cp-sat":
                    tally.cp_sat += 1
                else:
                    tally.greedy += 1
                committed = True
                break
        if not committed:
            failed.setdefault(signature, []).append(_sizes(preemptor))
            still.append(gang)
            protected = min_runtime_protected(state, action, preemptor)
            if protected and gang.key not in held_back:
                held_back[gang.key] = _protected_message(action, protected)
            why = looks.why_refused(action) if looks is not None else None
            if why is not None and gang.key not in held_back:
                held_back[gang.key] = why
    return still


def _delayed(state: EvictionState, waiting: Sequence[GangRequest]) -> dict[str, str]:
    """The gangs whose preemption delay keeps them from evicting anyone this cycle, and why."""
    now = state.inputs.snapshot.now
    found: dict[str, str] = {}
    for gang in waiting:
        group = gang.group
        end = preemption_delay_end(group, now)
        if end is not None:
            evicted_last = group.last_eviction is not None and (
                group.created is None or group.last_eviction >= group.created
            )
            since = "last eviction" if evicted_last else "creation"
            found[gang.key] = (
                f"it may not evict others before {_moment(end)}: its preemptionDelay of "
                f"{group.preemption_delay_seconds:g}s counts from its {since}"
            )
    return found


def _protected_message(action: Action, protected: Sequence[tuple[str, datetime]]) -> str:
    first, until = protected[0]
    return (
        f"{action.value} could take {len(protected)} running PodGroup(s) that min-runtime "
        f"protects; the first, {first}, may go at {_moment(until)}"
    )


def _moment(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _may_trigger(state: EvictionState, action: Action, preemptor: Preemptor) -> bool:
    if not preemptor.pods or preemption_delayed(preemptor.gang.group, state.inputs.snapshot.now):
        return False
    group = preemptor.gang.group
    refusal = state.ledger.check(group.queue, preemptor.request, group.preemptible)
    if action is Action.CONSOLIDATE:
        return refusal is None and may_consolidate(state, preemptor)
    if action is Action.RECLAIM:
        return (refusal is None or not beyond_reclaim(state, preemptor)) and can_reclaim(
            state, preemptor
        )
    # Preempt may free room under the queue's own limit, so only a quota refusal stops it;
    # a limit refusal is reported first, so quota is checked on its own.
    quota_refused = refusal is not None and (
        refusal.reason == NON_PREEMPTIBLE_OVER_QUOTA
        or state.ledger.check(
            group.queue, preemptor.request, group.preemptible, only=NON_PREEMPTIBLE_OVER_QUOTA
        )
        is not None
    )
    return not quota_refused and may_preempt(state, preemptor)


class _Looks:
    """The look at the next cycle for one preemptor, once per victim set: it depends on the
    victims alone (the search often trims a set to the one it found first)."""

    def __init__(
        self, state: EvictionState, preemptor: Preemptor, budget: SearchBudget, moves: bool
    ) -> None:
        self.state, self.preemptor, self.budget = state, preemptor, budget
        self.moves = moves
        """Consolidation's: a set is looked at only when inter-pod terms concern the
        preemptor or a moved pod. Otherwise the next cycle seats the moved pods as the
        move did, by the same packing order, and the stability property holds without
        the look; with terms, it seats them before the preemptor, which their moves
        stepped around (`test_consolidation_settles_over_rounds` found a pod moved
        away and back every other round)."""
        self._seen: dict[frozenset[tuple[str, frozenset[str]]], Look] = {}
        self.refused: tuple[Scenario, Look] | None = None
        """The last victim set the look refused, for the preemptor's message."""

    def refuses(self, scenario: Scenario) -> bool:
        """Whether the next cycle would leave the preemptor waiting after this set left."""
        if self.moves and not bound_by_terms(
            self.state, [*self.preemptor.pods, *(pod for pod, _, _ in scenario.moves)]
        ):
            return False
        victims = frozenset(scenario.evicted.items())
        seen = self._seen.get(victims)
        if seen is None:
            seen = self._seen[victims] = next_cycle(self.state, self.preemptor, scenario)
            self.budget.spend(seen.attempts * LOOK_OFFER_WORK)
        if seen.verdict is NextCycle.KEEPS:
            return False
        self.refused = (scenario, seen)
        return True

    def why_refused(self, action: Action) -> str | None:
        if self.refused is None:
            return None
        scenario, look = self.refused
        pods = sum(len(evicted) for evicted in scenario.evicted.values())
        victims = ", ".join(sorted(scenario.evicted))
        if look.verdict is NextCycle.VICTIM_FIRST:
            after = f"the next cycle would bind {look.first or victims} back there first"
        else:
            after = (
                f"the next cycle would place {look.first}, ahead of it in KAI's order, there first"
                if look.first is not None
                else "the next cycle would not place it there"
            )
        return (
            f"{action.value} could free room by evicting {pods} pod(s) of {victims}, but "
            f"{after}: nothing is evicted for room it would not get"
        )


def _choose(
    state: EvictionState,
    action: Action,
    preemptor: Preemptor,
    options: Sequence[VictimOption],
    budget: SearchBudget,
    models_left: int,
    looks: _Looks | None = None,
) -> list[Scenario]:
    """Valid scenarios, least disruptive first: the CP-SAT model's and the greedy search's.

    With no victims to take, the preemptor may still fit on room an earlier decision of the
    cycle freed: the greedy search tries that first. When the next cycle would not place the
    preemptor once greedy's victims left (`looks`), no model is built and the preemptor
    waits: a model costs more than the look and each of its answers needs one more, and the
    refusals are nearly all of gangs before the preemptor in KAI's order taking the room,
    whichever set freed it (45 of 46 in the 1,000-node benchmark's cycle)."""
    # Imported here, as in kai.engine.cycle: OR-Tools takes about a second to import and a
    # cycle without victims to look for never needs it.
    from kai.engine.evictions.victim_model import cp_sat_search

    order = VictimOrder(state, options, moves=action is Action.CONSOLIDATE)
    greedy = greedy_search(state, action, preemptor, options, budget, order)
    if greedy is not None and not greedy.evicted:
        return [greedy]  # it evicts nothing: no model can disrupt less, so none is built
    if not options:
        return []
    if greedy is not None and looks is not None and looks.refuses(greedy):
        return [greedy]
    if bound_by_terms(state, preemptor.pods):  # the model does not see inter-pod terms
        return [greedy] if greedy is not None else []
    answer = cp_sat_search(state, action, preemptor, options, order, greedy, budget, models_left)
    budget.solver_spent += answer.work_seconds
    found = [s for s in (answer.scenario, greedy) if s is not None]
    return sorted(found, key=lambda s: (order.disruption(s.evicted), s.answer != "cp-sat"))


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
    audit: _Audit,
    decision: EvictionDecision,
    seats: Sequence[Seat],
    tally: _Tally,
) -> bool:
    problems = audit.check(decision)
    if problems:
        tally.violations += len(problems)
        return False
    audit.commit(decision)
    state.commit(decision, seats)
    return True


def _pipelined(seats: Sequence[Seat]) -> tuple[PipelinedPod, ...]:
    return tuple(PipelinedPod(pod.key, pod.group, node, groups) for pod, node, groups in seats)


def _in_order(state: EvictionState, gangs: list[GangRequest]) -> Iterator[GangRequest]:
    inputs = state.inputs
    asks = {gang.key: state.preemptor(gang).request for gang in gangs}
    return ordered_gangs(
        gangs,
        inputs.queues,
        inputs.shares,
        lambda name: state.ledger.allocated.get(name, NO_RESOURCES),
        lambda gang: asks[gang.key],
        inputs.total,
    )


def _signature(action: Action, gang: GangRequest) -> tuple[object, ...]:
    """What, besides the size of the ask, decides whether the action can help this gang.

    Consolidation takes from any queue regardless of priority; reclaim depends on the
    queue; preempt on the queue and the priority. Where pods may run matters to all.
    """
    group = gang.group
    placements: tuple[Placement, ...] = tuple(sorted({p.placement for p in gang.core}, key=repr))
    if action is Action.CONSOLIDATE:
        return (placements,)
    if action is Action.RECLAIM:
        return (group.queue, group.preemptible, placements)
    return (group.queue, group.priority, group.preemptible, placements)


Size = tuple[Fraction, int, int, int]
"""One pod's ask: GPUs (whole plus portion), GPU memory (MiB), millicores, bytes."""


def _sizes(preemptor: Preemptor) -> list[Size]:
    """The pods' asks, largest first."""
    return sorted(
        (
            (Fraction(p.gpu.whole) + p.gpu.portion, p.gpu.memory_mib, p.cpu_millis, p.memory_bytes)
            for p in preemptor.pods
        ),
        reverse=True,
    )


def _known_to_fail(failures: list[list[Size]], preemptor: Preemptor) -> bool:
    """An ask at least as large, pod for pod, as one that already failed fails too."""
    mine = _sizes(preemptor)
    return any(
        len(mine) >= len(failed) and all(_at_most(f, m) for f, m in zip(failed, mine, strict=False))
        for failed in failures
    )


def _at_most(smaller: Size, larger: Size) -> bool:
    return (
        smaller[0] <= larger[0]
        and smaller[1] <= larger[1]
        and smaller[2] <= larger[2]
        and smaller[3] <= larger[3]
    )


def _waiting_messages(state: EvictionState) -> dict[str, str]:
    whole = {gang.key for gang in state.inputs.unplaced if gang.core}
    placed = {*state.inputs.placements, *state.promised}  # taken back, they never started
    messages: dict[str, str] = {}
    for decision in state.decisions:
        if decision.preemptor is None:
            continue
        seats = [record for record in decision.pipelined if record.group == decision.preemptor]
        if not any(record.pod in state.pipelined for record in seats):
            continue  # a later action took them back
        # A gang that runs grows pod by pod; one that waits binds whole.
        binds = "the gang binds as a whole" if decision.preemptor in whole else "the pods bind"
        when = "once they have left"
        evicted = [eviction for eviction in decision.evictions if eviction.pod not in placed]
        if decision.action is None:
            reason = "Releasing pods still hold the room it is placed on"
        elif evicted:
            reason = f"{len(evicted)} pods evicted by {decision.action.value} are still leaving"
        elif decision.evictions:  # nothing leaves: the room was only promised this cycle
            reason = (
                f"{decision.action.value} took back {len(decision.evictions)} pods placed this "
                "cycle before they were bound"
            )
            when = "next cycle"
        else:  # it waits on room the cycle's other decisions free
            nodes = {record.node for record in seats}
            leaving = sum(
                1
                for eviction in state.evicted.values()
                if eviction.node in nodes and eviction.pod not in placed
            )
            reason = f"{leaving} pods evicted for other gangs are still leaving its nodes"
        messages[decision.preemptor] = f"{len(seats)} pods pipelined: {reason}; {binds} {when}"
    return messages
