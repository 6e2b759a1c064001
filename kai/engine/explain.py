"""Why a gang is still pending, in words with numbers.

Every PodGroup the cycle leaves pending gets a reason code and a message that
names the queue, the resource and the amounts, or the pod and the node predicate
that failed. This is the answer to "why is my pod pending?", the complaint users
of other schedulers raise most.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from kai.engine import scalars
from kai.engine.budget import QueueBudget, Refusal, describe_amount
from kai.engine.capacity import NodeCapacity
from kai.engine.eligibility import rejection_reason
from kai.engine.gangs import GangRequest
from kai.engine.greedy import UNSCHEDULABLE
from kai.engine.model import Node, Pod

NOT_ENOUGH_PODS = "NotEnoughPods"


def explain_incomplete(gang: GangRequest) -> Refusal:
    group = gang.group
    have = gang.active + gang.pending
    return Refusal(
        NOT_ENOUGH_PODS,
        f"PodGroup {group.key} has {have} pods (running {gang.active}, pending {gang.pending}); "
        f"minMember is {group.min_member}, so it waits for {gang.missing} more",
    )


class PendingExplainer:
    """Explains the gangs one cycle leaves pending.

    What the explanations read is the same for every gang of the cycle, so it is worked
    out once: each distinct ask's verdict over the nodes as they were (at 5,000 nodes,
    looking at every node for every pending gang was a sixth of the cycle), and the whole
    GPUs left free. `capacity_after` is asked for only if some explanation needs it.
    """

    def __init__(
        self,
        budget_after: QueueBudget,
        capacity_before: Mapping[str, NodeCapacity],
        capacity_after: Callable[[], Mapping[str, NodeCapacity]],
        nodes: Mapping[str, Node],
        accounting_memory_mib: int,
        stuck_gpus: Callable[[], Mapping[str, int]],
        closed_by_terms: Callable[[Pod], str | None] | None = None,
    ) -> None:
        """`closed_by_terms`: why inter-pod affinity terms close every node a pod fits by
        its predicates (`PodAffinity.why_not`), or None when one is open."""
        self._closed_by_terms = closed_by_terms
        self._budget = budget_after
        self._before = capacity_before
        self._after = functools.cache(capacity_after)
        """The nodes after this cycle's placements: built once (a node index over every
        node), and only if some explanation reads them."""
        self._nodes = nodes
        self._memory_mib = accounting_memory_mib
        self._stuck = functools.cache(stuck_gpus)
        """Whole GPUs per node held by pods stuck in their deletion (`Pod.stuck`): a node
        short of GPUs says so, as nothing waits on that room. Worked out once, and only if
        some pod fits no node."""
        self._rejections: dict[tuple[object, ...], str | None] = {}
        self._free_gpus: int | None = None
        self._free_scalars: dict[str, int] = {}  # per scalar resource, over the nodes after

    def explain(self, gang: GangRequest, known: Refusal | None = None) -> Refusal:
        """The reason a gang that passed its own quota check was still not placed.

        Quota and per-pod node predicates are checked first, since they name the cause;
        then `known`, the refusal the allocation pass itself recorded, if any.
        """
        group = gang.group
        request = gang.core_request(self._memory_mib)
        refusal = self._budget.check(group.queue, request, group.preemptible)
        if refusal is not None:
            return Refusal(refusal.reason, refusal.message + " after this cycle's other placements")
        for pod in gang.core:
            reasons = self._node_rejections(pod)
            if reasons is not None:
                return Refusal(UNSCHEDULABLE, f"pod {pod.key} fits no node: {reasons}")
        closing = self._closed_by_terms
        if closing is not None:
            for pod in gang.core:
                closed = closing(pod)
                if closed:
                    return Refusal(
                        UNSCHEDULABLE,
                        f"pod {pod.key} fits no node its inter-pod affinity terms leave open: "
                        f"{closed}",
                    )
        for pod in gang.core:
            if pod.scalars:
                # The generic words below count GPUs and cores: a scalar resource the
                # placements ahead took is named instead, with the amounts.
                reasons = self._node_rejections(pod, after=True)
                if reasons is not None:
                    return Refusal(
                        UNSCHEDULABLE,
                        f"pod {pod.key} fits no node after this cycle's placements ahead of "
                        f"it in queue order: {reasons}",
                    )
        short = self._scalar_shortage(gang.core)
        if short is not None:
            return Refusal(UNSCHEDULABLE, short)
        if known is not None:
            return known
        if self._free_gpus is None:
            self._free_gpus = sum(cap.whole_gpus for cap in self._after().values())
        free_gpus = self._free_gpus
        if len(gang.core) == 1:
            asking, together, fitting = f"pod {gang.core[0].key}", "", "no node fits it"
        else:
            pods = len(gang.core)
            asking, together = f"gang of {pods} pods", " together"
            fitting = f"no set of nodes fits all {pods} pods"
        shortage = (
            f"only {free_gpus} whole GPUs are free"
            if free_gpus < request.gpu
            else f"{free_gpus} whole GPUs are free but {fitting}"
        )
        return Refusal(
            UNSCHEDULABLE,
            f"{asking} needs {describe_amount('gpu', request.gpu)} and {request.cpu}m cpu"
            f"{together}; it would fit the cluster as it was, but after this cycle's "
            f"placements ahead of it in queue order {shortage}",
        )

    def _scalar_shortage(self, core: Sequence[Pod]) -> str | None:
        """A scalar resource a gang's pods ask for more of together than the nodes have free
        after the placements ahead: each pod may fit a node, the gang fits none."""
        if len(core) < 2:
            return None  # a lone pod's words name the node's shortage
        asks: dict[str, int] = {}
        for pod in core:
            for name, amount in pod.scalars:
                asks[name] = asks.get(name, 0) + amount
        for name, need in sorted(asks.items()):
            free = self._free_scalars.get(name)
            if free is None:
                caps = self._after().values()
                free = self._free_scalars[name] = sum(
                    max(cap.scalars.get(name, 0), 0) for cap in caps
                )
            if need > free:
                return (
                    f"gang of {len(core)} pods needs {scalars.in_units(name, need)} {name} "
                    f"together; {scalars.in_units(name, free)} free after this cycle's "
                    f"placements ahead of it in queue order"
                )
        return None

    def explain_waiting(self, gang: GangRequest, left: Sequence[Pod]) -> Refusal:
        """Why pods still wait in a gang that runs, or is placed, at its minimum: an extra
        sub-group not placed, explained whole, else the first elastic pod left (KAI records
        such a job's pending pods as unschedulable, as it does a job's below its minimum)."""
        waiting = {pod.key for pod in left}
        core = tuple(pod for pod in gang.core if pod.key in waiting)
        refusal = self.explain(
            dataclasses.replace(gang, core=core or (left[0],), elastic=(), growth=False)
        )
        return Refusal(
            refusal.reason,
            f"the gang runs; {len(left)} pod(s) beyond its minimum wait: {refusal.message}",
        )

    def _node_rejections(self, pod: Pod, after: bool = False) -> str | None:
        """Counts of why each node refuses the pod, or None when some node would take it
        (pods that ask alike, in any gang, share the answer); on the nodes as they were, or
        `after` this cycle's placements."""
        # Integers, not the Fractions themselves: hashing a Fraction is slow, and this key is
        # made for every pod of every pending gang.
        cpu, memory, gpu = pod.request.cpu, pod.request.memory, pod.gpu
        ask = (
            cpu.numerator,
            cpu.denominator,
            memory.numerator,
            memory.denominator,
            gpu.whole,
            gpu.portion.numerator,
            gpu.portion.denominator,
            gpu.memory_mib,
            gpu.devices,
            pod.placement,
            pod.scalars,
            after,
        )
        if ask not in self._rejections:
            capacity = self._after() if after else self._before
            self._rejections[ask] = _node_rejections(pod, capacity, self._nodes, self._stuck())
        return self._rejections[ask]


def _node_rejections(
    pod: Pod,
    capacity: Mapping[str, NodeCapacity],
    nodes: Mapping[str, Node],
    stuck_gpus: Mapping[str, int],
) -> str | None:
    """Counts of why each node refuses the pod, or None when some node would take it."""
    tally: Counter[str] = Counter()
    for name, node in nodes.items():  # the tally is sorted: the walk's order does not matter
        predicate = rejection_reason(node, pod.placement)
        if predicate is not None:
            tally[predicate] += 1
            continue
        fit = _capacity_shortfall(pod, capacity[name], stuck_gpus.get(name, 0))
        if fit is None:
            return None
        tally[fit] += 1
    if not tally:
        return "the cluster has no nodes"
    return "; ".join(f"{count} node(s): {reason}" for reason, count in sorted(tally.items()))


def _capacity_shortfall(pod: Pod, cap: NodeCapacity, stuck_gpus: int) -> str | None:
    stuck = f"; {stuck_gpus} held by pods stuck in their deletion" if stuck_gpus else ""
    checks: list[tuple[bool, Callable[[], str]]] = [
        (cap.pods < 1, lambda: "no pod slots left"),
        (
            pod.request.cpu > cap.cpu,
            lambda: f"insufficient cpu (needs {pod.request.cpu}m, free {cap.cpu}m)",
        ),
        (
            pod.request.memory > cap.memory,
            lambda: f"insufficient memory (needs {pod.request.memory} bytes, free {cap.memory})",
        ),
        (
            pod.gpu.whole > cap.whole_gpus,
            lambda: f"insufficient GPUs (needs {pod.gpu.whole}, free {cap.whole_gpus}{stuck})",
        ),
    ]
    for failed, message in checks:
        if failed:
            return message()
    if pod.scalars:
        short = scalars.shortage_message(pod.scalars, cap.scalars)
        if short is not None:
            return short
    if pod.gpu.is_fractional and cap.shared_candidates(pod) is None:
        need = pod.gpu.memory_on(cap.node.gpu_memory_mib)
        if pod.gpu.devices == 1:
            return (
                f"no GPU device with {need} MiB free (device memory {cap.node.gpu_memory_mib} MiB)"
            )
        return (
            f"fewer than {pod.gpu.devices} GPU devices with {need} MiB free each"
            f" (device memory {cap.node.gpu_memory_mib} MiB)"
        )
    return None
