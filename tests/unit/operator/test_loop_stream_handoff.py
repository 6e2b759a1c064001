"""Outside a burst, which cycles hand their binds over (the next one plans while they go out).

Only a cycle whose timestamps all ride on its own group creates may: the rest of a
handed-over cycle writes its other stamps while the next cycle plans from a cache that
does not show them yet, and a stale-gang or eviction stamp missed there would be set
again, later, by that next cycle.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from fractions import Fraction

from immutables import Map

from kai.engine.cycle import Binding, CycleResult, SolverReport
from kai.engine.evictions.decisions import GroupStamps
from kai.grouping import PodGroupPlan
from kai.operator.loop import _hands_over
from kai.operator.pod_grouper import Plans

NOW = datetime(2026, 12, 6, 4, 0, tzinfo=UTC)
NEW_GROUP = "team/pg-new"


def _plan() -> PodGroupPlan:
    manifest = {"metadata": {"name": "pg-new", "namespace": "team"}, "spec": {"queue": "q"}}
    return PodGroupPlan("pg-new", "team", manifest, {"pod-group-name": "pg-new"}, {})


def _result(stamps: dict[str, GroupStamps]) -> CycleResult:
    report = SolverReport("greedy", "not-run", Fraction(1), Fraction(1), Fraction(1), 0)
    binding = Binding(pod="team/p", node="gpu-1", gpus=Fraction(1), gpu_groups=())
    return CycleResult((binding,), Map(), {}, report, stamps=stamps)


PLANS = Plans(new={"team/p": _plan()}, written={}, retrying=frozenset())
STARTED = GroupStamps(last_start=NOW, stale_since=None, last_eviction=None)


def test_a_stream_cycle_binding_its_new_group_with_its_start_hands_over() -> None:
    assert _hands_over(_result({NEW_GROUP: STARTED}), PLANS)


def test_a_cycle_with_no_stamps_hands_over() -> None:
    assert _hands_over(_result({}), PLANS)


def test_a_start_of_a_group_that_exists_already_keeps_the_cycle_whole() -> None:
    """Its start goes out as a patch after the binds: the next cycle must see it."""
    assert not _hands_over(_result({"team/pg-old": STARTED}), PLANS)


def test_a_stale_or_eviction_stamp_keeps_the_cycle_whole() -> None:
    stale = GroupStamps(last_start=NOW, stale_since=NOW, last_eviction=None)
    evicted = GroupStamps(last_start=None, stale_since=None, last_eviction=NOW)
    assert not _hands_over(_result({NEW_GROUP: stale}), PLANS)
    assert not _hands_over(_result({NEW_GROUP: evicted}), PLANS)


def test_the_cycle_that_ends_a_burst_keeps_its_binds() -> None:
    """The next cycle would plan beside its thousands of binds and hold them up."""
    ending = dataclasses.replace(PLANS, ends_burst=True)
    assert not _hands_over(_result({NEW_GROUP: STARTED}), ending)


def test_a_burst_goes_on_handing_over_whatever_its_stamps() -> None:
    going_on = dataclasses.replace(PLANS, deferred=100)
    assert _hands_over(_result({"team/pg-old": STARTED}), going_on)


def test_a_cycle_that_binds_nothing_keeps_its_turn() -> None:
    assert not _hands_over(dataclasses.replace(_result({}), bindings=()), PLANS)
