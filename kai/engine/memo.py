"""What a cycle derives from its snapshot's pods, kept so that the next cycle pays only for what changed.

Why: on a live cluster most cycles see a pod or two arrive beside thousands running,
and every pass over all the pods (queue usage, free capacity per node, the gangs'
members, the workload's mix, what other schedulers hold, whether any carries an
inter-pod affinity term) cost 10-20 ms each at 8,000
pods, and so did every pass over all the PodGroups (which are refused by their queue,
scheduled or waiting; which may be stale) and copying every node's free capacity. The adapters rebuild a snapshot every cycle but keep the objects of what did not
change (the operator's cache parses an object once per resourceVersion; `kai simulate`
and the benchmarks replace only the pods a cycle changed), so what changed is found by
identity: pods of the last snapshot that are not in this one have left, pods of this
one that were not in the last have arrived. A snapshot whose maker says what changed
since the last one (`kai.engine.snapshot_changes`, the live scheduler's) spares even that
comparison, a millisecond or two at 8,000 pods. Each fact is a sum or an index that a pod
enters and leaves exactly (sums per denominator, counts, members by identity), so a
cycle given the memo sees what a cold cycle sees; a test holds the two equal over runs
of changing snapshots. A change of context (a PodGroup's queue or preemptibility, a
node's device memory or its arrival) makes the pods it touches leave and enter again;
a change of the device size pending requests are measured against starts over.

The engine stays pure: the memo caches a function of the snapshot, is owned by the
caller (one per scheduling loop) and passed in; a cycle without one starts from an
empty memo. It is not thread-safe: one loop, one memo.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeVar

from immutables import Map

from kai.engine.accounting import accounting_device_memory
from kai.engine.capacity import NodeCapacity, node_capacity, total_allocatable
from kai.engine.cpu_balance import CpuBalance
from kai.engine.decision_changes import DecisionChanges
from kai.engine.eligibility import EligibilityIndex, node_accepts
from kai.engine.evictions.stale import may_be_stale
from kai.engine.fairshare import QueueShare, QueueUsage, compute_fair_shares
from kai.engine.fragmentation import (
    Fragmentation,
    KindKey,
    PodKind,
    kind_of,
    workload_from_counts,
)
from kai.engine.gangs import pod_resources
from kai.engine.group_decision import GroupDecision
from kai.engine.model import Node, Placement, Pod, PodGroup, PodPhase, Snapshot
from kai.engine.object_index import ObjectIndex
from kai.engine.queue_refusal import queue_refusal
from kai.engine.resources import Resources, ResourceSum
from kai.engine.snapshot_changes import Changes, SnapshotChanges
from kai.engine.topology import constrained

_ALLOCATED_SUM, _NON_PREEMPTIBLE_SUM, _PENDING_SUM, _RELEASING_SUM = range(4)
_NOTHING = Resources()
_BOUND, _RELEASING, _PENDING = PodPhase.BOUND, PodPhase.RELEASING, PodPhase.PENDING


@dataclass(frozen=True, slots=True)
class _Entry:
    """What one pod put into the memo's facts, so that it takes out exactly that."""

    usage: tuple[tuple[int, str], ...]  # (bucket, queue) sums the amount went into
    amount: Resources
    other: Resources | None  # another scheduler's pod: what it takes from its node's total


@dataclass(frozen=True)
class PodFacts:
    """The facts of one snapshot, fresh for the cycle to use (the memo keeps its own)."""

    capacity: Mapping[str, NodeCapacity]
    """Free capacity per node, in the snapshot's order: the memo's own, read only (a pass
    that places pods copies a node before it writes, as `NodeIndex` does)."""
    total: Resources
    usage: dict[str, QueueUsage]
    workload: tuple[PodKind, ...]
    members: Mapping[str, list[Pod]]
    """A PodGroup's pods (ours), in key order, for the snapshot's groups with a pending pod."""
    topology_constrained: bool
    """Whether some PodGroup (or a sub-group of one) names a Topology."""
    pod_terms: bool
    """Whether some pod carries an inter-pod affinity term (`kai.engine.pod_affinity`)."""
    groups: Mapping[str, PodGroup]
    """The snapshot's PodGroups by key (read only)."""
    nodes: Mapping[str, Node]
    """The snapshot's nodes by name (read only)."""
    pods_of: Mapping[str, Collection[Pod]]
    """Every PodGroup's pods (ours), in no set order (read only)."""
    may_be_stale: list[PodGroup]
    """The PodGroups the stale-gang check must look at (see `may_be_stale`), by key."""


@dataclass(frozen=True)
class GroupPartition:
    """The snapshot's PodGroups as the cycle starts on them."""

    refused: Map[str, GroupDecision]
    """Groups whose queue takes no job (see `queue_refusal`), pending with the reason."""
    scheduled: Map[str, GroupDecision]
    """Groups with no pending pod of ours and a queue that takes jobs: nothing keeps them."""
    waiting: list[PodGroup]
    """Groups with a pending pod of ours and a queue that takes jobs, by key."""


class SnapshotMemo:
    """The facts of the last snapshot seen, updated by what changed since."""

    def __init__(self) -> None:
        self._clear()
        self.checked = ObjectIndex()
        """The validator's own index of the snapshots this memo sees (`object_index`):
        kept here, beside the memo's facts, and never read by them."""

    def _clear(self) -> None:
        self._pods: dict[int, Pod] = {}
        self._entries: dict[int, _Entry] = {}
        # The last snapshot's tuples, which its successor's account of changes must name.
        self._seen_pods: tuple[Pod, ...] | None = None
        self._seen_groups: tuple[PodGroup, ...] | None = None
        self._seen_nodes: tuple[Node, ...] | None = None
        self._groups: dict[str, PodGroup] = {}
        self._group_objects: dict[int, PodGroup] = {}
        self._nodes: dict[str, Node] = {}
        self._node_objects: dict[int, Node] = {}
        self._memory_mib: int | None = None
        self._sums: dict[tuple[int, str], ResourceSum] = {}
        self._counts: Counter[tuple[int, str]] = Counter()
        self._others: dict[str, ResourceSum] = {}  # node -> what other schedulers hold
        self._kinds: Counter[KindKey] = Counter()
        self._members: dict[str, dict[int, Pod]] = {}  # group key -> its pods (ours)
        self._pending: Counter[str] = Counter()  # group key -> its pending pods (ours)
        self._occupying: dict[str, dict[int, Pod]] = {}  # node -> pods occupying it
        self._with_terms: set[int] = set()  # pods with inter-pod affinity terms
        self._templates: dict[str, NodeCapacity] = {}
        self._volatile: set[str] = set()  # nodes whose capacity names devices per cycle
        self._allocatable: Resources | None = None
        # Persistent maps: a cycle's decisions start from them without copying 8,000 entries
        # (a copy touches every decision: about 2 ms a cycle on a live cluster).
        self._refused: Map[str, GroupDecision] = Map()
        self._scheduled: Map[str, GroupDecision] = Map()
        self._waiting: set[str] = set()
        self._queue_view: tuple[frozenset[str], frozenset[str]] | None = None
        self._regroup: set[str] = set()  # groups to partition again: changed, or pending changed
        # For the account of decisions made anew (`decided`): the groups partitioned again
        # since the last account, and the last account's mapping and its fresh decisions.
        self._unreported: set[str] = set()
        self._last_groups: Mapping[str, GroupDecision] | None = None
        self._last_fresh: set[str] = set()
        self._constrained: set[str] = set()  # groups that name a Topology
        self._watched: set[str] = set()  # groups that may be stale (see `may_be_stale`)
        self._measure: Fragmentation | None = None
        self._eligibility: EligibilityIndex | None = None  # the last cycle's
        self._balance: CpuBalance | None = None  # kept while no node changes
        self._eligible: dict[Placement, frozenset[str]] = {}  # for the nodes as they are

    def facts(self, snapshot: Snapshot) -> PodFacts:
        try:
            return self._update(snapshot)
        except BaseException:
            self._clear()  # half an update is no memo: the next cycle starts cold
            raise

    def _update(self, snapshot: Snapshot) -> PodFacts:
        memory_mib = accounting_device_memory(snapshot)
        if memory_mib != self._memory_mib:
            self._clear()
            self._memory_mib = memory_mib
        changes = snapshot.changes or SnapshotChanges()
        changed_nodes = _replace_changed(
            self._node_objects, snapshot.nodes, self._nodes, changes.nodes, self._seen_nodes
        )
        if changed_nodes:
            self._allocatable = None
            self._balance = None
        asked = self._eligible if self._eligibility is None else self._eligibility.used()
        self._eligible = _eligible_after(asked, changed_nodes, self._nodes)
        self._eligibility = None
        changed_groups = _replace_changed(
            self._group_objects, snapshot.pod_groups, self._groups, changes.pod_groups,
            self._seen_groups,
        )  # fmt: skip
        self._regroup.update(changed_groups)
        for key in changed_groups:
            group = self._groups.get(key)
            if group is not None and constrained(group):
                self._constrained.add(key)
            else:
                self._constrained.discard(key)
            if group is not None and may_be_stale(group):
                self._watched.add(key)
            else:
                self._watched.discard(key)
        again = self._regrouped(changed_groups)
        for name, old in changed_nodes.items():
            if _node_context(self._nodes.get(name)) != _node_context(old):
                again.update(self._occupying.get(name, ()))
        dirty = set(changed_nodes)
        told = self._told_pods(changes.pods, snapshot.pods)
        if told is None:
            pods = dict(zip(map(id, snapshot.pods), snapshot.pods, strict=True))
            left, arrived = self._pods.keys() - pods.keys(), pods.keys() - self._pods.keys()
        else:
            left, pods = told
            arrived = set(pods)
        self._seen_nodes, self._seen_groups = snapshot.nodes, snapshot.pod_groups
        self._seen_pods = snapshot.pods
        staying = {pod_id: self._pods[pod_id] for pod_id in again - left}  # enter again
        for pod_id in left | (again - arrived):
            pod = self._pods.pop(pod_id)
            self._leave(pod_id, pod)
            if pod.phase.occupies_node and pod.node is not None:
                dirty.add(pod.node)
        for pod_id in arrived | (again - left):
            pod = self._pods[pod_id] = pods[pod_id] if pod_id in pods else staying[pod_id]
            self._enter(pod_id, pod, memory_mib)
            if pod.phase.occupies_node and pod.node is not None:
                dirty.add(pod.node)
        return PodFacts(
            self._capacity(snapshot.nodes, dirty, snapshot.now.isoformat()),
            self._total(snapshot.nodes),
            self._usage(),
            workload_from_counts(self._kinds),
            _Members(self._members, self._pending, self._groups),
            bool(self._constrained),
            bool(self._with_terms),
            self._groups,
            self._nodes,
            _PodsOf(self._members),
            [self._groups[key] for key in sorted(self._watched)],
        )

    def _told_pods(
        self, changes: Changes[Pod] | None, pods: tuple[Pod, ...]
    ) -> tuple[set[int], dict[int, Pod]] | None:
        """The pods that left and those that arrived since the last snapshot, by id, from
        the snapshot's account of its changes when it starts from the last snapshot's pods
        and agrees with this memo; None: find them by comparing every pod."""
        if changes is None or not changes.holds_for_ids(self._seen_pods, pods, self._pods):
            return None
        left = {id(then) for then, _ in changes.changed.values() if then is not None}
        arrived = {id(now): now for _, now in changes.changed.values() if now is not None}
        return left, arrived

    def queue_shares(self, snapshot: Snapshot) -> dict[str, QueueShare]:
        """Each queue's fair share of the snapshot, as `accounting.queue_shares` divides it,
        from this memo's facts (the live scheduler's status and metrics after each cycle)."""
        facts = self.facts(snapshot)
        return compute_fair_shares(facts.total, snapshot.queues, facts.usage)

    def eligibility(self) -> EligibilityIndex:
        """Which nodes accept each pod of the snapshot `facts` last saw: the placements the
        last cycle asked about keep their node sets, brought up to date for the nodes that
        changed since."""
        index = self._eligibility = EligibilityIndex(self._nodes.values(), self._eligible)
        return index

    def cpu_balance(self) -> CpuBalance:
        """The cluster's cores per GPU (`cpu_balance`) for the snapshot `facts` last saw:
        its nodes' allocatable, worked out again only when a node changes."""
        if self._balance is None:
            self._balance = CpuBalance(self._nodes.values())
        return self._balance

    def fragmentation(self, workload: Sequence[PodKind]) -> Fragmentation:
        """The fragmentation measure of this workload, built on what the last cycle's learnt
        (most cycles change a kind's count or two: the sums it kept catch up when asked for),
        knowing the state of each node's capacity the memo hands out."""
        last = self._measure
        measure = Fragmentation(workload) if last is None else last.reweighted(workload)
        measure.know(self._templates.values())
        self._measure = measure
        return measure

    def partition(self, queues: Collection[str], leaves: Collection[str]) -> GroupPartition:
        """The last snapshot's PodGroups: refused by their queue, scheduled, or waiting, kept for
        every group that did not change, nor its pending pods, nor the queue tree (a cluster's
        thousands of running gangs, every cycle). `queues`: names; `leaves`: those without
        children."""
        view = (frozenset(queues), frozenset(leaves))
        regroup = self._regroup
        if view != self._queue_view:
            self._queue_view = view
            regroup = set(self._groups) | set(self._refused.keys()) | set(self._scheduled.keys())
        self._unreported.update(regroup)
        refused, scheduled = self._refused.mutate(), self._scheduled.mutate()
        for key in regroup:
            refused.pop(key, None)
            scheduled.pop(key, None)
            self._waiting.discard(key)
            group = self._groups.get(key)
            if group is None:
                continue
            refusal = queue_refusal(group, queues, leaves)
            if refusal is not None:
                refused[key] = GroupDecision(
                    key, group.queue, False, refusal.reason, refusal.message
                )
            elif self._pending.get(key):
                self._waiting.add(key)
            else:
                scheduled[key] = GroupDecision(key, group.queue, True, None, "")
        self._refused, self._scheduled = refused.finish(), scheduled.finish()
        self._regroup = set()
        return GroupPartition(
            self._refused,
            self._scheduled,
            [self._groups[key] for key in sorted(self._waiting)],
        )

    def decided(
        self, groups: Mapping[str, GroupDecision], fresh: Collection[str]
    ) -> DecisionChanges:
        """The account of a cycle's decisions `groups` against the last cycle's on this memo;
        `fresh`: the groups the cycle decided itself, all but those `partition` handed out.
        A cycle that fails before this leaves its groups partitioned again unreported, for
        the next account."""
        fresh = set(fresh)
        changes = DecisionChanges(
            self._last_groups, frozenset(fresh | self._unreported | self._last_fresh)
        )
        self._last_groups, self._last_fresh, self._unreported = groups, fresh, set()
        return changes

    def _regrouped(self, changed: Mapping[str, PodGroup | None]) -> set[int]:
        """The pods whose accounting depends on a PodGroup that changed how it counts."""
        again: set[int] = set()
        for key, old in changed.items():
            if _group_context(self._groups.get(key)) != _group_context(old):
                again.update(self._members.get(key, ()))
        return again

    def _enter(self, pod_id: int, pod: Pod, memory_mib: int) -> None:
        # Written for speed: a cold memo (the first cycle, or a burst) enters every pod.
        phase, node = pod.phase, pod.node
        if node is not None and (phase is _BOUND or phase is _RELEASING):
            on_node = self._occupying.get(node)
            if on_node is None:
                on_node = self._occupying[node] = {}
            on_node[pod_id] = pod
        else:
            node = None  # it occupies no node
        if pod.pod_terms or pod.preferred_terms:
            self._with_terms.add(pod_id)
        if not pod.scheduler_is_ours:
            other = None
            if node is not None:
                gpus = Fraction(pod.gpu.whole + pod.gpu.scalar_gpus)
                other = Resources(gpus, pod.request.cpu, pod.request.memory)
                self._others.setdefault(node, ResourceSum()).add(other)
            self._entries[pod_id] = _Entry((), _NOTHING, other)
            return
        self._kinds[kind_of(pod)] += 1
        members = self._members.get(pod.group)
        if members is None:
            members = self._members[pod.group] = {}
        members[pod_id] = pod
        if phase is _PENDING:
            self._pending[pod.group] += 1
            self._regroup.add(pod.group)
        group = self._groups.get(pod.group)
        buckets, amount = _accounting(pod, group, self._nodes, memory_mib)
        for bucket in buckets:
            total = self._sums.get(bucket)
            if total is None:
                total = self._sums[bucket] = ResourceSum()
            total.add(amount)
            self._counts[bucket] += 1
        self._entries[pod_id] = _Entry(buckets, amount, None)

    def _leave(self, pod_id: int, pod: Pod) -> None:
        entry = self._entries.pop(pod_id)
        phase, node = pod.phase, pod.node
        if node is not None and (phase is _BOUND or phase is _RELEASING):
            _discard(self._occupying, node, pod_id)
        if entry.other is not None:
            self._others[node or ""].remove(entry.other)
        self._with_terms.discard(pod_id)
        if not pod.scheduler_is_ours:
            return
        _decrement(self._kinds, kind_of(pod))
        _discard(self._members, pod.group, pod_id)
        if phase is _PENDING:
            _decrement(self._pending, pod.group)
            self._regroup.add(pod.group)
        for bucket in entry.usage:
            self._sums[bucket].remove(entry.amount)
            if _decrement(self._counts, bucket):
                del self._sums[bucket]

    def _capacity(
        self, nodes: Iterable[Node], dirty: set[str], cycle: str
    ) -> dict[str, NodeCapacity]:
        for name in dirty | self._volatile:
            node = self._nodes.get(name)
            if node is None:
                self._templates.pop(name, None)
                self._volatile.discard(name)
                continue
            built = node_capacity(node, self._occupying.get(name, {}).values(), cycle)
            self._templates[name] = built
            if built.opened:  # devices named after this cycle: the next builds its own
                self._volatile.add(name)
            else:
                self._volatile.discard(name)
        templates = self._templates
        for template in templates.values():
            template.cycle = cycle  # the devices a cycle opens are named after it
        return {node.name: templates[node.name] for node in nodes}

    def _total(self, nodes: Iterable[Node]) -> Resources:
        """Ready nodes' allocatable minus what other schedulers' pods hold there (§10.1)."""
        if self._allocatable is None:
            self._allocatable = total_allocatable(nodes)
        total = self._allocatable
        for name, held in self._others.items():
            node = self._nodes.get(name)
            if node is not None and node.ready:
                total = total - held.total()
        return total

    def _usage(self) -> dict[str, QueueUsage]:
        queues = {queue for bucket, queue in self._sums if bucket != _NON_PREEMPTIBLE_SUM}
        return {
            queue: QueueUsage(
                self._sum(_ALLOCATED_SUM, queue),
                self._sum(_NON_PREEMPTIBLE_SUM, queue),
                self._sum(_PENDING_SUM, queue),
                releasing=self._sum(_RELEASING_SUM, queue),
            )
            for queue in queues
        }

    def _sum(self, bucket: int, queue: str) -> Resources:
        found = self._sums.get((bucket, queue))
        return Resources() if found is None else found.total()


class _Members(Mapping[str, list[Pod]]):
    """Read only, built per cycle for the snapshot's groups that have a pending pod."""

    def __init__(
        self,
        members: Mapping[str, Mapping[int, Pod]],
        pending: Counter[str],
        groups: Mapping[str, PodGroup],
    ) -> None:
        self._lists = {
            key: sorted(members[key].values(), key=lambda pod: pod.key)
            for key in pending
            if key in groups
        }

    def __getitem__(self, key: str) -> list[Pod]:
        return list(self._lists[key])

    def __contains__(self, key: object) -> bool:
        return key in self._lists

    def __iter__(self) -> Iterator[str]:
        return iter(self._lists)

    def __len__(self) -> int:
        return len(self._lists)


class _PodsOf(Mapping[str, Collection[Pod]]):
    """Read only: our pods by PodGroup, as the memo holds them (by identity)."""

    def __init__(self, members: Mapping[str, Mapping[int, Pod]]) -> None:
        self._members = members

    def __getitem__(self, key: str) -> Collection[Pod]:
        return self._members[key].values()

    def __iter__(self) -> Iterator[str]:
        return iter(self._members)

    def __len__(self) -> int:
        return len(self._members)


_Keyed = TypeVar("_Keyed", PodGroup, Node)
_Counted = TypeVar("_Counted")


def _eligible_after(
    known: Mapping[Placement, frozenset[str]],
    changed: Mapping[str, Node | None],
    nodes: Mapping[str, Node],
) -> dict[Placement, frozenset[str]]:
    """These placements' node sets once the `changed` nodes (by name) are as `nodes` has
    them: a node that left drops out, and a new or changed one is asked again."""
    if not changed:
        return dict(known)
    # frozenset's own methods: `names - changed.keys()` is a mutable set, which the searches
    # that gather node sets in a set cannot hash.
    return {
        placement: names.difference(changed).union(
            name for name in changed if name in nodes and node_accepts(nodes[name], placement)
        )
        for placement, names in known.items()
    }


def _replace_changed(
    objects: dict[int, _Keyed],
    current: tuple[_Keyed, ...],
    by_key: dict[str, _Keyed],
    told: Changes[_Keyed] | None = None,
    seen: tuple[_Keyed, ...] | None = None,
) -> dict[str, _Keyed | None]:
    """Bring `by_key` (and `objects`, the same by identity) to the `current` objects; return
    the keys whose object changed, with the object each had before (None: it is new). `told`:
    the snapshot's account of what changed since `seen`, the tuple last brought in, used
    when it is that and agrees with `by_key`."""
    if told is not None and told.holds_for(seen, current, by_key):
        for key, (before, after) in told.changed.items():
            if before is not None:
                del objects[id(before)], by_key[key]
            if after is not None:
                objects[id(after)] = by_key[key] = after
        return {key: before for key, (before, _) in told.changed.items()}
    now = dict(zip(map(id, current), current, strict=True))
    changed: dict[str, _Keyed | None] = {}
    for gone in objects.keys() - now.keys():
        obj = objects.pop(gone)
        key = _key(obj)
        changed.setdefault(key, obj)
        if by_key.get(key) is obj:
            del by_key[key]
    for new in now.keys() - objects.keys():
        obj = objects[new] = now[new]
        key = _key(obj)
        changed.setdefault(key, None)
        by_key[key] = obj
    return changed


def _key(obj: PodGroup | Node) -> str:
    return obj.key if isinstance(obj, PodGroup) else obj.name


def _accounting(
    pod: Pod, group: PodGroup | None, nodes: Mapping[str, Node], memory_mib: int
) -> tuple[tuple[tuple[int, str], ...], Resources]:
    """The queue sums a pod of ours counts in, and the amount (as `leaf_usage` counts)."""
    if group is None:
        return (), _NOTHING
    phase = pod.phase
    if phase is _PENDING:
        return ((_PENDING_SUM, group.queue),), pod_resources(pod, memory_mib)
    if phase is not _BOUND and phase is not _RELEASING:
        return (), _NOTHING
    amount = pod.whole_request
    if amount is None:  # a share: counted by the node's device size
        amount = pod_resources(pod, _device_memory(nodes, pod, memory_mib))
    if phase is _RELEASING:
        return ((_RELEASING_SUM, group.queue),), amount
    if group.preemptible:
        return ((_ALLOCATED_SUM, group.queue),), amount
    return ((_ALLOCATED_SUM, group.queue), (_NON_PREEMPTIBLE_SUM, group.queue)), amount


def _device_memory(nodes: Mapping[str, Node], pod: Pod, default: int) -> int:
    node = nodes.get(pod.node or "")
    return node.gpu_memory_mib if node is not None else default


def _group_context(group: PodGroup | None) -> tuple[str, bool] | None:
    return None if group is None else (group.queue, group.preemptible)


def _node_context(node: Node | None) -> int | None:
    return None if node is None else node.gpu_memory_mib


def _discard(index: dict[str, dict[int, Pod]], key: str, pod_id: int) -> None:
    members = index[key]
    del members[pod_id]
    if not members:
        del index[key]


def _decrement(counts: Counter[_Counted], key: _Counted) -> bool:
    """Count one out; True when none is left (the key is gone)."""
    counts[key] -= 1
    if counts[key]:
        return False
    del counts[key]
    return True
