"""The eviction benchmark's cluster: full, valid, the same for the same seed, with work only evictions can place."""

from __future__ import annotations

from bench.synthetic_full import FullClusterSpec, full_cluster
from kai.engine.cycle import run_cycle
from kai.engine.model import EngineConfig, PodPhase
from kai.engine.validator import validate


def test_every_gpu_is_in_use_and_the_running_pods_fit() -> None:
    snap = full_cluster(FullClusterSpec(nodes=20, queues=6, seed=3))
    held = sum(p.gpu.whole for p in snap.pods if p.phase is PodPhase.BOUND)
    assert held == 20 * 8
    assert validate(snap, []) == []  # running pods within their nodes
    assert full_cluster(FullClusterSpec(nodes=20, queues=6, seed=3)) == snap


def test_pending_gangs_get_room_only_by_evicting() -> None:
    snap = full_cluster(FullClusterSpec(nodes=20, queues=6, seed=3))
    result = run_cycle(snap, EngineConfig(time_limit_seconds=0))
    assert not result.bindings  # nothing is free
    assert result.evictions and result.pipelined
