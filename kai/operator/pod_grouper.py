"""The live pod grouper: gives every `kai-scheduler` pod its PodGroup (kai-semantics §14.2).

For each pod without a `pod-group-name` annotation it reads the owner chain from
the API server and asks the same pure grouper `kai simulate` uses for the plan.
Planning writes nothing: the cycle schedules the planned groups at once (the
snapshot lays the plans over the cache), and only then are they written
(kai.operator.group_writes): a group the cycle binds whole beside its binds,
which do not wait for it and carry the pod's `pod-group-name` annotation (the API
server copies a Binding's annotations onto the pod in the same write), and while
a burst continues after the burst; every other group before its pods are bound
or annotated. An existing
group is updated keeping what users and operators may have changed: the queue,
markUnschedulable, schedulingBackoff, the node-pool and queue labels.

Plans are remembered until the cache shows both the pod's annotation and its
group (they come by different watches), so a pod is not grouped twice while the
watch catches up and a bound pod always counts toward its queue. What a stopped
scheduler left half done is found again from the cluster: a pod not annotated
yet is planned again and its group found (409) instead of created; a bound pod
whose annotation names the group its plan names, which the cluster lacks, is
planned again and its group created (KAI's pod grouper, too, writes the group of
every pod it sees). A bound pod naming another group (its own, which a user
deleted) is left as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from kai.api.constants import POD_GROUP_ANNOTATION
from kai.api.errors import ManifestError
from kai.api.shards import NODE_POOL_LABEL_KEY
from kai.grouping import GroupingError, PodGroupPlan, plan_pod_group
from kai.kube.client import ApiError, Kube
from kai.kube.owners import OwnerChainError, OwnerReader
from kai.operator.burst import cycle_bound, first_in_line
from kai.operator.cache import ClusterView
from kai.operator.events import GROUPING_FAILED, WARNING, EventRecorder, InvolvedObject
from kai.operator.group_writes import GroupWrites, Written
from kai.operator.grouping_candidates import Candidates
from kai.operator.recovered_starts import with_recovered_starts
from kai.workloads.catalog import load_catalog
from kai.workloads.jqeval import JqEvaluator
from kai.workloads.loader import InvalidDefinitionError, load_definition
from kai.workloads.registry import DefinitionRegistry, DuplicateDefinitionError

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Plans:
    """The grouper's decisions that the cache does not show yet, by pod key."""

    new: Mapping[str, PodGroupPlan]
    """Planned this cycle; nothing written yet."""
    written: Mapping[str, PodGroupPlan]
    """Written in an earlier cycle (or bound, the group owed); the cache does not show
    the annotation and the group yet."""
    retrying: frozenset[str]
    """New plans whose group write failed in an earlier cycle: written, not scheduled."""
    deferred: int = 0
    """Pods that need a group but wait for a later cycle: the burst was over its bound."""
    ends_burst: bool = False
    """The cycle before left pods for this one, and this one takes on the rest."""

    @property
    def burst_continues(self) -> bool:
        """More new pods wait than this cycle took on: the next cycle starts at once."""
        return self.deferred > 0

    def schedulable(self) -> dict[str, PodGroupPlan]:
        """The plans the cycle's snapshot lays over the cache."""
        fresh = {key: plan for key, plan in self.new.items() if key not in self.retrying}
        return {**self.written, **fresh}


class PodGrouper:
    def __init__(
        self,
        kube: Kube,
        owners: OwnerReader,
        events: EventRecorder,
        reservation_namespace: str,
        concurrency: int,
        burst_limit: int = 0,
        node_pool_label: str = NODE_POOL_LABEL_KEY,
    ) -> None:
        self._kube = kube
        self._node_pool_label = node_pool_label  # copied from the pod onto its group (KAI)
        self._owners = owners
        self._burst_limit = (
            burst_limit  # a burst's first cycle's bound; 0: all (kai.operator.burst)
        )
        self._burst_cycles = 0  # cycles in a row that left new pods for the next one
        self._events = events
        self._concurrency = concurrency
        self._jq = JqEvaluator()
        self._catalog = load_catalog(self._jq)
        self._registry: tuple[frozenset[str], DefinitionRegistry] | None = None
        self._written: dict[str, tuple[str, PodGroupPlan]] = {}  # pod key -> (uid, plan)
        self._refused: set[str] = set()  # pod keys whose group write failed last time
        self._reported: dict[str, str] = {}  # pod uid -> last grouping problem
        self._owed: dict[str, PodGroupPlan] = {}  # group key -> plan: bound in a burst, not written
        self._named_elsewhere: set[str] = set()  # uids of bound pods naming a group not theirs
        self._candidates = Candidates(reservation_namespace)

    async def plan(
        self,
        view: ClusterView,
        priority_classes: Mapping[str, int],
        in_flight: Mapping[str, PodGroupPlan] | None = None,
    ) -> Plans:
        """Plan the ungrouped pods first in line (at most the burst's bound); reads owners, writes nothing.

        `in_flight`: the plans of a cycle whose binds and writes are still going out (its
        pods are not planned again, and its plans count as written until they settle).
        """
        self._forget_settled(view)
        self._forget_reports_of_gone(view)
        in_flight = in_flight or {}
        waiting = [
            (key, view.pods[key])
            for key, candidate in self._candidates.needing(view.pods, view.pod_groups)
            if key not in self._written
            and key not in in_flight
            and (candidate.named is None or candidate.uid not in self._named_elsewhere)
        ]
        self._refused &= {key for key, _ in waiting}
        waiting, deferred = first_in_line(
            waiting, cycle_bound(self._burst_limit, self._burst_cycles)
        )
        ends_burst = self._burst_cycles > 0 and not deferred
        self._burst_cycles = self._burst_cycles + 1 if deferred else 0
        new: dict[str, PodGroupPlan] = {}
        if waiting:
            self._owners.start_cycle()
            registry = self._definitions(view)
            for key, pod in waiting:
                plan = await self._plan(pod, registry, priority_classes)
                if plan is not None and self._is_its_group(pod, plan):
                    new[key] = plan
        return Plans(
            new=with_recovered_starts(new, view.pods),
            written={**in_flight, **{key: plan for key, (_, plan) in self._written.items()}},
            retrying=frozenset(self._refused & new.keys()),
            deferred=deferred,
            ends_burst=ends_burst,
        )

    def writes(self, view: ClusterView, plans: Plans) -> GroupWrites:
        """The writes of this cycle's new plans, and of the groups an earlier burst owes
        once it is over; enter it to start them (see GroupWrites)."""
        return GroupWrites(
            self._kube,
            view,
            plans.new,
            self._concurrency,
            self._settle,
            self._node_pool_label,
            owed=dict(self._owed),
            defer=plans.burst_continues,
            ends_burst=plans.ends_burst,
            settle_owed=self._settle_owed,
        )

    def _settle(self, key: str, uid: str, plan: PodGroupPlan, outcome: Written) -> None:
        if outcome is Written.GROUP_REFUSED:
            self._refused.add(key)
            return
        self._refused.discard(key)
        if outcome in (Written.ALL, Written.GROUP_OWED):
            self._written[key] = (uid, plan)
        if outcome is Written.GROUP_OWED:
            self._owed[plan.key] = plan

    @property
    def owed_groups(self) -> frozenset[str]:
        """The PodGroups bound in a burst that have not been created yet."""
        return frozenset(self._owed)

    def _settle_owed(self, group: str, written: bool) -> None:
        if written:
            self._owed.pop(group, None)

    def _is_its_group(self, pod: Mapping[str, Any], plan: PodGroupPlan) -> bool:
        """Whether the plan is the group the pod names, if it names one; a pod that names
        another is remembered, so that its owners are not read again every cycle."""
        metadata = pod.get("metadata") or {}
        named = (metadata.get("annotations") or {}).get(POD_GROUP_ANNOTATION)
        if named and named != plan.name:
            self._named_elsewhere.add(str(metadata.get("uid")))
            return False
        return True

    def _forget_settled(self, view: ClusterView) -> None:
        """Drop plans whose pod is gone or replaced, or which the cache shows whole: the pod
        with its annotation and the PodGroup itself. The two come by different watches; a
        bound pod whose group the cache lacks would count toward no queue, and its queue
        could be given more than its limit."""
        for key, (uid, plan) in list(self._written.items()):
            pod = view.pods.get(key)
            metadata = (pod or {}).get("metadata") or {}
            annotated = bool((metadata.get("annotations") or {}).get(POD_GROUP_ANNOTATION))
            group_seen = plan.key in view.pod_groups
            if pod is None or metadata.get("uid") != uid or (annotated and group_seen):
                del self._written[key]
        if self._owed:  # a group owed for pods that are all gone is not written
            waited_for = {plan.key for _, plan in self._written.values()}
            self._owed = {key: plan for key, plan in self._owed.items() if key in waited_for}

    def _forget_reports_of_gone(self, view: ClusterView) -> None:
        """Drop what is remembered about pods that no longer exist (problems, foreign groups)."""
        if not (self._reported or self._named_elsewhere):
            return
        present = {(pod.get("metadata") or {}).get("uid") for pod in view.pods.values()}
        self._reported = {uid: why for uid, why in self._reported.items() if uid in present}
        self._named_elsewhere &= present

    @property
    def remembered(self) -> int:
        """Pods the grouper keeps something about (plans written, problems reported)."""
        return (
            len(self._written)
            + len(self._refused)
            + len(self._reported)
            + len(self._owed)
            + len(self._named_elsewhere)
        )

    def _definitions(self, view: ClusterView) -> DefinitionRegistry:
        """The catalog plus the cluster's Karta definitions, rebuilt only when those change."""
        versions = frozenset(
            f"{key}@{(obj.get('metadata') or {}).get('resourceVersion')}"
            for key, obj in view.kartas.items()
        )
        if self._registry is None or self._registry[0] != versions:
            cluster = []
            for key, obj in view.kartas.items():
                try:
                    cluster.append(load_definition(obj, self._jq, "cluster"))
                except InvalidDefinitionError as error:
                    log.warning("Karta definition skipped", karta=key, problem=str(error))
            try:
                registry = DefinitionRegistry(self._catalog, cluster, self._jq)
            except DuplicateDefinitionError as error:
                log.warning("Karta definitions ignored", problem=str(error))
                registry = DefinitionRegistry(self._catalog, (), self._jq)
            self._registry = (versions, registry)
        return self._registry[1]

    async def _plan(
        self,
        pod: Mapping[str, Any],
        registry: DefinitionRegistry,
        priority_classes: Mapping[str, int],
    ) -> PodGroupPlan | None:
        try:
            chain = await self._owners.chain(pod)
            return plan_pod_group(pod, chain, registry, priority_classes, self._node_pool_label)
        except (GroupingError, OwnerChainError, ManifestError) as error:
            self._report(pod, str(error))
        except ApiError as error:
            log.warning("owner chain not read; retrying next cycle", error=str(error))
        return None

    def _report(self, pod: Mapping[str, Any], problem: str) -> None:
        about = InvolvedObject.of({**pod, "apiVersion": "v1", "kind": "Pod"})
        if self._reported.get(about.uid) != problem:
            self._reported[about.uid] = problem
            self._events.record(about, WARNING, GROUPING_FAILED, problem)
