"""Reading a whole set of manifests at once, reporting every problem, and the parsing entry points.

`kai simulate` reads a cluster from files and must say everything that is wrong with
them in one go, each problem on one line naming the file, the object and the field
(contracts/simulate.md). `parse_objects` does that: it parses each object with the
per-kind parsers below, never stops at the first problem, and passes through objects
that are handled elsewhere (workload objects such as Jobs), untouched.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kai.api.constants import (
    CORE_API_VERSION,
    POD_GROUP_API_VERSION,
    PRIORITY_CLASS_API_VERSION,
    QUEUE_API_VERSION,
    STORAGE_API_VERSION,
    default_priority_classes,
)
from kai.api.corev1 import NamedObject, PriorityClass
from kai.api.dependencies import ClusterObjects
from kai.api.errors import ManifestError, ManifestWarning, ObjectRef, object_ref, validated
from kai.api.fields import WireModel
from kai.api.nodes import parse_node
from kai.api.podgroups import parse_pod_group
from kai.api.pods import annotated_pod_group_key, parse_pod
from kai.api.queues import parse_queue, queue_warnings, validate_queue_tree
from kai.api.storage import PersistentVolume, PersistentVolumeClaim, StorageClass
from kai.api.topologies import TOPOLOGY_API_VERSION, parse_topology
from kai.api.volumes import VolumeObjects
from kai.engine.model import Node, Pod, PodGroup, Queue, Topology

__all__ = [
    "ParsedObjects",
    "ParsedPod",
    "SourcedObject",
    "cluster_objects",
    "default_priority_classes",
    "parse_node",
    "parse_objects",
    "parse_pod",
    "parse_pod_group",
    "parse_queue",
    "queue_warnings",
    "validate_queue_tree",
]

# kind -> (apiVersion kai reads, whether the kind is namespaced)
_KINDS: Mapping[str, tuple[str, bool]] = {
    "Node": (CORE_API_VERSION, False),
    "Pod": (CORE_API_VERSION, True),
    "Queue": (QUEUE_API_VERSION, False),
    "PodGroup": (POD_GROUP_API_VERSION, True),
    "PriorityClass": (PRIORITY_CLASS_API_VERSION, False),
    "Topology": (TOPOLOGY_API_VERSION, False),
    "PersistentVolumeClaim": (CORE_API_VERSION, True),
    "PersistentVolume": (CORE_API_VERSION, False),
    "StorageClass": (STORAGE_API_VERSION, False),
    "ConfigMap": (CORE_API_VERSION, True),
    "Namespace": (CORE_API_VERSION, False),
}
_DEPENDED_MODELS: dict[str, type[WireModel]] = {
    "PersistentVolumeClaim": PersistentVolumeClaim,
    "PersistentVolume": PersistentVolume,
    "StorageClass": StorageClass,
    "ConfigMap": NamedObject,
    "Namespace": NamedObject,
}
"""Kinds pods depend on (`kai.api.dependencies`): kept as given, read with the pods."""


@dataclass(frozen=True, slots=True)
class SourcedObject:
    """A manifest and the file it came from."""

    source: str
    manifest: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ParsedPod:
    """A valid pod, raw for the pod grouper and parsed for the engine.

    `pod.group` is the PodGroup its `pod-group-name` annotation names, or "" when the
    pod has none and the pod grouper has to decide.
    """

    source: str
    manifest: Mapping[str, Any]
    pod: Pod


@dataclass
class ParsedObjects:
    """Everything read from a set of files; usable only when `problems` is empty."""

    nodes: list[Node] = field(default_factory=list)
    pods: list[ParsedPod] = field(default_factory=list)
    queues: list[Queue] = field(default_factory=list)
    pod_groups: list[PodGroup] = field(default_factory=list)
    topologies: list[Topology] = field(default_factory=list)
    priority_classes: dict[str, int] = field(default_factory=default_priority_classes)
    depended: dict[str, dict[str, Mapping[str, Any]]] = field(
        default_factory=lambda: {kind: {} for kind in _DEPENDED_MODELS}
    )
    """Claims and ConfigMaps ("namespace/name"), volumes and StorageClasses, by kind, as
    given: the pods are read against them all together (`kai.api.dependencies`)."""
    others: list[SourcedObject] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """One line each: `FILE: Kind namespace/name: field: message`."""
    warnings: list[str] = field(default_factory=list)
    """Valid input that probably does not do what was meant, in the same format."""


def parse_objects(docs: Iterable[tuple[str, object]]) -> ParsedObjects:
    """Parse (source file, manifest) pairs; `kind: List` documents are read item by item.

    Empty YAML documents (None) are skipped. PriorityClasses are read first, so a
    PodGroup may name a class defined later in the input.
    """
    parsed = ParsedObjects()
    ours: list[tuple[SourcedObject, ObjectRef]] = []
    seen: dict[ObjectRef, str] = {}
    for item in _flatten(docs, parsed.problems):
        ref = _classify(item, parsed)
        if ref is None:
            continue
        if ref in seen:
            parsed.problems.append(
                f"{item.source}: {ref}: metadata.name: also defined in {seen[ref]}"
            )
            continue
        seen[ref] = item.source
        ours.append((item, ref))

    # A stable sort: PriorityClasses first, everything else in input order.
    for item, ref in sorted(ours, key=lambda pair: pair[1].kind != "PriorityClass"):
        try:
            _parse_one(parsed, item, ref)
        except ManifestError as error:
            parsed.problems += _lines(item.source, error.all_errors)

    queue_sources = {ref.name: item.source for item, ref in ours if ref.kind == "Queue"}
    tree_errors = validate_queue_tree(parsed.queues, also_defined=queue_sources)
    parsed.problems += [f"{queue_sources[error.name]}: {error}" for error in tree_errors]
    return parsed


def _flatten(docs: Iterable[tuple[str, object]], problems: list[str]) -> Iterator[SourcedObject]:
    """Objects one by one, with lists opened and documents that are no object reported."""
    for source, doc in docs:
        if doc is None:
            continue
        if not isinstance(doc, Mapping):
            problems.append(f"{source}: document: expected an object, got {type(doc).__name__}")
            continue
        kind = doc.get("kind")
        items = doc.get("items")
        if isinstance(kind, str) and kind.endswith("List") and isinstance(items, list):
            yield from _flatten(((source, entry) for entry in items), problems)
            continue
        missing = next(
            (name for name in ("kind", "apiVersion") if not _is_text(doc.get(name))), None
        )
        if missing is not None:
            label = kind if isinstance(kind, str) and kind else "Object"
            ref = object_ref(label, doc, namespaced=_KINDS.get(label, ("", False))[1])
            problems.append(f"{source}: {ref}: {missing}: required")
            continue
        yield SourcedObject(source, doc)


def _classify(item: SourcedObject, parsed: ParsedObjects) -> ObjectRef | None:
    """The reference of an object kai parses; None for one passed through or reported."""
    kind, api_version = item.manifest["kind"], item.manifest["apiVersion"]
    expected, namespaced = _KINDS.get(kind, ("", False))
    # Another group's kind of the same name (a Volcano Queue, say) is not ours to read.
    if not expected or _group(api_version) != _group(expected):
        parsed.others.append(item)
        return None
    ref = object_ref(kind, item.manifest, namespaced=namespaced)
    if api_version != expected:
        parsed.problems.append(
            f"{item.source}: {ref}: apiVersion: {api_version} is not supported; use {expected}"
        )
        return None
    return ref


def _parse_one(parsed: ParsedObjects, item: SourcedObject, ref: ObjectRef) -> None:
    manifest = item.manifest
    if ref.kind == "PriorityClass":
        parsed.priority_classes[ref.name] = validated(PriorityClass, ref, manifest).value
    elif ref.kind == "Node":
        parsed.nodes.append(parse_node(manifest))
    elif ref.kind == "Pod":
        pod = parse_pod(manifest, annotated_pod_group_key(manifest) or "")
        parsed.pods.append(ParsedPod(item.source, manifest, pod))
    elif ref.kind == "Queue":
        parsed.queues.append(parse_queue(manifest))
        parsed.warnings += _lines(item.source, queue_warnings(manifest))
    elif ref.kind == "Topology":
        parsed.topologies.append(parse_topology(manifest))
    elif ref.kind in _DEPENDED_MODELS:
        validated(_DEPENDED_MODELS[ref.kind], ref, manifest)
        key = f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name
        parsed.depended[ref.kind][key] = manifest
    elif ref.kind == "PodGroup":
        group = parse_pod_group(manifest, parsed.priority_classes)
        parsed.pod_groups.append(group)
        if group.priority_class is not None and group.priority_class not in parsed.priority_classes:
            missing = ref.warning(
                "spec.priorityClassName",
                f"PriorityClass {group.priority_class!r} does not exist; "
                f"the group gets priority {group.priority}",
            )
            parsed.warnings += _lines(item.source, [missing])


def cluster_objects(parsed: ParsedObjects) -> ClusterObjects:
    """The claims, volumes, StorageClasses, ConfigMaps and Namespaces read, for the pods'
    dependencies; a pod's namespace exists even when the input has no Namespace for it."""
    depended = parsed.depended
    volumes = VolumeObjects(
        depended["PersistentVolumeClaim"], depended["PersistentVolume"], depended["StorageClass"]
    )
    pods_in = frozenset(item.pod.namespace for item in parsed.pods)
    return ClusterObjects(volumes, depended["ConfigMap"], depended["Namespace"], pods_in)


def _lines(source: str, findings: Iterable[ManifestError | ManifestWarning]) -> list[str]:
    return [f"{source}: {finding}" for finding in findings]


def _is_text(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]
