"""The burst bound: how it grows, who is first in line, and a controller's pods are never
split by it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kai.engine.group_decision import GroupDecision
from kai.operator.burst import cycle_bound, first_in_line, statuses_to_write
from kai.operator.config import BURST_GROWTH


def _pod(
    name: str, created: str, priority: int = 0, owner: str | None = None, kind: str = "Job"
) -> tuple[str, dict[str, Any]]:
    metadata: dict[str, Any] = {"name": name, "creationTimestamp": created}
    if owner is not None:
        metadata["ownerReferences"] = [{"kind": kind, "uid": owner, "controller": True}]
    return f"ns/{name}", {"metadata": metadata, "spec": {"priority": priority}}


def _names(taken: list[tuple[str, Mapping[str, Any]]]) -> list[str]:
    return [key.partition("/")[2] for key, _ in taken]


def test_higher_priority_then_oldest_then_name_go_first() -> None:
    waiting = [
        _pod("late", "2026-01-01T00:00:09Z"),
        _pod("b", "2026-01-01T00:00:01Z"),
        _pod("a", "2026-01-01T00:00:01Z"),
        _pod("urgent", "2026-01-01T00:00:10Z", priority=100),
    ]
    taken, left = first_in_line(waiting, 3)
    assert _names(taken) == ["urgent", "a", "b"]
    assert left == 1


def test_a_controllers_pods_are_taken_together() -> None:
    waiting = [
        _pod("solo", "2026-01-01T00:00:01Z"),
        _pod("job-0", "2026-01-01T00:00:02Z", owner="job"),
        _pod("other", "2026-01-01T00:00:03Z"),
        _pod("job-1", "2026-01-01T00:00:04Z", owner="job"),
    ]
    taken, left = first_in_line(waiting, 2)
    assert _names(taken) == ["solo", "job-0", "job-1"]
    assert left == 1


def test_a_replicasets_pods_are_not_a_gang_and_are_taken_limit_at_a_time() -> None:
    waiting = [
        _pod(f"web-{index}", "2026-01-01T00:00:01Z", owner="rs", kind="ReplicaSet")
        for index in range(5)
    ]
    taken, left = first_in_line(waiting, 2)
    assert _names(taken) == ["web-0", "web-1"]
    assert left == 3


def test_no_bound_or_a_small_burst_takes_everything() -> None:
    waiting = [_pod(f"p{index}", "2026-01-01T00:00:01Z") for index in range(4)]
    assert first_in_line(waiting, 0) == (waiting, 0)
    assert first_in_line(waiting, 4) == (waiting, 0)


def test_a_burst_takes_few_pods_first_then_its_growth_each_later_cycle() -> None:
    assert BURST_GROWTH == 16  # the sequence below is written for it
    assert [cycle_bound(500, continued) for continued in range(4)] == [500, 8000, 8000, 8000]
    assert cycle_bound(500, 10**9) == 8000  # a burst that lasts keeps the same bound


def test_no_bound_stays_no_bound_however_long_the_burst() -> None:
    assert cycle_bound(0, 0) == 0
    assert cycle_bound(0, 5) == 0


def test_a_burst_writes_the_status_of_groups_that_wait_whole_or_in_part_only() -> None:
    decisions = {
        "ns/done": GroupDecision("ns/done", "q", True, None, ""),
        "ns/part": GroupDecision("ns/part", "q", True, "Unschedulable", "the gang runs; ..."),
        "ns/none": GroupDecision("ns/none", "q", False, "OverLimit", "queue q: limit ..."),
    }
    assert set(statuses_to_write(decisions, burst_continues=True)) == {"ns/part", "ns/none"}
    assert statuses_to_write(decisions, burst_continues=False) == decisions
