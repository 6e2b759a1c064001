"""A group whose data makes the engine raise is set aside with a reason; everyone else is scheduled."""

from __future__ import annotations

import pytest

from kai.engine.cycle import EngineInvariantError
from kai.engine.model import EngineConfig, Snapshot
from kai.operator.isolation import ENGINE_INVARIANT_VIOLATED, MAX_PROBES, run_isolating
from tests.faulty_engine import FaultyEngine
from tests.unit.engine.builders import group, node, pod, queue, snapshot

GREEDY = EngineConfig(time_limit_seconds=0)


def _cluster(good: int, poisoned: int, poisoned_running: int = 0) -> Snapshot:
    names = [f"good-{i}" for i in range(good)] + [f"poisoned-{i}" for i in range(poisoned)]
    pods = [pod(f"{name}-p", name, gpus=1) for name in names]
    pods += [
        pod(f"poisoned-0-running-{i}", "poisoned-0", gpus=1, node_name="n1")
        for i in range(poisoned_running)
    ]
    return snapshot([node("n1", gpus=64)], pods, [group(name, "q") for name in names], [queue("q")])


def test_one_poisoned_group_is_set_aside_and_the_rest_bind() -> None:
    engine = FaultyEngine()
    result = run_isolating(engine, _cluster(good=9, poisoned=1), GREEDY).result
    assert sorted(b.pod for b in result.bindings) == [f"ns/good-{i}-p" for i in range(9)]
    decision = result.groups["ns/poisoned-0"]
    assert not decision.scheduled
    assert decision.reason == ENGINE_INVARIANT_VIOLATED
    assert "validation failed for ns/poisoned-0" in decision.message
    assert engine.calls <= MAX_PROBES + 2  # the failing run, the probes, the final run


def test_every_poisoned_group_is_found() -> None:
    result = run_isolating(FaultyEngine(), _cluster(good=6, poisoned=3), GREEDY).result
    assert len(result.bindings) == 6
    aside = {key for key, d in result.groups.items() if d.reason == ENGINE_INVARIANT_VIOLATED}
    assert aside == {"ns/poisoned-0", "ns/poisoned-1", "ns/poisoned-2"}


def test_running_pods_of_a_set_aside_group_still_count() -> None:
    result = run_isolating(
        FaultyEngine(), _cluster(good=1, poisoned=1, poisoned_running=2), GREEDY
    ).result
    assert result.queues["q"].allocated.gpu == 2  # the poisoned group's running pods


def test_out_of_probes_every_group_still_suspected_is_set_aside() -> None:
    result = run_isolating(FaultyEngine(), _cluster(good=2, poisoned=40), GREEDY).result
    bound = {b.pod for b in result.bindings}
    assert all(not key.startswith("ns/poisoned") for key in bound)
    assert all(
        result.groups[f"ns/poisoned-{i}"].reason == ENGINE_INVARIANT_VIOLATED for i in range(40)
    )


def test_a_failure_no_group_causes_is_raised() -> None:
    cluster = _cluster(good=3, poisoned=0)
    poisoned_node = node("n2", labels={"kai.test/poisoned": "yes"})
    broken = snapshot(
        [*cluster.nodes, poisoned_node], list(cluster.pods), list(cluster.pod_groups), [queue("q")]
    )
    with pytest.raises(EngineInvariantError, match="labelled"):
        run_isolating(FaultyEngine(), broken, GREEDY)


def test_a_healthy_cycle_runs_the_engine_once() -> None:
    engine = FaultyEngine()
    isolated = run_isolating(engine, _cluster(good=3, poisoned=0), GREEDY)
    assert len(isolated.result.bindings) == 3 and engine.calls == 1
    assert isolated.culprits == ()


def test_groups_set_aside_last_cycle_are_tried_without_first() -> None:
    cluster = _cluster(good=30, poisoned=1)
    found = run_isolating(FaultyEngine(), cluster, GREEDY)
    assert found.culprits == ("ns/poisoned-0",)
    engine = FaultyEngine()
    again = run_isolating(engine, cluster, GREEDY, found.culprits)
    assert engine.calls == 2  # the whole snapshot, then without last cycle's culprits
    assert again.culprits == found.culprits and len(again.result.bindings) == 30


def test_a_new_culprit_besides_last_cycles_is_searched_for() -> None:
    cluster = _cluster(good=8, poisoned=2)
    again = run_isolating(FaultyEngine(), cluster, GREEDY, ["ns/poisoned-0"])
    assert set(again.culprits) == {"ns/poisoned-0", "ns/poisoned-1"}
    assert len(again.result.bindings) == 8
