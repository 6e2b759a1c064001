"""`bench/e2e.py --shards N`: how nodes and pods are cut into pools, and the shard side's summary."""

from __future__ import annotations

from collections import Counter

from bench.e2e import (
    _pod,
    gpus_per_node_needed,
    pool_queue,
    ratio,
    round_robin_pools,
    summarize_bursts,
    summarize_shard_cycles,
)
from kai.api.shards import NODE_POOL_LABEL_KEY, Shard


def test_one_shard_labels_nothing() -> None:
    assert round_robin_pools(3, 1) == [None, None, None]


def test_pools_are_round_robin_and_even() -> None:
    assert round_robin_pools(5, 2) == ["pool-0", "pool-1", "pool-0", "pool-1", "pool-0"]
    counts = Counter(round_robin_pools(2000, 3))
    assert set(counts) == {"pool-0", "pool-1", "pool-2"}
    assert max(counts.values()) - min(counts.values()) <= 1


def test_a_pool_s_pod_is_labelled_with_its_pool_and_its_pool_s_queue() -> None:
    pod = _pod("p", "kai-scheduler", "pool-1")
    labels = pod["metadata"]["labels"]
    assert labels == {"kai.scheduler/queue": "bench-pool-1", NODE_POOL_LABEL_KEY: "pool-1"}
    assert pool_queue("pool-1") == "bench-pool-1"
    assert Shard("pool-1").owns(pod) and not Shard().owns(pod)  # the grouper's cut
    plain = _pod("q", "kai-scheduler")
    assert plain["metadata"]["labels"] == {"kai.scheduler/queue": "bench"}
    assert Shard().owns(plain)


def test_gpus_per_node_fit_the_fullest_pool() -> None:
    assert gpus_per_node_needed(200, 2000, 1, 8) == 10
    assert gpus_per_node_needed(200, 2000, 2, 8) == 10
    # 3 pools of 7 nodes: pool-0 has 3 nodes, pool-2 2; 10 pods: pool-0 has 4 pods
    assert gpus_per_node_needed(7, 10, 3, 1) == 2
    assert gpus_per_node_needed(7, 100, 3, 1) == 17  # 34 pods on 2 nodes
    assert gpus_per_node_needed(500, 100, 4, 8) == 8  # never below the asked count


def test_shard_cycles_are_each_pool_s_median_run() -> None:
    rows = [
        {"seconds": 10.0, "firstBindSeconds": 1.0, "shards": {
            "pool-0": {"cycles": 3.0, "meanCycleSeconds": 0.5},
            "pool-1": {"cycles": 4.0, "meanCycleSeconds": 0.9}}},
        {"seconds": 12.0, "firstBindSeconds": 1.5, "shards": {
            "pool-0": {"cycles": 5.0, "meanCycleSeconds": 0.7},
            "pool-1": {}}},  # its metrics gave nothing: left out
        {"seconds": 11.0, "firstBindSeconds": 1.2, "shards": {
            "pool-0": {"cycles": 4.0, "meanCycleSeconds": 0.6},
            "pool-1": {"cycles": 2.0, "meanCycleSeconds": 0.3}}},
    ]  # fmt: skip
    assert summarize_shard_cycles(rows) == {
        "pool-0": {"meanCycleSeconds": 0.6, "cycles": 4.0},
        "pool-1": {"meanCycleSeconds": 0.6, "cycles": 3.0},
    }
    assert summarize_shard_cycles([{"seconds": 1.0}]) == {}


def test_the_shards_ratio_is_of_median_rates() -> None:
    kai = summarize_bursts(2000, [{"seconds": s, "firstBindSeconds": 1.0} for s in (10, 20, 12)])
    shards = summarize_bursts(2000, [{"seconds": s, "firstBindSeconds": 1.0} for s in (16, 8, 9)])
    assert kai["podsBoundPerSecond"] == 166.7  # 2000 / 12
    assert shards["podsBoundPerSecond"] == 222.2  # 2000 / 9
    assert ratio(shards["podsBoundPerSecond"], kai["podsBoundPerSecond"]) == 1.33
