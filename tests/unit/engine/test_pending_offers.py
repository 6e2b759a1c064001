"""A pass started from `PendingOffers` offers what one with every gang pushed offers, in the same order.

The eviction actions' look at the next cycle runs one greedy pass per decision over every
gang still pending; they keep those gangs' first offers in heaps (`PendingOffers`) and
start each pass from a copy, less the gangs the decision evicts from (offered again with
their evicted pods pending). The order of attempts decides which gang is bound first, so
the copy must give exactly the order of pushing the same gangs one by one.
"""

from __future__ import annotations

import random

from kai.engine.accounting import pods_by_group
from kai.engine.capacity import initial_capacity
from kai.engine.gangs import GangRequest, build_gang_requests
from kai.engine.greedy import AllocationOutcome, allocate_on_index
from kai.engine.job_order import PendingOffers
from kai.engine.model import Pod, PodGroup, Snapshot
from tests.unit.engine.builders import group, node, pod, queue, snapshot
from tests.unit.engine.passes import order_and_ledger


def _cluster(seed: int) -> Snapshot:
    """Gangs of mixed priority, size and elasticity in four leaf queues under two parents,
    on too few GPUs for all of them, so that queues re-rank as they are served."""
    rng = random.Random(seed)
    queues = [queue("a"), queue("b", gpu_quota=6), queue("a1", "a"), queue("a2", "a", gpu_limit=5)]
    queues += [queue("b1", "b", weight=3), queue("b2", "b")]
    groups: list[PodGroup] = []
    pods: list[Pod] = []
    for number in range(24):
        name = f"g{number}"
        size = rng.randint(1, 4)
        minimum = rng.randint(1, size)
        groups.append(
            group(name, rng.choice(["a1", "a2", "b1", "b2"]), minimum, rng.choice([50, 100]))
        )
        pods += [pod(f"{name}-{i}", name, gpus=rng.randint(0, 2)) for i in range(size)]
    return snapshot([node(f"n{i}", gpus=4) for i in range(4)], pods, groups, queues)


def _pass(
    snap: Snapshot, gangs: list[GangRequest], pending: PendingOffers | None, without: set[str]
) -> AllocationOutcome:
    order, ledger = order_and_ledger(snap)
    index = order.node_index(initial_capacity(snap.nodes, snap.pods))
    return allocate_on_index(gangs, index, ledger, order, None, pending, without)


def test_a_copy_less_some_gangs_offers_as_pushing_them_one_by_one() -> None:
    for seed in range(20):
        snap = _cluster(seed)
        gangs = build_gang_requests(snap.pod_groups, pods_by_group(snap))
        rng = random.Random(seed)
        apart = {gang.key for gang in rng.sample(gangs, 5)}  # offered anew, as victims are
        pending = PendingOffers(gangs)
        pushed = _pass(snap, gangs, None, set())
        started = _pass(snap, [g for g in gangs if g.key in apart], pending, apart)
        assert started.offers == pushed.offers, seed
        assert started.placements == pushed.placements, seed
        assert len(pushed.admitted) < len(gangs)  # the queues competed for too few GPUs


def test_a_discarded_gang_is_not_offered_and_the_heaps_are_not_used_up() -> None:
    snap = _cluster(7)
    gangs = build_gang_requests(snap.pod_groups, pods_by_group(snap))
    pending = PendingOffers(gangs)
    gone = {gangs[0].key, gangs[3].key}
    pending.discard(gone)
    rest = [gang for gang in gangs if gang.key not in gone]
    expected = _pass(snap, rest, None, set())
    for _ in range(2):  # a pass pops a copy: the next one starts from every gang again
        outcome = _pass(snap, [], pending, set())
        assert outcome.offers == expected.offers
        assert not gone & {key for key, _ in outcome.offers}
    assert gangs[0].key not in pending and gangs[1].key in pending
