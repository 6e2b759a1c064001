"""`kai simulate --node-pool` simulates one shard of a two-pool cluster, through the real CLI.

Each queue in the fixture asks for more GPUs than its pool has: a shard that saw the
other pool's nodes would bind more, one that saw the other pool's queue would divide
the fair share with it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

CLUSTER = Path(__file__).parents[2] / "fixtures" / "shards" / "two-pools.yaml"


def _simulate(*extra: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "kai.cli.main", "simulate", str(CLUSTER), "-o", "json",
         "--now", "2026-06-01T00:00:00Z", "--time-limit", "0", *extra],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


@pytest.mark.parametrize(
    ("pool", "node", "queue", "gpus", "pods"),
    [
        ("a", "a-1", "team-a", 4, {"ml/train-a-0", "ml/train-a-1", "ml/train-a-2"}),
        ("", "d-1", "team-d", 2, {"ml/train-d-0", "ml/train-d-1"}),
    ],
)
def test_a_shard_places_its_pods_on_its_nodes_with_its_queues_only(
    pool: str, node: str, queue: str, gpus: int, pods: set[str]
) -> None:
    document = _simulate("--node-pool", pool)
    assert set(document["pods"]) == pods
    running = [pod for pod in document["pods"].values() if pod["phase"] == "Running"]
    assert {pod["node"] for pod in running} == {node}
    assert len(running) == gpus // 2  # 2 GPUs each: the pool's nodes, no more
    assert set(document["queues"]) == {queue}
    assert document["queues"][queue]["fairShare"]["gpu"] == gpus


def test_without_node_pool_the_whole_cluster_is_simulated() -> None:
    document = _simulate()
    assert set(document["queues"]) == {"team-a", "team-d"}
    running = [pod for pod in document["pods"].values() if pod["phase"] == "Running"]
    assert len(running) == 3
