"""KAI's victim order, worked by hand: both victim searches must choose the victims KAI's rules give.

Each cluster is full, so the pending gang gets room only by evicting; each test names
the victim KAI's order picks (kai-semantics §7.3, §8.3, §8.6, §10.6) and checks the
greedy search and the CP-SAT model both pick it.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from fractions import Fraction

from kai.engine.evictions.budget import SearchBudget
from kai.engine.evictions.decisions import Action
from kai.engine.evictions.greedy_search import greedy_search
from kai.engine.evictions.rules import victim_options
from kai.engine.evictions.scenario import Scenario
from kai.engine.evictions.victim_model import cp_sat_search
from kai.engine.evictions.victim_order import VictimOrder
from kai.engine.model import Snapshot
from tests.unit.engine.builders import NOW, group, node, pod, queue, snapshot
from tests.unit.evictions.helpers import eviction_state, preemptor


def evicted(scenario: Scenario | None) -> list[str]:
    assert scenario is not None
    return sorted(pod for pods in scenario.evicted.values() for pod in pods)


def both_searches(cluster: Snapshot, action: Action, who: str) -> tuple[list[str], list[str]]:
    """What the greedy search and the CP-SAT model evict for the pending gang `who`."""
    state = eviction_state(cluster)
    claimant = preemptor(state, who)
    options = victim_options(state, action, claimant)
    order = VictimOrder(state, options)
    greedy = greedy_search(state, action, claimant, options, SearchBudget(1.0), order)
    answer = cp_sat_search(state, action, claimant, options, order, greedy, SearchBudget(1.0), 1)
    assert answer.status == "OPTIMAL", answer.status
    return evicted(greedy), evicted(answer.scenario)


def test_an_elastic_gang_loses_its_last_task_in_task_order_never_its_leader() -> None:
    """train (minMember 1) runs train-0 (task-priority 10: the leader), train-1 and train-2,
    created in that order, on n0's 3 GPUs. urgent (priority 100) needs 1 GPU.

    Task order: task-priority first, then creation, so train-0, train-1, train-2; the last in
    task order goes first: train-2.
    """
    pods = [
        dataclasses.replace(
            pod(f"train-{i}", "train", 1, node_name="n0"),
            created=NOW - timedelta(minutes=10 - i),
            task_priority=10 if i == 0 else 0,
        )
        for i in range(3)
    ]
    pods.append(pod("urgent-0", "urgent", 1))
    groups = [group("train", "team", priority=50), group("urgent", "team", priority=100)]
    cluster = snapshot([node("n0", gpus=3)], pods, groups, [queue("team")])
    assert both_searches(cluster, Action.PREEMPT, "ns/urgent") == (["ns/train-2"], ["ns/train-2"])


def test_a_task_priority_keeps_a_later_pod_and_the_earlier_one_goes() -> None:
    """As above, but train-2 carries task-priority 5: task order is train-0, train-2, train-1."""
    pods = [
        dataclasses.replace(
            pod(f"train-{i}", "train", 1, node_name="n0"),
            created=NOW - timedelta(minutes=10 - i),
            task_priority={0: 10, 1: 0, 2: 5}[i],
        )
        for i in range(3)
    ]
    pods.append(pod("urgent-0", "urgent", 1))
    groups = [group("train", "team", priority=50), group("urgent", "team", priority=100)]
    cluster = snapshot([node("n0", gpus=3)], pods, groups, [queue("team")])
    assert both_searches(cluster, Action.PREEMPT, "ns/urgent") == (["ns/train-1"], ["ns/train-1"])


def test_among_equal_jobs_the_newest_in_job_order_goes() -> None:
    """job-a (created 2 h ago) and job-b (1 h ago), priority 50, neither with a start time,
    fill n0's 2 GPUs. urgent (priority 100) needs 1 GPU.

    Reverse job order: lowest priority first, then the newest creation: job-b.
    """
    groups = [
        dataclasses.replace(group("job-a", "team"), created=NOW - timedelta(hours=2)),
        dataclasses.replace(group("job-b", "team"), created=NOW - timedelta(hours=1)),
        group("urgent", "team", priority=100),
    ]
    pods = [
        pod("job-a-0", "job-a", 1, node_name="n0"),
        pod("job-b-0", "job-b", 1, node_name="n0"),
        pod("urgent-0", "urgent", 1),
    ]
    cluster = snapshot([node("n0", gpus=2)], pods, groups, [queue("team")])
    assert both_searches(cluster, Action.PREEMPT, "ns/urgent") == (["ns/job-b-0"], ["ns/job-b-0"])


def test_a_fraction_that_suffices_is_reclaimed_rather_than_a_whole_job() -> None:
    """n0 has 4 GPUs: mine runs 1 (queue q0, deserved 2); q1 (deserved 0) runs big (2 GPUs,
    the newer job) and half (0.5 of a device, the rest of that device free). want (q0) needs
    1 GPU.

    Fair shares: q0 2 (its request), q1 the other 2; q1 holds 2.5, so either victim passes the
    reclaim rules (q1 stays above its deserved 0). big comes first in job order (newer), but
    half alone frees a whole device: the fewest, smallest victims are half.
    """
    groups = [
        group("mine", "q0"),
        group("want", "q0"),
        dataclasses.replace(group("big", "q1"), created=NOW - timedelta(hours=1)),
        dataclasses.replace(group("half", "q1"), created=NOW - timedelta(hours=2)),
    ]
    pods = [
        pod("mine-0", "mine", 1, node_name="n0"),
        pod("big-0", "big", 2, node_name="n0"),
        pod("half-0", "half", portion=Fraction(1, 2), node_name="n0", gpu_groups=("dev",)),
        pod("want-0", "want", 1),
    ]
    queues = [queue("q0", gpu_quota=2), queue("q1", gpu_quota=0)]
    cluster = snapshot([node("n0", gpus=4)], pods, groups, queues)
    assert both_searches(cluster, Action.RECLAIM, "ns/want") == (["ns/half-0"], ["ns/half-0"])


def test_a_higher_priority_queue_is_not_reclaimed_from_while_a_lower_one_can_give() -> None:
    """6 GPUs on n0. mine (queue r, deserved 3) holds 2 and wants 1 more. Queue high
    (priority 10, deserved 0) runs h-0 and h-1 (job priority 40); queue low (priority 1,
    deserved 0) runs l-0 and l-1 (job priority 50). 1 GPU each.

    Fair shares: r 3; the surplus of 3 goes to the higher priority first: high 2 (its
    request), low 1. Reverse queue order: low is over its fair share, high is not, and low
    has the lower priority: low gives first, although its jobs have the higher priority.
    Taking from either would pass the reclaim rules.
    """
    groups = [
        group("r-0", "r"),
        group("r-1", "r"),
        group("want", "r"),
        group("h-0", "high", priority=40),
        group("h-1", "high", priority=40),
        group("l-0", "low", priority=50),
        group("l-1", "low", priority=50),
    ]
    pods = [pod(f"{g.name}-0", g.name, 1, node_name="n0") for g in groups if g.name != "want"]
    pods.append(pod("want-0", "want", 1))
    queues = [
        queue("r", gpu_quota=3),
        queue("high", gpu_quota=0, priority=10),
        queue("low", gpu_quota=0, priority=1),
    ]
    cluster = snapshot([node("n0", gpus=6)], pods, groups, queues)
    greedy, model = both_searches(cluster, Action.RECLAIM, "ns/want")
    assert greedy == model and len(model) == 1 and model[0].startswith("ns/l-")
