"""An independent re-check of every allocation and eviction before it leaves the engine.

The solver, the decoder and the greedy pass share capacity code; this module does
not. It recomputes node usage, device memory, gang sizes and queue totals from the
snapshot and the proposed bindings alone, with plain loops. Its node predicates
(`validator_nodes`) and its queue accounting and fair shares (`validator_shares`) are
its own too: it imports only the engine's data types, never a module that holds an
engine rule (a unit test parses the imports to keep it that way). The eviction audit does
the same for victims: KAI's reclaim, preempt, consolidation and staleness rules are
re-derived here, apart from the code that searched for the victims. Any violation it
finds is a bug in the engine: the cycle falls back to a checked answer and tests fail.
"""

from __future__ import annotations

import dataclasses
import operator
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Protocol

from kai.engine.evictions.decisions import Action, EvictionDecision
from kai.engine.model import (
    UNLIMITED,
    EngineConfig,
    Node,
    PlacementStrategy,
    Pod,
    PodGroup,
    PodPhase,
    Queue,
    ReclaimResolveMethod,
    Snapshot,
)
from kai.engine.object_index import ObjectIndex
from kai.engine.resources import ResourceName, Resources
from kai.engine.validator_nodes import may_run_on, mig_mode_refuses
from kai.engine.validator_pod_affinity import pod_affinity_problems
from kai.engine.validator_shares import (
    Entitlement,
    entitlements,
    exact_sum,
    pending_device_memory,
)
from kai.engine.validator_topology import topology_problems


@dataclass(frozen=True)
class ProposedBinding:
    pod: str
    node: str
    gpu_groups: tuple[str, ...]


def validate(
    snapshot: Snapshot, bindings: Iterable[ProposedBinding], index: ObjectIndex | None = None
) -> list[str]:
    """Every rule a binding set breaks, one line each; empty when it is sound.

    Only what the bindings touch is looked at (their pods, nodes, PodGroups), through
    `index` (`object_index`), brought to this snapshot: most cycles bind a pod or two
    beside thousands running. Without bindings no rule can be broken, so a cycle that
    binds nothing (on a busy cluster every other one, the echo of a bind) returns once
    the index is brought up to date. Without an index, one is built."""
    bindings = list(bindings)
    if index is not None:
        index.update(snapshot)  # also without bindings: the next update is told what changed
    if not bindings:
        return []
    if index is None:
        index = ObjectIndex.of(snapshot)
    pods = index.pods
    nodes = {node.name: node for node in snapshot.nodes}
    new: list[tuple[Pod, ProposedBinding]] = []
    problems: list[str] = []
    for binding in bindings:
        pod = pods.get(binding.pod)
        node = nodes.get(binding.node)
        if pod is None or node is None:
            problems.append(f"binding {binding.pod} -> {binding.node}: unknown pod or node")
            continue
        if pod.phase is not PodPhase.PENDING:
            problems.append(f"pod {pod.key} is not pending ({pod.phase.value})")
        if not may_run_on(node, pod.placement) or mig_mode_refuses(node, pod):
            problems.append(f"pod {pod.key} may not run on node {node.name}")
        if pod.unhonoured is not None:
            problems.append(f"pod {pod.key} is bound with {pod.unhonoured}, which kai cannot keep")
        if pod.waits_for is not None:
            problems.append(f"pod {pod.key} is bound while it waits: {pod.waits_for.message}")
        new.append((pod, binding))
    problems += _check_nodes(snapshot, new, index)
    problems += _check_gangs(snapshot, new, index)
    problems += _check_queues(snapshot, new)
    if any(map(_POD_TERMS, pods.values())):  # map: this pass over every pod is in every cycle
        bound = [(pod, binding.node) for pod, binding in new]
        problems += pod_affinity_problems(snapshot.nodes, list(pods.values()), bound)
    return problems


def _check_nodes(
    snapshot: Snapshot, new: list[tuple[Pod, ProposedBinding]], index: ObjectIndex
) -> list[str]:
    problems: list[str] = []
    # Only nodes this cycle binds to are the engine's responsibility: a node that was
    # already over-committed (a kubelet admitted more, allocatable shrank) must not
    # make every later cycle fail.
    touched = {binding.node for _, binding in new}
    occupants: dict[str, list[tuple[Pod, tuple[str, ...]]]] = defaultdict(list)
    for name in sorted(touched):
        for pod in index.on_node(name):
            if pod.phase.occupies_node:
                occupants[name].append((pod, pod.gpu_groups))
    for pod, binding in new:
        occupants[binding.node].append((pod, binding.gpu_groups))
    group_home: dict[str, str] = {}
    binding_of = {pod.key for pod, _ in new}
    for node in snapshot.nodes:
        if node.name not in touched:
            continue
        residents = occupants.get(node.name, [])
        cpu = sum((p.request.cpu for p, _ in residents), Fraction(0))
        memory = sum((p.request.memory for p, _ in residents), Fraction(0))
        whole = sum(p.gpu.whole for p, _ in residents)
        device_use: dict[str, int] = defaultdict(int)
        unnamed_fraction_mib = 0
        for pod, groups in residents:
            if not pod.gpu.is_fractional:
                if groups and pod.key in binding_of:
                    problems.append(
                        f"pod {pod.key} takes whole GPUs but is bound onto shared devices {groups}"
                    )
                continue
            mib = pod.gpu.memory_on(node.gpu_memory_mib)
            if not groups:
                unnamed_fraction_mib += mib * pod.gpu.devices
            if groups and len(set(groups)) != pod.gpu.devices:
                problems.append(
                    f"pod {pod.key} needs {pod.gpu.devices} distinct shared devices, got {groups}"
                )
            for group in groups:
                device_use[group] += mib
                if group_home.setdefault(group, node.name) != node.name:
                    problems.append(f"shared device {group} is on two nodes")
        devices = whole + len(device_use)
        if cpu > node.allocatable.cpu:
            problems.append(f"node {node.name}: cpu {cpu}m requested of {node.allocatable.cpu}m")
        if memory > node.allocatable.memory:
            problems.append(
                f"node {node.name}: memory {memory} requested of {node.allocatable.memory}"
            )
        problems += _scalar_problems(node, residents, binding_of)
        if len(residents) > node.max_pods:
            problems.append(f"node {node.name}: {len(residents)} pods of {node.max_pods}")
        if devices * node.gpu_memory_mib + unnamed_fraction_mib > node.gpus * node.gpu_memory_mib:
            problems.append(f"node {node.name}: {devices} GPUs in use of {node.gpus}")
        for group, used in device_use.items():
            if used > node.gpu_memory_mib:
                problems.append(
                    f"node {node.name}: shared device {group} holds {used} MiB of {node.gpu_memory_mib}"
                )
    return problems


def _scalar_problems(
    node: Node, residents: list[tuple[Pod, tuple[str, ...]]], new: set[str]
) -> list[str]:
    """Scalar resources (extended, hugepages, ephemeral storage; in thousandths) asked of
    the node beyond its allocatable. Only those a new binding asks for: a node another
    scheduler over-committed on a resource is no reason to refuse a pod that asks none."""
    asked = sorted({name for pod, _ in residents if pod.key in new for name, _ in pod.scalars})
    if not asked:
        return []
    allocatable = dict(node.scalars)
    problems = []
    for name in asked:
        used = sum(amount for pod, _ in residents for n, amount in pod.scalars if n == name)
        if used > allocatable.get(name, 0):
            problems.append(
                f"node {node.name}: {name} {used} thousandths requested of "
                f"{allocatable.get(name, 0)}"
            )
    return problems


def _check_gangs(
    snapshot: Snapshot, new: list[tuple[Pod, ProposedBinding]], index: ObjectIndex
) -> list[str]:
    problems: list[str] = []
    touched: dict[str, list[Pod]] = defaultdict(list)
    node_of: dict[str, str] = {}
    for pod, binding in new:
        touched[pod.group].append(pod)
        node_of[pod.key] = binding.node
    groups = index.groups
    running = {
        key: [pod for pod in index.of_group(key) if pod.phase.is_active_allocated]
        for key in touched
    }
    topologies = {topology.name: topology for topology in snapshot.topologies}
    nodes = {node.name: node for node in snapshot.nodes}
    for key, added in touched.items():
        group = groups.get(key)
        if group is None:
            problems.append(f"pods bound for unknown PodGroup {key}")
            continue
        members = running[key] + added
        if len(members) < group.min_member:
            problems.append(
                f"PodGroup {key}: {len(members)} pods placed, minMember {group.min_member}"
            )
        problems += [f"PodGroup {key} {gap}" for gap in _gang_gaps(group, members, added)]
        problems += topology_problems(
            group,
            topologies,
            nodes,
            [(pod, pod.node) for pod in running[key] if pod.node],
            [(pod, node_of[pod.key]) for pod in added],
        )
    return problems


def _gang_gaps(group: PodGroup, members: list[Pod], added: list[Pod]) -> list[str]:
    """Sub-group minimums, with `minSubGroup` at every level; an empty tree means no gaps.

    A leaf sub-group that gains pods must reach its own minimum (a partial sub-group is
    half a gang), and every (sub)group with children needs `minSubGroup` of them (all of
    them when unset) at their minimums.
    """
    if not group.subgroups:
        return []
    names = {sub.name for sub in group.subgroups}
    kids: dict[str | None, list[str]] = defaultdict(list)
    for sub in group.subgroups:
        kids[sub.parent if sub.parent in names else None].append(sub.name)
    minimum = {sub.name: sub.min_member for sub in group.subgroups}
    wanted = {sub.name: sub.min_sub_group for sub in group.subgroups}
    have: dict[str | None, int] = defaultdict(int)
    for pod in members:
        have[pod.subgroup] += 1
    gaps = [
        f"sub-group {name}: {have[name]} pods, minMember {minimum[name]}"
        for name in sorted({pod.subgroup for pod in added if pod.subgroup in names})
        if not kids.get(name) and have[name] < minimum[name]
    ]

    def holds(name: str | None) -> bool:
        children = kids.get(name, [])
        if name is not None and not children:
            return have[name] >= minimum[name]
        need = wanted[name] if name is not None else group.min_sub_group
        met = sum(1 for child in children if holds(child))
        return met >= (len(children) if need is None else min(need, len(children)))

    if not holds(None):
        required = "all" if group.min_sub_group is None else str(group.min_sub_group)
        gaps.append(f"has too few sub-groups at their minimum ({required} required)")
    return gaps


def _check_queues(snapshot: Snapshot, new: list[tuple[Pod, ProposedBinding]]) -> list[str]:
    queues = {queue.name: queue for queue in snapshot.queues}
    totals: dict[str, _Tally] = defaultdict(_Tally)
    totals_np: dict[str, _Tally] = defaultdict(_Tally)
    grew: dict[str, list[bool]] = defaultdict(lambda: [False] * 3)
    grew_np: dict[str, list[bool]] = defaultdict(lambda: [False] * 3)
    # Only a queue with a limit (or a quota) can be above it: the pods of queues without
    # one are not summed (most cycles bind a pod or two beside thousands running).
    limited, with_quota = _bounded(queues)
    if not limited and not with_quota:
        return []
    groups = {group.key: group for group in snapshot.pod_groups}
    nodes = {node.name: node for node in snapshot.nodes}

    def usage(pod: Pod, node_name: str) -> tuple[Fraction | int, Fraction, Fraction]:
        memory_mib = nodes[node_name].gpu_memory_mib
        gpus = (
            pod.gpu.gpus_on(memory_mib)
            if pod.gpu.is_fractional
            else pod.gpu.whole + pod.gpu.scalar_gpus
        )
        return gpus, pod.request.cpu, pod.request.memory

    chains: dict[str, tuple[list[str], list[str]]] = {}
    # A pod being deleted still holds its devices: it counts against the limit (not the
    # non-preemptible quota, which KAI's allocated decides) until it is gone.
    entries = [
        (p, p.node, False)
        for p in snapshot.pods
        if p.node in nodes and p.phase in (PodPhase.BOUND, PodPhase.RELEASING)
    ]
    entries += [(p, b.node, True) for p, b in new]
    for pod, node_name, is_new in entries:
        group = groups.get(pod.group)
        if group is None or node_name is None:
            continue
        chain = chains.get(group.queue)
        if chain is None:
            ancestry = _ancestry(queues, group.queue)
            chain = chains[group.queue] = (
                [name for name in ancestry if name in limited],
                [name for name in ancestry if name in with_quota],
            )
        counts_np = not group.preemptible and pod.phase is not PodPhase.RELEASING
        to_limit, to_quota = chain[0], chain[1] if counts_np else []
        if not to_limit and not to_quota:
            continue
        amounts = usage(pod, node_name)
        for queue_name in to_limit:
            totals[queue_name].add(amounts)
            if is_new:
                for i, amount in enumerate(amounts):
                    grew[queue_name][i] |= amount > 0
        for queue_name in to_quota:
            totals_np[queue_name].add(amounts)
            if is_new:
                for i, amount in enumerate(amounts):
                    grew_np[queue_name][i] |= amount > 0
    problems: list[str] = []
    for name in sorted(set(totals) | set(totals_np)):
        values, values_np = totals[name].values(), totals_np[name].values()
        queue = queues[name]
        for i, resource in enumerate(("gpu", "cpu", "memory")):
            spec = queue.resource(resource)
            if grew[name][i] and spec.limit != UNLIMITED and values[i] > spec.limit:
                problems.append(f"queue {name}: {resource} {values[i]} above limit {spec.limit}")
            if grew_np[name][i] and spec.quota != UNLIMITED and values_np[i] > spec.quota:
                problems.append(
                    f"queue {name}: non-preemptible {resource} {values_np[i]} above quota {spec.quota}"
                )
    return problems


def _bounded(queues: Mapping[str, Queue]) -> tuple[set[str], set[str]]:
    """The queues with a limit on some resource, and those with a quota on some resource."""
    specs = {
        name: [queue.resource(r) for r in ("gpu", "cpu", "memory")]
        for name, queue in queues.items()
    }
    return (
        {name for name, spec in specs.items() if any(r.limit != UNLIMITED for r in spec)},
        {name for name, spec in specs.items() if any(r.quota != UNLIMITED for r in spec)},
    )


class _Tally:
    """A queue's gpu, cpu and memory summed exactly: whole numerators per denominator,
    made Fractions once at the end (adding Fractions one by one normalises every step)."""

    def __init__(self) -> None:
        self._by_denominator: tuple[dict[int, int], ...] = ({}, {}, {})

    def add(self, amounts: tuple[Fraction | int, Fraction, Fraction]) -> None:
        gpu, cpu, memory = self._by_denominator  # unrolled: once per running pod per check
        amount = amounts[0]
        gpu[amount.denominator] = gpu.get(amount.denominator, 0) + amount.numerator
        amount = amounts[1]
        cpu[amount.denominator] = cpu.get(amount.denominator, 0) + amount.numerator
        amount = amounts[2]
        memory[amount.denominator] = memory.get(amount.denominator, 0) + amount.numerator

    def values(self) -> list[Fraction]:
        return [
            sum((Fraction(n, d) for d, n in sums.items()), Fraction(0))
            for sums in self._by_denominator
        ]


def _ancestry(queues: Mapping[str, object], leaf: str) -> list[str]:
    chain: list[str] = []
    name: str | None = leaf
    while name is not None and name in queues and name not in chain:
        chain.append(name)
        name = getattr(queues[name], "parent", None)
    return chain


# -- evictions ---------------------------------------------------------------------------
#
# The eviction actions commit decisions one after another, each seeing the ones before.
# The audit replays them in that order over its own queue totals and re-derives every
# rule from the snapshot: it shares no code with the victim searches or their rules.

_POD_TERMS = operator.attrgetter("pod_terms")

_RULES_BY_ACTION = {
    "reclaim": ("MaintainFairShare", "GuaranteeDeservedQuota"),
    "preempt": ("LowerPriority",),
    "consolidate": ("Moved",),
    "stale-gang": ("StaleGracePeriodExpired",),
}
_TAKES_BACK = (Action.PREEMPT,)
"""The action that may take a pod bound this cycle before it binds (`kai.engine.evictions.gangs`
says why only preempt)."""
_TAKES_BACK_PROMISED = (Action.RECLAIM, Action.PREEMPT)
"""The actions that may take a pod consolidation pipelined this cycle for its preemptor
before it binds, as KAI's later actions may (`EvictionState.promised`)."""
Amount = tuple[Fraction, Fraction, Fraction]  # gpu, cpu, memory


class EngineShare(Protocol):
    """What the audit reads of the engine's `QueueShare`, to compare it with its own division."""

    @property
    def deserved(self) -> Resources: ...

    @property
    def fair_share(self) -> Resources: ...


def _disagreements(mine: Mapping[str, Entitlement], theirs: Mapping[str, EngineShare]) -> list[str]:
    problems: list[str] = []
    for name in sorted(set(mine) | set(theirs)):
        if name not in mine or name not in theirs:
            problems.append(f"queue {name}: fair share computed on one side only")
            continue
        for _, resource in _INDEXED:
            for what, ours, engine in (
                ("deserved", mine[name].deserved, theirs[name].deserved),
                ("fair share", mine[name].fair_share, theirs[name].fair_share),
            ):
                if ours.get(resource) != engine.get(resource):
                    problems.append(
                        f"queue {name}: engine's {resource} {what} {engine.get(resource)}, "
                        f"validator's {ours.get(resource)}"
                    )
    return problems


class EvictionAudit:
    """Checks each eviction decision against KAI's rules before the engine commits it."""

    def __init__(
        self,
        snapshot: Snapshot,
        config: EngineConfig,
        bindings: Iterable[ProposedBinding],
        shares: Mapping[str, EngineShare] | None = None,
    ) -> None:
        """`shares`: the engine's fair shares, if the caller has them, to be cross-checked.

        The audit always divides the cluster itself (`validator_shares`) and judges
        reclaim by its own numbers; where the engine's shares disagree with them, every
        reclaim decision is reported, since the engine searched with the wrong ones.
        """
        self._now = snapshot.now
        self._config = config
        self._queues = {queue.name: queue for queue in snapshot.queues}
        self._groups = {group.key: group for group in snapshot.pod_groups}
        self._pods = {pod.key: pod for pod in snapshot.pods}
        self._nodes = snapshot.nodes
        self._termed = any(pod.pod_terms for pod in snapshot.pods)
        self._node_memory = {node.name: node.gpu_memory_mib for node in snapshot.nodes}
        self._pending_memory = pending_device_memory(snapshot)
        self._shares: dict[str, Entitlement] = entitlements(snapshot)
        self._share_problems = [] if shares is None else _disagreements(self._shares, shares)
        # Pods bound this cycle count as their gang's running pods: a gang placed in part
        # may wait for room for the rest, and preempt may take them back.
        self._bound = {binding.pod: binding.node for binding in bindings}
        self._gone: set[str] = set()
        self._waiting: dict[str, str] = {}  # pipelined pod -> its node
        self._moved: dict[str, str] = {}  # a pod consolidation moves -> its new node
        self._promised: set[str] = set()  # pipelined for consolidation's preemptors
        self._held: dict[str, list[Fraction]] = defaultdict(lambda: [Fraction(0)] * 3)
        self._held_np: dict[str, list[Fraction]] = defaultdict(lambda: [Fraction(0)] * 3)
        self._running: dict[str, set[str]] = defaultdict(set)
        self._members: dict[str, list[Pod]] = defaultdict(list)
        # Each group's amounts are summed once (whole ones as ints), then counted up the tree.
        per_group: dict[str, tuple[list[Fraction], ...]] = defaultdict(lambda: ([], [], []))
        placed_on = [(pod, pod.node) for pod in snapshot.pods if pod.phase is PodPhase.BOUND]
        placed_on += [
            (self._pods[key], node) for key, node in self._bound.items() if key in self._pods
        ]
        for pod in snapshot.pods:
            if pod.scheduler_is_ours:
                self._members[pod.group].append(pod)
        for pod, node in placed_on:
            if pod.scheduler_is_ours and pod.group in self._groups:
                self._running[pod.group].add(pod.key)
                for column, value in zip(
                    per_group[pod.group], self._amount(pod, node), strict=True
                ):
                    column.append(value)
        for key, (gpu, cpu, memory) in per_group.items():
            self._count(key, (exact_sum(gpu), exact_sum(cpu), exact_sum(memory)), 1)

    # -- public ------------------------------------------------------------------------
    def check(self, decision: EvictionDecision) -> list[str]:
        """Every rule the decision breaks, given the decisions committed before it."""
        label = decision.action.value if decision.action else "pipelining"
        problems = self._check_evictions(decision)
        victims = self._victims(decision)
        if decision.action is None or decision.preemptor is not None:
            problems += self._check_preemptor(decision)
        if decision.action is Action.STALE_GANG:
            problems += self._check_stale(decision, victims)
        elif decision.action is not None:
            problems += self._check_trigger(decision, victims)
        if decision.action is Action.RECLAIM:
            problems += self._share_problems
        return [f"{label} for {decision.preemptor or 'stale gang'}: {p}" for p in problems]

    def commit(self, decision: EvictionDecision) -> None:
        moved = {record.pod for record in decision.pipelined}
        for eviction in decision.evictions:
            self._gone.add(eviction.pod)
            if eviction.pod not in moved:
                pod = self._pods[eviction.pod]
                self._count(pod.group, self._amount(pod, self._node_of(pod)), -1)
        for record in decision.pipelined:
            pod = self._pods[record.pod]
            if pod.key in self._gone and decision.action is Action.CONSOLIDATE:  # moved
                self._moved[pod.key] = record.node
            if pod.key not in self._gone:
                self._waiting[pod.key] = record.node
                self._count(pod.group, self._amount(pod, record.node), 1)
                if decision.action is Action.CONSOLIDATE and pod.group == decision.preemptor:
                    self._promised.add(pod.key)
                    self._running[pod.group].add(pod.key)

    # -- evictions and gang integrity ---------------------------------------------------
    def _check_evictions(self, decision: EvictionDecision) -> list[str]:
        problems: list[str] = []
        allowed = _RULES_BY_ACTION.get(decision.action.value if decision.action else "", ())
        for eviction in decision.evictions:
            pod = self._pods.get(eviction.pod)
            if pod is None or pod.group != eviction.group or self._node_of(pod) != eviction.node:
                problems.append(f"evicted pod {eviction.pod} is not on {eviction.node}")
            elif eviction.pod in self._gone or not (
                pod.phase is PodPhase.BOUND or pod.key in self._bound or pod.key in self._promised
            ):
                problems.append(f"evicted pod {eviction.pod} is not running")
            elif pod.key in self._bound and decision.action not in _TAKES_BACK:
                problems.append(f"{eviction.pod}, placed this cycle, may not be taken back")
            elif pod.key in self._promised and decision.action not in _TAKES_BACK_PROMISED:
                problems.append(f"{eviction.pod}, pipelined this cycle, may not be taken back")
            if eviction.action is not decision.action or eviction.rule not in allowed:
                problems.append(f"eviction of {eviction.pod} names {eviction.rule}")
        moved = {record.pod for record in decision.pipelined}
        for key, evicted in self._victims(decision).items():
            group = self._groups.get(key)
            running = self._running[key] - self._gone
            if group is None or not evicted <= running:
                problems.append(f"PodGroup {key} does not run the evicted pods")
                continue
            # A pod consolidation moves stays in its gang, on its new place.
            leaving = evicted - moved if decision.action is Action.CONSOLIDATE else evicted
            left = running - leaving
            if left and not self._keeps_minimum(group, left):
                problems.append(f"PodGroup {key} would keep running below its minimum")
        return problems

    def _keeps_minimum(self, group: PodGroup, left: set[str]) -> bool:
        if len(left) < group.min_member:
            return False
        remaining = [self._pods[key] for key in left]
        return not _gang_gaps(group, remaining, remaining)  # no sub-group left part-run

    def _victims(self, decision: EvictionDecision) -> dict[str, set[str]]:
        victims: dict[str, set[str]] = defaultdict(set)
        for eviction in decision.evictions:
            victims[eviction.group].add(eviction.pod)
        return victims

    # -- the preemptor ------------------------------------------------------------------
    def _check_preemptor(self, decision: EvictionDecision) -> list[str]:
        group = self._groups.get(decision.preemptor or "")
        if group is None:
            return [f"unknown preemptor {decision.preemptor}"]
        problems: list[str] = []
        evicted = {eviction.pod for eviction in decision.evictions}
        own = 0
        for record in decision.pipelined:
            pod = self._pods.get(record.pod)
            if pod is None:
                problems.append(f"pipelined pod {record.pod} does not exist")
                continue
            if pod.unhonoured is not None:
                problems.append(f"pod {pod.key} is placed with {pod.unhonoured}, kai cannot keep")
            if pod.waits_for is not None:
                problems.append(f"pod {pod.key} is placed while it waits for the cluster")
            if pod.group == group.key:
                own += 1
                if (
                    pod.phase is not PodPhase.PENDING
                    or pod.key in self._bound
                    or pod.key in self._waiting
                ):
                    problems.append(f"pipelined pod {pod.key} is not pending")
            elif decision.action is not Action.CONSOLIDATE or pod.key not in evicted:
                problems.append(f"pipelined pod {pod.key} belongs to neither side")
            elif record.node == pod.node and not _changes_device(pod, record.gpu_groups):
                problems.append(f"moved pod {pod.key} stays on {record.node}")
        if decision.action is Action.CONSOLIDATE:
            moved = {record.pod for record in decision.pipelined}
            problems += [f"pod {key} is killed, not moved" for key in sorted(evicted - moved)]
        running = len(self._running[group.key] - self._gone)
        if own == 0 or running + own < group.min_member:
            problems.append(f"{own} pods pipelined would leave the gang below minMember")
        if decision.action is not None and _delayed(group, self._now):
            problems.append("its preemption delay has not passed")
        return problems + self._term_problems(decision, evicted)

    def _term_problems(self, decision: EvictionDecision, evicted: set[str]) -> list[str]:
        """The inter-pod terms the decision's seats break, beside the pods where they will
        be once it is made: those running but its victims and earlier ones, this cycle's
        bindings, earlier decisions' seats and the pods they moved, at their new nodes."""
        if not self._termed:
            return []
        seats = [(self._pods[r.pod], r.node) for r in decision.pipelined if r.pod in self._pods]
        gone = self._gone | evicted
        located = [
            pod
            for pod in self._pods.values()
            if pod.node is not None and pod.phase.occupies_node and pod.key not in gone
        ]
        for key, node in (*self._bound.items(), *self._waiting.items()):
            pod = self._pods.get(key)
            if pod is not None and key not in gone:
                located.append(dataclasses.replace(pod, node=node, phase=PodPhase.BOUND))
        for key, node in self._moved.items():
            located.append(dataclasses.replace(self._pods[key], node=node, phase=PodPhase.BOUND))
        return pod_affinity_problems(self._nodes, located, seats)

    def _request(self, decision: EvictionDecision) -> Amount:
        total = [Fraction(0)] * 3
        for record in decision.pipelined:
            pod = self._pods[record.pod]
            if pod.group == decision.preemptor:
                for i, value in enumerate(self._amount(pod, None)):
                    total[i] += value
        return (total[0], total[1], total[2])

    # -- preempt, reclaim and consolidation ---------------------------------------------
    def _check_trigger(self, decision: EvictionDecision, victims: dict[str, set[str]]) -> list[str]:
        preemptor = self._groups[decision.preemptor or ""]
        evictions = self._config.evictions
        request = self._request(decision)
        problems: list[str] = []
        for key, evicted in victims.items():
            victim = self._groups[key]
            whole = evicted == self._running[key] - self._gone
            if not victim.preemptible:
                problems.append(f"victim {key} is not preemptible")
            if decision.action is Action.PREEMPT:
                if victim.queue != preemptor.queue:
                    problems.append(f"victim {key} is in another queue")
                if victim.priority >= preemptor.priority:
                    problems.append(f"victim {key} is not of strictly lower priority")
                minimum = self._walk_up(victim.queue, "preempt")
                if minimum is None:
                    minimum = evictions.preempt_min_runtime_seconds
                if whole and _started_within(victim, minimum, self._now):
                    problems.append(f"victim {key} is protected by preemptMinRuntime")
            elif decision.action is Action.RECLAIM:
                if victim.queue == preemptor.queue:
                    problems.append(f"victim {key} is in the reclaimer's own queue")
                if whole and _started_within(
                    victim, self._reclaim_minimum(preemptor.queue, victim.queue), self._now
                ):
                    problems.append(f"victim {key} is protected by reclaimMinRuntime")
        if decision.action is Action.CONSOLIDATE:
            config = self._config
            if (
                config.placement_strategy is PlacementStrategy.SPREAD
                or len(victims) > evictions.max_consolidation_preemptees
            ):
                problems.append("consolidation is off or moves too many gangs")
            if not preemptor.preemptible:
                problems.append("a non-preemptible gang may not consolidate")
            return problems
        problems += self._check_queue_limits(preemptor, victims, request)
        if decision.action is Action.RECLAIM:
            problems += self._check_reclaim(preemptor, victims, request)
        return problems

    def _check_queue_limits(
        self, preemptor: PodGroup, victims: dict[str, set[str]], request: Amount
    ) -> list[str]:
        freed = self._freed(victims)
        problems: list[str] = []
        for name in _ancestry(self._queues, preemptor.queue):
            queue = self._queues[name]
            for i, resource in enumerate(("gpu", "cpu", "memory")):
                spec = queue.resource(resource)
                after = self._held[name][i] - freed[name][i] + request[i]
                if request[i] and spec.limit != UNLIMITED and after > spec.limit:
                    problems.append(f"queue {name} would go over its {resource} limit")
                after_np = self._held_np[name][i] + request[i]
                if (
                    request[i]
                    and not preemptor.preemptible
                    and spec.quota != UNLIMITED
                    and after_np > spec.quota
                ):
                    problems.append(f"queue {name} would run non-preemptible work over quota")
        return problems

    def _check_reclaim(
        self, reclaimer: PodGroup, victims: dict[str, set[str]], request: Amount
    ) -> list[str]:
        problems: list[str] = []
        leaf = reclaimer.queue
        fair = self._shares[leaf].fair_share
        if any(self._held[leaf][i] + request[i] > fair.get(r) for i, r in _INDEXED):
            problems.append(f"queue {leaf} would go over its fair share")
        chunks: dict[str, list[Amount]] = defaultdict(list)
        sides: dict[str, str] = {}
        for key, evicted in sorted(victims.items()):
            mine, theirs = _pair(self._queues, leaf, self._groups[key].queue)
            sides[theirs] = mine
            chunks[theirs] += self._chunks(self._groups[key], evicted)
        for side, amounts in chunks.items():
            if not self._some_chunk_can_go_last(sides[side], side, amounts, request):
                problems.append(f"queue {side} would fall to its fair share or deserved quota")
        problems += self._check_saturation(reclaimer, victims, request)
        return problems

    def _chunks(self, group: PodGroup, evicted: set[str]) -> list[Amount]:
        """Each surplus pod alone; a whole gang's first minMember pods (task order) as one."""
        pods = sorted(
            (self._pods[key] for key in self._running[group.key] - self._gone),
            key=lambda p: (-p.task_priority, p.created or _EPOCH, p.key),
        )
        if len(evicted) < len(pods):
            return [
                self._amount(self._pods[key], self._node_of(self._pods[key]))
                for key in sorted(evicted)
            ]
        core, surplus = pods[: group.min_member], pods[group.min_member :]
        amounts = [self._amount(pod, self._node_of(pod)) for pod in surplus]
        if core:
            amounts.append(_sum(self._amount(pod, self._node_of(pod)) for pod in core))
        return amounts

    def _some_chunk_can_go_last(
        self, reclaimer_side: str, side: str, amounts: list[Amount], request: Amount
    ) -> bool:
        """The chunk taken last sees the least left; some chunk must pass even there."""
        share, queue = self._shares[side], self._queues[side]
        held = self._held[side]
        taken = _sum(amounts)
        reclaimer_share = self._shares[reclaimer_side]
        reclaimer_queue = self._queues[reclaimer_side]
        guarantee = all(
            reclaimer_queue.resource(r).quota == UNLIMITED
            or self._held[reclaimer_side][i] + request[i] <= reclaimer_share.deserved.get(r)
            for i, r in _INDEXED
        )
        for amount in amounts:
            left = [held[i] - taken[i] + amount[i] for i in range(3)]
            for i, r in _INDEXED:
                spec = queue.resource(r)
                if spec.quota == UNLIMITED:
                    allocatable = spec.limit
                else:
                    allocatable = max(share.deserved.get(r), share.fair_share.get(r))
                    if spec.limit != UNLIMITED:
                        allocatable = min(allocatable, spec.limit)
                if allocatable != UNLIMITED and left[i] > allocatable:
                    return True
                if guarantee and spec.quota != UNLIMITED and left[i] > share.deserved.get(r):
                    return True
        return False

    def _check_saturation(
        self, reclaimer: PodGroup, victims: dict[str, set[str]], request: Amount
    ) -> list[str]:
        freed = self._freed(victims)
        multiplier = self._config.evictions.reclaimer_saturation_multiplier
        involved: dict[str, set[int]] = defaultdict(set)
        for key, evicted in victims.items():
            positive = {
                i
                for pod in evicted
                for i, v in enumerate(self._amount(self._pods[pod], self._node_of(self._pods[pod])))
                if v > 0
            }
            for name in _ancestry(self._queues, self._groups[key].queue):
                involved[name] |= positive
        asked = {i for i in range(3) if request[i] > 0}
        touched = {name for name, amount in freed.items() if any(amount)}
        for level in _ancestry(self._queues, reclaimer.queue):
            parent = self._queues[level].parent
            for sibling in sorted(touched):
                if sibling == level or self._queues[sibling].parent != parent:
                    continue
                for i in sorted(asked | involved[sibling]):
                    resource = _INDEXED[i][1]
                    mine_fair = self._shares[level].fair_share.get(resource)
                    theirs_fair = self._shares[sibling].fair_share.get(resource)
                    mine = self._held[level][i] - freed[level][i] + request[i]
                    theirs = self._held[sibling][i] - freed[sibling][i]
                    if theirs_fair <= 0:
                        continue
                    if mine_fair == 0:
                        if mine > 0:
                            return [f"queue {level} would hold {resource} beyond a zero fair share"]
                        continue
                    ratio = mine / mine_fair
                    if ratio > 1 and ratio * multiplier >= theirs / theirs_fair:
                        return [f"queue {level} would end more saturated than sibling {sibling}"]
            if not reclaimer.preemptible:
                queue, share = self._queues[level], self._shares[level]
                for i, resource in _INDEXED:
                    if queue.resource(resource).quota != UNLIMITED and self._held_np[level][
                        i
                    ] + request[i] > share.deserved.get(resource):
                        return [f"queue {level} would run non-preemptible work over quota"]
        return []

    # -- stale gangs --------------------------------------------------------------------
    def _check_stale(self, decision: EvictionDecision, victims: dict[str, set[str]]) -> list[str]:
        problems: list[str] = []
        if decision.pipelined or decision.preemptor is not None:
            problems.append("a stale-gang eviction makes room for nobody")
        for key, evicted in victims.items():
            group = self._groups[key]
            members = self._members[key]
            if any(pod.phase is PodPhase.SUCCEEDED for pod in members):
                problems.append(f"PodGroup {key} has succeeded pods: it is completing")
            used = {
                pod.key
                for pod in members
                if pod.phase in (PodPhase.BOUND, PodPhase.RELEASING)
                or pod.key in self._bound
                or pod.key in self._waiting
            }
            if self._keeps_minimum(group, used):
                problems.append(f"PodGroup {key} is not below its minimum")
            if evicted != self._running[key] - self._gone - self._bound.keys():
                problems.append(f"PodGroup {key} is not evicted whole")
            grace = group.staleness_grace_period_seconds
            grace = self._config.evictions.staleness_grace_seconds if grace is None else grace
            since = group.stale_since or self._now
            if grace < 0 or self._now - since < timedelta(seconds=grace):
                problems.append(f"PodGroup {key} is within its staleness grace period")
        return problems

    # -- helpers ------------------------------------------------------------------------
    def _node_of(self, pod: Pod) -> str | None:
        """Where the pod runs, or was bound or promised this cycle."""
        if pod.key in self._promised:
            return self._waiting[pod.key]
        return self._bound.get(pod.key, pod.node)

    def _amount(self, pod: Pod, node: str | None) -> Amount:
        memory = self._node_memory.get(node or "", self._pending_memory)
        gpus = (
            pod.gpu.gpus_on(memory)
            if pod.gpu.is_fractional
            else Fraction(pod.gpu.whole + pod.gpu.scalar_gpus)
        )
        return (gpus, pod.request.cpu, pod.request.memory)

    def _count(self, group_key: str, amount: Amount, sign: int) -> None:
        group = self._groups[group_key]
        for name in _ancestry(self._queues, group.queue):
            for i in range(3):
                self._held[name][i] += sign * amount[i]
                if not group.preemptible:
                    self._held_np[name][i] += sign * amount[i]

    def _freed(self, victims: dict[str, set[str]]) -> dict[str, list[Fraction]]:
        freed: dict[str, list[Fraction]] = defaultdict(lambda: [Fraction(0)] * 3)
        for key, evicted in victims.items():
            for name in _ancestry(self._queues, self._groups[key].queue):
                for pod in evicted:
                    amount = self._amount(self._pods[pod], self._node_of(self._pods[pod]))
                    for i in range(3):
                        freed[name][i] += amount[i]
        return freed

    def _walk_up(self, leaf: str, kind: str) -> float | None:
        for name in _ancestry(self._queues, leaf):
            queue = self._queues[name]
            value = (
                queue.preempt_min_runtime_seconds
                if kind == "preempt"
                else queue.reclaim_min_runtime_seconds
            )
            if value is not None:
                return value
        return None

    def _reclaim_minimum(self, reclaimer_queue: str, victim_queue: str) -> float:
        default = self._config.evictions.reclaim_min_runtime_seconds
        victim_chain = _ancestry(self._queues, victim_queue)
        if self._config.evictions.reclaim_resolve_method is ReclaimResolveMethod.QUEUE:
            start = 0
        else:
            reclaimer_chain = set(_ancestry(self._queues, reclaimer_queue))
            below_common = [i for i, name in enumerate(victim_chain) if name not in reclaimer_chain]
            start = below_common[-1] if below_common else 0
        for name in victim_chain[start:]:
            value = self._queues[name].reclaim_min_runtime_seconds
            if value is not None:
                return value
        return default


_INDEXED: tuple[tuple[int, ResourceName], ...] = ((0, "gpu"), (1, "cpu"), (2, "memory"))
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _sum(amounts: Iterable[Amount]) -> Amount:
    total = [Fraction(0)] * 3
    for amount in amounts:
        for i in range(3):
            total[i] += amount[i]
    return (total[0], total[1], total[2])


def _pair(queues: Mapping[str, Queue], mine: str, theirs: str) -> tuple[str, str]:
    """The sibling queues below the two queues' lowest common ancestor (top-level queues are siblings)."""
    my_path, their_path = _ancestry(queues, mine)[::-1], _ancestry(queues, theirs)[::-1]
    for a, b in zip(my_path, their_path, strict=False):
        if a != b:
            return a, b
    depth = min(len(my_path), len(their_path)) - 1
    return my_path[depth], their_path[depth]


def _delayed(group: PodGroup, now: datetime) -> bool:
    if not group.preemption_delay_seconds or group.preemption_delay_seconds <= 0:
        return False
    moments = [m for m in (group.created, group.last_eviction) if m is not None]
    return bool(moments) and now < max(moments) + timedelta(seconds=group.preemption_delay_seconds)


def _started_within(group: PodGroup, seconds: float, now: datetime) -> bool:
    return (
        group.last_start is not None
        and seconds > 0
        and now < group.last_start + timedelta(seconds=seconds)
    )


def _changes_device(pod: Pod, groups: Iterable[str]) -> bool:
    """A fractional pod moved on its own node: onto shared devices none of which it leaves."""
    new = set(groups)
    return pod.gpu.is_fractional and bool(new) and not new & set(pod.gpu_groups)


def validate_after_evictions(
    snapshot: Snapshot,
    bindings: Iterable[ProposedBinding],
    evicted: Iterable[str],
    pipelined: Iterable[ProposedBinding],
    stuck_after_seconds: float,
) -> list[str]:
    """Nodes once everything leaving has left: the running pods, the bound and the pipelined fit.

    A pod stuck in its deletion (`Pod.frees_room`) has not left and will not.

    Only nodes that take pipelined pods are checked: on any other node the future holds
    a subset of what `validate` already checked with the bindings.
    """
    waiting = list(pipelined)
    if not waiting:
        return []
    bindings = list(bindings)
    gone = set(evicted)
    touched = {binding.node for binding in waiting}
    staying = tuple(
        pod
        for pod in snapshot.pods
        if not pod.frees_room(snapshot.now, stuck_after_seconds)
        and pod.key not in gone
        and pod.node in touched
    )
    future = dataclasses.replace(
        snapshot, nodes=tuple(n for n in snapshot.nodes if n.name in touched), pods=staying
    )
    pods = {pod.key: pod for pod in snapshot.pods}
    placed = [
        (pods[b.pod], b) for b in [*bindings, *waiting] if b.pod in pods and b.node in touched
    ]
    problems = _check_nodes(future, placed, ObjectIndex.of(future))
    termed = [(pods[b.pod], b.node) for b in waiting if b.pod in pods and pods[b.pod].pod_terms]
    if termed:
        problems += _terms_once_gone(
            snapshot, pods, stuck_after_seconds, gone, [*bindings, *waiting], termed
        )
    return problems


def _terms_once_gone(
    snapshot: Snapshot,
    pods: Mapping[str, Pod],
    stuck_after_seconds: float,
    gone: set[str],
    placed: Sequence[ProposedBinding],
    termed: Sequence[tuple[Pod, str]],
) -> list[str]:
    """The inter-pod terms of the pipelined pods that have any, read once every victim of
    the cycle has left, beside the cycle's bindings and the other pipelined pods. Each
    decision's seats were checked as the decision left things (`_term_problems`); a later
    decision must not evict the pod an earlier seat's affinity counts on."""
    moved = {b.pod for b in placed}
    located = [
        pod
        for pod in snapshot.pods
        if pod.node is not None
        and pod.phase.occupies_node
        and not pod.frees_room(snapshot.now, stuck_after_seconds)
        and pod.key not in gone
        and pod.key not in moved
    ]
    located += [
        dataclasses.replace(pods[b.pod], node=b.node, phase=PodPhase.BOUND)
        for b in placed
        if b.pod in pods
    ]
    return pod_affinity_problems(snapshot.nodes, located, termed)
