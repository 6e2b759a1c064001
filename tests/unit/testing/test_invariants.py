"""The invariant watcher catches each broken invariant it claims to, from events alone.

The fault tests trust the watcher to fail them; these feed it hand-made events
(no cluster) and check that each kind of breakage is reported, and that the
same history without the breakage is not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kai.testing.invariants import InvariantWatcher


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def watcher(clock: Clock | None = None) -> InvariantWatcher:
    return InvariantWatcher(
        Path("unused"), stale_grace_seconds=60, slack_seconds=0, clock=clock or Clock()
    )


def node(name: str, gpus: int) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}}}


def queue(name: str, limit: float, allocated: str | None = None) -> dict[str, Any]:
    status = {"allocated": {"nvidia.com/gpu": allocated}} if allocated is not None else {}
    return {
        "metadata": {"name": name},
        "spec": {"resources": {"gpu": {"limit": limit}}},
        "status": status,
    }


def group(name: str, min_member: int, queue_name: str = "q") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"minMember": min_member, "queue": queue_name},
    }


def pod(
    name: str, gpus: int, node_name: str = "", phase: str = "Pending", pod_group: str = "g"
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "labels": {"kai.scheduler/queue": "q"},
            "annotations": {"pod-group-name": pod_group},
        },
        "spec": {
            "nodeName": node_name,
            "containers": [{"resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}],
        },
        "status": {"phase": phase},
    }


def test_a_pod_seen_on_two_nodes_is_bound_twice() -> None:
    seen = watcher()
    seen.record("Pod", "MODIFIED", pod("a", 1, "n1"))
    seen.record("Pod", "MODIFIED", pod("a", 1, "n2"))
    assert seen.current_violations() == ["Pod ns/a (uid uid-a) bound to n1, then to n2"]
    assert seen.binds == 1


def test_a_node_given_more_gpus_than_it_has_is_reported_and_a_finished_pod_frees_them() -> None:
    seen = watcher()
    seen.record("Node", "ADDED", node("n1", 2))
    seen.record("Pod", "MODIFIED", pod("a", 2, "n1"))
    seen.record("Pod", "MODIFIED", pod("a", 2, "n1", phase="Succeeded"))
    seen.record("Pod", "MODIFIED", pod("b", 2, "n1"))
    assert seen.current_violations() == []
    seen.record("Pod", "MODIFIED", pod("c", 2, "n1"))
    assert seen.current_violations() == ["Node n1: running pods hold 4 of 2 GPUs"]


def test_a_queue_over_its_limit_at_any_instant_is_reported_once_per_excursion() -> None:
    seen = watcher()
    seen.record("Queue", "ADDED", queue("q", 2))
    seen.record("Pod", "MODIFIED", pod("a", 2, "n1"))
    seen.record("Pod", "MODIFIED", pod("b", 1, "n2"))
    seen.record("Pod", "MODIFIED", pod("b", 1, "n2", phase="Failed"))
    seen.record("Pod", "MODIFIED", pod("c", 1, "n2"))
    seen.record("Pod", "DELETED", pod("c", 1, "n2"))
    assert seen.current_violations() == [
        "Queue q: running pods hold 3 GPUs, limit 2",
        "Queue q: running pods hold 3 GPUs, limit 2",
    ]


def test_a_child_queue_counts_toward_its_parent_limit() -> None:
    seen = watcher()
    parent = queue("parent", 1)
    child = queue("q", -1)
    child["spec"]["parentQueue"] = "parent"
    seen.record("Queue", "ADDED", parent)
    seen.record("Queue", "ADDED", child)
    seen.record("Pod", "MODIFIED", pod("a", 2, "n1"))
    assert seen.current_violations() == ["Queue parent: running pods hold 2 GPUs, limit 1"]


def test_a_gang_partial_past_its_grace_is_reported_and_one_completed_in_time_is_not() -> None:
    clock = Clock()
    seen = watcher(clock)
    seen.record("PodGroup", "ADDED", group("g", 2))
    seen.record("PodGroup", "ADDED", group("h", 2))
    seen.record("Pod", "MODIFIED", pod("a", 1, "n1", pod_group="g"))
    seen.record("Pod", "MODIFIED", pod("b", 1, "n1", pod_group="h"))
    clock.now = 30
    seen.record("Pod", "MODIFIED", pod("c", 1, "n1", pod_group="h"))  # h complete in time
    clock.now = 61
    assert seen.current_violations() == ["PodGroup ns/g below minMember for 61s (still open)"]


def test_queue_status_must_equal_its_running_pods() -> None:
    seen = watcher()
    seen.record("Queue", "ADDED", queue("q", -1, allocated="2"))
    seen.record("Pod", "MODIFIED", pod("a", 2, "n1"))
    assert seen.queue_status_mismatches(["q"]) == []
    seen.record("Pod", "MODIFIED", pod("a", 2, "n1", phase="Succeeded"))
    assert seen.queue_status_mismatches(["q"]) == [
        "Queue q status.allocated nvidia.com/gpu=2, running pods hold 0"
    ]


def test_a_watcher_of_one_namespace_ignores_pods_elsewhere() -> None:
    seen = InvariantWatcher(Path("unused"), namespace="other")
    seen.record("Node", "ADDED", node("n1", 1))
    seen.record("Pod", "MODIFIED", pod("a", 2, "n1"))
    assert seen.current_violations() == []
    assert seen.binds == 0
