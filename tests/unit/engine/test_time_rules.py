"""`next_time_change`: the instant it names is where a cycle's decisions flip, for each time rule.

Each case runs the same snapshot a second before the instant and at it: before,
the rule holds the decision back; at it, the decision is made. So an instant
too late (a quiet loop would sleep through the change) or too early fails here.
"""

from __future__ import annotations

import dataclasses
import random
from datetime import datetime, timedelta

from kai.engine.cycle import run_cycle
from kai.engine.model import EngineConfig, EvictionConfig, PodGroup, PodPhase, Snapshot
from kai.engine.time_rules import TimeRuleInstants, next_time_change
from tests.unit.engine.builders import NOW, group, node, pod, queue, snapshot, told, with_groups
from tests.unit.evictions.clusters import inside_deserved_cluster

SECOND = timedelta(seconds=1)


def _evicted_at(snap: Snapshot, at: datetime, config: EngineConfig) -> set[str]:
    result = run_cycle(dataclasses.replace(snap, now=at), config)
    return {eviction.group for eviction in result.evictions}


def test_reclaim_waits_for_the_victims_min_runtime_and_no_longer() -> None:
    config = EngineConfig(evictions=EvictionConfig(reclaim_min_runtime_seconds=600.0))
    started = NOW - timedelta(minutes=4)
    snap = with_groups(inside_deserved_cluster(), "borrow", last_start=started)
    change = next_time_change(snap, config.evictions)
    assert change == started + timedelta(minutes=10)
    assert _evicted_at(snap, change - SECOND, config) == set()
    assert _evicted_at(snap, change, config) >= {"ns/borrow-0"}


def test_a_preemption_delay_ends_when_named() -> None:
    config = EngineConfig()
    created = NOW - timedelta(minutes=1)
    snap = with_groups(
        inside_deserved_cluster(), "claim", created=created, preemption_delay_seconds=300.0
    )
    change = next_time_change(snap, config.evictions)
    assert change == created + timedelta(minutes=5)
    assert _evicted_at(snap, change - SECOND, config) == set()
    assert _evicted_at(snap, change, config) != set()


def test_a_stale_gang_is_evicted_when_its_grace_ends() -> None:
    config = EngineConfig(evictions=EvictionConfig(staleness_grace_seconds=120.0))
    since = NOW - timedelta(seconds=30)
    gang = dataclasses.replace(group("g", "q", min_member=4), stale_since=since)
    snap = snapshot(
        [node("n")], [pod(f"g-{i}", "g", 1, node_name="n") for i in range(2)], [gang], [queue("q")]
    )
    change = next_time_change(snap, config.evictions)
    assert change == since + timedelta(minutes=2)
    assert _evicted_at(snap, change - SECOND, config) == set()
    assert _evicted_at(snap, change, config) == {"ns/g"}


def test_a_pod_being_deleted_is_stuck_when_named() -> None:
    """One GPU, held by a running pod deleted 30 s ago: a pending pod waits on its room
    (pipelined) until the named instant, and from it is told it fits nowhere."""
    config = EngineConfig(evictions=EvictionConfig(stuck_in_releasing_seconds=60.0))
    since = NOW - timedelta(seconds=30)
    going = pod("going-0", "going", 1, node_name="n", phase=PodPhase.RELEASING)
    snap = snapshot(
        [node("n", gpus=1)],
        [dataclasses.replace(going, deleting_since=since), pod("new-0", "new", 1)],
        [group("going", "q"), group("new", "q")],
        [queue("q")],
    )
    change = next_time_change(snap, config.evictions)
    assert change is not None and change - since - timedelta(minutes=1) < SECOND

    def pipelined_at(at: datetime) -> list[str]:
        result = run_cycle(dataclasses.replace(snap, now=at), config)
        return [p.pod for p in result.pipelined]

    assert pipelined_at(change - SECOND) == ["ns/new-0"]
    assert pipelined_at(change) == []
    assert TimeRuleInstants().next_change(snap, config.evictions) == change


def test_nothing_timed_nothing_named() -> None:
    snap = inside_deserved_cluster()
    assert next_time_change(snap, EvictionConfig()) is None
    disabled = with_groups(snap, "borrow", stale_since=NOW, staleness_grace_period_seconds=-1.0)
    assert next_time_change(disabled, EvictionConfig()) is None
    started_long_ago = with_groups(snap, "borrow", last_start=NOW - timedelta(days=1))
    config = EvictionConfig(reclaim_min_runtime_seconds=600.0)
    assert next_time_change(started_long_ago, config) is None


def _random_group(rng: random.Random, name: str) -> PodGroup:
    def moment() -> datetime | None:
        return rng.choice((None, NOW + timedelta(seconds=rng.randint(-900, 900))))

    return dataclasses.replace(
        group(name, rng.choice(("q", "r"))),
        created=moment(),
        last_start=moment(),
        last_eviction=moment(),
        stale_since=moment(),
        preemption_delay_seconds=rng.choice((None, 0.0, 60.0, 300.0)),
        staleness_grace_period_seconds=rng.choice((None, -1.0, 0.0, 120.0)),
    )


def test_the_kept_instants_name_what_working_every_group_out_names() -> None:
    """`TimeRuleInstants`, as the live loop keeps it over a cycle's snapshots: groups come,
    change and go, the queues' minimum runtimes change, the clock moves (backwards too),
    and the snapshots tell what changed, or an account the instants must not use, or
    nothing."""
    for seed in range(30):
        rng = random.Random(seed)
        kept = TimeRuleInstants()
        queues = [queue("q"), queue("r")]
        groups = {f"g{i}": _random_group(rng, f"g{i}") for i in range(8)}
        last = snapshot([], [], list(groups.values()), queues)
        for step in range(40):
            for _ in range(rng.randint(0, 3)):
                name = f"g{rng.randrange(12)}"
                if name in groups and rng.random() < 0.3:
                    del groups[name]
                else:
                    groups[name] = _random_group(rng, name)
            if rng.random() < 0.1:
                queues = [dataclasses.replace(queues[0], reclaim_min_runtime_seconds=rng.choice((None, 30.0, 600.0))), queues[1]]  # fmt: skip
            now = NOW + timedelta(seconds=rng.randint(-1000, 1000))
            made = dataclasses.replace(
                snapshot([], [], [groups[k] for k in sorted(groups)], queues), now=now
            )
            roll = rng.random()
            current = made if roll < 0.2 else told(last if roll < 0.9 else made, made)
            config = EvictionConfig(staleness_grace_seconds=rng.choice((60.0, 60.0, 3600.0)))
            assert kept.next_change(current, config) == next_time_change(current, config), (
                seed,
                step,
            )
            last = current
