"""Engine objects: the immutable snapshot of a cluster that one scheduling cycle reasons about.

These types carry no Kubernetes wire format. The adapters (`kai.api.parse` for
manifests, the simulator, the live watch cache) translate objects into them, so the
engine sees the same shapes whether it runs live or in `kai simulate`.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from fractions import Fraction

from kai.engine import mig
from kai.engine.resources import Resources
from kai.engine.scalars import Scalars
from kai.engine.snapshot_changes import SnapshotChanges

UNLIMITED = Fraction(-1)
"""KAI's special value for an unlimited quota (deserved = everything) or limit (no cap)."""

DEFAULT_QUEUE_PRIORITY = 100
DEFAULT_PODGROUP_PRIORITY = 50
NON_PREEMPTIBLE_PRIORITY_THRESHOLD = 100


STUCK_IN_RELEASING_SECONDS = 120.0
"""KAI's `--stuck-in-releasing-threshold` default: a running pod deleted longer ago is stuck."""


class PodPhase(enum.Enum):
    """The part of KAI's pod status model the engine needs (kai-semantics §6)."""

    PENDING = "Pending"
    GATED = "Gated"
    BOUND = "Bound"  # bound or running: counts for the queue, the gang and the node
    RELEASING = "Releasing"  # being deleted: occupies the node, frees capacity for pipelining
    # (unless stuck: see `Pod.frees_room`)
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

    @property
    def occupies_node(self) -> bool:
        return self in (PodPhase.BOUND, PodPhase.RELEASING)

    @property
    def is_active_allocated(self) -> bool:
        return self is PodPhase.BOUND


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """A pod's GPU ask: whole devices, or a portion of each of `devices` shared devices.

    `portion` is a share of one device (`gpu-fraction`); `memory_mib` is an absolute
    amount of device memory (`gpu-memory`). At most one of whole / portion / memory is set.
    """

    whole: int = 0
    portion: Fraction = Fraction(0)
    memory_mib: int = 0
    devices: int = 1
    scalar_gpus: int = 0
    """GPUs the pod's devices other than `nvidia.com/gpu` count as against quotas, as KAI
    counts them: a MIG slice its compute slices (`kai.engine.mig`), an AMD device
    (`amd.com/gpu`) one. The devices themselves are scalar resources (`Pod.scalars`)."""
    # MiB per device size, memoised: placement asks this for every candidate node.
    _mib: dict[int, int] = field(default_factory=dict, init=False, repr=False, compare=False)
    # GPUs counted per device size, memoised: queue accounting asks it of every pod, and
    # each answer was a new Fraction (a gcd and an object).
    _gpus: dict[int, Fraction] = field(default_factory=dict, init=False, repr=False, compare=False)
    is_fractional: bool = field(init=False, repr=False, compare=False)
    """A share of devices, derived once: every pass over the pods asks it of each."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "is_fractional", bool(self.portion) or bool(self.memory_mib))

    def memory_on(self, device_memory_mib: int) -> int:
        """MiB of one device this request takes on a node with the given device memory."""
        if self.memory_mib:
            return self.memory_mib
        mib = self._mib.get(device_memory_mib)
        if mib is None:
            mib = self._mib[device_memory_mib] = math.ceil(self.portion * device_memory_mib)
        return mib

    def gpus_on(self, device_memory_mib: int) -> Fraction:
        """Devices counted against quotas when placed on such a node (fractions count as portions)."""
        gpus = self._gpus.get(device_memory_mib)
        if gpus is None:
            if self.whole or self.scalar_gpus:
                gpus = Fraction(self.whole + self.scalar_gpus)
            elif self.memory_mib:
                gpus = Fraction(self.memory_mib, device_memory_mib) * self.devices
            else:
                gpus = self.portion if self.devices == 1 else self.portion * self.devices
            self._gpus[device_memory_mib] = gpus
        return gpus


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str | None
    operator: str  # Equal | Exists
    value: str | None
    effect: str | None  # None tolerates every effect


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str | None
    effect: str  # NoSchedule | PreferNoSchedule | NoExecute


@dataclass(frozen=True, slots=True)
class Requirement:
    """One node-selector requirement of required node affinity."""

    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """One inter-pod affinity or anti-affinity term (`kai.engine.pod_affinity`).

    It selects pods by label (`match_labels` and `expressions`, ANDed; a term whose
    selector was null selects none) in `namespaces` (None: every namespace), and its
    domain is the value of `topology_key` on the nodes. `weight` is a preferred term's
    (1-100); a required term has none (0). `namespace_selector`: the term also selects in
    the namespaces whose labels meet these, which the snapshot's maker adds to `namespaces`
    (`kai.api.namespaces`); the engine reads `namespaces` alone."""

    anti: bool
    topology_key: str
    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[Requirement, ...] = ()
    namespaces: frozenset[str] | None = frozenset()
    selects_nothing: bool = False
    weight: int = 0
    namespace_selector: tuple[Requirement, ...] | None = None


@dataclass(frozen=True, slots=True)
class Prerequisite:
    """What a pod needs from the cluster before it may run anywhere (`kai.engine.prerequisites`):
    the reason code its gang waits with, and the message naming what is missing."""

    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a pod may go: nodeSelector, required node affinity (OR of ANDed terms),
    tolerations, the kind of its GPU ask, which MIG-enabled nodes read (`kai.engine.mig`;
    `Pod` sets it from its own ask), and the nodes its volumes can be used from: each
    claim's terms, ORed as node affinity's, all of them to hold (`kai.api.volumes`)."""

    node_selector: tuple[tuple[str, str], ...] = ()
    affinity_terms: tuple[tuple[Requirement, ...], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    gpu_kind: str = ""
    volume_terms: tuple[tuple[tuple[Requirement, ...], ...], ...] = ()


@dataclass(frozen=True, slots=True)
class Pod:
    namespace: str
    name: str
    uid: str
    group: str  # key of the PodGroup, "namespace/name"
    subgroup: str | None
    phase: PodPhase
    node: str | None
    request: Resources  # cpu and memory; gpu = whole devices (fractions are in `gpu`)
    gpu: GpuRequest
    placement: Placement
    created: datetime | None = None
    task_priority: int = 0
    gpu_groups: tuple[str, ...] = ()  # shared devices a running fractional pod sits on
    scheduler_is_ours: bool = True
    deleting_since: datetime | None = None  # a running pod being deleted: since when
    unhonoured: str | None = None  # a required constraint kai cannot honour yet: its field
    labels: tuple[tuple[str, str], ...] = ()  # what inter-pod affinity terms select by
    pod_terms: tuple[PodAffinityTerm, ...] = ()  # its required inter-pod affinity terms
    preferred_terms: tuple[PodAffinityTerm, ...] = ()  # its preferred ones, each with a weight
    scalars: Scalars = ()  # extended resources, hugepages, ephemeral storage it asks of a node
    waits_for: Prerequisite | None = None  # what it needs from the cluster before it may run
    nominated_node: str | None = None  # an unbound pod's status.nominatedNodeName: tried first
    # Derived once: placement loops compare these millions of times, and exact
    # Fractions (or an f-string per access) would dominate the cycle.
    key: str = field(init=False, repr=False, compare=False)
    cpu_millis: int = field(init=False, repr=False, compare=False)
    memory_bytes: int = field(init=False, repr=False, compare=False)
    whole_request: Resources | None = field(init=False, repr=False, compare=False)
    """What queue accounting counts for a pod of whole GPUs (None for a share, which
    depends on the node's devices): every pass over the running pods asks it."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.namespace}/{self.name}")
        object.__setattr__(self, "cpu_millis", math.ceil(self.request.cpu))
        object.__setattr__(self, "memory_bytes", math.ceil(self.request.memory))
        whole = None
        if not self.gpu.is_fractional:
            gpus = Fraction(self.gpu.whole + self.gpu.scalar_gpus)
            whole = Resources(gpus, self.request.cpu, self.request.memory)
        object.__setattr__(self, "whole_request", whole)
        kind = _gpu_kind(self.gpu, self.scalars)
        if self.placement.gpu_kind != kind:  # where it may go follows from what it asks
            object.__setattr__(self, "placement", replace(self.placement, gpu_kind=kind))

    def frees_room(self, now: datetime, stuck_after_seconds: float) -> bool:
        """Whether the pod is being deleted and its room can be counted on: KAI's Releasing."""
        return self.phase is PodPhase.RELEASING and not self.stuck(now, stuck_after_seconds)

    def stuck(self, now: datetime, stuck_after_seconds: float) -> bool:
        """KAI's StuckInReleasing (kai-semantics §6): a running pod deleted longer than
        `stuck_after_seconds` ago. Its node has not let it go (lost, or a finalizer waits),
        and nothing pipelined onto its room would ever bind. It still holds the node."""
        return (
            self.phase is PodPhase.RELEASING
            and self.deleting_since is not None
            and now - self.deleting_since > timedelta(seconds=stuck_after_seconds)
        )


def _gpu_kind(gpu: GpuRequest, scalars: Scalars) -> str:
    """The kind of GPU ask MIG-enabled nodes tell apart (KAI's request types)."""
    if mig.asks_for_slices(scalars):
        return mig.SLICES
    if gpu.is_fractional:
        return mig.SHARED
    return mig.WHOLE if gpu.whole else ""


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    labels: tuple[tuple[str, str], ...]
    allocatable: Resources  # gpu = whole devices
    max_pods: int
    gpu_memory_mib: int  # per device, floored to a multiple of 100 as KAI does
    unschedulable: bool = False
    ready: bool = True
    taints: tuple[Taint, ...] = ()
    scalars: Scalars = ()  # allocatable extended resources, hugepages, ephemeral storage
    mig: str | None = None  # None: not MIG-enabled; else its MIG strategy (`kai.engine.mig`)
    scalar_gpus: int = 0  # GPUs its MIG slices and AMD devices count as in the cluster's total
    gpus: int = field(init=False, repr=False, compare=False)
    """Whole devices, derived once: placement and fragmentation ask it per node per pod."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpus", int(self.allocatable.gpu))

    def label(self, key: str) -> str | None:
        for k, v in self.labels:
            if k == key:
                return v
        return None


@dataclass(frozen=True, slots=True)
class TopologyLevel:
    """One level of a Topology: the node label whose values name its domains, and an
    optional alias a constraint may use instead of the label (KAI v0.17)."""

    node_label: str
    alias: str | None = None


@dataclass(frozen=True, slots=True)
class Topology:
    """A `kai.scheduler/v1alpha1` Topology: levels from the widest (say zone) to the most
    local (say `kubernetes.io/hostname`), as the CRD lists them."""

    name: str
    levels: tuple[TopologyLevel, ...]

    def node_label(self, level: str) -> str | None:
        """The node label a constraint's level names, by label or by alias; None if neither."""
        for entry in self.levels:
            if level in (entry.node_label, entry.alias):
                return entry.node_label
        return None


@dataclass(frozen=True, slots=True)
class TopologyConstraint:
    """Where a (sub)group must or should sit in a Topology's domain tree (kai-semantics §12)."""

    topology: str
    required_level: str | None = None
    preferred_level: str | None = None


@dataclass(frozen=True, slots=True)
class SubGroup:
    name: str
    min_member: int
    parent: str | None = None
    min_sub_group: int | None = None  # direct child subgroups that must be schedulable
    topology: TopologyConstraint | None = None


@dataclass(frozen=True, slots=True)
class PodGroup:
    namespace: str
    name: str
    queue: str
    min_member: int
    priority: int
    preemptible: bool
    subgroups: tuple[SubGroup, ...] = ()
    created: datetime | None = None
    uid: str = ""
    priority_class: str | None = None
    min_sub_group: int | None = None  # direct child subgroups that must be schedulable
    topology: TopologyConstraint | None = None
    preemption_delay_seconds: float | None = None
    staleness_grace_period_seconds: float | None = None  # negative disables stale eviction
    last_start: datetime | None = None
    """When the gang last started running (`kai.scheduler/last-start-timestamp`): the min-runtime clock."""
    stale_since: datetime | None = None
    """When the gang was first seen below its minimum (`kai.scheduler/stale-podgroup-timestamp`)."""
    last_eviction: datetime | None = None
    """When the gang last lost pods to an eviction (`kai.scheduler/last-eviction-timestamp`)."""
    key: str = field(init=False, repr=False, compare=False)
    """"namespace/name", derived once: every pass over the pods looks groups up by it."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.namespace}/{self.name}")


@dataclass(frozen=True, slots=True)
class QueueResource:
    """One resource of a queue: quota (deserved), limit and over-quota weight; -1 = unlimited."""

    quota: Fraction = Fraction(0)
    limit: Fraction = UNLIMITED
    over_quota_weight: Fraction = Fraction(1)


@dataclass(frozen=True, slots=True)
class Queue:
    name: str
    parent: str | None
    priority: int = DEFAULT_QUEUE_PRIORITY
    gpu: QueueResource = QueueResource()
    cpu: QueueResource = QueueResource()
    memory: QueueResource = QueueResource()
    created: datetime | None = None
    uid: str = ""
    preempt_min_runtime_seconds: float | None = None
    reclaim_min_runtime_seconds: float | None = None

    def resource(self, name: str) -> QueueResource:
        value: QueueResource = getattr(self, name)
        return value


class PlacementStrategy(enum.Enum):
    BINPACK = "binpack"
    SPREAD = "spread"


class ReclaimResolveMethod(enum.Enum):
    """Where reclaimMinRuntime is looked up (kai-semantics §11.1)."""

    LCA = "lca"  # one level below the reclaimer's and victim's common ancestor, then up
    QUEUE = "queue"  # the victim's own queue, then up


@dataclass(frozen=True, slots=True)
class EvictionConfig:
    """The scheduler-wide settings of the eviction actions; KAI's defaults."""

    time_limit_seconds: float | None = None
    """Solver time for choosing victims per cycle; None: half the allocation's; 0: greedy only."""
    staleness_grace_seconds: float = 60.0  # negative disables stale-gang eviction
    max_consolidation_preemptees: int = 16  # 0 disables consolidation
    preempt_min_runtime_seconds: float = 0.0
    reclaim_min_runtime_seconds: float = 0.0
    reclaim_resolve_method: ReclaimResolveMethod = ReclaimResolveMethod.LCA
    reclaimer_saturation_multiplier: Fraction = Fraction(1)
    stuck_in_releasing_seconds: float = STUCK_IN_RELEASING_SECONDS
    """How long after its deletion a running pod's room stops being offered (`Pod.frees_room`)."""


REPRODUCIBLE_WALL_FACTOR = 30.0
"""With `EngineConfig.reproducible`, a solve's wall-clock limit as a multiple of its
budget: this machine runs 2-3 wall seconds per deterministic second, and the allocation
model's later stages overrun their work budget up to threefold."""


@dataclass(frozen=True, slots=True)
class EngineConfig:
    time_limit_seconds: float = 1.0
    placement_strategy: PlacementStrategy = PlacementStrategy.BINPACK
    device_strategy: PlacementStrategy | None = None
    """Which shared GPU device a fraction joins (KAI's gpupack / gpuspread): the fullest or
    the emptiest with room. Unset, it follows `placement_strategy`, as KAI's shard does."""
    solver_workers: int = 2
    random_seed: int = 0
    isolate_solver: bool = False
    """Run OR-Tools in forked children (kai.engine.forked): each stage of the
    allocation model, and the eviction actions with their victim models, so that an
    OR-Tools abort costs that answer and not the process; `kai run` does."""
    reproducible: bool = False
    """Let every solve end on its deterministic work budget, with the wall clock only a
    guard against a hung solve (`REPRODUCIBLE_WALL_FACTOR` times the limit): the same
    snapshot then gives the same decisions however loaded the machine, and a cycle may
    take longer than `time_limit_seconds` on a slow one. `kai simulate` and the trace
    benchmark set it; `kai run` does not, as a live cycle must end on time."""
    evictions: EvictionConfig = EvictionConfig()

    @property
    def device_placement(self) -> PlacementStrategy:
        return self.device_strategy or self.placement_strategy


@dataclass(frozen=True)
class Snapshot:
    """Everything one cycle sees. Built by an adapter; never mutated by the engine."""

    nodes: tuple[Node, ...]
    pods: tuple[Pod, ...]
    pod_groups: tuple[PodGroup, ...]
    queues: tuple[Queue, ...]
    now: datetime
    set_aside: tuple[SetAside, ...] = ()
    """PodGroups the adapter could not use (bad spec, bad pod), reported and never scheduled."""
    topologies: tuple[Topology, ...] = ()
    changes: SnapshotChanges | None = field(default=None, compare=False, repr=False)
    """What changed since an earlier snapshot, when the maker knows (`snapshot_changes`):
    an account, never a difference in what the snapshot is."""


@dataclass(frozen=True, slots=True)
class SetAside:
    group: str  # PodGroup key
    queue: str
    reason: str
    message: str
