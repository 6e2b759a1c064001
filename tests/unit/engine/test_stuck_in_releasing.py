"""A pod deleted long ago and still running is stuck, and its room is not counted on.

KAI calls a running pod whose deletion started more than two minutes ago StuckInReleasing
(its node has not let it go: lost, or a finalizer waits): it holds its node, but unlike a
Releasing pod its room is not offered for pipelining. kai read every deleting pod as
Releasing, so a pending gang was pipelined onto a stuck pod's room, every cycle, and never
bound; a preemptor waited there instead of evicting what would make room. KAI's cases for it
(`allocate_stuck_in_releasing_test/002`, preempt `/007`, `/008`, reclaim `/043`) pass.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from kai.api.parse import parse_pod
from kai.engine.cycle import run_cycle
from kai.engine.model import STUCK_IN_RELEASING_SECONDS, EngineConfig, PodPhase
from tests.unit.engine.builders import NOW, group, node, pod, queue, snapshot


def _manifest(phase: str, deleted: str | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "p", "namespace": "ns"}
    if deleted is not None:
        metadata["deletionTimestamp"] = deleted
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"schedulerName": "kai-scheduler", "nodeName": "n", "containers": [{"name": "c"}]},
        "status": {"phase": phase},
    }


def test_a_running_pod_being_deleted_carries_when_its_deletion_started() -> None:
    parsed = parse_pod(_manifest("Running", "2026-06-01T00:00:00Z"), "ns/pg")
    assert parsed.phase is PodPhase.RELEASING
    assert parsed.deleting_since == NOW
    assert parse_pod(_manifest("Running", None), "ns/pg").deleting_since is None


def test_a_pending_pod_being_deleted_is_never_stuck() -> None:
    """KAI's rule is for running pods only: a deleted pod that never started is Releasing."""
    parsed = parse_pod(_manifest("Pending", "2026-06-01T00:00:00Z"), "ns/pg")
    assert parsed.phase is PodPhase.RELEASING
    assert parsed.deleting_since is None
    assert parsed.frees_room(NOW + timedelta(days=1), STUCK_IN_RELEASING_SECONDS)


def test_two_minutes_after_its_deletion_a_running_pod_is_stuck() -> None:
    going = dataclasses.replace(
        pod("going-0", "going", 1, node_name="n", phase=PodPhase.RELEASING), deleting_since=NOW
    )
    threshold = timedelta(seconds=STUCK_IN_RELEASING_SECONDS)
    assert threshold == timedelta(minutes=2)  # KAI's default
    assert going.frees_room(NOW + threshold, STUCK_IN_RELEASING_SECONDS)
    assert not going.frees_room(NOW + threshold + timedelta(seconds=1), STUCK_IN_RELEASING_SECONDS)
    assert not going.frees_room(NOW + timedelta(seconds=6), 5.0)  # `--stuck-in-releasing-threshold`


def test_nothing_waits_on_a_stuck_pods_room() -> None:
    """One GPU, held by a pod deleted three minutes ago: the pending pod stays pending, told
    the GPU is held by a stuck pod, where a pod deleted a minute ago gives it a place to wait
    (pipelined)."""

    def waiting_for(deleted_ago: timedelta) -> tuple[list[str], str]:
        going = dataclasses.replace(
            pod("going-0", "going", 1, node_name="n", phase=PodPhase.RELEASING),
            deleting_since=NOW - deleted_ago,
        )
        snap = snapshot(
            [node("n", gpus=1)],
            [going, pod("new-0", "new", 1)],
            [group("going", "q"), group("new", "q")],
            [queue("q")],
        )
        result = run_cycle(snap, EngineConfig(time_limit_seconds=0))
        decision = result.groups["ns/new"]
        return [p.pod for p in result.pipelined], f"{decision.reason}: {decision.message}"

    pipelined, told = waiting_for(timedelta(minutes=1))
    assert pipelined == ["ns/new-0"]
    assert told.startswith("Pipelined: ")
    pipelined, told = waiting_for(timedelta(minutes=3))
    assert pipelined == []
    assert told == (
        "Unschedulable: pod ns/new-0 fits no node: 1 node(s): insufficient GPUs"
        " (needs 1, free 0; 1 held by pods stuck in their deletion)"
    )
