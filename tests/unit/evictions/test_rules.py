"""KAI's rules for victims, checked on small clusters worked out by hand (kai-semantics §8, §10.7)."""

from __future__ import annotations

import dataclasses

from kai.engine.cycle import run_cycle
from kai.engine.evictions.decisions import (
    GUARANTEE_DESERVED_QUOTA,
    LOWER_PRIORITY,
    MAINTAIN_FAIR_SHARE,
    Action,
)
from kai.engine.evictions.options import VictimOption
from kai.engine.evictions.reclaim_rules import can_reclaim
from kai.engine.evictions.rules import check, victim_options
from kai.engine.evictions.state import EvictionState
from kai.engine.model import EngineConfig
from kai.engine.resources import Resources
from tests.unit.engine.builders import group, node, pod, queue, snapshot
from tests.unit.evictions.clusters import (
    chunk_cluster,
    departments,
    inside_deserved_cluster,
    priority_cluster,
)
from tests.unit.evictions.helpers import eviction_state, preemptor


def options_of(state: EvictionState, action: Action, who: str) -> dict[str, VictimOption]:
    return {o.gang.key: o for o in victim_options(state, action, preemptor(state, who))}


def test_a_queue_inside_its_deserved_quota_is_no_reclaim_victim() -> None:
    state = eviction_state(inside_deserved_cluster())
    options = options_of(state, Action.RECLAIM, "ns/claim")
    assert sorted(options) == [f"ns/borrow-{i}" for i in range(4)]
    keepers = {f"ns/keep-{i}": frozenset({f"ns/keep-{i}"}) for i in range(4)}
    assert not check(state, Action.RECLAIM, preemptor(state, "ns/claim"), options, keepers).ok


def test_taking_from_a_queue_above_its_fair_share_maintains_fair_share() -> None:
    state = eviction_state(inside_deserved_cluster())
    options = options_of(state, Action.RECLAIM, "ns/claim")
    borrowed = {key: frozenset({key}) for key in options}
    verdict = check(state, Action.RECLAIM, preemptor(state, "ns/claim"), options, borrowed)
    assert verdict.ok and set(verdict.rules.values()) == {MAINTAIN_FAIR_SHARE}


def test_guarantee_deserved_quota_takes_over_once_the_victim_is_at_its_fair_share() -> None:
    state = eviction_state(chunk_cluster())
    assert state.inputs.shares["b"].fair_share.gpu == 4
    options = options_of(state, Action.RECLAIM, "ns/gang")
    four = {f"ns/b-{i}": frozenset({f"ns/b-{i}"}) for i in range(4)}
    verdict = check(state, Action.RECLAIM, preemptor(state, "ns/gang"), options, four)
    assert verdict.ok
    assert (
        sorted(verdict.rules.values()) == [GUARANTEE_DESERVED_QUOTA] * 2 + [MAINTAIN_FAIR_SHARE] * 2
    )
    # A fifth GPU would take b to its deserved 2 before the last chunk: refused for good.
    five = {f"ns/b-{i}": frozenset({f"ns/b-{i}"}) for i in range(5)}
    refused = check(state, Action.RECLAIM, preemptor(state, "ns/gang"), options, five)
    assert not refused.ok and refused.final


def test_a_queue_may_not_reclaim_beyond_its_fair_share() -> None:
    # Asking for 10 GPUs: a gets its deserved 4, a third of the 4 left floored to 1, and the
    # single flooring remainder (equal remainders, "a" first by name): fair share 6 < 10.
    snap = chunk_cluster()
    asks_five = [
        dataclasses.replace(p, gpu=dataclasses.replace(p.gpu, whole=5))
        if p.group == "ns/gang"
        else p
        for p in snap.pods
    ]
    state = eviction_state(dataclasses.replace(snap, pods=tuple(asks_five)))
    assert state.inputs.shares["a"].fair_share.gpu == 6
    assert not can_reclaim(state, preemptor(state, "ns/gang"))
    assert can_reclaim(eviction_state(snap), preemptor(eviction_state(snap), "ns/gang"))


def test_the_reclaimer_may_not_end_more_saturated_than_the_sibling_it_takes_from() -> None:
    for cpu_ask, allowed in ((2000, False), (0, True)):
        state = eviction_state(departments(cpu_ask))
        options = options_of(state, Action.RECLAIM, "ns/want")
        assert "ns/cpu-0" not in options  # protected by p2's reclaimMinRuntime
        one = {"ns/gpu-4": frozenset({"ns/gpu-4"})}
        verdict = check(state, Action.RECLAIM, preemptor(state, "ns/want"), options, one)
        assert verdict.ok is allowed, verdict.problem
        if not allowed:
            assert verdict.problem is not None and "saturated" in verdict.problem


def test_preempt_takes_only_strictly_lower_priority_preemptible_unprotected_work() -> None:
    state = eviction_state(priority_cluster())
    options = options_of(state, Action.PREEMPT, "ns/urgent")
    # peer: equal priority; np: not preemptible; young: protected by preemptMinRuntime.
    assert sorted(options) == ["ns/elastic", "ns/low"]
    assert options["ns/low"].whole_allowed
    assert not options["ns/elastic"].whole_allowed  # protected: only its pod above minMember
    who = preemptor(state, "ns/urgent")
    verdict = check(state, Action.PREEMPT, who, options, {"ns/low": frozenset({"ns/low"})})
    assert verdict.ok and verdict.rules == {"ns/low": LOWER_PRIORITY}
    whole = {"ns/elastic": frozenset({"ns/elastic-0", "ns/elastic-1"})}
    assert not check(state, Action.PREEMPT, who, options, whole).ok
    surplus = {"ns/elastic": frozenset({"ns/elastic-1"})}
    assert check(state, Action.PREEMPT, who, options, surplus).ok


def test_queue_usage_the_rules_read_is_the_snapshots() -> None:
    state = eviction_state(chunk_cluster())
    assert state.ledger.allocated["b"] == Resources.of(6)


def test_a_gang_running_in_a_deleted_queue_is_no_reclaim_victim_and_breaks_no_cycle() -> None:
    """Its Queue was deleted while it ran: reclaim has no share to weigh it against, so
    it takes from the queues that exist (and the cycle goes on)."""
    snap = snapshot(
        [node("n0", gpus=2)],
        [
            pod("orphan-0", "orphan", 1, node_name="n0"),
            pod("over-0", "over", 1, node_name="n0"),
            pod("claim-0", "claim", 1),
        ],
        [group("orphan", "gone"), group("over", "lender"), group("claim", "claimer")],
        [queue("lender", gpu_quota=0), queue("claimer", gpu_quota=1)],
    )
    result = run_cycle(snap, EngineConfig(time_limit_seconds=0))
    assert [e.pod for e in result.evictions] == ["ns/over-0"]
