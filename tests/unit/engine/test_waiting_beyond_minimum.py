"""Pods beyond the minimum of a gang that runs, or is placed, say why they wait.

KAI records every pending pod of a job as unschedulable, its PodGroup too, whether or
not the job has reached its minimum. kai marked such a group scheduled with no reason,
so a PyTorchJob of min 2 and 8 workers showed 6 Pending pods and nothing to say why.
"""

from __future__ import annotations

from kai.engine.budget import OVER_LIMIT
from kai.engine.cycle import run_cycle
from kai.engine.greedy import UNSCHEDULABLE
from kai.engine.model import EngineConfig
from tests.unit.engine.builders import group, node, pod, queue, snapshot

GREEDY = EngineConfig(time_limit_seconds=0)


def test_a_gang_placed_at_its_minimum_says_why_the_rest_wait() -> None:
    pods = [pod(f"p{i}", "g", gpus=1) for i in range(3)]
    snap = snapshot([node("n0", gpus=2)], pods, [group("g", "q")], [queue("q")])
    result = run_cycle(snap, GREEDY)
    assert {b.pod for b in result.bindings} == {"ns/p0", "ns/p1"}
    decision = result.groups["ns/g"]
    assert decision.scheduled and decision.reason == UNSCHEDULABLE
    assert decision.message == (
        "the gang runs; 1 pod(s) beyond its minimum wait: pod ns/p2 needs 1 GPUs and 1000m cpu; "
        "it would fit the cluster as it was, but after this cycle's placements ahead of it in "
        "queue order only 0 whole GPUs are free"
    )


def test_a_running_gangs_next_pod_names_the_limit_that_holds_it() -> None:
    pods = [pod(f"p{i}", "g", gpus=1, node_name="n0" if i < 2 else None) for i in range(4)]
    snap = snapshot([node("n0", gpus=8)], pods, [group("g", "q")], [queue("q", gpu_limit=2)])
    decision = run_cycle(snap, GREEDY).groups["ns/g"]
    assert decision.scheduled and decision.reason == OVER_LIMIT
    assert decision.message.startswith("the gang runs; 2 pod(s) beyond its minimum wait: ")
    assert "queue q: limit 2 GPUs, allocated 2 GPUs, this gang needs 1 GPUs" in decision.message


def test_a_gang_placed_whole_has_no_reason() -> None:
    pods = [pod(f"p{i}", "g", gpus=1) for i in range(3)]
    snap = snapshot([node("n0", gpus=4)], pods, [group("g", "q")], [queue("q")])
    decision = run_cycle(snap, GREEDY).groups["ns/g"]
    assert decision.scheduled and decision.reason is None and decision.message == ""
