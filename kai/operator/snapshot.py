"""The engine's snapshot from the watch cache, built leniently.

Unlike `kai simulate`, which refuses an input with any problem, a live scheduler
must keep scheduling everyone else when one object is bad. An invalid PodGroup,
or a pod of a group that cannot be parsed, sets its group aside with a reason and
message (shown in the group's status and events); an unreadable node, queue or
priority class is left out and logged. Parsing is memoised by resourceVersion, so
a cycle parses only what changed since the previous one; pods of one template that
a cycle sees new are validated once (`kai.api.pods.SiblingParser`); a pod that names
volume claims or requires ConfigMaps is read with them (`kai.operator.dependencies_memo`);
and a pod that waits for
the pod grouper (on no node, in no group yet) is not read at all: it holds nothing.

Three pieces of the scheduler's own recent work are laid over the cache, because
watch events for them may not have arrived yet: the pod grouper's decisions,
binds already made (so capacity is not handed out twice), and groups held back
because binding them keeps failing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from operator import attrgetter
from typing import Any

import structlog

from kai.api.constants import SCHEDULER_NAME, default_priority_classes
from kai.api.corev1 import PriorityClass
from kai.api.dependencies import depends
from kai.api.errors import ManifestError, object_ref, validated
from kai.api.host_ports import ports_in_use
from kai.api.node_offers import volume_offers
from kai.api.parse import parse_node, parse_pod_group, parse_queue, validate_queue_tree
from kai.api.pods import SiblingParser, annotated_pod_group_key, reparsed
from kai.api.reservations import counted_reservations
from kai.api.topologies import parse_topology
from kai.engine.model import Node, Pod, PodGroup, PodPhase, Queue, SetAside, Snapshot, Topology
from kai.engine.snapshot_changes import SnapshotChanges
from kai.grouping import PodGroupPlan, grouped_manifest
from kai.operator.cache import ClusterView
from kai.operator.dependencies_memo import DependenciesMemo
from kai.operator.offers_memo import NodeOffers
from kai.operator.parse_memo import ParseMemo
from kai.operator.snapshot_lineage import Lineage

log = structlog.get_logger(__name__)

INVALID_POD_GROUP = "InvalidPodGroup"
INVALID_POD = "InvalidPod"
INVALID_QUEUE = "InvalidQueue"


@dataclass(frozen=True)
class Assumed:
    """A bind the scheduler made whose watch event may still be on its way."""

    node: str
    gpu_groups: tuple[str, ...]


@dataclass(frozen=True)
class Overlay:
    """The scheduler's own recent decisions, applied over what the cache shows."""

    plans: Mapping[str, PodGroupPlan] = field(default_factory=dict)
    """Pod key -> the grouper's plan, for pods whose annotation is not visible yet."""
    assumed: Mapping[str, Assumed] = field(default_factory=dict)
    """Pod key -> where this process bound it, or sent a bind whose outcome is not known yet."""
    held: Mapping[str, SetAside] = field(default_factory=dict)
    """Group key -> why the group sits out this cycle (bind backoff)."""


class SnapshotBuilder:
    """Turns a ClusterView and an Overlay into the engine's Snapshot, cycle after cycle."""

    def __init__(self, reservation_namespace: str) -> None:
        self._reservation_namespace = reservation_namespace
        self._nodes: ParseMemo[Node] = ParseMemo()
        self._queues: ParseMemo[Queue] = ParseMemo()
        self._groups: ParseMemo[PodGroup] = ParseMemo()
        self._pods: ParseMemo[Pod] = ParseMemo()
        self._dependencies = DependenciesMemo()
        self._offers = NodeOffers()
        self._siblings = SiblingParser()
        self._topologies: ParseMemo[Topology] = ParseMemo()
        self._classes: ParseMemo[int] = ParseMemo()
        # The last snapshot's pods, groups and nodes by key, to say what changed since.
        self._pod_lineage: Lineage[Pod] = Lineage(_key)
        self._group_lineage: Lineage[PodGroup] = Lineage(_key)
        self._node_lineage: Lineage[Node] = Lineage(_name)
        self._pods_whole_before = False  # the last snapshot's pod changes were not told
        self._counted_before: set[str] = set()  # the reservation pods the last one counted
        self._touched_before: set[str] = set()  # the groups planned or set aside in it
        self._classes_version: tuple[tuple[str, int], ...] | None = None
        self._reported: set[str] = set()  # problems logged, as of the last cycle
        self._reported_now: set[str] = set()  # problems seen this cycle

    def build(self, view: ClusterView, overlay: Overlay, now: datetime) -> Snapshot:
        set_aside: dict[str, SetAside] = {}
        priority_classes = self.priority_classes(view)
        nodes, nodes_parsed = self._parse_nodes(view)
        queues, broken_queues = self._parse_queues(view)
        groups = self._parse_groups(view, overlay, priority_classes, broken_queues, set_aside)
        pods, pods_parsed, counted = self._parse_pods(view, overlay, groups, set_aside)
        volumes = volume_offers(pods, nodes, view.volume_objects)
        for problem in view.volume_objects.static_problems():
            self._report(f"PersistentVolume/{problem.ref.name}", problem)
        nodes, nodes_parsed = self._offers.offered(nodes, nodes_parsed, ports_in_use(pods), volumes)
        # A group in bind backoff waits: its pending pods leave the snapshot, but the group
        # and its running pods stay, so they count toward its queue (limits, fair share,
        # status) and the validator sees them.
        held = {key for key in overlay.held if key in groups}
        for key in held:
            set_aside[key] = overlay.held[key]
        if held:
            pods = [p for p in pods if p.group not in held or p.phase is not PodPhase.PENDING]
        topologies = self._parse_topologies(view)
        snapshot = Snapshot(
            nodes=tuple(sorted(nodes, key=_name)),
            pods=tuple(sorted(pods, key=_key)),
            pod_groups=tuple(sorted(groups.values(), key=_key)),
            queues=tuple(sorted(queues, key=lambda q: q.name)),
            now=now,
            set_aside=tuple(sorted(set_aside.values(), key=lambda s: s.group)),
            topologies=tuple(sorted(topologies, key=lambda t: t.name)),
        )
        changes = self._changes(
            snapshot,
            overlay,
            set_aside,
            (nodes_parsed, groups, pods_parsed),
            counted,
            bool(held),
        )
        memos = (
            self._nodes,
            self._queues,
            self._groups,
            self._pods,
            self._topologies,
            self._classes,
        )
        for memo in memos:
            memo.end_cycle()
        self._dependencies.end_cycle()
        self._siblings.forget()
        # A problem gone from the cluster is forgotten, so the memory does not grow for ever.
        self._reported, self._reported_now = self._reported_now, set()
        return dataclasses.replace(snapshot, changes=changes)

    def _changes(
        self,
        snapshot: Snapshot,
        overlay: Overlay,
        set_aside: Mapping[str, SetAside],
        parsed: tuple[Mapping[str, Node], Mapping[str, PodGroup], Mapping[str, Pod]],
        counted: Mapping[str, Pod],
        pods_whole: bool,
    ) -> SnapshotChanges:
        """What changed since the last snapshot (`kai.engine.snapshot_changes`): the keys
        handed out to be parsed and those gone; for groups also those planned or set aside
        (a broken queue's, a bad pod's) now or then; for pods also the reservation pods
        counted now or then but not both (`counted`: now's), as a device's users come and
        go: one counted both times is the very object of the last snapshot, unless parsed
        again, and then it was handed out. `parsed`: the nodes and pods parsed this cycle,
        and every group. The pods' changes are not told while groups are held
        (`pods_whole`), nor in the cycle after: that leaves out pods that did not change."""
        nodes, groups, pods = parsed
        pods_told = not (pods_whole or self._pods_whole_before)
        self._pods_whole_before = pods_whole
        counted_then, self._counted_before = self._counted_before, set(counted)
        recounted = counted_then.symmetric_difference(counted)
        touched_now = {plan.key for plan in overlay.plans.values()} | set_aside.keys()
        touched = touched_now | self._touched_before
        self._touched_before = touched_now
        return SnapshotChanges(
            pods=self._pod_lineage.changes(
                snapshot.pods,
                {**pods, **counted} if pods_told else None,
                (*self._pods.handed, *self._pods.gone, *recounted),
            ),
            pod_groups=self._group_lineage.changes(
                snapshot.pod_groups, groups, (*self._groups.handed, *self._groups.gone, *touched)
            ),
            nodes=self._node_lineage.changes(
                snapshot.nodes,
                nodes,
                (*self._nodes.handed, *self._nodes.gone, *self._offers.reoffered),
            ),
        )

    @property
    def problems_remembered(self) -> int:
        """Distinct object problems kept so each is logged once, not once per cycle."""
        return len(self._reported)

    def priority_classes(self, view: ClusterView) -> dict[str, int]:
        """Each PriorityClass's value by name (parsed once per resourceVersion: a cycle asks
        twice, and validating every class each time was 2% of a live steady cycle)."""
        classes = default_priority_classes()
        for key, manifest in view.priority_classes.items():
            value = self._classes.get(key, _version(manifest), partial(_priority, manifest))
            if isinstance(value, ManifestError):
                self._report(key, value)
            else:
                classes[key] = value
        return classes

    def _parse_nodes(self, view: ClusterView) -> tuple[list[Node], dict[str, Node]]:
        """The usable nodes, and those of them parsed this cycle by key."""
        nodes, others = self._nodes.kept(view.nodes)
        parsed_now: dict[str, Node] = {}
        for key in others:
            manifest = view.nodes[key]
            parsed = self._nodes.get(
                key, _version(manifest), partial(parse_node, manifest), origin=manifest
            )
            if isinstance(parsed, ManifestError):
                self._report(key, parsed)
            else:
                nodes.append(parsed)
                parsed_now[key] = parsed
        return nodes, parsed_now

    def _parse_topologies(self, view: ClusterView) -> list[Topology]:
        """The usable Topologies; a bad one is reported and left out, so the groups that
        name it wait with InvalidTopologyConstraint instead of being placed anywhere."""
        topologies: list[Topology] = []
        for key, manifest in view.topologies.items():
            parsed = self._topologies.get(
                key, _version(manifest), partial(parse_topology, manifest)
            )
            if isinstance(parsed, ManifestError):
                self._report(key, parsed)
            else:
                topologies.append(parsed)
        return topologies

    def _parse_queues(self, view: ClusterView) -> tuple[list[Queue], dict[str, str]]:
        """The usable queues, and a message for each queue that is not (bad spec or tree)."""
        queues: list[Queue] = []
        broken: dict[str, str] = {}
        for key, manifest in view.queues.items():
            parsed = self._queues.get(key, _version(manifest), partial(parse_queue, manifest))
            if isinstance(parsed, ManifestError):
                self._report(key, parsed)
                broken[key] = str(parsed)
            else:
                queues.append(parsed)
        for error in validate_queue_tree(queues, also_defined=broken.keys()):
            broken.setdefault(error.name, str(error))
        # A queue below a broken one is unusable too: the engine drops the whole subtree.
        parents = {queue.name: queue.parent for queue in queues}
        for queue in queues:
            ancestor = queue.parent
            seen = {queue.name}
            while ancestor is not None and ancestor not in seen:
                if ancestor in broken and queue.name not in broken:
                    broken[queue.name] = f"Queue {queue.name}: ancestor: {broken[ancestor]}"
                seen.add(ancestor)
                ancestor = parents.get(ancestor)
        return [queue for queue in queues if queue.name not in broken], broken

    def _parse_groups(
        self,
        view: ClusterView,
        overlay: Overlay,
        priority_classes: Mapping[str, int],
        broken_queues: Mapping[str, str],
        set_aside: dict[str, SetAside],
    ) -> dict[str, PodGroup]:
        classes_version = tuple(sorted(priority_classes.items()))
        # A group's parse depends on the priority classes too: kept ones count only while
        # those are the same.
        same_classes = classes_version == self._classes_version
        self._classes_version = classes_version
        if not same_classes:
            self._groups.forget_kept()
        kept, others = self._groups.kept(view.pod_groups)
        # A planned group the cache does not show yet is parsed from its plan (and, not
        # being the cache's object, never kept).
        planned = {
            plan.key: plan.manifest
            for plan in overlay.plans.values()
            if plan.key not in view.pod_groups
        }
        groups: dict[str, PodGroup] = {}
        for group in kept:
            if broken_queues and group.queue in broken_queues:
                others.append(group.key)  # set aside below, as the queue's parse says
            else:
                groups[group.key] = group
        for key in (*others, *planned):
            manifest = planned[key] if key in planned else view.pod_groups[key]
            parsed = self._groups.get(
                key,
                (_version(manifest), classes_version),
                partial(parse_pod_group, manifest, priority_classes),
                origin=None if key in planned else manifest,
            )
            if isinstance(parsed, ManifestError):
                set_aside[key] = SetAside(key, _queue_of(manifest), INVALID_POD_GROUP, str(parsed))
            elif broken_queues and parsed.queue in broken_queues:
                reason = broken_queues[parsed.queue]
                set_aside[key] = SetAside(key, _queue_of(manifest), INVALID_QUEUE, reason)
            else:
                groups[key] = parsed
        return groups

    def _parse_pods(
        self,
        view: ClusterView,
        overlay: Overlay,
        groups: dict[str, PodGroup],
        set_aside: dict[str, SetAside],
    ) -> tuple[list[Pod], dict[str, Pod], dict[str, Pod]]:
        """The pods, those of them parsed this cycle (but reservation pods) by key, and the
        reservation pods counted (`counted_reservations`) by key."""
        pods: list[Pod] = []
        reservations: list[Pod] = []
        parsed_now: dict[str, Pod] = {}
        overlaid = overlay.plans.keys() | overlay.assumed.keys()
        namespace = self._reservation_namespace
        in_reservations = f"{namespace}/"
        kept, others = self._pods.kept(view.pods, overlaid)
        cluster = view.dependencies()
        for pod in kept:
            (reservations if pod.namespace == namespace else pods).append(pod)
        for key in others:
            manifest = view.pods[key]
            plan = overlay.plans.get(key)
            group_key = plan.key if plan else annotated_pod_group_key(manifest) or ""
            if not group_key and not _on_a_node(manifest) and key not in overlay.assumed:
                # It waits for the pod grouper: it holds nothing and is in no queue yet.
                # (A burst's first cycle parsed 4,500 such pods: 0.3 s before its binds.)
                continue
            readable = grouped_manifest(manifest, plan) if plan is not None else manifest
            parse: Callable[[], Pod] = partial(self._siblings.parse, readable, group_key)
            if key.startswith(in_reservations):  # a device's holder: counted, never scheduled
                parse = partial(_not_ours, parse)
            dependent = depends(manifest)
            parsed = self._pods.get(
                key,
                (_version(manifest), group_key, plan is not None),
                parse,
                (group_key, readable),
                partial(_reparsed, group_key, readable),
                # kept only when the cache's pod alone decided: not what it depends on, nor
                # the overlay
                None if key in overlaid or dependent else manifest,
            )
            if isinstance(parsed, ManifestError):
                self._set_pod_aside(key, readable, group_key, parsed, groups, set_aside)
                continue
            if dependent:
                parsed = self._dependencies.applied(key, parsed, manifest, cluster)
            assumed = overlay.assumed.get(key)
            if assumed is not None and parsed.phase in (PodPhase.PENDING, PodPhase.BOUND):
                parsed = dataclasses.replace(
                    parsed,
                    phase=PodPhase.BOUND,
                    node=assumed.node,
                    gpu_groups=parsed.gpu_groups or assumed.gpu_groups,
                )
            if parsed.namespace == namespace:
                reservations.append(parsed)
            else:
                pods.append(parsed)
                parsed_now[key] = parsed
        if not reservations:  # no GPU sharing: no pass over the pods for devices in use
            return pods, parsed_now, {}
        counted = {pod.key: pod for pod in counted_reservations(reservations, pods)}
        return pods + list(counted.values()), parsed_now, counted

    def _set_pod_aside(
        self,
        key: str,
        manifest: Mapping[str, Any],
        group_key: str,
        error: ManifestError,
        groups: dict[str, PodGroup],
        set_aside: dict[str, SetAside],
    ) -> None:
        """A pod that cannot be read holds its whole gang back; the group says why."""
        spec = manifest.get("spec") or {}
        if spec.get("schedulerName") != SCHEDULER_NAME or not group_key:
            self._report(key, error)
            return
        group = groups.pop(group_key, None)
        queue = group.queue if group is not None else ""
        if group_key not in set_aside:
            set_aside[group_key] = SetAside(group_key, queue, INVALID_POD, str(error))

    def _report(self, key: str, error: ManifestError) -> None:
        """Log an unusable object once per distinct problem, not once per cycle."""
        text = str(error)
        self._reported_now.add(text)
        if text not in self._reported:
            self._reported.add(text)
            log.warning("object left out of scheduling", object=key, problem=text)


_key = attrgetter("key")
_name = attrgetter("name")


def _priority(manifest: Mapping[str, Any]) -> int:
    ref = object_ref("PriorityClass", manifest, namespaced=False)
    return validated(PriorityClass, ref, manifest).value


def _not_ours(parse: Callable[[], Pod]) -> Pod:
    return dataclasses.replace(parse(), scheduler_is_ours=False)


def _queue_of(manifest: Mapping[str, Any]) -> str:
    return str((manifest.get("spec") or {}).get("queue") or "")


def _on_a_node(manifest: Mapping[str, Any]) -> bool:
    return bool((manifest.get("spec") or {}).get("nodeName"))


def _reparsed(
    group_key: str, readable: Mapping[str, Any], earlier: tuple[str, Mapping[str, Any]], pod: Pod
) -> Pod | None:
    """The pod from its earlier parse, if in the same group and bound since at most."""
    earlier_group, earlier_readable = earlier
    return reparsed(earlier_readable, readable, pod) if earlier_group == group_key else None


def _version(manifest: Mapping[str, Any]) -> str:
    metadata = manifest.get("metadata") or {}
    return f"{metadata.get('uid')}@{metadata.get('resourceVersion')}"
