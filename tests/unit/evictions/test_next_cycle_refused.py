"""The look at the next cycle leaves out the gangs the next cycle refuses for a queue's cap.

The next cycle refuses a gang whose core is over its queue's limit (or non-preemptible
quota) before it offers any room, so such a gang never stands for its queue in the queue
order. The look offered it: its queue then ranked by an ask it could not have and came
after its siblings, whose gangs took the room a reclaim freed, so the victims seemed
unable to come back. On the 100-node synthetic cluster they came back every other cycle,
ahead of their reclaimers, and were reclaimed again.
"""

from __future__ import annotations

from collections import Counter

from bench.synthetic import ClusterSpec, synthetic_cluster
from kai.engine.evictions.next_cycle import _readmitted
from kai.engine.model import EngineConfig
from kai.engine.resources import Resources
from kai.simulate.rounds import simulate
from tests.unit.engine.builders import group, node, pod, queue, snapshot
from tests.unit.evictions.helpers import eviction_state, preemptor


def test_reclaims_on_the_synthetic_cluster_settle_and_take_no_pod_twice() -> None:
    """Ten rounds as `kai simulate` runs them (greedy only, which ping-ponged as the solver
    did): 4 pods were evicted two to four times, and rounds 6-10 still evicted."""
    rounds = simulate(
        synthetic_cluster(ClusterSpec(100, 1000, 1)), 10, EngineConfig(time_limit_seconds=0)
    ).rounds
    evicted = Counter(eviction.pod for result in rounds for eviction in result.evictions)
    assert evicted and max(evicted.values()) == 1, evicted.most_common(4)
    assert [len(result.evictions) for result in rounds[5:]] == [0] * 5


def test_a_gang_over_its_queue_limit_is_left_out_unless_its_queue_was_freed() -> None:
    """`capped` (limit 4 GPUs) runs `held` on its 4 GPUs and waits with `big` (4 GPUs);
    `claim` waits in `claimant`; `loose` runs `victim`."""
    groups = [
        group("held", "capped"),
        group("big", "capped"),
        group("victim", "loose"),
        group("claim", "claimant"),
    ]
    pods = [
        pod("held-0", "held", 4, cpu=0, memory=0, node_name="n0"),
        pod("victim-0", "victim", 4, cpu=0, memory=0, node_name="n1"),
        pod("big-0", "big", 4, cpu=0, memory=0),
        pod("claim-0", "claim", 4, cpu=0, memory=0),
    ]
    queues = [queue("capped", gpu_limit=4), queue("loose"), queue("claimant")]
    state = eviction_state(snapshot([node("n0", 4), node("n1", 4)], pods, groups, queues))
    assert [gang.key for gang, _ in state.over_caps()] == ["ns/big"]
    assert "ns/big" not in state.pending_offers() and "ns/claim" in state.pending_offers()
    claim = preemptor(state, "ns/claim")
    ledger = state.ledger.copy()
    assert _readmitted(state, ledger, claim, ["ns/victim"]) == []
    # With `held` leaving, `capped` is under its limit again: `big` may come back.
    ledger.add("capped", Resources() - state.usage["ns/held-0"], True)
    assert [gang.key for gang in _readmitted(state, ledger, claim, ["ns/held"])] == ["ns/big"]
