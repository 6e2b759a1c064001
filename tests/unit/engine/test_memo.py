"""The memo carried between cycles gives, for every snapshot, what a cold pass over its pods gives.

The oracle is the engine's cold functions (`initial_capacity`, `divisible_total`,
`leaf_usage`, `pods_by_group`, `workload_of`), which read every pod of the snapshot;
the memo sees the same snapshots one after the other, each a random change of the last
(pods arriving, bound, released, deleted or replaced; groups moving queue, losing
preemptibility or naming a Topology, appearing and disappearing; nodes changing device
memory, readiness, labels or taints, joining and leaving; other schedulers' pods), as the
operator's cache hands them over. Which nodes accept each pod's placement, which the memo
keeps for the placements the last cycle asked about, is checked against a fresh index, and
the cluster's cores per GPU against a fresh count.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator, Mapping
from datetime import timedelta
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from kai.engine.accounting import divisible_total, leaf_usage, pods_by_group, queue_shares
from kai.engine.budget import leaf_names
from kai.engine.capacity import NodeCapacity, initial_capacity
from kai.engine.cpu_balance import CpuBalance
from kai.engine.cycle import EngineInvariantError, run_cycle
from kai.engine.eligibility import EligibilityIndex
from kai.engine.evictions.stale import may_be_stale
from kai.engine.fragmentation import workload_of
from kai.engine.memo import PodFacts, SnapshotMemo
from kai.engine.model import (
    EngineConfig,
    Placement,
    Pod,
    PodAffinityTerm,
    PodPhase,
    SetAside,
    Snapshot,
    Taint,
    Toleration,
    TopologyConstraint,
)
from kai.engine.queue_refusal import queue_refusal
from kai.engine.snapshot_changes import Changes, SnapshotChanges
from kai.engine.topology import constrained
from tests.unit.engine.builders import group, node, pod, queue, snapshot, told

QUEUES = ("team-a", "team-b")
QUEUE_TREES = (
    tuple(queue(name) for name in QUEUES),
    (queue("team-a"),),
    (*(queue(name) for name in QUEUES), queue("team-a-1", parent="team-a")),
)


TAINT = Taint("dedicated", "train", "NoSchedule")
PLACEMENTS = (
    Placement(),
    Placement(node_selector=(("zone", "a"),)),
    Placement(tolerations=(Toleration("dedicated", "Exists", None, None),)),
    Placement(
        node_selector=(("zone", "b"),), tolerations=(Toleration(None, "Exists", None, None),)
    ),
)


def _start() -> Snapshot:
    return snapshot(
        [node("n0"), node("n1", gpus=4, gpu_memory_mib=80_000), node("n2", gpus=0)],
        [pod("p0", "g0", gpus=1, node_name="n0"), pod("p1", "g0", portion=Fraction(1, 2))],
        [group("g0", "team-a")],
        [queue(name) for name in QUEUES],
    )


def _pod_of(draw: st.DrawFn, state: Snapshot, serial: int) -> Pod:
    nodes = [n.name for n in state.nodes] + ["gone-node"]
    groups = [g.name for g in state.pod_groups] + ["no-such-group"]
    kind = draw(st.sampled_from(["whole", "portion", "memory", "cpu"]))
    on = draw(st.none() | st.sampled_from(nodes))
    phase = PodPhase.PENDING
    if on is not None:
        phase = draw(st.sampled_from([PodPhase.BOUND, PodPhase.RELEASING]))
    elif draw(st.booleans()):
        phase = draw(st.sampled_from([PodPhase.SUCCEEDED, PodPhase.FAILED, PodPhase.GATED]))
    named = on is not None and kind != "whole" and draw(st.booleans())
    made = pod(
        f"p{serial}",
        draw(st.sampled_from(groups)),
        gpus=draw(st.integers(1, 2)) if kind == "whole" else 0,
        cpu=draw(st.sampled_from([500, 1000, 3000])),
        portion=Fraction(draw(st.integers(1, 3)), 4) if kind == "portion" else Fraction(0),
        memory_mib=draw(st.sampled_from([5_000, 20_000])) if kind == "memory" else 0,
        devices=draw(st.integers(1, 2)) if kind in ("portion", "memory") else 1,
        node_name=on,
        gpu_groups=(f"dev-{on}-{draw(st.integers(0, 2))}",) if named else (),
        ours=draw(st.integers(0, 4)) > 0,
        phase=phase,
        placement=draw(st.sampled_from(PLACEMENTS)),
    )
    terms = draw(st.sampled_from([(), (PodAffinityTerm(True, "zone", (("app", "a"),)),)]))
    return dataclasses.replace(made, pod_terms=terms)


@st.composite
def _changed(draw: st.DrawFn, state: Snapshot, serial: int) -> Snapshot:
    change = draw(
        st.sampled_from(
            ["add", "add", "add", "bind", "delete", "replace", "regroup", "group", "node", "queues"]
        )
    )
    pods, groups, nodes = list(state.pods), list(state.pod_groups), list(state.nodes)
    queues = state.queues
    if change == "queues":  # a queue goes, or a leaf becomes a parent
        queues = draw(st.sampled_from(QUEUE_TREES))
    elif change == "add" or not pods:
        pods.append(_pod_of(draw, state, serial))
    elif change == "bind":
        at = draw(st.integers(0, len(pods) - 1))
        target = draw(st.sampled_from([n.name for n in nodes]))
        pods[at] = dataclasses.replace(pods[at], phase=PodPhase.BOUND, node=target)
    elif change == "delete":
        del pods[draw(st.integers(0, len(pods) - 1))]
    elif change == "replace":  # a new object for the same pod (a new resourceVersion)
        at = draw(st.integers(0, len(pods) - 1))
        pods[at] = dataclasses.replace(pods[at])
    elif change == "regroup" and groups:
        at = draw(st.integers(0, len(groups) - 1))
        groups[at] = dataclasses.replace(
            groups[at],
            queue=draw(st.sampled_from(QUEUES)),
            preemptible=draw(st.booleans()),
            topology=draw(st.none() | st.just(TopologyConstraint("racks", "rack"))),
            min_member=draw(st.integers(1, 2)),
            stale_since=draw(st.none() | st.just(state.now)),
        )
    elif change == "group":
        name = f"g{draw(st.integers(0, 3))}"
        present = [g for g in groups if g.name == name]
        if present:
            groups.remove(present[0])
        else:
            groups.append(group(name, draw(st.sampled_from(QUEUES))))
    else:
        at = draw(st.integers(0, len(nodes)))
        if at == len(nodes):
            nodes.append(node(f"n{serial}", gpus=draw(st.sampled_from([0, 2, 8]))))
        elif draw(st.booleans()) and len(nodes) > 1:
            del nodes[at]
        else:
            nodes[at] = dataclasses.replace(
                nodes[at],
                gpu_memory_mib=draw(st.sampled_from([40_000, 80_000])),
                ready=draw(st.booleans()),
                labels=draw(st.sampled_from([(), (("zone", "a"),), (("zone", "b"),)])),
                taints=draw(st.sampled_from([(), (TAINT,)])),
            )
    return dataclasses.replace(
        state,
        pods=tuple(pods),
        pod_groups=tuple(groups),
        nodes=tuple(nodes),
        queues=queues,
        now=state.now + timedelta(seconds=1),
    )


def _free(capacity: Mapping[str, NodeCapacity]) -> dict[str, tuple[object, ...]]:
    return {
        name: (cap.cpu, cap.memory, cap.pods, cap.whole_gpus, cap.shared, cap.opened, cap.cycle)
        for name, cap in capacity.items()
    }


def _assert_as_cold(facts: PodFacts, state: Snapshot) -> None:
    cold = initial_capacity(state.nodes, state.pods, state.now.isoformat())
    assert list(facts.capacity) == list(cold)  # the snapshot's node order
    assert _free(facts.capacity) == _free(cold)
    assert facts.total == divisible_total(state)
    assert facts.usage == leaf_usage(state)
    # kinds of one shape come in the order counted: the measure's whole-number sums ignore it
    assert Counter(facts.workload) == Counter(
        workload_of(p for p in state.pods if p.scheduler_is_ours)
    )
    members = pods_by_group(state)
    for key in facts.members:
        assert facts.members[key] == sorted(members[key], key=lambda p: p.key)
    waiting = {
        p.group
        for p in state.pods
        if p.scheduler_is_ours and p.phase is PodPhase.PENDING and p.group in members
    }
    assert waiting <= set(facts.members)
    assert facts.topology_constrained == any(constrained(g) for g in state.pod_groups)
    assert facts.pod_terms == any(p.pod_terms for p in state.pods)
    assert facts.may_be_stale == sorted(
        (g for g in state.pod_groups if may_be_stale(g)), key=lambda g: g.key
    )


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_the_memo_sees_each_snapshot_as_a_cold_pass_does(data: st.DataObject) -> None:
    memo = SnapshotMemo()
    state = _start()
    for serial in range(data.draw(st.integers(1, 25))):
        state = data.draw(_changed(state, 100 + serial))
        _assert_as_cold(memo.facts(state), state)
        _assert_partition_as_cold(memo, state)
        _assert_eligibility_as_cold(memo, state, data.draw(st.sets(st.sampled_from(PLACEMENTS))))
        assert memo.cpu_balance().millis_per_gpu == CpuBalance(state.nodes).millis_per_gpu
        assert memo.queue_shares(state) == queue_shares(state)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_a_memo_told_what_changed_sees_each_snapshot_as_a_cold_pass_does(
    data: st.DataObject,
) -> None:
    """The live scheduler's snapshots say what changed since the one before; the memo reads
    only that when the account names the tuples it saw last, and compares everything when
    it does not (a snapshot skipped, an account of another lineage)."""
    memo = SnapshotMemo()
    for state in told_states(data):
        _assert_as_cold(memo.facts(state), state)
        _assert_partition_as_cold(memo, state)
        assert memo.queue_shares(state) == queue_shares(state)


def told_states(data: st.DataObject) -> Iterator[Snapshot]:
    """Snapshots each a random change of the last, told what changed since it or, now and
    then, since an earlier one (another lineage, which a reader must not read)."""
    state = _start()
    earlier = [state]
    for serial in range(data.draw(st.integers(1, 25))):
        after = data.draw(_changed(state, 100 + serial))
        since = data.draw(st.sampled_from([state, state, state, earlier[0]]))
        state = told(since, after)
        earlier = [*earlier[-3:], state]
        yield state


def test_an_account_that_disagrees_with_what_the_memo_saw_is_not_used() -> None:
    """Its tuples are the right ones, but it names a pod, a group and a node as they
    never were: the memo compares everything instead (and does not fail the cycle)."""
    memo = SnapshotMemo()
    first = snapshot(
        nodes=[node("n0", gpus=8)], pods=[pod("a", group="g")], groups=[group("g", "q")],
        queues=[queue("q")],
    )  # fmt: skip
    memo.facts(first)
    second = dataclasses.replace(
        first,
        pods=(pod("a", group="g", phase=PodPhase.BOUND, node_name="n0"),),
        pod_groups=(group("g", "q"),),
        nodes=(node("n0", gpus=4),),
    )
    exact = told(first, second).changes
    assert exact is not None and exact.pods and exact.pod_groups and exact.nodes
    never = pod("never", group="g")
    wrong = SnapshotChanges(
        *(
            Changes(c.since, c.now, {key: (never, now) for key, (_, now) in c.changed.items()})
            for c in (exact.pods, exact.pod_groups, exact.nodes)
        )
    )
    state = dataclasses.replace(second, changes=wrong)
    _assert_as_cold(memo.facts(state), state)
    assert memo.queue_shares(state) == queue_shares(state)


def _assert_eligibility_as_cold(memo: SnapshotMemo, state: Snapshot, asked: set[Placement]) -> None:
    """The memo's index answers as a fresh one for every pod; the cycle asks about the
    placements of its pods and some others (`asked`), which the next one keeps."""
    index, cold = memo.eligibility(), EligibilityIndex(state.nodes)
    for p in state.pods:
        assert index.nodes_for(p) == cold.nodes_for(p), p.placement
        assert type(index.nodes_for(p)) is frozenset  # searches gather node sets in sets
    for serial, placement in enumerate(asked):
        probe = pod(f"probe-{serial}", "g0", placement=placement)
        assert index.nodes_for(probe) == cold.nodes_for(probe), placement


def _assert_partition_as_cold(memo: SnapshotMemo, state: Snapshot) -> None:
    names, leaves = {q.name for q in state.queues}, leaf_names(state.queues)
    partition = memo.partition(names, leaves)
    members = pods_by_group(state)
    for g in state.pod_groups:
        refusal = queue_refusal(g, names, leaves)
        if refusal is not None:
            decision = partition.refused[g.key]
            assert (decision.reason, decision.queue) == (refusal.reason, g.queue)
        elif any(p.phase is PodPhase.PENDING for p in members.get(g.key, ())):
            assert g in partition.waiting
        else:
            assert partition.scheduled[g.key].scheduled
            assert partition.scheduled[g.key].queue == g.queue
    parts = (partition.refused, partition.scheduled, partition.waiting)
    assert sum(map(len, parts)) == len(state.pod_groups)
    assert [g.key for g in partition.waiting] == sorted(g.key for g in partition.waiting)


def test_what_a_cycle_does_to_its_facts_does_not_reach_the_memo() -> None:
    """The capacity a memo hands out is its own (passes copy a node before they write it):
    a cycle that places pods, gangs and a lone pod, in its greedy pass, the solver's answer
    and its explanations, leaves it as it was."""
    memo = SnapshotMemo()
    state = dataclasses.replace(
        _start(),
        pods=(
            *_start().pods,
            pod("w0", "g1", gpus=2),
            pod("w1", "g1", gpus=2),
            pod("big", "g2", gpus=8),  # fits nowhere: explained against what is left
        ),
        pod_groups=(
            *_start().pod_groups,
            group("g1", "team-b", min_member=2),
            group("g2", "team-a"),
        ),
    )
    facts = memo.facts(state)
    facts.members["ns/g0"].clear()
    result = run_cycle(state, EngineConfig(time_limit_seconds=1), memo)
    assert {b.pod for b in result.bindings} >= {"ns/p1", "ns/w0", "ns/w1"}
    assert not result.groups["ns/g2"].scheduled
    _assert_as_cold(memo.facts(state), state)


def test_cycles_with_a_memo_decide_as_cycles_without() -> None:
    memo = SnapshotMemo()
    state = _start()
    config = EngineConfig(time_limit_seconds=0)
    for serial in range(12):
        arriving = pod(f"q{serial}", "g0", gpus=1 + serial % 2, cpu=2000)
        state = dataclasses.replace(
            state, pods=(*state.pods, arriving), now=state.now + timedelta(seconds=1)
        )
        warm, cold = run_cycle(state, config, memo), run_cycle(state, config)
        assert warm.bindings == cold.bindings
        assert warm.groups == cold.groups
        assert warm.queues == cold.queues
        bound = {b.pod: b for b in warm.bindings}
        state = dataclasses.replace(
            state,
            pods=tuple(
                dataclasses.replace(
                    p,
                    phase=PodPhase.BOUND,
                    node=bound[p.key].node,
                    gpu_groups=bound[p.key].gpu_groups,
                )
                if p.key in bound
                else p
                for p in state.pods
            ),
        )
    assert sum(p.phase is PodPhase.BOUND for p in state.pods) >= 8  # the cluster did fill


def test_a_cycle_after_a_node_changed_can_evict_with_a_memo() -> None:
    """The memo's node sets stay frozensets when a node changes: the victim search gathers
    them in a set, and a mutable one failed the cycle with a TypeError."""
    memo = SnapshotMemo()
    state = snapshot(
        [node("n0", gpus=2), node("n1", gpus=0)],
        [pod("low", "low", gpus=2, node_name="n0"), pod("peer", "peer", gpus=2)],
        [
            group("low", "team-a", priority=10),
            group("peer", "team-a", priority=10),  # asks where it fits, may not evict
            group("high", "team-a", priority=200),
        ],
        [queue("team-a")],
    )
    config = EngineConfig(time_limit_seconds=0)
    run_cycle(state, config, memo)
    changed = dataclasses.replace(
        state,
        nodes=(state.nodes[0], node("n1", gpus=0, labels={"zone": "a"})),
        pods=(*state.pods, pod("urgent", "high", gpus=2)),
        now=state.now + timedelta(seconds=1),
    )
    result = run_cycle(changed, config, memo)
    assert [e.pod for e in result.evictions] == ["ns/low"]


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_a_cycles_account_of_its_decisions_names_every_group_whose_decision_is_new(
    data: st.DataObject,
) -> None:
    """`CycleResult.changes` against the last result of the same memo: every group it
    does not name has the very decision object it had (a reader skips it), over random
    changes, groups set aside for a cycle, and cycles that fail after sorting the groups
    (their groups sorted anew go into the next account)."""
    memo = SnapshotMemo()
    state = _start()
    config = EngineConfig(time_limit_seconds=0)
    last: Mapping[str, object] | None = None
    as_returned: dict[str, object] = {}
    for serial in range(data.draw(st.integers(1, 20))):
        state = data.draw(_changed(state, 100 + serial))
        keys = sorted(g.key for g in state.pod_groups)
        aside = data.draw(st.sets(st.sampled_from(keys), max_size=1)) if keys else set()
        state = dataclasses.replace(
            state, set_aside=tuple(SetAside(key, "team-a", "Broken", "x") for key in aside)
        )
        if data.draw(st.integers(0, 5)) == 0:  # a cycle that raises once the groups are sorted
            memo.facts(state)
            memo.partition({q.name for q in state.queues}, leaf_names(state.queues))
            continue
        try:
            result = run_cycle(state, config, memo)
        except EngineInvariantError:  # a random state the validator refuses: a failed cycle
            continue
        # None: the memo started over (the device size pending requests count against).
        assert result.changes.since is last or result.changes.since is None
        if last is not None:  # a later cycle leaves an earlier result as it was
            assert dict(last) == as_returned
        if result.changes.since is not None:
            assert last is not None
            for key in (set(last) | set(result.groups)) - result.changes.keys:
                assert key in last and key in result.groups, key
                assert result.groups[key] is last[key], key
        last, as_returned = result.groups, dict(result.groups)


def test_a_steady_cycles_account_names_only_the_groups_it_decided() -> None:
    """One pod arriving beside many scheduled groups: the account names the arrival's
    group and the last cycle's, not the rest; a cycle without a memo knows of no earlier."""
    running = [pod(f"r{i}", f"s{i}", gpus=1, node_name="n0") for i in range(6)]
    state = snapshot(
        [node("n0", gpus=8)],
        running,
        [group(f"s{i}", "team-a") for i in range(6)],
        queues=[queue("team-a")],
    )
    memo, config = SnapshotMemo(), EngineConfig(time_limit_seconds=0)
    first = run_cycle(state, config, memo)
    assert first.changes.since is None
    arriving = dataclasses.replace(
        state,
        pods=(*state.pods, pod("new", "w", gpus=1)),
        pod_groups=(*state.pod_groups, group("w", "team-a")),
    )
    second = run_cycle(arriving, config, memo)
    assert second.changes.keys_since(first.groups) == {"ns/w"}
    assert second.changes.keys_since(dict(first.groups)) is None  # another mapping: read all
    again = run_cycle(
        dataclasses.replace(arriving, now=arriving.now + timedelta(seconds=1)), config, memo
    )
    assert again.changes.keys_since(second.groups) == {"ns/w"}  # the last cycle's, decided anew
    assert again.groups["ns/s0"] is first.groups["ns/s0"]
    assert run_cycle(arriving, config).changes.since is None
