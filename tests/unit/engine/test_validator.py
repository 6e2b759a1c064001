"""The independent validator: each rule it enforces, broken on purpose, is reported."""

from __future__ import annotations

from fractions import Fraction

from kai.engine.cycle import run_cycle
from kai.engine.model import EngineConfig, Placement, SubGroup
from kai.engine.validator import ProposedBinding, validate
from tests.unit.engine.builders import group, node, pod, queue, snapshot


def bind(pod_name: str, node_name: str, *groups: str) -> ProposedBinding:
    return ProposedBinding(f"ns/{pod_name}", node_name, groups)


def test_a_sound_binding_set_passes() -> None:
    snap = snapshot(
        [node("n1", gpus=8)],
        [pod("a", "g", gpus=4), pod("b", "g", gpus=4)],
        [group("g", "q", min_member=2)],
        [queue("q")],
    )
    assert validate(snap, [bind("a", "n1"), bind("b", "n1")]) == []


def test_overcommitted_gpus_and_cpu_are_reported() -> None:
    snap = snapshot(
        [node("n1", gpus=4, cpu=2000)],
        [pod("a", "g", gpus=3, cpu=1500), pod("b", "g", gpus=3, cpu=1500)],
        [group("g", "q", min_member=2)],
        [queue("q")],
    )
    problems = validate(snap, [bind("a", "n1"), bind("b", "n1")])
    assert any("GPUs in use of 4" in p for p in problems)
    assert any("cpu" in p for p in problems)


def test_overfull_shared_device_is_reported() -> None:
    snap = snapshot(
        [node("n1", gpus=1, gpu_memory_mib=40_000)],
        [pod("a", "g", portion=Fraction(3, 4)), pod("b", "h", portion=Fraction(1, 2))],
        [group("g", "q"), group("h", "q")],
        [queue("q")],
    )
    problems = validate(snap, [bind("a", "n1", "d"), bind("b", "n1", "d")])
    assert any("shared device d holds 50000 MiB of 40000" in p for p in problems)


def test_half_a_gang_is_reported() -> None:
    snap = snapshot(
        [node("n1")],
        [pod("a", "g", gpus=1), pod("b", "g", gpus=1)],
        [group("g", "q", min_member=2)],
        [queue("q")],
    )
    assert any("minMember 2" in p for p in validate(snap, [bind("a", "n1")]))


def test_subgroup_minimum_is_checked() -> None:
    subgroups = (SubGroup("leader", 1), SubGroup("workers", 2))
    pods = [
        pod("l", "g", gpus=1, subgroup="leader"),
        pod("w1", "g", gpus=1, subgroup="workers"),
        pod("w2", "g", gpus=1, subgroup="workers"),
    ]
    snap = snapshot(
        [node("n1")], pods, [group("g", "q", min_member=2, subgroups=subgroups)], [queue("q")]
    )
    problems = validate(snap, [bind("l", "n1"), bind("w1", "n1")])
    assert any("sub-group workers: 1 pods, minMember 2" in p for p in problems)


def test_limits_at_an_ancestor_and_non_preemptible_quota_are_checked() -> None:
    queues = [queue("dept", gpu_limit=4), queue("team", parent="dept", gpu_quota=2)]
    snap = snapshot(
        [node("n1")],
        [pod("a", "g", gpus=3), pod("b", "h", gpus=3)],
        [group("g", "team"), group("h", "team", preemptible=False, priority=100)],
        queues,
    )
    problems = validate(snap, [bind("a", "n1"), bind("b", "n1")])
    assert any("queue dept: gpu 6 above limit 4" in p for p in problems)
    assert any("queue team: non-preemptible gpu 3 above quota 2" in p for p in problems)


def test_a_node_that_refuses_the_pod_is_reported() -> None:
    picky = pod("a", "g", gpus=1, placement=Placement(node_selector=(("pool", "x"),)))
    snap = snapshot([node("n1")], [picky], [group("g", "q")], [queue("q")])
    assert any("may not run on node n1" in p for p in validate(snap, [bind("a", "n1")]))


def test_a_node_over_committed_before_the_cycle_does_not_fail_bindings_elsewhere() -> None:
    crowded = pod("old", "g", gpus=6, node_name="n1")  # n1 has 4 GPUs: over-committed already
    snap = snapshot(
        [node("n1", gpus=4), node("n2", gpus=4)],
        [crowded, pod("a", "h", gpus=2)],
        [group("g", "q"), group("h", "q")],
        [queue("q")],
    )
    assert validate(snap, [bind("a", "n2")]) == []
    assert any("n1" in p for p in validate(snap, [bind("a", "n1")]))


def test_an_engine_answer_passes_and_each_way_of_breaking_it_is_reported() -> None:
    """Start from what the cycle really decided, then break it one rule at a time."""
    snap = snapshot(
        [node("n1", gpus=4), node("n2", gpus=4)],
        [
            pod("shared", "f", portion=Fraction(1, 2), node_name="n1", gpu_groups=("d",)),
            pod("g-0", "g", gpus=2),
            pod("g-1", "g", gpus=2),
            pod("w", "h", gpus=1),
            pod("big", "x", gpus=4),
        ],
        [
            group("f", "q"),
            group("g", "q", min_member=2),
            group("h", "q"),
            group("x", "other"),
        ],
        [queue("q", gpu_limit=6), queue("other", gpu_limit=0)],
    )
    result = run_cycle(snap, EngineConfig(time_limit_seconds=0.5, solver_workers=1))
    engine = {b.pod: ProposedBinding(b.pod, b.node, b.gpu_groups) for b in result.bindings}
    assert set(engine) == {"ns/g-0", "ns/g-1", "ns/w"}  # "big" is over its queue's limit
    assert validate(snap, engine.values()) == []

    def broken(**changes: ProposedBinding | None) -> list[str]:
        bindings = dict(engine)
        for name, binding in changes.items():
            if binding is None:
                bindings.pop(f"ns/{name.replace('_', '-')}")
            else:
                bindings[binding.pod] = binding
        return validate(snap, bindings.values())

    w_node = engine["ns/w"].node  # 4 more GPUs where w already takes one: over capacity
    assert any("GPUs in use of 4" in p for p in broken(big=bind("big", w_node)))
    assert any("PodGroup ns/g: 1 pods placed, minMember 2" in p for p in broken(g_1=None))
    assert any("queue other: gpu 4 above limit 0" in p for p in broken(big=bind("big", "n2")))
    on_shared = broken(w=bind("w", "n1", "d"))
    assert any("takes whole GPUs but is bound onto shared devices" in p for p in on_shared)


def test_gpu_shares_add_up_exactly_against_a_limit() -> None:
    """Thirds of a device make exactly one GPU: at the limit passes, a sixth more does not."""
    running = [
        pod(f"r{i}", f"r{i}", portion=Fraction(1, 3), node_name="n1", gpu_groups=(f"d{i}",))
        for i in range(2)
    ]
    pending = [
        pod("third", "third", portion=Fraction(1, 3)),
        pod("half", "half", portion=Fraction(1, 2)),
    ]
    groups = [group(p.name, "q") for p in (*running, *pending)]
    snap = snapshot([node("n1", gpus=4)], [*running, *pending], groups, [queue("q", gpu_limit=1)])
    assert validate(snap, [bind("third", "n1", "d2")]) == []
    problems = validate(snap, [bind("half", "n1", "d2")])
    assert problems == ["queue q: gpu 7/6 above limit 1"]
