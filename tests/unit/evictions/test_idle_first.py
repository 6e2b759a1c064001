"""A preemptor's pods wait on nodes they fit without an eviction first, as KAI's node scores say.

KAI places a reclaimer's tasks with `nodeavailability` (+100 for a node where the task fits
in idle capacity) above bin-packing (at most 9). kai's victim search seats the gang in
bin-packing order alone, so its first pod took the fuller node that only has room once the
victim leaves, and the idle node got the rest (KAI's case "Reclaim based on releasing and
idle resources" pipelines them the other way round). `idle_first` seats them again.
"""

from __future__ import annotations

from fractions import Fraction

from kai.engine.cycle import run_cycle
from kai.engine.evictions.decisions import Action
from kai.engine.model import EngineConfig, PodPhase, Snapshot
from tests.unit.engine.builders import group, node, pod, queue, snapshot

CONFIG = EngineConfig(time_limit_seconds=0)


def _cluster(*extra_on_b: tuple[str, PodPhase]) -> Snapshot:
    """`a` (1 GPU) runs the borrower's `old` (1 GPU); `b` (2 GPUs) runs `extra_on_b` (1 GPU
    each). The owner's gang `new` needs three pods of 1 GPU: it fits once `old` leaves."""
    others = [pod(f"{name}-0", name, 1, node_name="b", phase=phase) for name, phase in extra_on_b]
    return snapshot(
        [node("a", gpus=1), node("b", gpus=2)],
        [
            pod("old-0", "old", 1, node_name="a"),
            *others,
            *(pod(f"new-{i}", "new", 1) for i in range(3)),
        ],
        [
            group("old", "borrower"),
            *(group(name, "borrower", preemptible=False) for name, _ in extra_on_b),
            group("new", "owner", min_member=3),
        ],
        [queue("borrower", gpu_quota=0, weight=0), queue("owner", gpu_quota=3, weight=0)],
    )


def _pipelined(snap: Snapshot) -> list[tuple[str, str]]:
    result = run_cycle(snap, CONFIG)
    assert [(e.pod, e.action) for e in result.evictions] == [("ns/old-0", Action.RECLAIM)]
    return sorted((p.pod, p.node) for p in result.pipelined)


def test_the_pods_that_fit_idle_capacity_go_there_first() -> None:
    """Bin-packing alone seats new-0 on `a` (1 GPU once `old` leaves) before `b` (2 idle)."""
    assert _pipelined(_cluster()) == [("ns/new-0", "b"), ("ns/new-1", "b"), ("ns/new-2", "a")]


def test_a_releasing_pod_still_holds_its_room() -> None:
    """`b`'s GPU under a pod being deleted is releasing, not idle: one pod fits `b` idle, and
    the next goes to `a` by bin-packing (both have one GPU left once everything has left)."""
    snap = _cluster(("going", PodPhase.RELEASING))
    assert _pipelined(snap) == [("ns/new-0", "b"), ("ns/new-1", "a"), ("ns/new-2", "b")]


def test_a_share_waits_for_releasing_room_when_the_whole_pods_took_the_idle() -> None:
    """Two whole pods and a half-GPU share: the whole pods take `b`'s idle GPUs, and the share,
    finding no shared device and no idle one, opens the device `old` leaves on `a`."""
    base = _cluster()
    snap = snapshot(
        list(base.nodes),
        [p for p in base.pods if p.name != "new-2"] + [pod("new-2", "new", portion=Fraction(1, 2))],
        list(base.pod_groups),
        list(base.queues),
    )
    assert _pipelined(snap) == [("ns/new-0", "b"), ("ns/new-1", "b"), ("ns/new-2", "a")]
