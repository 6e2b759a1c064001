"""Turns a v1 Pod manifest into the engine's `Pod`.

The pod's group is passed in rather than read here: which PodGroup a pod belongs to
is the pod grouper's decision (kai-semantics §14.2), made from owners this module
never sees.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from kai.api import corev1
from kai.api.constants import (
    GPU_GROUP_LABEL,
    MULTI_GPU_GROUP_LABEL_PREFIX,
    NVIDIA_GPU_RESOURCE,
    POD_GROUP_ANNOTATION,
    SCHEDULER_NAME,
    SUBGROUP_LABEL,
    TASK_PRIORITY_LABEL,
)
from kai.api.errors import ManifestError, ObjectRef, object_ref, raise_all, validated
from kai.api.fields import ObjectMeta, integer_or_none
from kai.api.gpu_sharing import pod_gpu_request
from kai.api.host_ports import asked_ports
from kai.api.placement import pod_placement
from kai.api.pod_affinity import pod_terms, preferred_terms
from kai.api.projection import field_keys, read_part
from kai.api.requests import container_errors, effective_requests
from kai.api.scalars import asked_scalars, counted_gpus
from kai.api.unhonoured import unhonoured_field
from kai.engine.model import Pod, PodPhase
from kai.engine.resources import Resources


def parse_pod(manifest: Mapping[str, Any], pod_group_key: str) -> Pod:
    """The engine's view of a Pod in the group `pod_group_key` ("namespace/name").

    Raises ManifestError naming the first bad field, with the others in `also`. Malformed
    fields (types, quantities, enums) are all reported at once; the rules that span fields
    (GPU forms, phase, affinity) are checked, all of them, once the pod is well-formed.
    """
    ref = object_ref("Pod", manifest, namespaced=True)
    wire = validated(corev1.Pod, ref, manifest)
    metadata, spec = wire.metadata, wire.spec
    errors = container_errors(ref, spec)
    requests = effective_requests(spec)
    whole_gpus = requests.get(NVIDIA_GPU_RESOURCE, Fraction(0))
    gpu = pod_gpu_request(ref, metadata.annotations, spec, math.floor(whole_gpus), errors)
    counted = counted_gpus(requests)
    if counted:
        gpu = dataclasses.replace(gpu, scalar_gpus=counted)
    placement = pod_placement(ref, spec, errors)
    phase = _phase(ref, wire, errors)
    task_priority = _task_priority(ref, metadata.labels, errors)
    raise_all(errors)
    return Pod(
        namespace=ref.namespace or "default",
        name=metadata.name,
        uid=metadata.uid,
        group=pod_group_key,
        subgroup=metadata.labels.get(SUBGROUP_LABEL) or None,
        phase=phase,
        node=spec.node_name or None,
        request=Resources.of(
            gpu=gpu.whole,
            cpu=math.ceil(requests.get("cpu", Fraction(0)) * 1000),
            memory=math.ceil(requests.get("memory", Fraction(0))),
        ),
        gpu=gpu,
        placement=placement,
        created=metadata.creation_timestamp,
        task_priority=task_priority,
        gpu_groups=gpu_groups(metadata.labels),
        scheduler_is_ours=spec.scheduler_name == SCHEDULER_NAME,
        deleting_since=metadata.deletion_timestamp if wire.status.phase == "Running" else None,
        unhonoured=unhonoured_field(spec),
        labels=tuple(sorted(metadata.labels.items())),
        pod_terms=pod_terms(spec.affinity, ref.namespace or "default", metadata.labels),
        preferred_terms=preferred_terms(spec.affinity, ref.namespace or "default", metadata.labels),
        scalars=tuple(sorted((*asked_scalars(requests), *asked_ports(spec)))),
        # A bound pod keeps the field, but only a pod still to be placed is nominated.
        nominated_node=(wire.status.nominated_node_name or None) if not spec.node_name else None,
    )


_READ_METADATA = tuple(
    key for name in ObjectMeta.model_fields for key in field_keys(ObjectMeta, name)
)
"""The metadata keys `parse_pod` reads (`ObjectMeta`'s fields, by wire and Python name); with
the spec and `_READ_STATUS`, all of the pod it reads (`corev1.Pod`)."""

_READ_STATUS = tuple(
    key for name in corev1.PodStatus.model_fields for key in field_keys(corev1.PodStatus, name)
)
"""The status keys `parse_pod` reads: the phase, and the node a pod is nominated to."""


def reparsed(before: Mapping[str, Any], after: Mapping[str, Any], parsed: Pod) -> Pod | None:
    """`parse_pod(after)` worked out from `parsed`, which is `parse_pod(before)` (the same
    group), when nothing `parse_pod` reads changed but the node it was bound to; else None,
    and `after` must be parsed.

    Why: the scheduler parses each pod it binds again once bound, and again when its
    group shows up, and validating the whole pod was most of the snapshot's time in a
    burst. A bound pod's other changes (resourceVersion, managedFields, conditions) are
    not read.
    """
    spec, was = after.get("spec"), before.get("spec")
    if not (isinstance(spec, Mapping) and isinstance(was, Mapping)):
        return None
    status, old_status = after.get("status") or {}, before.get("status") or {}
    meta, old_meta = after.get("metadata") or {}, before.get("metadata") or {}
    if (
        not isinstance(status, Mapping)
        or not isinstance(old_status, Mapping)
        or not isinstance(meta, Mapping)
        or not isinstance(old_meta, Mapping)
        or any(status.get(name) != old_status.get(name) for name in _READ_STATUS)
        or any(meta.get(name) != old_meta.get(name) for name in _READ_METADATA)
        or any(spec.get(name) != was.get(name) for name in (set(spec) | set(was)) - {"nodeName"})
    ):
        return None
    node, old_node = spec.get("nodeName"), was.get("nodeName")
    if node == old_node:
        return parsed
    if old_node or not isinstance(node, str) or not node:
        return None  # moved or unbound: never by a bind
    if parsed.phase not in (PodPhase.PENDING, PodPhase.GATED):
        return None
    return dataclasses.replace(parsed, node=node, phase=PodPhase.BOUND, nominated_node=None)


class SiblingParser:
    """`parse_pod`, once per shape: pods stamped from one template differ only in identity.

    Why: a burst of 5,000 pods from one template (a Job's, or plain pods the grouper gives
    a group each) validated each pod whole again: 0.7 s of the snapshot, on the critical
    path while the cycle before binds. A pod's shape is what validating it reads
    (`kai.api.projection`: not, say, the service-account volume the API server names
    per pod) but its name, uid and group; a pod whose shape matches one parsed before
    takes that pod's result with its own identity. Only successes are shared: an error
    names its pod. The shape is the `repr` of JSON values, which tells apart whatever
    differs (`1`, `"1"`, `True`), and a differently ordered copy only misses. `forget`
    ends a cycle's shapes, so nothing is kept across cycles.
    """

    def __init__(self) -> None:
        self._by_shape: dict[str, Pod] = {}

    def parse(self, manifest: Mapping[str, Any], pod_group_key: str) -> Pod:
        shape = _shape(manifest)
        if shape is None:
            return parse_pod(manifest, pod_group_key)
        sibling = self._by_shape.get(shape)
        if sibling is None:
            parsed = parse_pod(manifest, pod_group_key)
            self._by_shape[shape] = parsed
            return parsed
        metadata = manifest["metadata"]
        return dataclasses.replace(
            sibling, name=metadata["name"], uid=metadata.get("uid", ""), group=pod_group_key
        )

    def forget(self) -> None:
        self._by_shape.clear()


def _shape(manifest: Mapping[str, Any]) -> str | None:
    """What `parse_pod` reads of the pod but its identity (name, uid, group annotation), or
    None when the identity is not plainly valid (the pod is then parsed, so any error is
    its own)."""
    read = read_part(corev1.Pod, manifest)
    metadata = read.get("metadata") if isinstance(read, dict) else None
    if not isinstance(metadata, dict):
        return None
    name, uid = metadata.pop("name", None), metadata.pop("uid", "")
    if not (isinstance(name, str) and name and isinstance(uid, str)):
        return None
    annotations = metadata.get("annotations")
    if isinstance(annotations, Mapping) and POD_GROUP_ANNOTATION in annotations:
        # The group comes in as `pod_group_key`; its annotation differs per plain pod.
        if not isinstance(annotations[POD_GROUP_ANNOTATION], str):
            return None
        metadata["annotations"] = {
            key: value for key, value in annotations.items() if key != POD_GROUP_ANNOTATION
        }
    return repr(read)


def gpu_groups(labels: Mapping[str, str]) -> tuple[str, ...]:
    """The shared devices a fractional pod sits on, from the labels KAI's binder writes.

    The single-device label comes first; a multi-device pod also carries one
    `runai-gpu-group/<group>` label per device. As in KAI, those count only beside
    the single-device label.
    """
    first = labels.get(GPU_GROUP_LABEL)
    if not first:
        return ()
    groups = [first]
    for key in sorted(labels):
        value = labels[key]
        if key.startswith(MULTI_GPU_GROUP_LABEL_PREFIX) and value and value not in groups:
            groups.append(value)
    return tuple(groups)


def _phase(ref: ObjectRef, wire: corev1.Pod, errors: list[ManifestError]) -> PodPhase:
    """KAI's pod status (kai-semantics §6) folded into the phases the engine distinguishes."""
    phase = wire.status.phase
    bound = bool(wire.spec.node_name)
    if phase == "Succeeded":
        return PodPhase.SUCCEEDED
    if phase == "Failed":
        return PodPhase.FAILED
    if wire.metadata.deletion_timestamp is not None:
        return PodPhase.RELEASING
    if bound:
        # Running, Pending-on-a-node and Unknown (node lost contact) all hold the node.
        return PodPhase.BOUND
    if phase != "Pending":
        errors.append(
            ref.error("status.phase", f"{phase} needs spec.nodeName: a pod runs on a node")
        )
    return PodPhase.GATED if wire.spec.scheduling_gates else PodPhase.PENDING


def _task_priority(ref: ObjectRef, labels: Mapping[str, str], errors: list[ManifestError]) -> int:
    text = labels.get(TASK_PRIORITY_LABEL)
    if text is None:
        return 0
    priority = integer_or_none(text)
    if priority is None:
        field = f"metadata.labels.{TASK_PRIORITY_LABEL}"
        errors.append(ref.error(field, f"must be an integer, got {text!r}"))
        return 0
    return priority


def annotated_pod_group_key(manifest: Mapping[str, Any]) -> str | None:
    """ "namespace/name" of the PodGroup the pod's `pod-group-name` annotation names, if any.

    Read leniently, before validation, because the key is needed to parse the pod; a
    malformed pod is reported by `parse_pod` itself.
    """
    metadata = manifest.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    name = annotations.get(POD_GROUP_ANNOTATION) if isinstance(annotations, Mapping) else None
    if not isinstance(name, str) or not name:
        return None
    return f"{object_ref('Pod', manifest, namespaced=True).namespace}/{name}"


def waits_for_scheduler(manifest: Mapping[str, Any]) -> bool:
    """A `kai-scheduler` pod not yet on a node and still Pending: one a scheduler must place.

    Read leniently, before validation, as `annotated_pod_group_key` is."""
    spec, status = manifest.get("spec"), manifest.get("status")
    spec = spec if isinstance(spec, Mapping) else {}
    status = status if isinstance(status, Mapping) else {}
    return (
        spec.get("schedulerName") == SCHEDULER_NAME
        and not spec.get("nodeName")
        and status.get("phase", "Pending") == "Pending"
    )
