"""The benchmarks' synthetic cluster: the same seed gives the same cluster, of the sizes and mix asked for."""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction

import pytest

from bench.synthetic import GPU_PRODUCT_LABEL, NODE_TYPES, ClusterSpec, synthetic_cluster
from kai.engine.cycle import run_cycle
from kai.engine.model import UNLIMITED, EngineConfig, PodPhase, Snapshot
from kai.engine.validator import ProposedBinding, validate
from tests.unit.running_as_bindings import running_as_bindings

SPEC = ClusterSpec(nodes=120, pods=2000, seed=7)


@pytest.fixture(scope="module")
def cluster() -> Snapshot:
    return synthetic_cluster(SPEC)


def test_the_same_seed_builds_the_same_cluster_and_another_seed_does_not(cluster: Snapshot) -> None:
    assert synthetic_cluster(SPEC) == cluster
    other = synthetic_cluster(ClusterSpec(nodes=120, pods=2000, seed=8))
    assert other.pods != cluster.pods


def test_sizes_are_the_ones_asked_for(cluster: Snapshot) -> None:
    assert len(cluster.nodes) == 120
    assert all(node.gpus == 8 for node in cluster.nodes)
    pending = [p for p in cluster.pods if p.phase is PodPhase.PENDING]
    assert len(pending) == 2000
    per_gang: dict[str, int] = defaultdict(int)
    for pod in pending:
        per_gang[pod.group] += 1
    assert max(per_gang.values()) <= 32
    assert min(per_gang.values()) >= 1
    groups = {g.key: g for g in cluster.pod_groups}
    assert all(groups[key].min_member <= size for key, size in per_gang.items())


@pytest.mark.parametrize("share", [0.2, 0.5])
def test_fractional_pods_make_up_the_share_asked_for(share: float) -> None:
    snapshot = synthetic_cluster(ClusterSpec(nodes=50, pods=2000, seed=3, fractional_share=share))
    pending = [p for p in snapshot.pods if p.phase is PodPhase.PENDING]
    fractional = sum(1 for p in pending if p.gpu.is_fractional)
    assert share - 0.01 <= fractional / len(pending) <= share + 0.02
    assert all(p.gpu.whole == 0 for p in pending if p.gpu.is_fractional)


def test_the_mix_covers_products_odd_gpu_counts_selectors_and_priorities(cluster: Snapshot) -> None:
    products = {node.label(GPU_PRODUCT_LABEL) for node in cluster.nodes}
    assert products == {kind.product for kind in NODE_TYPES}
    pending = [p for p in cluster.pods if p.phase is PodPhase.PENDING]
    assert {3, 6} <= {p.gpu.whole for p in pending}
    assert any(p.placement.node_selector for p in pending)
    pending_groups = {p.group for p in pending}
    gangs = [g for g in cluster.pod_groups if g.key in pending_groups]
    assert {g.priority for g in gangs} >= {50, 100, 125}
    assert all(g.preemptible == (g.priority < 100) for g in gangs)
    non_preemptible = sum(1 for g in gangs if not g.preemptible)
    assert 0 < non_preemptible < len(gangs) * 0.3


def test_running_pods_fit_their_nodes_and_stay_within_queue_limits(cluster: Snapshot) -> None:
    running = [p for p in cluster.pods if p.phase is PodPhase.BOUND]
    assert running
    assert any(p.gpu_groups for p in running)  # some devices start shared and part-full
    # The independent check of node capacity, devices, gangs and queue limits, on the
    # running pods themselves: shown the cluster before they were bound, and asked to bind them.
    before, bindings = running_as_bindings(cluster)
    assert len(bindings) == len(running)
    assert validate(before, bindings) == []
    queues = {q.name: q for q in cluster.queues}
    groups = {g.key: g for g in cluster.pod_groups}
    held: dict[str, Fraction] = defaultdict(Fraction)
    for pod in running:
        name: str | None = groups[pod.group].queue
        while name is not None:
            held[name] += pod.gpu.whole + pod.gpu.portion
            name = queues[name].parent
    for name, gpus in held.items():
        limit = queues[name].gpu.limit
        assert limit == UNLIMITED or gpus <= limit, name


def test_quotas_sum_below_the_cluster_and_jobs_go_to_leaf_queues(cluster: Snapshot) -> None:
    total_gpus = sum(node.gpus for node in cluster.nodes)
    top = [q for q in cluster.queues if q.parent is None]
    assert 2 <= len(top) <= 5
    assert sum(q.gpu.quota for q in top) < total_gpus
    for department in top:
        projects = [q for q in cluster.queues if q.parent == department.name]
        assert projects
        assert sum(q.gpu.quota for q in projects) <= department.gpu.quota
    leaves = {q.name for q in cluster.queues if q.parent is not None}
    assert {g.queue for g in cluster.pod_groups} <= leaves


def test_a_spec_without_nodes_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="nodes=0"):
        ClusterSpec(nodes=0, pods=10)


def test_what_the_engine_binds_on_it_passes_the_validator(cluster: Snapshot) -> None:
    result = run_cycle(cluster, EngineConfig(time_limit_seconds=0))  # the greedy pass alone
    bindings = [ProposedBinding(b.pod, b.node, b.gpu_groups) for b in result.bindings]
    assert (
        len(bindings) > 100
    )  # the cluster has room: a benchmark that binds nothing measures nothing
    assert validate(cluster, bindings) == []
