"""The live pod grouper: gives every `kai-scheduler` pod its PodGroup (kai-semantics §14.2).

For each pod without a `pod-group-name` annotation it reads the owner chain from
the API server, asks the same pure grouper `kai simulate` uses for the plan, then
creates the PodGroup (or updates it, keeping what users and operators may have
changed: the queue, markUnschedulable, schedulingBackoff, the node-pool and queue
labels) and patches the pod. Plans are remembered until the cache shows the
annotation, so the pod is schedulable in the cycle that grouped it and is not
grouped twice while the watch catches up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import structlog

from kai.api.constants import POD_GROUP_ANNOTATION, QUEUE_LABEL, SCHEDULER_NAME
from kai.api.errors import ManifestError
from kai.grouping import GroupingError, PodGroupPlan, plan_pod_group
from kai.grouping.plan import NODE_POOL_LABEL
from kai.operator.cache import ClusterView
from kai.operator.events import GROUPING_FAILED, WARNING, EventRecorder, InvolvedObject
from kai.operator.kube import ApiError, Kube
from kai.operator.owners import OwnerReader
from kai.operator.writes import run_bounded
from kai.workloads.catalog import load_catalog
from kai.workloads.jqeval import JqEvaluator
from kai.workloads.loader import InvalidDefinitionError, load_definition
from kai.workloads.registry import DefinitionRegistry, DuplicateDefinitionError

log = structlog.get_logger(__name__)

PRESERVED_SPEC_FIELDS = ("queue", "markUnschedulable", "schedulingBackoff")
PRESERVED_LABELS = (NODE_POOL_LABEL, QUEUE_LABEL)
_CONFLICT = 409


class PodGrouper:
    def __init__(
        self,
        kube: Kube,
        owners: OwnerReader,
        events: EventRecorder,
        reservation_namespace: str,
        concurrency: int,
    ) -> None:
        self._kube = kube
        self._owners = owners
        self._events = events
        self._reservation_namespace = reservation_namespace
        self._concurrency = concurrency
        self._jq = JqEvaluator()
        self._catalog = load_catalog(self._jq)
        self._registry: tuple[frozenset[str], DefinitionRegistry] | None = None
        self._plans: dict[str, tuple[str, PodGroupPlan]] = {}  # pod key -> (uid, plan)
        self._reported: dict[str, str] = {}  # pod uid -> last grouping problem

    async def sync(
        self, view: ClusterView, priority_classes: Mapping[str, int]
    ) -> dict[str, PodGroupPlan]:
        """Group every ungrouped pod; the plans not yet visible in the cache, by pod key."""
        self._forget_settled(view)
        waiting = [
            (key, pod)
            for key, pod in view.pods.items()
            if key not in self._plans and self._needs_group(pod)
        ]
        if waiting:
            self._owners.start_cycle()
            registry = self._definitions(view)
            new: dict[str, PodGroupPlan] = {}
            for key, pod in waiting:
                plan = await self._plan(pod, registry, priority_classes)
                if plan is not None:
                    new[key] = plan
            await self._write(view, new)
        return {key: plan for key, (_, plan) in self._plans.items()}

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
        """Drop plans whose pod now shows its annotation, or is gone or replaced."""
        for key, (uid, _) in list(self._plans.items()):
            pod = view.pods.get(key)
            metadata = (pod or {}).get("metadata") or {}
            if (
                pod is None
                or metadata.get("uid") != uid
                or (metadata.get("annotations") or {}).get(POD_GROUP_ANNOTATION)
            ):
                del self._plans[key]

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
            return plan_pod_group(pod, chain, registry, priority_classes)
        except (GroupingError, ManifestError) as error:
            self._report(pod, str(error))
        except ApiError as error:
            log.warning("owner chain not read; retrying next cycle", error=str(error))
        return None

    def _report(self, pod: Mapping[str, Any], problem: str) -> None:
        about = InvolvedObject.of({**pod, "apiVersion": "v1", "kind": "Pod"})
        if self._reported.get(about.uid) != problem:
            self._reported[about.uid] = problem
            self._events.record(about, WARNING, GROUPING_FAILED, problem)

    async def _write(self, view: ClusterView, plans: Mapping[str, PodGroupPlan]) -> None:
        """Create or update each PodGroup once, then annotate the pods whose group exists."""
        by_group: dict[str, PodGroupPlan] = {}
        for plan in plans.values():
            by_group.setdefault(f"{plan.namespace}/{plan.name}", plan)
        group_writes = [
            (key, self._group_writer(view.pod_groups.get(key), plan))
            for key, plan in by_group.items()
        ]
        failed_groups = await run_bounded(
            [(key, write) for key, write in group_writes if write is not None], self._concurrency
        )
        for key, error in failed_groups.items():
            log.warning("PodGroup not written; retrying next cycle", group=key, error=str(error))
        pod_writes = [
            (key, self._pod_patcher(view.pods[key], plan))
            for key, plan in plans.items()
            if f"{plan.namespace}/{plan.name}" not in failed_groups
        ]
        failed_pods = await run_bounded(pod_writes, self._concurrency)
        for key, error in failed_pods.items():
            log.warning("pod not annotated; retrying next cycle", pod=key, error=str(error))
        for key, plan in plans.items():
            if key not in failed_pods and f"{plan.namespace}/{plan.name}" not in failed_groups:
                uid = str((view.pods[key].get("metadata") or {}).get("uid") or "")
                self._plans[key] = (uid, plan)

    def _group_writer(
        self, existing: Mapping[str, Any] | None, plan: PodGroupPlan
    ) -> Callable[[], Awaitable[object]] | None:
        collection = f"/apis/scheduling.run.ai/v2alpha2/namespaces/{plan.namespace}/podgroups"
        if existing is None:

            async def create() -> None:
                try:
                    await self._kube.create(collection, plan.manifest)
                except ApiError as error:
                    if error.status != _CONFLICT:
                        raise
                    # Created by an earlier incarnation, and not in the cache yet.
                    current = await self._kube.get(f"{collection}/{plan.name}")
                    patch = update_patch(current, plan)
                    if patch is not None:
                        await self._kube.merge_patch(f"{collection}/{plan.name}", patch)

            return create
        patch = update_patch(existing, plan)
        if patch is None:
            return None
        return lambda: self._kube.merge_patch(f"{collection}/{plan.name}", patch)

    def _pod_patcher(
        self, pod: Mapping[str, Any], plan: PodGroupPlan
    ) -> Callable[[], Awaitable[object]]:
        metadata = pod.get("metadata") or {}
        path = f"/api/v1/namespaces/{metadata.get('namespace')}/pods/{metadata.get('name')}"
        patch: dict[str, Any] = {
            # The uid precondition: never annotate a newer pod of the same name.
            "metadata": {"uid": metadata.get("uid"), "annotations": plan.pod_annotations}
        }
        if plan.pod_labels:
            patch["metadata"]["labels"] = plan.pod_labels
        return lambda: self._kube.merge_patch(path, patch)


def update_patch(existing: Mapping[str, Any], plan: PodGroupPlan) -> dict[str, Any] | None:
    """The merge patch that brings an existing PodGroup to the plan, or None if it is there.

    What KAI's grouper preserves on update is taken from the existing object.
    """
    current_spec = dict(existing.get("spec") or {})
    spec = dict(plan.manifest["spec"])
    for name in PRESERVED_SPEC_FIELDS:
        if name in current_spec:
            spec[name] = current_spec[name]
    current_meta = existing.get("metadata") or {}
    current_labels = dict(current_meta.get("labels") or {})
    labels = dict(plan.manifest["metadata"].get("labels") or {})
    for name in PRESERVED_LABELS:
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
