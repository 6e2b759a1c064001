"""Turns a v1 Node manifest into the engine's `Node`.

The node's capacity is its `status.allocatable` (cpu, memory, pods, whole GPUs, and the
scalar resources of `kai.api.scalars`); its
per-device GPU memory comes from the GPU Feature Discovery label and is rounded the
way KAI rounds it, because fractional requests are placed against that number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from kai.api import corev1
from kai.api.constants import GPU_MEMORY_NODE_LABEL, MAX_GPUS_PER_NODE, NVIDIA_GPU_RESOURCE
from kai.api.errors import ManifestError, ObjectRef, object_ref, raise_all, validated
from kai.api.mig import mig_mode
from kai.api.scalars import allocatable_scalars, counted_gpus
from kai.engine.model import Node, Taint
from kai.engine.resources import Resources

KUBELET_DEFAULT_MAX_PODS = 110
"""Pods a node takes when its manifest leaves `allocatable.pods` out (the kubelet's default).

Real nodes always report it; hand-written simulator nodes often do not, and reading the
absence as 0 would make every pod silently unschedulable there.
"""

GPU_MEMORY_STEP_MIB = 100
"""KAI floors the per-device memory label to a multiple of this, and assumes it if it is missing."""


def parse_node(manifest: Mapping[str, Any]) -> Node:
    """The engine's view of a Node; a ManifestError names the first bad field, `also` the rest."""
    ref = object_ref("Node", manifest, namespaced=False)
    wire = validated(corev1.Node, ref, manifest)
    errors: list[ManifestError] = []
    allocatable = _allocatable(ref, wire.status.allocatable, errors)
    max_pods = _max_pods(ref, wire.status.allocatable, errors)
    gpu_memory = _gpu_memory_mib(ref, wire.metadata.labels, errors)
    raise_all(errors)
    return Node(
        name=wire.metadata.name,
        labels=tuple(sorted(wire.metadata.labels.items())),
        allocatable=allocatable,
        max_pods=max_pods,
        gpu_memory_mib=gpu_memory,
        unschedulable=wire.spec.unschedulable,
        ready=_is_ready(wire.status.conditions),
        taints=tuple(Taint(t.key, t.value or None, t.effect) for t in wire.spec.taints),
        scalars=allocatable_scalars(wire.status.allocatable),
        mig=mig_mode(wire.metadata.labels, wire.status.allocatable),
        scalar_gpus=counted_gpus(wire.status.allocatable),
    )


def _allocatable(
    ref: ObjectRef, allocatable: Mapping[str, Fraction], errors: list[ManifestError]
) -> Resources:
    for name, amount in allocatable.items():
        if amount < 0:
            errors.append(ref.error(f"status.allocatable.{name}", "must not be negative"))
    gpus = allocatable.get(NVIDIA_GPU_RESOURCE, Fraction(0))
    field = f"status.allocatable.{NVIDIA_GPU_RESOURCE}"
    if gpus.denominator != 1:
        errors.append(ref.error(field, f"must be a whole number of devices, got {float(gpus)}"))
    elif gpus > MAX_GPUS_PER_NODE:
        errors.append(
            ref.error(field, f"{gpus} devices on one node; kai reads at most {MAX_GPUS_PER_NODE:,}")
        )
    cpu_millicores = math.ceil(allocatable.get("cpu", Fraction(0)) * 1000)
    memory_bytes = math.ceil(allocatable.get("memory", Fraction(0)))
    return Resources.of(gpu=int(gpus), cpu=cpu_millicores, memory=memory_bytes)


def _max_pods(
    ref: ObjectRef, allocatable: Mapping[str, Fraction], errors: list[ManifestError]
) -> int:
    pods = allocatable.get("pods")
    if pods is None:
        return KUBELET_DEFAULT_MAX_PODS
    if pods.denominator != 1:
        errors.append(
            ref.error("status.allocatable.pods", f"must be a whole number, got {float(pods)}")
        )
    return int(pods)


def _gpu_memory_mib(ref: ObjectRef, labels: Mapping[str, str], errors: list[ManifestError]) -> int:
    text = labels.get(GPU_MEMORY_NODE_LABEL)
    if text is None:
        return GPU_MEMORY_STEP_MIB
    field = f"metadata.labels.{GPU_MEMORY_NODE_LABEL}"
    if not text.isascii() or not text.isdigit():
        errors.append(ref.error(field, f"must be a whole number of MiB per device, got {text!r}"))
        return GPU_MEMORY_STEP_MIB
    floored = int(text) // GPU_MEMORY_STEP_MIB * GPU_MEMORY_STEP_MIB
    if floored == 0:
        errors.append(ref.error(field, f"must be at least {GPU_MEMORY_STEP_MIB} MiB, got {text}"))
        return GPU_MEMORY_STEP_MIB
    return floored


def _is_ready(conditions: list[corev1.NodeCondition]) -> bool:
    """Not ready only when a Ready condition says so: no conditions at all means Ready."""
    return all(c.status == "True" for c in conditions if c.type == "Ready")
