"""One cycle's grouping writes: the new PodGroups, the pods' annotations, in the binder's order.

A new group whose pods the cycle binds, all of them, by bindings that carry the
pod's annotation does not hold those binds back: its create goes out beside them
instead of before them (a PodGroup create costs the API server about as much as
a bind), and while a burst continues (more new pods wait than a cycle takes on)
it is not written in the cycle at all but owed, and written by the first cycle
after the burst, so that a burst's binds share the API server with nothing else.
That cycle writes its own such groups after its binds too, with those owed. Until
the cache shows such a group, the pod grouper lays its plan over the
cache, so its pods count toward their queue from their bind on; a scheduler
stopped before it wrote one leaves a bound pod that names a group the cluster
lacks, and the grouper plans that pod again (kai.operator.pod_grouper).

Every other group is written before its pods' binds, first those the binder needs
first. A pod whose binding does not carry its annotation (it is not bound this
cycle, or it needs sub-group labels, which a Binding does not copy) is patched
once its group is written. Failures (an unexpected exception too: it stays with
its pod) are logged and retried next cycle.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from enum import Enum
from functools import partial
from types import TracebackType
from typing import Any

import structlog

from kai.api.constants import QUEUE_LABEL
from kai.api.shards import NODE_POOL_LABEL_KEY
from kai.grouping import PodGroupPlan
from kai.kube.client import ApiError, Kube
from kai.operator.cache import ClusterView

log = structlog.get_logger(__name__)

PRESERVED_SPEC_FIELDS = ("queue", "markUnschedulable", "schedulingBackoff")
_CONFLICT = 409


class Written(Enum):
    """How far one pod's grouping writes got in a cycle."""

    ALL = "all"
    """The group, and the annotation (patched, or carried by the binding)."""
    GROUP_ONLY = "group-only"
    """The group; the annotation is written next cycle."""
    GROUP_REFUSED = "group-refused"
    """Not even the group."""
    GROUP_OWED = "group-owed"
    """The bind, carrying the annotation; the group is written after the burst."""


Settle = Callable[[str, str, PodGroupPlan, Written], None]
"""Told each planned pod's outcome: pod key, pod uid, plan (with the start its group
is to be created with, for an owed one), outcome."""


class GroupWrites:
    """One cycle's grouping writes, as an async context that awaits them all on exit.

    `decided` is told which pods the cycle binds, in the binder's order, and the
    start timestamps of the groups it binds; it starts the group writes, at most
    `concurrency` at once, those the binder needs first first, but for the groups a
    burst defers (`defer`, `ends_burst`, or groups `owed`). The binder asks
    `annotations(pod)` before each bind: it answers what the binding must carry once the pod may be bound
    (waiting for the pod's group unless its binds need not), or None when the group
    could not be written. `finish` is told which pods were bound: while a burst
    continues it owes the deferred groups whose pods were all bound; it writes the
    other deferred groups, writes the groups `owed` by an earlier
    burst (unless `defer`) and the annotations the bindings did not carry, and waits
    for every write. On exit each pod's outcome goes to `settle` and each
    owed group's (written or not) to `settle_owed`. `stamped` says which creates
    carried (or, owed, will carry) a start timestamp.
    """

    def __init__(
        self,
        kube: Kube,
        view: ClusterView,
        plans: Mapping[str, PodGroupPlan],
        concurrency: int,
        settle: Settle,
        node_pool_label: str = NODE_POOL_LABEL_KEY,
        owed: Mapping[str, PodGroupPlan] | None = None,
        defer: bool = False,
        ends_burst: bool = False,
        settle_owed: Callable[[str, bool], None] | None = None,
    ) -> None:
        self._kube = kube
        self._node_pool_label = node_pool_label
        self._view = view
        self._plans = plans
        self._settle = settle
        self._owed = owed or {}
        self._defer = defer
        self._ends_burst = ends_burst
        self._settle_owed = settle_owed
        self._slots = asyncio.Semaphore(concurrency)
        self._tasks = asyncio.TaskGroup()
        self._groups: dict[str, asyncio.Task[bool]] = {}
        self._owed_writes: dict[str, asyncio.Task[bool]] = {}
        self._patches: dict[str, asyncio.Task[bool]] = {}
        self._carried: set[str] = set()
        self._unawaited: dict[str, list[str]] = {}  # group key -> its pods, all carried
        self._starts: Mapping[str, Mapping[str, str]] = {}
        self._bound: set[str] = set()
        self.stamped: dict[str, Mapping[str, str]] = {}
        """PodGroup key -> the timestamp annotations its create carried (or, owed, will carry)."""

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
        """What the pod's binding must carry once it may be bound; None: do not bind."""
        plan = self._plans.get(pod_key)
        if plan is None:
            return {}
        if pod_key in self._patches:
            return {} if await self._patches[pod_key] else None
        if plan.key in self._unawaited:
            return plan.pod_annotations
        return plan.pod_annotations if await self._groups[plan.key] else None

    def decided(
        self, binding_order: Sequence[str], starts: Mapping[str, Mapping[str, str]]
    ) -> None:
        """The pods the cycle binds, and PodGroup key -> the start annotations of each group
        it binds: the group writes start, and the patches of pods the bindings do not carry."""
        self._starts = starts
        self._carried = {
            key for key in binding_order if key in self._plans and not self._plans[key].pod_labels
        }
        members: dict[str, list[str]] = {}
        for key, plan in self._plans.items():
            members.setdefault(plan.key, []).append(key)
        self._unawaited = {
            group: keys
            for group, keys in members.items()
            if all(key in self._carried for key in keys)
        }
        # While a burst continues, and in the cycle that ends it, such groups are written
        # after the binds: the burst's binds then share the API server with nothing else.
        # `owed` alone does not say a burst ends here: the cycle before, whose groups will
        # be owed, may still be binding (kai.operator.loop hands its binds over); a cycle
        # that ended a 5,000-pod burst as its second created its 4,000 groups beside its
        # binds, and the burst took 11.3-12.1 s against 6.7-7.5 (kube-apiserver's CPU
        # 11.6-12.7 s against 5.3-6.2).
        after_binds = self._defer or self._ends_burst or bool(self._owed)
        for key in [*binding_order, *self._plans]:
            planned = self._plans.get(key)
            if planned is None:
                continue
            group = planned.key
            deferred = after_binds and group in self._unawaited
            if group not in self._groups and not deferred:
                self._start_group_write(planned, starts.get(group) or {})
        for key in self._plans:
            if key not in self._carried:
                self._start_patch(key)

    async def finish(self, bound: Collection[str]) -> None:
        """After the binds: the deferred groups (owed if a burst continues and all their
        pods were bound, else written now), those owed by an earlier burst, the
        annotations whose binding was not made; then wait for every write of the cycle."""
        self._bound = {key for key in bound if key in self._carried}
        for group, keys in self._unawaited.items():
            if group in self._groups:  # written beside its binds
                continue
            starts = self._starts.get(group) or {}
            if self._defer and all(key in self._bound for key in keys):
                if starts:
                    self.stamped[group] = starts
                continue
            self._start_group_write(self._plans[keys[0]], starts)
        for key in self._carried - self._bound:
            self._start_patch(key)
        if not self._defer:
            for group, plan in self._owed.items():
                if group not in self._groups:
                    write = partial(_create_pod_group, self._kube, plan, {}, self._node_pool_label)
                    task = self._tasks.create_task(self._bounded(group, "PodGroup", write))
                    self._owed_writes[group] = task
        await asyncio.gather(
            *self._groups.values(), *self._owed_writes.values(), *self._patches.values()
        )

    def _start_group_write(self, plan: PodGroupPlan, starts: Mapping[str, str]) -> None:
        key = plan.key
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

    def _hand_back(self) -> None:
        """Tell the grouper how far each pod got, and which owed groups were written."""
        for key, plan in self._plans.items():
            group = self._groups.get(plan.key)
            patch = self._patches.get(key)
            remembered = plan
            if group is None:  # bound, all its pods, while a burst continues
                remembered = self._with_start(plan)  # the create to come
                outcome = Written.GROUP_OWED
            elif not group.result():
                outcome = Written.GROUP_REFUSED
            elif patch.result() if patch is not None else key in self._bound:
                outcome = Written.ALL
            else:
                outcome = Written.GROUP_ONLY
            uid = str((self._view.pods[key].get("metadata") or {}).get("uid") or "")
            self._settle(key, uid, remembered, outcome)
        if self._settle_owed is not None:
            for owed, write in self._owed_writes.items():
                self._settle_owed(owed, write.result())

    def planned_with_starts(self) -> dict[str, PodGroupPlan]:
        """Pod key -> its plan, the group's create carrying the start the cycle gave it."""
        return {key: self._with_start(plan) for key, plan in self._plans.items()}

    def _with_start(self, plan: PodGroupPlan) -> PodGroupPlan:
        return plan.with_group_annotations(self._starts.get(plan.key) or {})

    def _start_patch(self, pod_key: str) -> None:
        self._patches[pod_key] = self._tasks.create_task(self._annotate(pod_key))

    async def _annotate(self, pod_key: str) -> bool:
        plan = self._plans[pod_key]
        if not await self._groups[plan.key]:
            return False
        pod = self._view.pods[pod_key]
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        if not plan.pod_labels and plan.pod_annotations.items() <= annotations.items():
            return True  # bound by a binding that carried it, its group written late
        return await self._bounded(pod_key, "pod", _pod_patcher(self._kube, pod, plan))

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
        await kube.create(collection, plan.with_group_annotations(annotations).manifest)
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
