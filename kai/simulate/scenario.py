"""Turn the simulator's input objects into the engine's snapshot, grouping pods as the live pod grouper does.

Pods that name a PodGroup join it; `kai-scheduler` pods that name none are grouped
by the same pod-grouper code the live operator runs, over the owner chain found in
the input. Workload objects (Jobs, JobSets, PyTorchJobs, ...) are first expanded
into the pods their controllers would create. Any problem makes the whole input
invalid: the simulator never runs on a partial reading.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from kai.api.dependencies import ClusterObjects, depends, with_dependencies
from kai.api.errors import ManifestError, ObjectRef, object_ref
from kai.api.host_ports import ports_in_use
from kai.api.node_offers import offering, volume_offers
from kai.api.parse import (
    ParsedObjects,
    SourcedObject,
    cluster_objects,
    parse_objects,
    parse_pod,
    parse_pod_group,
)
from kai.api.shards import NODE_POOL_LABEL_KEY
from kai.api.volumes import claim_keys, ephemeral_claims
from kai.engine.model import Pod, PodGroup, Snapshot
from kai.grouping import GroupingError, grouped_manifest, plan_pod_group, resolve_owner_chain
from kai.workloads.catalog import catalog_registry
from kai.workloads.expansion import expand_workload, is_workload_kind
from kai.workloads.registry import DefinitionRegistry

OUR_SCHEDULER = "kai-scheduler"
_READ_KINDS = (
    "Pod",
    "Node",
    "Queue",
    "PodGroup",
    "PriorityClass",
    "Topology",
    "PersistentVolumeClaim",
    "PersistentVolume",
    "StorageClass",
    "ConfigMap",
    "List",
)
"""Kinds read as they are, never expanded as a workload."""


class InvalidScenarioError(ValueError):
    """The input has problems; the message holds one line per problem."""


def load_scenario(
    documents: Sequence[tuple[str, object]],
    now: datetime,
    node_pool_label: str = NODE_POOL_LABEL_KEY,
) -> Snapshot:
    """The snapshot the documents describe; pods are grouped with `node_pool_label` as the
    pool label (`--node-pool-label`), as `kai run`'s grouper."""
    registry = catalog_registry()
    problems: list[str] = []
    expanded = _expand_workloads(documents, registry, problems)
    parsed = parse_objects([*documents, *expanded])
    problems += parsed.problems
    unsupported = [
        item
        for item in parsed.others
        if not is_workload_kind(
            str(item.manifest.get("apiVersion")), str(item.manifest.get("kind")), registry
        )
        and not _is_expansion(item, expanded)
    ]
    problems += [
        f"{item.source}: {_reference(item.manifest)}: kind: "
        f"{item.manifest.get('apiVersion')} {item.manifest.get('kind')} is not supported"
        for item in unsupported
    ]
    pods, groups = _group_pods(parsed, registry, problems, node_pool_label)
    objects = cluster_objects(parsed)
    pods = _with_dependencies(pods, parsed, objects, problems)
    if problems:
        raise InvalidScenarioError("\n".join(problems))
    ports = ports_in_use(pods)
    volumes = volume_offers(pods, parsed.nodes, objects.volumes)
    offered = (offering(n, ports, volumes.get(n.name, ())) for n in parsed.nodes)
    return Snapshot(
        nodes=tuple(sorted(offered, key=lambda n: n.name)),
        pods=tuple(sorted(pods, key=lambda p: p.key)),
        pod_groups=tuple(sorted(groups.values(), key=lambda g: g.key)),
        queues=tuple(sorted(parsed.queues, key=lambda q: q.name)),
        now=now,
        topologies=tuple(sorted(parsed.topologies, key=lambda t: t.name)),
    )


def _expand_workloads(
    documents: Sequence[tuple[str, object]], registry: DefinitionRegistry, problems: list[str]
) -> list[tuple[str, object]]:
    result: list[tuple[str, object]] = []
    for source, doc in documents:
        if not isinstance(doc, Mapping):
            continue
        api_version, kind = str(doc.get("apiVersion", "")), str(doc.get("kind", ""))
        if kind in _READ_KINDS:
            continue
        if is_workload_kind(api_version, kind, registry):
            try:
                result += [(source, obj) for obj in expand_workload(doc, registry)]
            except ManifestError as error:
                problems += [f"{source}: {e}" for e in error.all_errors]
    return result


def _with_dependencies(
    pods: list[Pod], parsed: ParsedObjects, given: ClusterObjects, problems: list[str]
) -> list[Pod]:
    """The pods with what their volume claims and the ConfigMaps they require say
    (`kai.api.dependencies`)."""
    sources = {item.pod.key: (item.source, item.manifest) for item in parsed.pods}
    # What the ephemeral volume controller would make, unless the input has it already.
    made = {k: v for _, m in sources.values() for k, v in ephemeral_claims(m).items()}
    claims = {**made, **given.volumes.claims}
    objects = dataclasses.replace(given, volumes=dataclasses.replace(given.volumes, claims=claims))
    result: list[Pod] = []
    for pod in pods:
        source, manifest = sources.get(pod.key, ("", {}))
        if not depends(manifest):
            result.append(pod)
            continue
        try:
            claim_keys(manifest)
        except ManifestError as error:
            problems.append(f"{source}: {error}")
            continue
        result.append(with_dependencies(pod, manifest, objects))
    return result


def _is_expansion(item: SourcedObject, expanded: Sequence[tuple[str, object]]) -> bool:
    return any(obj is item.manifest for _, obj in expanded)


def _group_pods(
    parsed: ParsedObjects, registry: DefinitionRegistry, problems: list[str], node_pool_label: str
) -> tuple[list[Pod], dict[str, PodGroup]]:
    groups = {group.key: group for group in parsed.pod_groups}
    objects = [item.manifest for item in parsed.others]
    pods: list[Pod] = []
    for item in parsed.pods:
        pod = item.pod
        if pod.group or not pod.scheduler_is_ours:
            pods.append(pod)
            continue
        try:
            chain = resolve_owner_chain(item.manifest, objects)
            plan = plan_pod_group(
                item.manifest, chain, registry, parsed.priority_classes, node_pool_label
            )
            if plan is None:  # opted out of grouping and names no group: it cannot be scheduled
                pods.append(pod)
                continue
            pods.append(parse_pod(grouped_manifest(item.manifest, plan), plan.key))
            if plan.key not in groups:
                groups[plan.key] = parse_pod_group(plan.manifest, parsed.priority_classes)
        except ManifestError as error:
            problems += [f"{item.source}: {e}" for e in error.all_errors]
        except GroupingError as error:
            problems.append(f"{item.source}: Pod {pod.key}: metadata.ownerReferences: {error}")
    return pods, groups


def _reference(manifest: Mapping[str, Any]) -> ObjectRef:
    """An object kai does not read, named as leniently as a broken one it reads: its
    metadata may be anything."""
    metadata = manifest.get("metadata")
    namespaced = isinstance(metadata, Mapping) and bool(metadata.get("namespace"))
    return object_ref(str(manifest.get("kind")), manifest, namespaced=namespaced)
