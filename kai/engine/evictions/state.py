"""What the eviction actions share during one cycle: capacity as it will be, queue usage, running gangs.

Allocation leaves pods bound on idle capacity. The eviction actions work on the
capacity as it will be once everything being deleted is gone ("future" room):
Releasing pods and this cycle's victims give their room back there, and pods
placed on it are pipelined, not bound. Queue usage follows the decisions: a
victim stops counting for its queue, a pipelined gang starts counting for its own,
so each later decision in the cycle sees the earlier ones. The pods allocation placed
that preempt may take back count among their gangs' running pods (`placed`), and so do
the pods consolidation pipelined, which reclaim and preempt may take back (`promised`).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from kai.engine.accounting import pods_by_group
from kai.engine.budget import QueueBudget
from kai.engine.capacity import NodeCapacity, initial_capacity
from kai.engine.eligibility import EligibilityIndex
from kai.engine.evictions.decisions import Action, Eviction, EvictionDecision, PipelinedPod
from kai.engine.evictions.gangs import RunningGang, running_gangs
from kai.engine.evictions.preemptors import Preemptor
from kai.engine.evictions.room import IdleRoom, Overlay, RankedRoom, Seat, release
from kai.engine.fairshare import QueueShare
from kai.engine.fragmentation import Fragmentation
from kai.engine.gangs import GangRequest, pod_resources, task_order_key
from kai.engine.greedy import KaiOrder, PodPlacement
from kai.engine.job_order import PendingOffers
from kai.engine.model import (
    EngineConfig,
    PlacementStrategy,
    Pod,
    PodGroup,
    PodPhase,
    Queue,
    Snapshot,
)
from kai.engine.node_index import NodeIndex
from kai.engine.pod_affinity import PodAffinity
from kai.engine.queue_order import allocatable_share
from kai.engine.resources import Resources
from kai.engine.topology import TopologyIndex


@dataclass(frozen=True)
class EvictionInputs:
    """The cycle after allocation, as the eviction actions need it."""

    snapshot: Snapshot
    config: EngineConfig
    queues: Mapping[str, Queue]
    shares: Mapping[str, QueueShare]  # fair shares computed at the start of the cycle
    total: Resources
    ledger: QueueBudget  # queue usage before this cycle's bindings
    placements: Mapping[str, PodPlacement]  # this cycle's bindings
    unplaced: Sequence[GangRequest]  # gangs allocation left pending, each with pods to place
    eligible_for: EligibilityIndex
    memory_mib: int  # device memory a pending fractional request is accounted against
    fragmentation: Fragmentation | None = None  # the allocation's, so its look ahead agrees
    topology: TopologyIndex | None = None  # the cycle's Topologies, for constrained gangs
    known: SnapshotIndex | None = None
    """The snapshot's PodGroups by key and our pods by group, when the cycle has them (its
    memo keeps them); None: read from the snapshot."""
    pod_affinity: PodAffinity | None = None
    """The cycle's inter-pod terms, when a pod carries one: a preemptor they concern, and
    the pods consolidation moves, are seated by them (`term_seats`)."""

    def index(self) -> SnapshotIndex:
        if self.known is not None:
            return self.known
        snapshot = self.snapshot
        return SnapshotIndex(
            {group.key: group for group in snapshot.pod_groups},
            pods_by_group(snapshot),
            snapshot.pod_groups,
        )


@dataclass(frozen=True)
class SnapshotIndex:
    """A snapshot's PodGroups by key, and our pods by PodGroup (read only)."""

    groups: Mapping[str, PodGroup]
    pods_of: Mapping[str, Collection[Pod]]
    may_be_stale: Sequence[PodGroup]
    """At least the PodGroups the stale-gang check must look at."""


@dataclass
class EvictionState:
    inputs: EvictionInputs
    ledger: QueueBudget
    groups: Mapping[str, PodGroup]
    pods_of: Mapping[str, Collection[Pod]]  # our pods by PodGroup, as the snapshot has them
    may_be_stale: Sequence[PodGroup]  # at least the PodGroups the stale-gang check looks at
    decisions: list[EvictionDecision] = field(default_factory=list)
    evicted: dict[str, Eviction] = field(default_factory=dict)
    pipelined: dict[str, PipelinedPod] = field(default_factory=dict)
    _future: dict[str, NodeCapacity] | None = None
    _idle: IdleRoom | None = None
    _seated: list[Seat] = field(default_factory=list)  # the seats committed before `idle` was made
    _occupants: dict[tuple[str, str], set[str]] | None = None
    _preemptors: dict[str, Preemptor] = field(default_factory=dict)
    _free_gpus: Fraction | None = None
    _lowest_victim_priority: dict[str, int] | None = None
    _by_queue: dict[str, list[RunningGang]] | None = None
    _allocatable: dict[str, Resources] = field(default_factory=dict)
    _running: dict[str, RunningGang] | None = None
    _placed: dict[str, Pod] | None = None
    _placed_groups: set[str] | None = None
    _usage: dict[str, Resources] | None = None
    _order: KaiOrder | None = None
    _next_cycle: NodeIndex | None = None
    _ranked: RankedRoom | None = None
    _pending_offers: PendingOffers | None = None
    _over_caps: list[tuple[GangRequest, str]] | None = None
    _placed_for_terms: dict[str, PodPlacement] | None = None
    anchored: set[str] = field(default_factory=set)
    """The pods (by key) an affinity term of a pod seated this cycle selects: no later
    decision of the cycle takes or moves them, so the seats that counted on them hold."""
    freed: set[str] = field(default_factory=set)
    """The queues (and their ancestors) victims have left this cycle: a gang `over_caps`
    found refused may fit under their caps again."""
    promised: dict[str, Pod] = field(default_factory=dict)
    """The pods consolidation pipelined for its preemptors this cycle, by key, each with
    its node and devices set: they count among their gang's running pods, and reclaim or
    preempt may take them back before they bind, as KAI's later actions take the tasks its
    consolidation pipelined. Taken back, a pod is no longer pipelined, nor evicted."""

    @classmethod
    def start(cls, inputs: EvictionInputs) -> EvictionState:
        snapshot = inputs.snapshot
        nodes = {node.name: node for node in snapshot.nodes}
        ledger = inputs.ledger.copy()
        index = inputs.index()
        groups = index.groups
        # Bound pods count as running pods do: a gpu-memory request on the node's devices.
        ledger.add_many(
            (
                groups[placement.pod.group],
                pod_resources(placement.pod, nodes[placement.node].gpu_memory_mib),
            )
            for placement in inputs.placements.values()
        )
        return cls(inputs, ledger, groups, index.pods_of, index.may_be_stale)

    @property
    def running(self) -> dict[str, RunningGang]:
        """The running gangs with the pods this cycle placed, as the cycle's decisions leave
        them (built when first needed: a cycle with nothing waiting never looks at the
        thousands a cluster runs)."""
        if self._running is None:
            snapshot = self.inputs.snapshot
            self._running = running_gangs(snapshot.pod_groups, snapshot.pods, self.placed.values())
        return self._running

    @property
    def placed(self) -> dict[str, Pod]:
        """This cycle's placements preempt may take back (a victim among them is not evicted),
        by pod key, each pod with its node and devices set: those of preemptible gangs of
        lower priority than a gang still waiting in their queue. No other action takes them
        (`kai.engine.evictions.gangs`), and a cycle places thousands."""
        if self._placed is None:
            highest: dict[str, int] = {}
            for gang in self.inputs.unplaced:
                waiting = gang.group
                highest[waiting.queue] = max(
                    highest.get(waiting.queue, waiting.priority), waiting.priority
                )
            self._placed = {}
            for key, placement in self.inputs.placements.items():
                group = self.groups.get(placement.pod.group)
                if group is None or not group.preemptible:
                    continue
                if group.priority < highest.get(group.queue, group.priority):
                    self._placed[key] = dataclasses.replace(
                        placement.pod, node=placement.node, gpu_groups=placement.gpu_groups
                    )
        return self._placed

    @property
    def usage(self) -> dict[str, Resources]:
        """A running or placed pod's resources as its queue accounts them, by pod key."""
        if self._usage is None:
            memory = {node.name: node.gpu_memory_mib for node in self.inputs.snapshot.nodes}
            running = (
                pod
                for pod in self.inputs.snapshot.pods
                if pod.phase.is_active_allocated and pod.scheduler_is_ours
            )
            self._usage = {  # every pod `running` starts with, evicted ones included
                pod.key: pod_resources(pod, memory[pod.node])
                for pod in itertools.chain(running, self.placed.values())
                if pod.node in memory and pod.group in self.groups
            }
        return self._usage

    def bound_gangs(self, gangs: Iterable[RunningGang]) -> list[RunningGang]:
        """These gangs without this cycle's placements (those with none left dropped): what
        reclaim and consolidation may take (see `kai.engine.evictions.gangs`)."""
        if self._placed_groups is None:
            self._placed_groups = {pod.group for pod in self.placed.values()}
        placed, groups = self.placed, self._placed_groups
        return [
            bound
            for gang in gangs
            if (bound := gang.without(placed) if gang.key in groups else gang) is not None
        ]

    def started_gangs(self) -> list[RunningGang]:
        """The running gangs without this cycle's placements or promised pods: what
        consolidation may move (it moves pods that run, and none twice)."""
        promised = self.promised
        groups = {pod.group for pod in promised.values()}
        return [
            started
            for gang in self.bound_gangs(self.running.values())
            if (started := gang.without(promised) if gang.key in groups else gang) is not None
        ]

    @property
    def future(self) -> dict[str, NodeCapacity]:
        """Free room per node once everything leaving has left (built when first needed)."""
        if self._future is None:
            self._future, self._occupants = self._build_room()
        return self._future

    @property
    def idle(self) -> IdleRoom:
        """Free room per node with nothing gone yet, this cycle's bindings and the seats
        pipelined so far taken (made when first needed; `kai.engine.evictions.idle_first`)."""
        if self._idle is None:
            snapshot = self.inputs.snapshot
            self._idle = IdleRoom(snapshot.nodes, snapshot.pods, snapshot.now.isoformat())
            for placement in self.inputs.placements.values():
                self._idle.take((placement.pod, placement.node, placement.gpu_groups))
            for seat in self._seated:
                self._idle.take(seat)
        return self._idle

    @property
    def occupants(self) -> dict[tuple[str, str], set[str]]:
        """(node, shared device) -> the pods that will use it."""
        if self._occupants is None:
            self._future, self._occupants = self._build_room()
        return self._occupants

    def _build_room(self) -> tuple[dict[str, NodeCapacity], dict[tuple[str, str], set[str]]]:
        snapshot, placements = self.inputs.snapshot, self.inputs.placements.values()
        stuck_after = self.config.evictions.stuck_in_releasing_seconds
        staying = [
            pod
            for pod in snapshot.pods
            if pod.phase is PodPhase.BOUND or pod.stuck(snapshot.now, stuck_after)
        ]
        future = initial_capacity(snapshot.nodes, staying, snapshot.now.isoformat())
        for placement in placements:
            if placement.node in future:
                future[placement.node].take(placement.pod, placement.gpu_groups)
        occupants: dict[tuple[str, str], set[str]] = {}
        sitting = [(pod.key, pod.node, pod.gpu_groups) for pod in staying]
        sitting += [(p.pod.key, p.node, p.gpu_groups) for p in placements]
        for key, node, gpu_groups in sitting:
            for device in gpu_groups:
                occupants.setdefault((node or "", device), set()).add(key)
        return future, occupants

    @property
    def order(self) -> KaiOrder:
        """KAI's allocation order over this cycle's queues, as the next cycle would follow it."""
        if self._order is None:
            inputs = self.inputs
            self._order = KaiOrder(
                inputs.queues,
                inputs.shares,
                inputs.total,
                inputs.config,
                inputs.eligible_for,
                inputs.memory_mib,
                inputs.fragmentation,
                inputs.topology,
                pod_affinity=inputs.pod_affinity,
            )
        return self._order

    def next_cycle_index(self) -> NodeIndex:
        """A node index over `future`, which `commit` keeps in step with it.

        Each next-cycle check looks at one future of this room inside a checkpoint of
        this index and rolls it back: an index of its own per check was a sixth of the
        checks' time at 1,000 nodes (fragmentation states worked out for every node).
        """
        if self._next_cycle is None:
            self._next_cycle = self.order.node_index(self.future)
        return self._next_cycle

    @property
    def config(self) -> EngineConfig:
        return self.inputs.config

    def room(self) -> Overlay:
        return Overlay(self.future)

    def allocatable(self, queue: str) -> Resources:
        """The queue's allocatable share (§10.4); it depends on the cycle's fair shares alone."""
        found = self._allocatable.get(queue)
        if found is None:
            share = self.inputs.shares[queue]
            found = self._allocatable[queue] = allocatable_share(share, self.inputs.queues[queue])
        return found

    def next_cycle_order(self, gone: Iterable[str]) -> KaiOrder:
        """KAI's order as the next cycle would follow it once the pods `gone` (and those
        evicted before) have left: its inter-pod terms read without them, and with this
        cycle's bindings on their nodes, where the next cycle finds them bound."""
        order = self.order
        if order.pod_affinity is None:
            return order
        view = order.pod_affinity.without([*self.evicted, *gone]).beside(self.inputs.placements)
        return dataclasses.replace(order, pod_affinity=view, rankings=order.rankings)

    def placed_for_terms(self) -> Mapping[str, PodPlacement]:
        """This cycle's bindings and its eviction decisions' seats so far (moved pods'
        included), by pod: what inter-pod terms read beside the pods on nodes
        (`term_seats`). One mapping while no decision is committed: the terms index it as
        it grows."""
        if self._placed_for_terms is None:
            pending = {
                pod.key: pod for gang in self.inputs.unplaced for pod in (*gang.core, *gang.elastic)
            }
            placed = dict(self.inputs.placements)
            for record in self.pipelined.values():
                pod = pending.get(record.pod)
                if pod is None and record.pod in self.evicted:  # moved: read at its new seat
                    pod = next(p for p in self.pods_of[record.group] if p.key == record.pod)
                if pod is not None:
                    placed[record.pod] = PodPlacement(pod, record.node, record.gpu_groups)
            self._placed_for_terms = placed
        return self._placed_for_terms

    def preemptor(self, gang: GangRequest) -> Preemptor:
        found = self._preemptors.get(gang.key)
        if found is None:
            found = self._preemptors[gang.key] = Preemptor.of(gang, self.inputs.memory_mib)
        return found

    def free_gpus(self) -> Fraction:
        """GPUs free once everything leaving has left, shared devices counting their free part."""
        if self._free_gpus is None:
            free = Fraction(0)
            for cap in self.future.values():
                memory = cap.node.gpu_memory_mib
                free += cap.whole_gpus + Fraction(
                    sum(memory - used for used in cap.shared.values()), memory
                )
            self._free_gpus = free
        return self._free_gpus

    def running_in(self, queue: str) -> list[RunningGang]:
        """The queue's running gangs."""
        return self._running_by_queue().get(queue, [])

    def running_queues(self) -> list[str]:
        """The queues that run gangs, by name."""
        return sorted(self._running_by_queue())

    def _running_by_queue(self) -> dict[str, list[RunningGang]]:
        if self._by_queue is None:
            by_queue: dict[str, list[RunningGang]] = {}
            for gang in self.running.values():
                by_queue.setdefault(gang.queue, []).append(gang)
            self._by_queue = by_queue
        return self._by_queue

    def has_victims(self) -> bool:
        """Some running gang is preemptible: without one, no eviction action can do anything."""
        return bool(self._lowest_priorities())

    def lowest_victim_priority(self, queue: str) -> int | None:
        """The lowest priority among the queue's running preemptible gangs, if it has any."""
        return self._lowest_priorities().get(queue)

    def _lowest_priorities(self) -> dict[str, int]:
        if self._lowest_victim_priority is None:
            lowest: dict[str, int] = {}
            for gang in self.running.values():
                group = gang.group
                if group.preemptible:
                    lowest[group.queue] = min(
                        lowest.get(group.queue, group.priority), group.priority
                    )
            self._lowest_victim_priority = lowest
        return self._lowest_victim_priority

    def commit(self, decision: EvictionDecision, seats: Sequence[Seat]) -> None:
        """Apply a checked decision: victims leave (their room frees), seated pods are pipelined."""
        self._placed_for_terms = None
        leaving: dict[str, set[str]] = {}
        for eviction in decision.evictions:
            pod = next(p for p in self.running[eviction.group].pods if p.key == eviction.pod)
            self._change(
                eviction.node, functools.partial(release, pod=pod, gpu_groups=pod.gpu_groups)
            )
            for device in pod.gpu_groups:
                self.occupants.get((eviction.node, device), set()).discard(pod.key)
            group = self.groups[eviction.group]
            self.ledger.add(group.queue, Resources() - self.usage[pod.key], group.preemptible)
            self.freed.update(queue.name for queue in self.ledger.ancestry(group.queue))
            self.evicted[pod.key] = eviction
            self.pipelined.pop(pod.key, None)  # a promised pod taken back never binds
            leaving.setdefault(eviction.group, set()).add(pod.key)
        for key, gone in leaving.items():
            gang = self.running[key]
            rest = tuple(pod for pod in gang.pods if pod.key not in gone)
            if rest:
                self.running[key] = RunningGang(gang.group, rest)
            else:
                del self.running[key]
        for seat in seats:
            if self._idle is not None:
                self._idle.take(seat)
            else:
                self._seated.append(seat)
        for (pod, node, gpu_groups), record in zip(seats, decision.pipelined, strict=True):
            self._change(node, functools.partial(NodeCapacity.take, pod=pod, groups=gpu_groups))
            for device in gpu_groups:
                self.occupants.setdefault((node, device), set()).add(pod.key)
            group = self.groups[pod.group]
            self.ledger.add(
                group.queue,
                pod_resources(pod, self.future[node].node.gpu_memory_mib),
                group.preemptible,
            )
            self.pipelined[record.pod] = record
        if decision.action is Action.CONSOLIDATE:
            self._promise(decision, seats)
        affinity = self.inputs.pod_affinity
        wanting = [pod for pod, _, _ in seats if any(not term.anti for term in pod.pod_terms)]
        if affinity is not None and wanting:
            self.anchored |= affinity.without(self.evicted).wanted_by(
                wanting, self.placed_for_terms()
            )
        self.decisions.append(decision)
        self._free_gpus = None
        self._lowest_victim_priority = None
        self._by_queue = None
        if self._pending_offers is not None:
            self._pending_offers.discard({record.group for record in decision.pipelined})

    def _promise(self, decision: EvictionDecision, seats: Sequence[Seat]) -> None:
        """The preemptor's pods the decision pipelined join its gang's running pods."""
        promised = [
            dataclasses.replace(pod, node=node, gpu_groups=gpu_groups)
            for pod, node, gpu_groups in seats
            if pod.group == decision.preemptor
        ]
        if not promised:
            return
        memory = {node.name: node.gpu_memory_mib for node in self.inputs.snapshot.nodes}
        for pod in promised:
            self.promised[pod.key] = pod
            self.usage[pod.key] = pod_resources(pod, memory[pod.node or ""])
        group = self.groups[promised[0].group]
        earlier = self.running.get(group.key)
        pods = (*earlier.pods, *promised) if earlier is not None else tuple(promised)
        self.running[group.key] = RunningGang(group, tuple(sorted(pods, key=task_order_key)))

    def _change(self, node: str, change: Callable[[NodeCapacity], object]) -> None:
        """Change the node's future room, and the next-cycle index with it. The index goes
        first: until it has changed a node it shares `future`'s object, which it copies."""
        if self._next_cycle is not None:
            self._next_cycle.update(node, change)
        if self._ranked is not None:
            self._ranked.change(node, change)
        else:
            change(self.future[node])

    def over_caps(self) -> list[tuple[GangRequest, str]]:
        """The gangs still pending whose core a queue's cap refuses, each with the queue whose
        cap it breaks first: the next cycle refuses them before it offers any room, so they
        do not stand for their queue in its order (worked out when first asked, against the
        ledger then; a gang not among them only sees its queues hold more after). One fits
        again only once a victim leaves that queue's subtree (`freed`)."""
        if self._over_caps is None:
            memory_mib = self.inputs.memory_mib
            ledger = self.ledger
            self._over_caps = [
                (gang, queue)
                for gang in self.inputs.unplaced
                if gang.core
                and not gang.growth
                and (
                    queue := ledger.breaking(
                        gang.group.queue, gang.core_request(memory_mib), gang.group.preemptible
                    )
                )
                is not None
            ]
        return self._over_caps

    def pending_offers(self) -> PendingOffers:
        """The first offers of the gangs still pending that no queue's cap refuses
        (`over_caps`): not placed by the cycle's allocation, nor pipelined by a decision so
        far. The look at the next cycle offers these, and adds back an over-cap gang only
        where victims left its queues."""
        if self._pending_offers is None:
            waiting = {record.group for record in self.pipelined.values()}
            waiting.update(gang.key for gang, _ in self.over_caps())
            self._pending_offers = PendingOffers(
                request for request in self.inputs.unplaced if request.key not in waiting
            )
        return self._pending_offers

    def ranked_room(self) -> RankedRoom:
        """The future room's nodes in seating order, for seatings on overlays of it."""
        if self._ranked is None:
            spread = self.config.placement_strategy is PlacementStrategy.SPREAD
            self._ranked = RankedRoom(self.future, spread)
        return self._ranked
