"""Stale gangs (kai-semantics §8.5) and the PodGroup timestamps a cycle writes (§4.2)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from kai.engine.accounting import pods_by_group
from kai.engine.evictions.decisions import Action
from kai.engine.evictions.stale import stale_gangs
from kai.engine.evictions.stamps import cycle_stamps
from kai.engine.model import Pod, PodGroup, PodPhase
from tests.unit.engine.builders import NOW, group, node, pod, queue, snapshot

GRACE = 60.0


def _by_group(pods: list[Pod]) -> dict[str, list[Pod]]:
    return {key: [p for p in pods if p.group == key] for key in {p.group for p in pods}}


def half_running(name: str, **fields: Any) -> tuple[PodGroup, list[Pod]]:
    g = dataclasses.replace(group(name, "q", min_member=4), **fields)
    return g, [pod(f"{name}-{i}", name, 1, node_name="n") for i in range(2)]


def test_a_gang_below_its_minimum_past_its_grace_period_is_evicted_whole() -> None:
    g, pods = half_running("g", stale_since=NOW - timedelta(minutes=2))
    outcome = stale_gangs([g], _by_group(pods), (), (), GRACE, NOW)
    [decision] = outcome.decisions
    assert decision.action is Action.STALE_GANG
    assert sorted(e.pod for e in decision.evictions) == ["ns/g-0", "ns/g-1"]
    assert outcome.stale_since == {}  # unchanged: still stale, since two minutes ago


def test_the_first_stale_cycle_records_the_time_and_waits() -> None:
    g, pods = half_running("g")
    outcome = stale_gangs([g], _by_group(pods), (), (), GRACE, NOW)
    assert outcome.decisions == () and outcome.stale_since == {"ns/g": NOW}


def test_per_group_grace_period_and_negative_disables() -> None:
    long_grace, pods = half_running(
        "g", stale_since=NOW - timedelta(minutes=2), staleness_grace_period_seconds=600.0
    )
    assert stale_gangs([long_grace], _by_group(pods), (), (), GRACE, NOW).decisions == ()
    disabled = dataclasses.replace(long_grace, staleness_grace_period_seconds=-1.0)
    assert stale_gangs([disabled], _by_group(pods), (), (), GRACE, NOW).decisions == ()
    assert stale_gangs([long_grace], _by_group(pods), (), (), -1.0, NOW).decisions == ()


def test_a_completing_gang_is_not_stale_and_forgets_its_time() -> None:
    g, pods = half_running("g", stale_since=NOW - timedelta(minutes=2))
    done = [
        dataclasses.replace(pod(f"g-done-{i}", "g", 1), phase=PodPhase.SUCCEEDED) for i in range(2)
    ]
    outcome = stale_gangs([g], _by_group([*pods, *done]), (), (), GRACE, NOW)
    assert outcome.decisions == () and outcome.stale_since == {"ns/g": None}


def test_pods_placed_this_cycle_count_towards_the_minimum() -> None:
    g, pods = half_running("g", stale_since=NOW - timedelta(minutes=2))
    waiting = [pod(f"g-{i}", "g", 1) for i in (2, 3)]
    outcome = stale_gangs([g], _by_group([*pods, *waiting]), {"ns/g-2", "ns/g-3"}, (), GRACE, NOW)
    assert outcome.decisions == () and outcome.stale_since == {"ns/g": None}


def test_last_start_is_set_when_a_gang_reaches_its_minimum_not_when_it_grows() -> None:
    starting = group("start", "q", min_member=2)
    growing = dataclasses.replace(
        group("grow", "q", min_member=1), last_start=NOW - timedelta(hours=1)
    )
    victim = group("victim", "q")
    snap = snapshot(
        [node("n")],
        [
            pod("start-0", "start", 1),
            pod("start-1", "start", 1),
            pod("grow-0", "grow", 1, node_name="n"),
            pod("grow-1", "grow", 1),
            pod("victim-0", "victim", 1, node_name="n"),
        ],
        [starting, growing, victim],
        [queue("q")],
    )
    bound = {"ns/start-0": "ns/start", "ns/start-1": "ns/start", "ns/grow-1": "ns/grow"}
    groups = {g.key: g for g in snap.pod_groups}
    stamps = cycle_stamps(NOW, groups, pods_by_group(snap), bound, {"ns/victim-0": "ns/victim"}, {})
    assert stamps["ns/start"].last_start == NOW
    assert "ns/grow" not in stamps  # already running: its clock keeps running
    assert stamps["ns/victim"].last_eviction == NOW
