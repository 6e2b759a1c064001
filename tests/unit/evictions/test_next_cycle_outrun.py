"""A reclaim is made only if the next cycle would place its reclaimer.

KAI checks each victim set with a virtual allocation, in job order, of the preemptor and of
every other pending job, and commits it only if the preemptor is allocated (kai-semantics
§8.6). kai's look at the next cycle once refused a decision only when a victim came back
before the preemptor: a gang ahead of the reclaimer that could not reclaim for itself took
the room instead, the victims left for nothing and the reclaimer asked again a cycle later.
Over ten rounds on the engine benchmark's 500-node cluster that evicted 112 pods where
this rule evicts 2, with the queues below their fair share closer to it at the end.
"""

from __future__ import annotations

from kai.engine.cycle import run_cycle
from kai.engine.evictions.budget import SearchBudget
from kai.engine.evictions.decisions import Action
from kai.engine.evictions.greedy_search import greedy_search
from kai.engine.evictions.next_cycle import NextCycle, next_cycle
from kai.engine.evictions.rules import victim_options
from kai.engine.model import EngineConfig, Snapshot
from tests.unit.engine.builders import group, node, pod, queue, snapshot
from tests.unit.evictions.helpers import eviction_state, preemptor


def _overtaken() -> Snapshot:
    """One 4-GPU node runs `borrowed` (queue `lender`, deserving nothing). Queue `team`
    deserves 2 GPUs and waits with `big` (4 GPUs, first in its job order: a higher priority)
    and `small` (2 GPUs). `big` would take `team` past its fair share, so it cannot reclaim;
    `small` can, but the next cycle offers `big` the freed node first."""
    groups = [
        group("borrowed", "lender"),
        group("big", "team", priority=100),
        group("small", "team", priority=50),
    ]
    pods = [
        pod("borrowed-0", "borrowed", 4, cpu=0, memory=0, node_name="n0"),
        pod("big-0", "big", 4, cpu=0, memory=0),
        pod("small-0", "small", 2, cpu=0, memory=0),
    ]
    queues = [queue("lender", gpu_quota=0), queue("team", gpu_quota=2)]
    return snapshot([node("n0", 4)], pods, groups, queues)


def test_the_look_finds_the_reclaimer_overtaken() -> None:
    state = eviction_state(_overtaken())
    small = preemptor(state, "ns/small")
    options = victim_options(state, Action.RECLAIM, small)
    scenario = greedy_search(state, Action.RECLAIM, small, options, SearchBudget(1.0))
    assert scenario is not None and set(scenario.evicted) == {"ns/borrowed"}
    look = next_cycle(state, small, scenario)
    assert (look.verdict, look.first) == (NextCycle.OUTRUN, "ns/big")


def test_no_pod_is_evicted_for_a_reclaimer_the_next_cycle_would_not_place() -> None:
    result = run_cycle(_overtaken(), EngineConfig(time_limit_seconds=0))
    assert result.evictions == ()
    small, big = result.groups["ns/small"], result.groups["ns/big"]
    assert not small.scheduled and not big.scheduled
    # Its PodGroup says what reclaim could do and why it did not.
    assert "reclaim could free room by evicting 1 pod(s) of ns/borrowed" in small.message
    assert "the next cycle would place ns/big, ahead of it in KAI's order" in small.message
