"""Consolidation moves and never kills: fractions change devices, gangs move only what must."""

from __future__ import annotations

from fractions import Fraction

from kai.engine.evictions.budget import SearchBudget
from kai.engine.evictions.decisions import MOVED, Action, Eviction, EvictionDecision, PipelinedPod
from kai.engine.evictions.greedy_search import greedy_search
from kai.engine.evictions.rules import victim_options
from kai.engine.evictions.scenario import Scenario
from kai.engine.evictions.victim_model import Answer, VictimModel, cp_sat_search
from kai.engine.evictions.victim_order import VictimOrder
from kai.engine.model import EngineConfig, EvictionConfig, Snapshot
from kai.engine.validator import EvictionAudit
from tests.unit.engine.builders import group, node, pod, queue, snapshot
from tests.unit.evictions.helpers import eviction_state, preemptor

HALF = Fraction(1, 2)


def _search(snap: Snapshot, key: str) -> Scenario | None:
    state = eviction_state(snap)
    who = preemptor(state, key)
    options = victim_options(state, Action.CONSOLIDATE, who)
    order = VictimOrder(state, options, moves=True)
    return greedy_search(state, Action.CONSOLIDATE, who, options, SearchBudget(5.0), order)


def _moved(scenario: Scenario | None) -> list[str]:
    assert scenario is not None
    return sorted(pod for pods in scenario.evicted.values() for pod in pods)


def halves(second: Fraction = HALF) -> Snapshot:
    """n0's two devices each hold one fraction (a older than b); a 1-GPU pod waits."""
    return snapshot(
        [node("n0", gpus=2, gpu_memory_mib=100)],
        [
            pod("a-0", "a", portion=HALF, node_name="n0", gpu_groups=("dev-a",)),
            pod("b-0", "b", portion=second, node_name="n0", gpu_groups=("dev-b",)),
            pod("whole-0", "whole", 1),
        ],
        [group("a", "q"), group("b", "q"), group("whole", "q")],
        [queue("q")],
    )


def test_a_fraction_moves_to_the_other_shared_device_of_its_own_node() -> None:
    scenario = _search(halves(), "ns/whole")
    assert _moved(scenario) == ["ns/b-0"]  # the newer fraction goes first
    assert scenario is not None
    [(moved, where, devices)] = scenario.moves
    assert (moved.key, where, devices) == ("ns/b-0", "n0", ("dev-a",))
    [(seated, seat, _)] = scenario.seats
    assert (seated.key, seat) == ("ns/whole-0", "n0")


def test_fractions_that_cannot_share_a_device_are_not_moved() -> None:
    assert _search(halves(Fraction(6, 10)), "ns/whole") is None  # 0.5 + 0.6 > 1: never kill


def test_a_gang_moves_only_its_pods_on_the_node_to_free() -> None:
    """A 3-pod gang at its minimum runs 2 pods on n0 and 1 on n1; a 3-GPU pod waits. Moving
    the pod on n1 next to its gang-mates frees n1: the pods on n0 stay running."""
    snap = snapshot(
        [node("n0", gpus=3), node("n1", gpus=3)],
        [
            pod("gang-0", "gang", 1, node_name="n0"),
            pod("gang-1", "gang", 1, node_name="n0"),
            pod("gang-2", "gang", 1, node_name="n1"),
            pod("wide-0", "wide", 3),
        ],
        [group("gang", "q", min_member=3), group("wide", "q")],
        [queue("q")],
    )
    scenario = _search(snap, "ns/wide")
    assert _moved(scenario) == ["ns/gang-2"]
    assert scenario is not None
    assert [(p.key, n) for p, n, _ in scenario.moves] == [("ns/gang-2", "n0")]
    assert [(p.key, n) for p, n, _ in scenario.seats] == [("ns/wide-0", "n1")]


def test_a_consolidation_that_would_exceed_the_victim_cap_is_not_done() -> None:
    capped = EngineConfig(
        time_limit_seconds=1.0,
        solver_workers=1,
        evictions=EvictionConfig(max_consolidation_preemptees=0),
    )
    state = eviction_state(halves(), capped)
    who = preemptor(state, "ns/whole")
    options = victim_options(state, Action.CONSOLIDATE, who)
    order = VictimOrder(state, options, moves=True)
    assert greedy_search(state, Action.CONSOLIDATE, who, options, SearchBudget(5.0), order) is None


def _decision(devices: tuple[str, ...]) -> EvictionDecision:
    return EvictionDecision(
        Action.CONSOLIDATE,
        "ns/whole",
        (Eviction("ns/b-0", "ns/b", "n0", Action.CONSOLIDATE, MOVED, "ns/whole"),),
        (
            PipelinedPod("ns/whole-0", "ns/whole", "n0", ()),
            PipelinedPod("ns/b-0", "ns/b", "n0", devices),
        ),
        "greedy",
    )


def test_the_validator_accepts_a_fraction_moved_to_another_device_only() -> None:
    snap = halves()
    assert EvictionAudit(snap, EngineConfig(), []).check(_decision(("dev-a",))) == []
    problems = EvictionAudit(snap, EngineConfig(), []).check(_decision(("dev-b",)))
    assert any("stays on n0" in p for p in problems)


def elsewhere() -> Snapshot:
    """n0's one device holds a preemptible half (a) where a 1-GPU pod waits; n1's device has a
    half free beside a fixed half (c); n2's device is taken whole by a fixed pod (d). Only
    the victim's share counts on n2's cores and memory, which are free."""
    return snapshot(
        [node(name, gpus=1, gpu_memory_mib=100) for name in ("n0", "n1", "n2")],
        [
            pod("a-0", "a", portion=HALF, node_name="n0", gpu_groups=("dev-a",)),
            pod("c-0", "c", portion=HALF, node_name="n1", gpu_groups=("dev-c",)),
            pod("d-0", "d", 1, node_name="n2"),
            pod("whole-0", "whole", 1),
        ],
        [
            group("a", "q"),
            group("c", "q", preemptible=False),
            group("d", "q", preemptible=False),
            group("whole", "q"),
        ],
        [queue("q")],
    )


def _model(snap: Snapshot, key: str) -> tuple[VictimModel, Answer]:
    state = eviction_state(snap)
    who = preemptor(state, key)
    options = victim_options(state, Action.CONSOLIDATE, who)
    order = VictimOrder(state, options, moves=True)
    built = VictimModel(state, Action.CONSOLIDATE, who, options, order, None)
    answer = cp_sat_search(
        state, Action.CONSOLIDATE, who, options, order, None, SearchBudget(5.0), 1
    )
    return built, answer


def test_the_model_moves_a_share_to_a_device_with_room_on_another_node() -> None:
    _, answer = _model(elsewhere(), "ns/whole")
    assert answer.scenario is not None
    [(moved, where, devices)] = answer.scenario.moves
    assert (moved.key, where, devices) == ("ns/a-0", "n1", ("dev-c",))
    [(seated, seat, _)] = answer.scenario.seats
    assert (seated.key, seat) == ("ns/whole-0", "n0")


def test_the_model_moves_a_share_only_where_a_device_has_room_for_it() -> None:
    built, _ = _model(elsewhere(), "ns/whole")
    # n0 is where the victim leaves; n2 has cores and memory for the share, not a device.
    assert sorted(node for _, node in built.move) == ["n0", "n1"]
