"""The eviction benchmark's cluster: full, valid, the same for the same seed, with work only evictions can place."""

from __future__ import annotations

from bench.synthetic_full import FullClusterSpec, full_cluster
from kai.engine.cycle import run_cycle
from kai.engine.model import STUCK_IN_RELEASING_SECONDS, EngineConfig, PodPhase
from kai.engine.validator import ProposedBinding, validate, validate_after_evictions
from tests.unit.running_as_bindings import running_as_bindings


def test_every_gpu_is_in_use_and_the_running_pods_fit() -> None:
    snap = full_cluster(FullClusterSpec(nodes=20, queues=6, seed=3))
    held = sum(p.gpu.whole for p in snap.pods if p.phase is PodPhase.BOUND)
    assert held == 20 * 8
    # Running pods within their nodes, gangs and queue limits: the validator binds them anew.
    before, bindings = running_as_bindings(snap)
    assert validate(before, bindings) == []
    # Full means full: one more whole GPU anywhere is over some node's capacity.
    one_gpu = next(p for p in snap.pods if p.phase is PodPhase.PENDING and p.gpu.whole)
    for node in snap.nodes:
        problems = validate(snap, [ProposedBinding(one_gpu.key, node.name, ())])
        assert any(f"node {node.name}: " in p and "GPUs in use of 8" in p for p in problems)
    assert full_cluster(FullClusterSpec(nodes=20, queues=6, seed=3)) == snap


def test_pending_gangs_get_room_only_by_evicting() -> None:
    snap = full_cluster(FullClusterSpec(nodes=20, queues=6, seed=3))
    result = run_cycle(snap, EngineConfig(time_limit_seconds=0))
    assert not result.bindings  # nothing is free
    assert result.evictions and result.pipelined
    # Once the victims are gone, the pipelined pods fit where they wait.
    waiting = [ProposedBinding(p.pod, p.node, p.gpu_groups) for p in result.pipelined]
    evicted = [e.pod for e in result.evictions]
    assert validate_after_evictions(snap, [], evicted, waiting, STUCK_IN_RELEASING_SECONDS) == []
    # Without the evictions they would not: the check sees the room they need.
    assert validate_after_evictions(snap, [], [], waiting, STUCK_IN_RELEASING_SECONDS) != []
