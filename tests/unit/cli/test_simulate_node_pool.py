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


def _simulate(*extra: str, cluster: Path = CLUSTER) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "kai.cli.main", "simulate", str(cluster), "-o", "json",
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


CUSTOM_LABEL_CLUSTER = """
apiVersion: v1
kind: Node
metadata: {name: a-1, labels: {example.com/pool: a}}
status:
  allocatable: {cpu: '16', memory: 64Gi, pods: '110', nvidia.com/gpu: '2'}
  conditions: [{type: Ready, status: 'True'}]
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: research-a, labels: {example.com/pool: a}}
spec:
  resources:
    gpu: {quota: 0, limit: -1, overQuotaWeight: 1}
---
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: ml
  labels: {project: research, example.com/pool: a, kai.scheduler/node-pool: other}
spec:
  schedulerName: kai-scheduler
  containers: [{name: main, resources: {requests: {nvidia.com/gpu: '1'}}}]
"""


def test_pods_are_grouped_with_the_configured_node_pool_label(tmp_path: Path) -> None:
    """As `kai run`'s grouper: a `project` pod's queue is suffixed with its pool under
    `--node-pool-label` (research-a, which exists), not under kai.scheduler/node-pool."""
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CUSTOM_LABEL_CLUSTER)
    document = _simulate(
        "--node-pool", "a", "--node-pool-label", "example.com/pool", cluster=cluster
    )
    assert document["pods"]["ml/p"]["phase"] == "Running"
    assert document["pods"]["ml/p"]["node"] == "a-1"
