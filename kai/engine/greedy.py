"""The greedy allocation pass: KAI's allocate action, attempt by attempt in queue order, first fit by node preference.

It is fast and always feasible, so it serves three purposes: the solver's hint
(the solver starts from this answer and only improves on it), the fallback when
the solver finds nothing in time, and the baseline the benchmark compares against.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kai.engine.budget import QueueBudget, Refusal
from kai.engine.capacity import NodeCapacity
from kai.engine.cpu_balance import CpuBalance
from kai.engine.fairshare import QueueShare
from kai.engine.fragmentation import Fragmentation
from kai.engine.gangs import GangRequest, pod_resources
from kai.engine.job_order import Offer, OfferQueue, PendingOffers, first_offer
from kai.engine.model import EngineConfig, Pod, Queue
from kai.engine.node_index import NodeIndex
from kai.engine.pod_affinity import PodAffinity
from kai.engine.queue_order import QueueRanking
from kai.engine.resources import NO_RESOURCES, Resources
from kai.engine.topology import TopologyIndex, domain_of_placed
from kai.engine.topology_placement import Eligible, KeptApart, Seat, place_constrained

UNSCHEDULABLE = "Unschedulable"


@dataclass(frozen=True)
class PodPlacement:
    pod: Pod
    node: str
    gpu_groups: tuple[str, ...]


@dataclass
class AllocationOutcome:
    placements: dict[str, PodPlacement] = field(default_factory=dict)  # pod key -> placement
    admitted: list[str] = field(default_factory=list)  # gang keys whose core was placed, in order
    refusals: dict[str, Refusal] = field(
        default_factory=dict
    )  # gang key -> why its core was not placed
    capped: set[tuple[str, int]] = field(default_factory=set)
    """The attempts a queue's cap refused (a limit, or quota for non-preemptible work), as
    in `offers`: given what was admitted before them, no packing admits them."""
    offers: list[tuple[str, int]] = field(default_factory=list)
    """Every attempt, in the order KAI's job order made it: (gang key, 0) for a core and
    (gang key, n) for the gang's n-th elastic pod.

    The order depends on what was admitted before (queues re-rank after each admission),
    so it is recorded as it happened: the solver keeps this order and improves only the
    packing within it.
    """

    @property
    def offered(self) -> list[str]:
        """The gangs whose core was offered, in order."""
        return [gang for gang, elastic in self.offers if elastic == 0]

    def accepted_in_order(
        self, offers: Sequence[tuple[str, int]], elastic_of: Mapping[str, str]
    ) -> tuple[bool, ...]:
        """Which of these attempts this outcome satisfies: the core admitted, or at least n
        elastic pods of the gang placed (any n of them: they are interchangeable)."""
        admitted = set(self.admitted)
        placed = Counter(elastic_of[key] for key in self.placements if key in elastic_of)
        return tuple(
            placed.get(gang, 0) >= elastic if elastic else gang in admitted
            for gang, elastic in offers
        )


def index_after(
    capacity: Mapping[str, NodeCapacity], config: EngineConfig, placements: Iterable[PodPlacement]
) -> NodeIndex:
    """The node index once these placements are taken: what an answer leaves free."""
    index = NodeIndex(capacity, config.placement_strategy, config.device_placement)
    for placement in placements:
        index.take(placement.node, placement.pod, placement.gpu_groups or None)
    return index


Settled = Callable[[Offer, "AllocationOutcome"], bool]
"""Asked after each attempt: True ends the pass there (the caller knows all it needs)."""


def greedy_allocate(
    offers: OfferQueue,
    index: NodeIndex,
    budget: QueueBudget,
    eligible_for: Callable[[Pod], Callable[[str], bool]],
    accounting_memory_mib: int,
    settled: Settled | None = None,
    topology: TopologyIndex | None = None,
    pod_affinity: PodAffinity | None = None,
) -> AllocationOutcome:
    """Place each gang's core whole or not at all, and its elastic pods one per attempt.

    `offers` re-ranks queues as `budget` changes; a gang that got what it was offered is
    pushed back for one more elastic pod, as KAI's allocate does, so elastic growth is
    shared out in the job order rather than taken by the first gang.
    """
    outcome = AllocationOutcome()
    for offer in offers:
        gang = offer.gang
        outcome.offers.append((gang.key, offer.elastic))
        if offer.elastic == 0:
            placed = _place_core(
                gang,
                index,
                budget,
                eligible_for,
                accounting_memory_mib,
                outcome,
                topology,
                pod_affinity,
            )
            if placed:
                outcome.admitted.append(gang.key)
        else:
            placed = _place_elastic(
                offer,
                index,
                budget,
                _within_domain(gang, eligible_for, outcome, topology),
                accounting_memory_mib,
                outcome,
                pod_affinity,
            )
        following = offer.next_elastic() if placed else None
        if following is not None:
            offers.push(following)
        if settled is not None and settled(offer, outcome):
            break
    return outcome


@dataclass(frozen=True)
class KaiOrder:
    """What ranks the attempts: the queues with their fair shares, the cluster total, and
    the placement strategies the node index follows."""

    queues: Mapping[str, Queue]
    shares: Mapping[str, QueueShare]
    total: Resources
    config: EngineConfig
    eligible_for: Callable[[Pod], Callable[[str], bool]]
    accounting_memory_mib: int
    fragmentation: Fragmentation | None = None
    """Bin-packing's measure of what a placement strands; None under spreading, or for
    KAI's fullest-node rule."""
    topology: TopologyIndex | None = None
    """The cycle's Topologies, for gangs with a `topologyConstraint`."""
    balance: CpuBalance | None = None
    """The cluster's cores per GPU, when the caller knows them (a memo's)."""
    pod_affinity: PodAffinity | None = None
    """The cycle's inter-pod terms, when a pod carries one (the greedy pass keeps them)."""
    rankings: dict[str, QueueRanking] = field(default_factory=dict, compare=False)
    """Each queue's ranking, shared by every pass in this order: it depends only on the
    queue and its shares (the eviction actions' look at the next cycle runs a pass per
    decision, and building the rankings afresh was a fifth of it)."""

    def node_index(self, capacity: Mapping[str, NodeCapacity]) -> NodeIndex:
        """An index over this free capacity that finds nodes in this order's preference."""
        config = self.config
        return NodeIndex(
            capacity,
            config.placement_strategy,
            config.device_placement,
            self.fragmentation,
            self.balance,
        )


def allocate_in_kai_order(
    gangs: Iterable[GangRequest],
    capacity: Mapping[str, NodeCapacity],
    ledger: QueueBudget,
    order: KaiOrder,
    settled: Settled | None = None,
) -> AllocationOutcome:
    """The greedy pass over these gangs, from this free capacity and queue ledger: the one
    allocation the cycle makes, the solver's repair and the eviction searches' look at the
    next cycle all run (that one may end it early with `settled`)."""
    return allocate_on_index(gangs, order.node_index(capacity), ledger, order, settled)


def allocate_on_index(
    gangs: Iterable[GangRequest],
    index: NodeIndex,
    ledger: QueueBudget,
    order: KaiOrder,
    settled: Settled | None = None,
    pending: PendingOffers | None = None,
    without: Collection[str] = (),
) -> AllocationOutcome:
    """`allocate_in_kai_order` on an index the caller keeps: it takes what it places there,
    so a caller that looks at many futures of the same room wraps each in a checkpoint.
    `pending` (less the gangs in `without`) are offered besides `gangs`."""
    offers = OfferQueue(
        order.queues,
        order.shares,
        lambda name: ledger.allocated.get(name, NO_RESOURCES),
        lambda offer: offer.size(order.accounting_memory_mib),
        order.total,
        pending,
        without,
        order.rankings,
    )
    for gang in gangs:
        offer = first_offer(gang)
        if offer is not None:
            offers.push(offer)
    return greedy_allocate(
        offers,
        index,
        ledger,
        order.eligible_for,
        order.accounting_memory_mib,
        settled,
        order.topology,
        order.pod_affinity,
    )


def _place_core(
    gang: GangRequest,
    index: NodeIndex,
    budget: QueueBudget,
    eligible_for: Callable[[Pod], Callable[[str], bool]],
    accounting_memory_mib: int,
    outcome: AllocationOutcome,
    topology: TopologyIndex | None = None,
    pod_affinity: PodAffinity | None = None,
) -> bool:
    group = gang.group
    request = gang.core_request(accounting_memory_mib)
    refusal = budget.check(group.queue, request, group.preemptible)
    if refusal is not None:
        outcome.refusals[gang.key] = refusal
        outcome.capped.add((gang.key, 0))
        return False
    rules = topology.rules(group) if topology is not None else None
    if rules is not None and rules.problem is not None:
        outcome.refusals[gang.key] = rules.problem
        return False
    index.begin()
    if rules is not None and rules.rules:
        assert topology is not None
        concerned = _concerned(gang.core, pod_affinity)
        kept_apart = _seated_apart(pod_affinity, outcome) if concerned else None
        seats, why = place_constrained(
            group, gang.core, rules, topology.running(gang.key), index, eligible_for, kept_apart
        )
        if seats is None:
            index.rollback()
            outcome.refusals[gang.key] = Refusal(UNSCHEDULABLE, why)
            return False
        index.commit()
        budget.add(group.queue, request, group.preemptible)
        for pod, seat, groups in seats:
            outcome.placements[pod.key] = PodPlacement(pod, seat, groups)
        return True
    alone = len(gang.core) == 1
    placed: list[PodPlacement] = []
    for pod in gang.core:
        eligible = _kept_apart(pod, eligible_for(pod), pod_affinity, outcome, placed)
        node = _find_preferred(index, pod, eligible, alone, pod_affinity, outcome, placed)
        if node is None:
            index.rollback()
            outcome.refusals[gang.key] = Refusal(
                UNSCHEDULABLE,
                f"resources were found for {len(placed)} pods while {len(gang.core)} are required "
                f"to reach minMember {group.min_member}",
            )
            return False
        placed.append(PodPlacement(pod, node, index.take(node, pod, alone=alone)))
    index.commit()
    budget.add(group.queue, request, group.preemptible)
    for placement in placed:
        outcome.placements[placement.pod.key] = placement
    return True


def _within_domain(
    gang: GangRequest,
    eligible_for: Callable[[Pod], Callable[[str], bool]],
    outcome: AllocationOutcome,
    topology: TopologyIndex | None,
) -> Callable[[Pod], Callable[[str], bool]]:
    """An elastic pod of a constrained gang joins the domains its gang's pods are in."""
    rules = topology.rules(gang.group) if topology is not None else None
    if rules is None or not rules.rules:
        return eligible_for
    assert topology is not None
    placed = [*topology.running(gang.key)]
    placed += [p.pod for p in outcome.placements.values() if p.pod.group == gang.key]
    nodes = {p.pod.key: p.node for p in outcome.placements.values() if p.pod.group == gang.key}

    def restricted(pod: Pod) -> Callable[[str], bool]:
        eligible = eligible_for(pod)
        allowed = domain_of_placed(rules, pod, [(p, p.node or nodes.get(p.key)) for p in placed])
        if allowed is None:
            return eligible
        return lambda name: name in allowed and eligible(name)

    return restricted


def _place_elastic(
    offer: Offer,
    index: NodeIndex,
    budget: QueueBudget,
    eligible_for: Callable[[Pod], Callable[[str], bool]],
    accounting_memory_mib: int,
    outcome: AllocationOutcome,
    pod_affinity: PodAffinity | None = None,
) -> bool:
    gang, pod = offer.gang, offer.pods[0]
    group = gang.group
    request = pod_resources(pod, accounting_memory_mib)
    if not budget.fits(group.queue, request, group.preemptible):
        outcome.capped.add((gang.key, offer.elastic))
        return False
    eligible = _kept_apart(pod, eligible_for(pod), pod_affinity, outcome)
    node = _find_preferred(index, pod, eligible, True, pod_affinity, outcome)
    if node is None:
        return False
    outcome.placements[pod.key] = PodPlacement(pod, node, index.take(node, pod, alone=True))
    budget.add(group.queue, request, group.preemptible)
    return True


def _seated_apart(pod_affinity: PodAffinity | None, outcome: AllocationOutcome) -> KeptApart:
    """`_kept_apart` and `_preferred` for a topology search: beside the pass's placements
    and the seats the search has made so far."""

    def kept(pod: Pod, eligible: Callable[[str], bool], seats: Sequence[Seat]) -> list[Eligible]:
        placed = [PodPlacement(*seat) for seat in seats]
        allowed = _kept_apart(pod, eligible, pod_affinity, outcome, placed)
        return _preferred(pod, allowed, pod_affinity, outcome, placed)

    return kept


def _concerned(pods: Iterable[Pod], pod_affinity: PodAffinity | None) -> bool:
    return pod_affinity is not None and any(pod_affinity.concerns(pod) for pod in pods)


def _find_preferred(
    index: NodeIndex,
    pod: Pod,
    eligible: Callable[[str], bool],
    alone: bool,
    pod_affinity: PodAffinity | None,
    outcome: AllocationOutcome,
    placed: Sequence[PodPlacement] = (),
) -> str | None:
    """`index.find`, tier by tier of the nodes the preferred inter-pod terms score alike:
    KAI adds kube-scheduler's InterPodAffinity score to a node's order a million times
    over (`plugins/podaffinity`, `scores.K8sPlugins`), above every score but a nominated
    node's, so the packing order only breaks ties between nodes scored alike."""
    if pod.nominated_node is not None:
        nominated = index.nominated(pod, eligible)
        if nominated is not None:
            return nominated
    for allowed in _preferred(pod, eligible, pod_affinity, outcome, placed):
        node = index.find(pod, allowed, alone)
        if node is not None:
            return node
    return None


def _preferred(
    pod: Pod,
    allowed: Callable[[str], bool],
    pod_affinity: PodAffinity | None,
    outcome: AllocationOutcome,
    placed: Sequence[PodPlacement] = (),
) -> list[Eligible]:
    """`allowed` in tiers the preferred terms score alike, best first, beside the pass's
    placements and the gang's pods placed before (`PodAffinity.tiers_within`)."""
    if pod_affinity is None:
        return [allowed]
    return pod_affinity.tiers_within(pod, allowed, outcome.placements, placed)


def _kept_apart(
    pod: Pod,
    eligible: Callable[[str], bool],
    pod_affinity: PodAffinity | None,
    outcome: AllocationOutcome,
    placed: Sequence[PodPlacement] = (),
) -> Callable[[str], bool]:
    """`eligible`, narrowed by the inter-pod terms that concern `pod`, beside every pod
    placed before it (the pass's and, inside a gang being placed, its mates')."""
    if pod_affinity is None or not pod_affinity.constrains(pod):
        return eligible
    return pod_affinity.restrict(pod, eligible, outcome.placements, placed)
