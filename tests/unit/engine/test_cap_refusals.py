"""Greedy proved the best on the order window by its refusals: only when the solver would prove it.

`refused_only_by_caps` lets the cycle skip the allocation model when every attempt greedy
refused in a full order window was over a queue's cap. These tests hold it to the model:
whenever it answers yes, the model's first stage, solved without it, proves greedy's answer
the best (`greedy-proved`) and the cycle decides the same; and it answers no where a refusal
was for room, where the window is short, or where a gang's elastic pods ask differently.
"""

from __future__ import annotations

import dataclasses
import random
from fractions import Fraction

import pytest

from bench.synthetic import ClusterSpec, synthetic_cluster
from kai.engine.cycle import run_cycle
from kai.engine.model import EngineConfig, Pod, PodGroup, Queue, QueueResource, Snapshot
from kai.engine.solver import optimize
from kai.engine.solver.cap_refusals import refused_only_by_caps
from tests.unit.engine.builders import UNLIMITED_RESOURCE, group, node, pod, snapshot

CONFIG = EngineConfig(time_limit_seconds=10.0, solver_workers=1, reproducible=True)


def limited_queues(seed: int, gangs: int = 150, mixed_elastic: bool = False) -> Snapshot:
    """Queues whose GPU limits add up to half the cluster, and more gangs than they allow:
    once a queue reaches its limit, its gangs are refused over it, never for room. Some
    gangs are elastic, their pods alike (with `mixed_elastic`, one gang's differ)."""
    rng = random.Random(seed)
    queues = [
        Queue(
            f"q{i}",
            None,
            gpu=QueueResource(Fraction(-1), Fraction(rng.randint(3, 10)), Fraction(1)),
            cpu=UNLIMITED_RESOURCE,
            memory=UNLIMITED_RESOURCE,
        )
        for i in range(4)
    ]
    groups: list[PodGroup] = []
    pods: list[Pod] = []
    for g in range(gangs):
        name = f"g{g}"
        size, minimum = rng.choice(((1, 1), (2, 2), (3, 1), (2, 1)))
        gpus = rng.choice((1, 1, 2))
        groups.append(group(name, f"q{rng.randrange(4)}", min_member=minimum))
        pods += [pod(f"{name}-{i}", name, gpus, cpu=1000) for i in range(size)]
    if mixed_elastic:
        groups.append(group("mixed", "q0", min_member=1))
        pods += [pod("mixed-0", "mixed", 1), pod("mixed-1", "mixed", 1), pod("mixed-2", "mixed", 2)]
    nodes = [node(f"n{i}", gpus=8) for i in range(10)]
    return snapshot(nodes, pods, groups, queues)


def _without_the_shortcut(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(optimize, "refused_only_by_caps", lambda *args: False)


def _judged(
    cluster: Snapshot, monkeypatch: pytest.MonkeyPatch, config: EngineConfig = CONFIG
) -> list[bool]:
    """What the shortcut answered in the cycle (once per cycle that reaches the solver)."""
    answers: list[bool] = []

    def recorded(*args: object) -> bool:
        answer = refused_only_by_caps(*args)  # type: ignore[arg-type]
        answers.append(answer)
        return answer

    monkeypatch.setattr(optimize, "refused_only_by_caps", recorded)
    run_cycle(cluster, config)
    return answers


def test_where_it_answers_yes_the_model_proves_greedy_the_best(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The engine benchmark's 100-node cluster of seed 4 as well: its window's refusals are
    # all over quotas, and its first stage proves greedy's answer (`test_greedy_proved`).
    clusters = [limited_queues(seed) for seed in range(8)]
    clusters.append(synthetic_cluster(ClusterSpec(100, 1000, 4)))
    for seed, cluster in enumerate(clusters):
        assert _judged(cluster, monkeypatch) == [True], seed
        with_it = run_cycle(cluster, CONFIG)
        _without_the_shortcut(monkeypatch)
        without = run_cycle(cluster, CONFIG)
        assert without.report.status == "greedy-proved", (seed, without.report.status)
        assert with_it.report.status == "greedy-proved"
        assert with_it.bindings == without.bindings, seed
        assert with_it.groups == without.groups, seed
        monkeypatch.undo()


def test_a_refusal_for_room_in_the_window_leaves_it_to_the_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The engine benchmark's 100-node cluster: refusals for room, where the model finds
    answers as good as greedy's in other ways (FEASIBLE), or better."""
    quick = dataclasses.replace(CONFIG, time_limit_seconds=1.0)
    for seed in (1, 2):
        cluster = synthetic_cluster(ClusterSpec(100, 1000, seed))
        assert _judged(cluster, monkeypatch, quick) == [False]


def test_a_short_window_or_elastic_pods_that_differ_leave_it_to_the_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _judged(limited_queues(0, gangs=40), monkeypatch) == [False]  # < 60 attempts refused
    assert _judged(limited_queues(0, mixed_elastic=True), monkeypatch) == [False]
    assert _judged(limited_queues(0), monkeypatch) == [True]
