"""The live pod grouper: gives every `kai-scheduler` pod its PodGroup (kai-semantics §14.2).

For each pod without a `pod-group-name` annotation it reads the owner chain from
the API server and asks the same pure grouper `kai simulate` uses for the plan.
Planning writes nothing: the cycle schedules the planned groups at once (the
snapshot lays the plans over the cache), and only then are they written, in the
order the binder needs them, so the first binds go out while later groups are
still being written instead of after all of them.

Per pod the order is: the PodGroup is created (or updated, keeping what users and
operators may have changed: the queue, markUnschedulable, schedulingBackoff, the
node-pool and queue labels); then, if the cycle binds the pod, the binding itself
carries the `pod-group-name` annotation (the API server copies a Binding's
annotations onto the pod in the same write), else the pod is patched. So a pod is
never bound before its PodGroup exists, never bound without its annotation, and a
scheduler killed in between leaves at worst a PodGroup whose pod is not annotated
yet, which the next cycle plans again and finds (409) instead of creating.
Sub-group labels are patched before the bind: a Binding's labels are copied only
behind a feature gate. A new group the cycle binds is created with its start
timestamp (the writes start once the engine has decided): one write per new group
instead of a create and then an annotation patch. Written plans are remembered until the cache shows the
annotation, so a pod is not grouped twice while the watch catches up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import partial
from types import TracebackType
from typing import Any

import structlog

from kai.api.constants import POD_GROUP_ANNOTATION, QUEUE_LABEL, SCHEDULER_NAME
from kai.api.errors import ManifestError
from kai.api.shards import NODE_POOL_LABEL_KEY
from kai.grouping import GroupingError, PodGroupPlan, plan_pod_group
from kai.kube.client import ApiError, Kube
from kai.kube.owners import OwnerChainError, OwnerReader
from kai.operator.burst import first_in_line
from kai.operator.cache import ClusterView
from kai.operator.events import GROUPING_FAILED, WARNING, EventRecorder, InvolvedObject
from kai.workloads.catalog import load_catalog
from kai.workloads.jqeval import JqEvaluator
from kai.workloads.loader import InvalidDefinitionError, load_definition
from kai.workloads.registry import DefinitionRegistry, DuplicateDefinitionError

log = structlog.get_logger(__name__)

PRESERVED_SPEC_FIELDS = ("queue", "markUnschedulable", "schedulingBackoff")
_CONFLICT = 409


@dataclass(frozen=True)
class Plans:
    """The grouper's decisions that the cache does not show yet, by pod key."""

    new: Mapping[str, PodGroupPlan]
    """Planned this cycle; nothing written yet."""
    written: Mapping[str, PodGroupPlan]
    """Written in an earlier cycle; the watch has not shown the annotation yet."""
    retrying: frozenset[str]
    """New plans whose group write failed in an earlier cycle: written, not scheduled."""
    deferred: int = 0
    """Pods that need a group but wait for a later cycle: the burst was over its bound."""

    def schedulable(self) -> dict[str, PodGroupPlan]:
        """The plans the cycle's snapshot lays over the cache."""
        fresh = {key: plan for key, plan in self.new.items() if key not in self.retrying}
        return {**self.written, **fresh}


class Written(Enum):
    """How far one pod's grouping writes got in a cycle."""

    ALL = "all"
    """The group, and the annotation (patched, or carried by the binding)."""
    GROUP_ONLY = "group-only"
    """The group; the annotation is written next cycle."""
    GROUP_REFUSED = "group-refused"
    """Not even the group."""


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
        self._burst_limit = burst_limit  # new pods grouped per cycle; 0: all (kai.operator.burst)
        self._events = events
        self._reservation_namespace = reservation_namespace
        self._concurrency = concurrency
        self._jq = JqEvaluator()
        self._catalog = load_catalog(self._jq)
        self._registry: tuple[frozenset[str], DefinitionRegistry] | None = None
        self._written: dict[str, tuple[str, PodGroupPlan]] = {}  # pod key -> (uid, plan)
        self._refused: set[str] = set()  # pod keys whose group write failed last time
        self._reported: dict[str, str] = {}  # pod uid -> last grouping problem

    async def plan(self, view: ClusterView, priority_classes: Mapping[str, int]) -> Plans:
        """Plan the ungrouped pods first in line (at most the burst limit); reads owners, writes nothing."""
        self._forget_settled(view)
        self._forget_reports_of_gone(view)
        waiting = [
            (key, pod)
            for key, pod in view.pods.items()
            if key not in self._written and self._needs_group(pod)
        ]
        self._refused &= {key for key, _ in waiting}
        waiting, deferred = first_in_line(waiting, self._burst_limit)
        new: dict[str, PodGroupPlan] = {}
        if waiting:
            self._owners.start_cycle()
            registry = self._definitions(view)
            for key, pod in waiting:
                plan = await self._plan(pod, registry, priority_classes)
                if plan is not None:
                    new[key] = plan
        return Plans(
            new=new,
            written={key: plan for key, (_, plan) in self._written.items()},
            retrying=frozenset(self._refused & new.keys()),
            deferred=deferred,
        )

    def writes(self, view: ClusterView, plans: Mapping[str, PodGroupPlan]) -> GroupWrites:
        """The writes of this cycle's new plans; enter it to start them (see GroupWrites)."""
        return GroupWrites(
            self._kube, view, plans, self._concurrency, self._settle, self._node_pool_label
        )

    def _settle(self, key: str, uid: str, plan: PodGroupPlan, outcome: Written) -> None:
        if outcome is Written.GROUP_REFUSED:
            self._refused.add(key)
            return
        self._refused.discard(key)
        if outcome is Written.ALL:
            self._written[key] = (uid, plan)

    def _needs_group(self, pod: Mapping[str, Any]) -> bool:
        metadata = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        phase = (pod.get("status") or {}).get("phase")
        return (
            spec.get("schedulerName") == SCHEDULER_NAME
            and not (metadata.get("annotations") or {}).get(POD_GROUP_ANNOTATION)
            and metadata.get("namespace") != self._reservation_namespace
            and metadata.get("deletionTimestamp") is None
            and phase not in ("Succeeded", "Failed")
        )

    def _forget_settled(self, view: ClusterView) -> None:
        """Drop plans whose pod is gone or replaced, or which the cache shows whole: the pod
        with its annotation and the PodGroup itself. The two come by different watches; a
        bound pod whose group the cache lacks would count toward no queue, and its queue
        could be given more than its limit."""
        for key, (uid, plan) in list(self._written.items()):
            pod = view.pods.get(key)
            metadata = (pod or {}).get("metadata") or {}
            annotated = bool((metadata.get("annotations") or {}).get(POD_GROUP_ANNOTATION))
            group_seen = f"{plan.namespace}/{plan.name}" in view.pod_groups
            if pod is None or metadata.get("uid") != uid or (annotated and group_seen):
                del self._written[key]

    def _forget_reports_of_gone(self, view: ClusterView) -> None:
        """Drop the grouping problems remembered for pods that no longer exist."""
        if not self._reported:
            return
        present = {(pod.get("metadata") or {}).get("uid") for pod in view.pods.values()}
        self._reported = {uid: why for uid, why in self._reported.items() if uid in present}

    @property
    def remembered(self) -> int:
        """Pods the grouper keeps something about (plans written, problems reported)."""
        return len(self._written) + len(self._refused) + len(self._reported)

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


class GroupWrites:
    """One cycle's grouping writes, as an async context that awaits them all on exit.

    `decided` is told which pods the cycle binds, in the binder's order, and the
    start timestamps of the groups it binds; it starts the PodGroup writes, at most
    `concurrency` at once, in that order, then those of the other plans. A new
    group the cycle binds is created with its start timestamp (`stamped` says which
    creates carried one): written before the engine had decided, each needed a
    second write, an annotation patch, and a burst's creates were waiting for a
    write slot anyway. The bound pods' annotation will ride on the binding; every
    other pod (and a pod with sub-group labels) is patched as soon as its group is
    written. The binder asks `annotations(pod)` before each bind: it waits for the
    pod's PodGroup and answers what the binding must carry, or None when the group
    could not be written (the pod is not bound this cycle). `finish` is told which
    pods were bound, patches those whose bind did not happen and waits for every
    write. Failures (an unexpected exception too: it
    stays with its pod) are logged and retried next cycle; on exit each pod's
    outcome goes to `settle`.
    """

    def __init__(
        self,
        kube: Kube,
        view: ClusterView,
        plans: Mapping[str, PodGroupPlan],
        concurrency: int,
        settle: Callable[[str, str, PodGroupPlan, Written], None],
        node_pool_label: str = NODE_POOL_LABEL_KEY,
    ) -> None:
        self._kube = kube
        self._node_pool_label = node_pool_label
        self._view = view
        self._plans = plans
        self._settle = settle
        self._slots = asyncio.Semaphore(concurrency)
        self._tasks = asyncio.TaskGroup()
        self._groups: dict[str, asyncio.Task[bool]] = {}
        self._patches: dict[str, asyncio.Task[bool]] = {}
        self._carried: set[str] = set()
        self._bound: set[str] = set()
        self.stamped: dict[str, Mapping[str, str]] = {}
        """PodGroup key -> the timestamp annotations its create carried."""

    async def __aenter__(self) -> GroupWrites:
        await self._tasks.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._tasks.__aexit__(exc_type, exc, tb)
        if exc is None:
            self._hand_back()

    async def annotations(self, pod_key: str) -> Mapping[str, str] | None:
        """What the pod's binding must carry once its group is written; None: do not bind."""
        plan = self._plans.get(pod_key)
        if plan is None:
            return {}
        if pod_key in self._patches:
            return {} if await self._patches[pod_key] else None
        return plan.pod_annotations if await self._groups[_group_key(plan)] else None

    def decided(
        self, binding_order: Sequence[str], starts: Mapping[str, Mapping[str, str]]
    ) -> None:
        """The pods the cycle binds, and PodGroup key -> the start annotations of each group
        it binds: the group writes start; the binding carries the annotation of these pods,
        every other pod is patched."""
        for key in [*binding_order, *self._plans]:
            plan = self._plans.get(key)
            if plan is not None and _group_key(plan) not in self._groups:
                self._start_group_write(plan, starts.get(_group_key(plan)) or {})
        self._carried = {
            key for key in binding_order if key in self._plans and not self._plans[key].pod_labels
        }
        for key in self._plans:
            if key not in self._carried:
                self._start_patch(key)

    def _start_group_write(self, plan: PodGroupPlan, starts: Mapping[str, str]) -> None:
        key = _group_key(plan)
        existing = self._view.pod_groups.get(key)
        write = (
            partial(self._create, key, plan, starts)
            if existing is None
            else _group_updater(self._kube, existing, plan, self._node_pool_label)
        )
        self._groups[key] = self._tasks.create_task(self._bounded(key, "PodGroup", write))

    async def _create(self, key: str, plan: PodGroupPlan, starts: Mapping[str, str]) -> None:
        if await _create_pod_group(self._kube, plan, starts, self._node_pool_label) and starts:
            self.stamped[key] = starts

    async def finish(self, bound: Collection[str]) -> None:
        """After the binds: annotate the pods whose binding was to carry it but was not made,
        and wait for every write of the cycle."""
        self._bound = {key for key in bound if key in self._carried}
        for key in self._carried - self._bound:
            self._start_patch(key)
        await asyncio.gather(*self._groups.values(), *self._patches.values())

    def _hand_back(self) -> None:
        """Tell the grouper how far each pod got."""
        for key, plan in self._plans.items():
            patch = self._patches.get(key)
            if not self._groups[_group_key(plan)].result():
                outcome = Written.GROUP_REFUSED
            elif patch.result() if patch is not None else key in self._bound:
                outcome = Written.ALL
            else:
                outcome = Written.GROUP_ONLY
            uid = str((self._view.pods[key].get("metadata") or {}).get("uid") or "")
            self._settle(key, uid, plan, outcome)

    def _start_patch(self, pod_key: str) -> None:
        self._patches[pod_key] = self._tasks.create_task(self._annotate(pod_key))

    async def _annotate(self, pod_key: str) -> bool:
        plan = self._plans[pod_key]
        if not await self._groups[_group_key(plan)]:
            return False
        write = _pod_patcher(self._kube, self._view.pods[pod_key], plan)
        return await self._bounded(pod_key, "pod", write)

    async def _bounded(
        self, key: str, what: str, write: Callable[[], Awaitable[object]] | None
    ) -> bool:
        if write is None:
            return True
        async with self._slots:
            try:
                await write()
            except ApiError as error:
                log.warning(f"{what} not written; retrying next cycle", key=key, error=str(error))
                return False
            except Exception:  # one broken write must not cancel the others and the cycle
                log.exception(f"{what} not written; retrying next cycle", key=key)
                return False
        return True


def _group_key(plan: PodGroupPlan) -> str:
    return f"{plan.namespace}/{plan.name}"


def _collection(plan: PodGroupPlan) -> str:
    return f"/apis/scheduling.run.ai/v2alpha2/namespaces/{plan.namespace}/podgroups"


async def _create_pod_group(
    kube: Kube, plan: PodGroupPlan, annotations: Mapping[str, str], node_pool_label: str
) -> bool:
    """Creates the PodGroup with these extra annotations: True. False: it existed (an
    earlier incarnation created it, and the cache does not show it yet), and it is
    brought to the plan without them."""
    collection = _collection(plan)
    try:
        await kube.create(collection, _with_annotations(plan.manifest, annotations))
    except ApiError as error:
        if error.status != _CONFLICT:
            raise
        current = await kube.get(f"{collection}/{plan.name}")
        patch = update_patch(current, plan, node_pool_label)
        if patch is not None:
            await kube.merge_patch(f"{collection}/{plan.name}", patch)
        return False
    return True


def _group_updater(
    kube: Kube, existing: Mapping[str, Any], plan: PodGroupPlan, node_pool_label: str
) -> Callable[[], Awaitable[object]] | None:
    """Brings an existing PodGroup to the plan; None if nothing to do."""
    patch = update_patch(existing, plan, node_pool_label)
    if patch is None:
        return None
    return lambda: kube.merge_patch(f"{_collection(plan)}/{plan.name}", patch)


def _with_annotations(manifest: Mapping[str, Any], extra: Mapping[str, str]) -> Mapping[str, Any]:
    if not extra:
        return manifest
    metadata = dict(manifest.get("metadata") or {})
    metadata["annotations"] = {**(metadata.get("annotations") or {}), **extra}
    return {**manifest, "metadata": metadata}


def _pod_patcher(
    kube: Kube, pod: Mapping[str, Any], plan: PodGroupPlan
) -> Callable[[], Awaitable[object]]:
    metadata = pod.get("metadata") or {}
    path = f"/api/v1/namespaces/{metadata.get('namespace')}/pods/{metadata.get('name')}"
    patch: dict[str, Any] = {
        # The uid precondition: never annotate a newer pod of the same name.
        "metadata": {"uid": metadata.get("uid"), "annotations": plan.pod_annotations}
    }
    if plan.pod_labels:
        patch["metadata"]["labels"] = plan.pod_labels
    return lambda: kube.merge_patch(path, patch)


def update_patch(
    existing: Mapping[str, Any], plan: PodGroupPlan, node_pool_label: str = NODE_POOL_LABEL_KEY
) -> dict[str, Any] | None:
    """The merge patch that brings an existing PodGroup to the plan, or None if it is there.

    What KAI's grouper preserves on update is taken from the existing object: the spec
    fields users may change, and the node-pool (under the configured key, as KAI's
    PodGroupHandler) and queue labels.
    """
    current_spec = dict(existing.get("spec") or {})
    spec = dict(plan.manifest["spec"])
    for name in PRESERVED_SPEC_FIELDS:
        if name in current_spec:
            spec[name] = current_spec[name]
    current_meta = existing.get("metadata") or {}
    current_labels = dict(current_meta.get("labels") or {})
    labels = dict(plan.manifest["metadata"].get("labels") or {})
    for name in (node_pool_label, QUEUE_LABEL):
        if name in current_labels:
            labels[name] = current_labels[name]
    annotations = dict(plan.manifest["metadata"].get("annotations") or {})
    spec_changed = any(current_spec.get(name) != value for name, value in spec.items())
    labels_changed = any(current_labels.get(k) != v for k, v in labels.items())
    current_annotations = current_meta.get("annotations") or {}
    annotations_changed = any(current_annotations.get(k) != v for k, v in annotations.items())
    if not (spec_changed or labels_changed or annotations_changed):
        return None
    return {"metadata": {"labels": labels, "annotations": annotations}, "spec": spec}
