"""A gang that could evict but may not says why: min-runtime of its victims, or its own delay.

Without this its PodGroup said only that no node had room, while the reclaim it is
owed waits for a moment the engine knows: users asked "why is my pod pending" and
got half the answer.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from kai.engine.cycle import run_cycle
from kai.engine.model import EngineConfig
from tests.unit.engine.builders import NOW, with_groups
from tests.unit.evictions.clusters import inside_deserved_cluster


def _moment(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_reclaim_min_runtime_holds_off_names_the_moment_the_first_victim_may_go() -> None:
    cluster = inside_deserved_cluster()
    queues = tuple(
        dataclasses.replace(q, reclaim_min_runtime_seconds=600.0) if q.name == "borrower" else q
        for q in cluster.queues
    )
    started = {f"borrow-{i}": NOW - timedelta(minutes=i + 1) for i in range(4)}
    groups = tuple(
        dataclasses.replace(g, last_start=started[g.name]) if g.name in started else g
        for g in cluster.pod_groups
    )
    result = run_cycle(
        dataclasses.replace(cluster, queues=queues, pod_groups=groups), EngineConfig()
    )
    assert result.evictions == ()
    message = result.groups["ns/claim"].message
    # borrow-3 started first (4 minutes ago), so it is the first the 10 minutes release.
    assert "reclaim could take 4 running PodGroup(s) that min-runtime protects" in message
    assert f"the first, ns/borrow-3, may go at {_moment(NOW + timedelta(minutes=6))}" in message


def test_a_gang_inside_its_preemption_delay_says_until_when_and_from_what() -> None:
    cluster = inside_deserved_cluster()
    delayed = with_groups(
        cluster,
        "claim",
        created=NOW - timedelta(hours=1),
        last_eviction=NOW - timedelta(seconds=60),
        preemption_delay_seconds=300.0,
    )
    result = run_cycle(delayed, EngineConfig())
    assert result.evictions == ()
    message = result.groups["ns/claim"].message
    assert (
        f"it may not evict others before {_moment(NOW + timedelta(seconds=240))}: its "
        "preemptionDelay of 300s counts from its last eviction"
    ) in message
    # Once the delay has passed, the same gang reclaims: the message named the real obstacle.
    later = dataclasses.replace(delayed, now=NOW + timedelta(seconds=241))
    assert {e.pod for e in run_cycle(later, EngineConfig()).evictions} == {
        f"ns/borrow-{i}" for i in range(4)
    }
