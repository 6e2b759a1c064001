"""Reclaim's shortcut: when the saturation rule refuses every victim, no victim search runs.

`saturation_forbids_all` bounds the rule from the side it cannot be wrong on; these tests
hold it to the rule itself over random queue trees, and the eviction actions to the same
decisions with the shortcut as without it.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from datetime import timedelta
from fractions import Fraction

import pytest

from kai.engine.cycle import run_cycle
from kai.engine.evictions import actions
from kai.engine.evictions.decisions import Action
from kai.engine.evictions.options import VictimOption
from kai.engine.evictions.preemptors import Preemptor
from kai.engine.evictions.reclaim_rules import saturation_forbids_all
from kai.engine.evictions.rules import check, victim_options
from kai.engine.evictions.state import EvictionState
from kai.engine.model import EngineConfig, Pod, PodGroup, Queue, QueueResource, Snapshot
from tests.unit.engine.builders import NOW, UNLIMITED_RESOURCE, group, node, pod, snapshot
from tests.unit.evictions.clusters import departments
from tests.unit.evictions.helpers import eviction_state, preemptor

NODES, GPUS, CORES = 6, 4, 8_000
CONFIG = EngineConfig(time_limit_seconds=1.0, solver_workers=1, reproducible=True)


def _queue(
    name: str, gpu: int, cpu: int, parent: str | None = None, protected: bool = False
) -> Queue:
    """`protected`: its gangs, all started a minute ago, may not be reclaimed for an hour."""
    return Queue(
        name,
        parent,
        gpu=QueueResource(Fraction(gpu), Fraction(-1), Fraction(1)),
        cpu=QueueResource(Fraction(cpu), Fraction(-1), Fraction(1)),
        memory=UNLIMITED_RESOURCE,
        reclaim_min_runtime_seconds=3600.0 if protected else None,
    )


Profile = tuple[tuple[int, int], ...]
PROFILES: tuple[Profile, ...] = (
    ((0, 4000), (1, 6000)),  # mostly cores
    ((2, 1000), (1, 1000)),  # mostly GPUs
    ((1, 2000), (2, 4000)),
)
"""The pods a department runs, (GPUs, millicores): departments that hold mostly one
resource and reclaim the other are where the saturation rule refuses."""


def random_cluster(seed: int) -> Snapshot:
    """Three or four departments of one or two teams of one or two projects, the cluster's
    GPUs and cores held by running gangs of every project, more pending, and `want`."""
    rng = random.Random(seed)
    departments = rng.choice((3, 4))
    queues: list[Queue] = []
    runs: list[tuple[str, Profile]] = []  # project, its pods' shapes
    gpu_quotas = _split(rng, NODES * GPUS, departments)
    core_quotas = _split(rng, NODES * CORES // 1000, departments)
    for d, (gpus, cores) in enumerate(zip(gpu_quotas, core_quotas, strict=True)):
        queues.append(_queue(f"dept-{d}", gpus, cores * 1000))
        profile = rng.choice(PROFILES)
        for t in range(rng.choice((1, 2))):
            team = f"dept-{d}-t{t}"
            queues.append(_queue(team, 0, 0, f"dept-{d}"))
            for p in range(rng.choice((1, 2))):
                name = f"{team}-p{p}"
                runs.append((name, profile))
                queues.append(_queue(name, 0, 0, team, protected=rng.random() < 0.7))
    free = {f"n{i}": [GPUS, CORES] for i in range(NODES)}
    groups: list[PodGroup] = []
    pods: list[Pod] = []
    for g in range(rng.randint(8, 16)):
        name = f"run-{g}"
        project, profile = rng.choice(runs)
        asks = [rng.choice(profile) for _ in range(rng.choice((1, 1, 2)))]
        seats = []
        for gpus, cpu in asks:
            seat = next((n for n, (g_, c) in free.items() if g_ >= gpus and c >= cpu), None)
            if seat is None:
                break
            free[seat][0] -= gpus
            free[seat][1] -= cpu
            seats.append(seat)
        if len(seats) < len(asks):
            continue  # the cluster is full: a gang runs whole or not at all
        started = group(name, project, min_member=len(asks))
        groups.append(dataclasses.replace(started, last_start=NOW - timedelta(minutes=1)))
        pods += [
            pod(f"{name}-{i}", name, gpus, cpu=cpu, memory=0, node_name=seat)
            for i, ((gpus, cpu), seat) in enumerate(zip(asks, seats, strict=True))
        ]
    for g in range(rng.randint(10, 20)):  # more than fits: allocation fills the rest first
        name = f"more-{g}"
        project, profile = rng.choice(runs)
        groups.append(group(name, project))
        gpus, cpu = rng.choice(profile)
        pods.append(pod(f"{name}-0", name, gpus + 1, cpu=cpu, memory=0))
    want = rng.choice((1, 2))
    groups.append(group("want", rng.choice(runs)[0], min_member=want))
    gpus, cpu = rng.randint(1, 2), rng.choice((0, 2, 4, 6)) * 1000
    pods += [pod(f"want-{i}", "want", gpus, cpu=cpu, memory=0) for i in range(want)]
    nodes = [node(name, gpus=GPUS, cpu=CORES) for name in free]
    return snapshot(nodes, pods, groups, queues)


def _split(rng: random.Random, total: int, parts: int) -> list[int]:
    """`total` in `parts` random whole amounts: the departments' quotas share it all out."""
    cuts = sorted(rng.sample(range(1, total), parts - 1))
    return [b - a for a, b in zip([0, *cuts], [*cuts, total], strict=True)]


def _victim_sets(options: list[VictimOption]) -> list[dict[str, frozenset[str]]]:
    """Every non-empty set of whole victim gangs."""
    return [
        {option.gang.key: frozenset(p.key for p in option.gang.pods) for option in chosen}
        for size in range(1, len(options) + 1)
        for chosen in itertools.combinations(options, size)
    ]


def test_it_forbids_only_what_the_rule_refuses_in_random_cycles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Asked inside the cycle, after allocation has brought the queues near their fair
    shares (where the rule refuses), every victim set it forbids is one `check` refuses."""
    answers = {True: 0, False: 0}
    refused_for_saturation = 0

    def checked(state: EvictionState, who: Preemptor, options: list[VictimOption]) -> bool:
        nonlocal refused_for_saturation
        forbids = saturation_forbids_all(state, who, options)
        answers[forbids] += 1
        if forbids and len(options) <= 8:
            by_key = {option.gang.key: option for option in options}
            for evicted in _victim_sets(options):
                verdict = check(state, Action.RECLAIM, who, by_key, evicted)
                assert not verdict.ok, (who.key, sorted(evicted))
                refused_for_saturation += "saturated" in (verdict.problem or "")
        return forbids

    monkeypatch.setattr(actions, "saturation_forbids_all", checked)
    for seed in range(200):
        run_cycle(random_cluster(seed), CONFIG)
    # Neither answer is vacuous, and the rule itself refused what was forbidden.
    assert answers[True] >= 20 and answers[False] >= 100, answers
    assert refused_for_saturation >= 100, refused_for_saturation


def test_the_departments_cluster_is_forbidden_only_when_the_reclaimer_asks_for_cores() -> None:
    for cpu_ask, forbids in ((2000, True), (0, False)):
        state = eviction_state(departments(cpu_ask))
        who = preemptor(state, "ns/want")
        options = victim_options(state, Action.RECLAIM, who)
        assert options
        assert saturation_forbids_all(state, who, options) is forbids


def test_the_cycle_decides_the_same_with_the_shortcut_as_without(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fired = 0

    def counted(state: EvictionState, who: Preemptor, options: list[VictimOption]) -> bool:
        nonlocal fired
        found = saturation_forbids_all(state, who, options)
        fired += found
        return found

    for seed in range(200):
        cluster = random_cluster(seed)
        monkeypatch.setattr(actions, "saturation_forbids_all", counted)
        with_it = run_cycle(cluster, CONFIG)
        monkeypatch.setattr(actions, "saturation_forbids_all", lambda *args: False)
        without = run_cycle(cluster, CONFIG)
        assert with_it.evictions == without.evictions, seed
        assert with_it.pipelined == without.pipelined, seed
        assert with_it.bindings == without.bindings, seed
    assert fired >= 10, fired
