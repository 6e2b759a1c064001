"""MIG slices are placed where they are free and counted against queues as KAI counts them;
MIG-enabled nodes take only the kind of GPU ask their strategy allows.

Until this, a pod that asked for a slice waited (`UnhonouredConstraint`): kai counted no
slice on a node. KAI's own MIG action tests now pass (`tests/kai_port`, the `*MIG_test`
cases but the two with legacy MIG pods).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from kai.api.admission import pod_admission_warnings
from kai.api.parse import parse_node, parse_pod
from kai.engine.accounting import divisible_total, queue_shares
from kai.engine.cycle import run_cycle
from kai.engine.model import EngineConfig
from tests.unit.engine.builders import group, node, pod, queue, snapshot

SLICE = "nvidia.com/mig-1g.10gb"
BIG_SLICE = "nvidia.com/mig-3g.40gb"
GREEDY = EngineConfig(time_limit_seconds=0)
SOLVER = EngineConfig(time_limit_seconds=1.0, solver_workers=1)


def _pod_manifest(requests: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team"},
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [{"name": "c", "resources": {"requests": requests, "limits": requests}}],
        },
    }


@pytest.mark.parametrize(
    ("requests", "gpus"),
    [
        ({BIG_SLICE: "2"}, 6),
        ({SLICE: "1", BIG_SLICE: "1"}, 4),
        (
            {"nvidia.com/mig-1g.10gb+me": "1"},
            1,
        ),  # media extensions count (KAI's pattern misses them)
        ({"nvidia.com/mig-anything": "1"}, 0),  # no profile KAI reads: no GPU, as in KAI
    ],
)
def test_a_pods_slices_count_their_compute_slices(requests: dict[str, str], gpus: int) -> None:
    parsed = parse_pod(_pod_manifest(requests), "team/pg")
    assert parsed.unhonoured is None and pod_admission_warnings(_pod_manifest(requests)) == []
    assert parsed.gpu.scalar_gpus == gpus and parsed.gpu.gpus_on(40_000) == gpus
    assert [name for name, _ in parsed.scalars] == sorted(requests)
    assert parsed.placement.gpu_kind == "mig"


@pytest.mark.parametrize(
    ("labels", "allocatable", "mode"),
    [
        ({}, {}, None),
        ({}, {SLICE: "7"}, ""),  # offering slices makes a node MIG-enabled
        ({"nvidia.com/mig.strategy": "mixed"}, {SLICE: "7"}, "mixed"),
        (
            {"node-role.kubernetes.io/mig-enabled": "true", "nvidia.com/mig.strategy": "single"},
            {},
            "single",
        ),
        ({"node-role.kubernetes.io/mig-enabled": "False"}, {SLICE: "7"}, None),
        (
            {"node-role.kubernetes.io/mig-enabled": "yes"},
            {SLICE: "7"},
            None,
        ),  # Go's ParseBool fails
        ({"node-role.kubernetes.io/mig-enabled": "1", "nvidia.com/mig.strategy": "odd"}, {}, ""),
    ],
)
def test_a_nodes_mig_mode_is_read_as_kai_reads_it(
    labels: dict[str, str], allocatable: dict[str, str], mode: str | None
) -> None:
    parsed = parse_node(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n", "labels": labels},
            "status": {"allocatable": {"cpu": "8", **allocatable}},
        }
    )
    assert parsed.mig == mode
    assert parsed.scalar_gpus == (7 if allocatable else 0)


def test_a_slice_goes_where_one_is_free_and_counts_in_the_cluster_total() -> None:
    """Two mixed-strategy nodes, one with a free 3g slice; the cluster's GPUs are the
    slices' compute slices (3 + 3), which the queue's fair share divides."""
    snap = snapshot(
        [
            node("n0", gpus=0, mig="mixed", scalars={BIG_SLICE: 1}),
            node("n1", gpus=0, mig="mixed", scalars={BIG_SLICE: 1}),
        ],
        [
            pod("busy-0", "busy", node_name="n0", scalars={BIG_SLICE: 1}),
            pod("new-0", "new", scalars={BIG_SLICE: 1}),
            pod("late-0", "late", scalars={BIG_SLICE: 1}),
        ],
        [group("busy", "q"), group("new", "q"), group("late", "q")],
        [queue("q")],
    )
    assert divisible_total(snap).gpu == 6
    assert queue_shares(snap)["q"].allocated.gpu == 3
    for config in (GREEDY, SOLVER):
        result = run_cycle(snap, config)
        bound = {binding.pod: binding.node for binding in result.bindings}
        [placed] = bound.values()
        assert placed == "n1" and len(bound) == 1
        [binding] = result.bindings
        assert binding.gpus == 3
        [waiting] = [key for key in ("ns/new", "ns/late") if result.groups[key].reason]
        assert f"insufficient {BIG_SLICE} (needs 1, free 0)" in result.groups[waiting].message


def test_a_queue_limit_counts_the_compute_slices() -> None:
    """A 3g slice counts 3 GPUs: a queue limited to 2 GPUs may not take one."""
    snap = snapshot(
        [node("n0", gpus=0, mig="mixed", scalars={BIG_SLICE: 2, SLICE: 2})],
        [pod("big-0", "big", scalars={BIG_SLICE: 1}), pod("small-0", "small", scalars={SLICE: 2})],
        [group("big", "q"), group("small", "q")],
        [queue("q", gpu_limit=2)],
    )
    result = run_cycle(snap, GREEDY)
    assert [binding.pod for binding in result.bindings] == ["ns/small-0"]
    assert result.groups["ns/big"].reason == "OverLimit"
    assert "limit 2 GPUs" in result.groups["ns/big"].message


@pytest.mark.parametrize(
    ("strategy", "ask", "refusal"),
    [
        ("mixed", {"gpus": 1}, "MIG strategy mixed: only pods of MIG slices run here"),
        (
            "single",
            {"portion": Fraction(1, 2)},
            "MIG strategy single: only pods of whole GPUs run here",
        ),
        (None, {"scalars": {SLICE: 1}}, "MIG slices asked of a node without MIG"),
    ],
)
def test_a_mig_enabled_node_takes_only_what_its_strategy_allows(
    strategy: str | None, ask: dict[str, Any], refusal: str
) -> None:
    """KAI's PredicateByNodeResourcesType; a pod without a GPU goes anywhere. The node
    has whole GPUs and slices both, so only the strategy refuses."""
    snap = snapshot(
        [node("n0", gpus=4, mig=strategy, scalars={SLICE: 1} if strategy else None)],
        [pod("gpu-0", "gpu", **ask), pod("cpu-0", "cpu")],
        [group("gpu", "q"), group("cpu", "q")],
        [queue("q")],
    )
    result = run_cycle(snap, GREEDY)
    assert [binding.pod for binding in result.bindings] == ["ns/cpu-0"]
    assert result.groups["ns/gpu"].message == f"pod ns/gpu-0 fits no node: 1 node(s): {refusal}"
