"""The look at the next cycle ends once its preemptor can no longer be placed.

The look runs the next cycle's greedy pass, in KAI's order, until its answer is known;
`placeable_nowhere` lets it stop before the preemptor's turn when the gangs before it have
taken the room it needs. These tests hold that judgement to the pass itself, and the cycle
to the same decisions with the early end as without it.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from kai.engine.evictions import next_cycle as look_module
from kai.engine.evictions.next_cycle import NextCycle, next_cycle, placeable_nowhere
from kai.engine.evictions.options import Verdict
from kai.engine.evictions.scenario import Scenario
from kai.engine.greedy import AllocationOutcome, allocate_on_index
from kai.engine.job_order import Offer
from kai.engine.model import EngineConfig, Queue, QueueResource, Snapshot
from tests.unit.engine.builders import UNLIMITED_RESOURCE, group, node, pod, snapshot
from tests.unit.evictions.clusters import random_departments
from tests.unit.evictions.helpers import (
    eviction_state,
    preemptor,
    times_taken_with_the_same_decisions,
)

CONFIG = EngineConfig(time_limit_seconds=1.0, solver_workers=1, reproducible=True)


def _judged_pass(seed: int) -> tuple[set[str], set[str]]:
    """A full pass over the cluster's pending gangs, each gang not offered room yet judged
    after every attempt: the gangs judged placeable nowhere, and the gangs placed."""
    state = eviction_state(random_departments(seed, elastic=True))
    gangs = list(state.inputs.unplaced)
    index, ledger, order = state.next_cycle_index(), state.ledger.copy(), state.order
    offered: set[str] = set()
    doomed: set[str] = set()

    def judge(offer: Offer, outcome: AllocationOutcome) -> bool:
        offered.add(offer.gang.key)
        for gang in gangs:
            key = gang.key
            if (
                key not in offered
                and key not in doomed
                and placeable_nowhere(gang, index, ledger, order)
            ):
                doomed.add(key)
        return False

    index.begin()
    try:
        outcome = allocate_on_index(gangs, index, ledger, order, judge)
    finally:
        index.rollback()
    return doomed, {placement.pod.group for placement in outcome.placements.values()}


def test_a_gang_judged_placeable_nowhere_is_not_placed_later_in_the_pass() -> None:
    judged = placed = 0
    for seed in range(100):
        doomed, got = _judged_pass(seed)
        assert not doomed & got, (seed, sorted(doomed & got))
        judged += len(doomed)
        placed += len(got)
    # Neither judgement is vacuous: many gangs were judged so, and many placed.
    assert judged >= 500 and placed >= 100, (judged, placed)


def test_the_cycle_decides_the_same_with_the_early_end_as_without(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clusters = (random_departments(seed, elastic=True) for seed in range(200))
    ended = times_taken_with_the_same_decisions(
        monkeypatch, look_module, "placeable_nowhere", clusters, CONFIG
    )
    assert ended >= 10, ended


def _returning_victim_cluster() -> Snapshot:
    """Victims a (2 GPUs) and b (4) of queue `first`, whose priority puts it before `then`;
    `then` runs c and waits with x (2 GPUs). With a and b gone, the next cycle offers room to
    a (back on n0), then to x (b would take `first` past its deserved quota), which fits
    on n1; b, offered last, is over `first`'s limit once a is back."""
    queues = [
        Queue(
            "first",
            None,
            200,
            gpu=QueueResource(Fraction(4), Fraction(5), Fraction(1)),
            cpu=UNLIMITED_RESOURCE,
            memory=UNLIMITED_RESOURCE,
        ),
        Queue(
            "then",
            None,
            100,
            gpu=QueueResource(Fraction(4), Fraction(-1), Fraction(1)),
            cpu=UNLIMITED_RESOURCE,
            memory=UNLIMITED_RESOURCE,
        ),
    ]
    pods = [
        pod("a-0", "a", 2, node_name="n0"),
        pod("c-0", "c", 2, node_name="n0"),
        pod("b-0", "b", 4, node_name="n1"),
        pod("x-0", "x", 2),
    ]
    groups = [group("a", "first"), group("b", "first"), group("c", "then"), group("x", "then")]
    return snapshot([node("n0", gpus=4), node("n1", gpus=4)], pods, groups, queues)


def test_a_victim_back_before_the_preemptor_does_not_end_the_look_early() -> None:
    """a is placed back before x is offered room: the answer waits for x, which is placed,
    so the eviction stands."""
    state = eviction_state(_returning_victim_cluster())
    who = preemptor(state, "ns/x")
    evicted = {key: frozenset({f"{key}-0"}) for key in ("ns/a", "ns/b")}
    x = who.pods[0]
    scenario = Scenario(evicted, ((x, "n0", ()),), (), Verdict({}), "greedy")
    assert next_cycle(state, who, scenario).verdict is NextCycle.KEEPS
