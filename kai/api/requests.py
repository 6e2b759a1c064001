"""What a pod asks for, computed as Kubernetes computes it.

The scheduler reserves a pod's *effective* request, not the sum of its containers
(k8s.io/component-helpers `PodRequests`, KEP-753 for sidecars). Per resource:

- regular containers run together, so their requests add up;
- classic init containers run one at a time before them, so only the largest counts,
  together with the sidecars (init containers with `restartPolicy: Always`) started
  before it, since those keep running;
- sidecars also run beside the regular containers, so they add to that sum;
- the pod needs the larger of the two phases, plus `spec.overhead` (the sandbox);
- a pod-level request (`spec.resources`, KEP-2837) replaces that sum for the resources
  it may name (cpu, memory, hugepages-*); extended resources such as GPUs always come
  from the containers.

A container that sets a limit but no request requests its limit, as the API server
defaults it. The checks the API server makes on each container are repeated here so
that a file it would refuse is refused with the same field.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from fractions import Fraction

from kai.api import corev1
from kai.api.constants import NVIDIA_GPU_RESOURCE
from kai.api.errors import ManifestError, ObjectRef

ResourceAmounts = dict[str, Fraction]


def effective_requests(spec: corev1.PodSpec) -> ResourceAmounts:
    """Per resource name, the amount the scheduler must find on a node for this pod."""
    running = _sum(container_requests(c) for c in spec.containers)
    started_sidecars: ResourceAmounts = {}
    init_peak: ResourceAmounts = {}
    for container in spec.init_containers:
        requests = container_requests(container)
        if container.restart_policy == "Always":
            running = _sum((running, requests))
            started_sidecars = _sum((started_sidecars, requests))
            init_peak = _max(init_peak, started_sidecars)
        else:
            init_peak = _max(init_peak, _sum((requests, started_sidecars)))
    return _sum(({**_max(running, init_peak), **pod_level_requests(spec)}, spec.overhead))


def pod_level_requests(spec: corev1.PodSpec) -> ResourceAmounts:
    """The pod-level requests that stand in for the containers', each defaulted to its limit."""
    if spec.resources is None:
        return {}
    declared = {**spec.resources.limits, **spec.resources.requests}
    return {name: amount for name, amount in declared.items() if _pod_level_resource(name)}


def _pod_level_resource(name: str) -> bool:
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def container_requests(container: corev1.Container) -> ResourceAmounts:
    """The container's requests, each unset one defaulted to its limit."""
    return {**container.resources.limits, **container.resources.requests}


def container_errors(ref: ObjectRef, spec: corev1.PodSpec) -> list[ManifestError]:
    """What the API server would reject in the containers' resources."""
    errors: list[ManifestError] = []
    for path, container in containers(spec):
        resources = container.resources
        for kind, amounts in (("requests", resources.requests), ("limits", resources.limits)):
            for name, amount in amounts.items():
                field = f"{path}.resources.{kind}.{name}"
                if amount < 0:
                    errors.append(ref.error(field, "must not be negative"))
                elif is_extended(name) and amount.denominator != 1:
                    errors.append(
                        ref.error(field, f"must be a whole number of devices, got {float(amount)}")
                    )
        for name, request in resources.requests.items():
            limit = resources.limits.get(name)
            if limit is None:
                continue
            field = f"{path}.resources.requests.{name}"
            if is_extended(name) and request != limit:
                errors.append(
                    ref.error(field, "must equal the limit (devices cannot be overcommitted)")
                )
            elif request > limit:
                errors.append(ref.error(field, "must be less than or equal to the limit"))
    for name, amount in spec.overhead.items():
        if amount < 0:
            errors.append(ref.error(f"spec.overhead.{name}", "must not be negative"))
    if spec.resources is not None:
        for kind, amounts in (
            ("requests", spec.resources.requests),
            ("limits", spec.resources.limits),
        ):
            for name, amount in amounts.items():
                field = f"spec.resources.{kind}.{name}"
                if not _pod_level_resource(name):
                    errors.append(ref.error(field, "must be cpu, memory or hugepages-<size>"))
                elif amount < 0:
                    errors.append(ref.error(field, "must not be negative"))
    return errors


def is_extended(name: str) -> bool:
    """An extended resource (`nvidia.com/gpu`, `rdma/hca`, a MIG slice), as the API server
    tells them: named in a domain other than Kubernetes' own (`*kubernetes.io/`). It counts
    whole devices, never overcommitted, so its request must equal its limit."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def asks_for_whole_gpus(spec: corev1.PodSpec) -> bool:
    """Whether any container names `nvidia.com/gpu`, even as 0 (KAI's test for the conflict)."""
    return any(
        NVIDIA_GPU_RESOURCE in c.resources.requests or NVIDIA_GPU_RESOURCE in c.resources.limits
        for _, c in containers(spec)
    )


def containers(spec: corev1.PodSpec) -> Iterator[tuple[str, corev1.Container]]:
    """Each init container and container with its field path, init containers first."""
    for index, container in enumerate(spec.init_containers):
        yield f"spec.initContainers[{index}]", container
    for index, container in enumerate(spec.containers):
        yield f"spec.containers[{index}]", container


def _sum(parts: Iterable[Mapping[str, Fraction]]) -> ResourceAmounts:
    total: ResourceAmounts = {}
    for part in parts:
        for name, amount in part.items():
            total[name] = total.get(name, Fraction(0)) + amount
    return total


def _max(a: Mapping[str, Fraction], b: Mapping[str, Fraction]) -> ResourceAmounts:
    return {
        name: max(a.get(name, Fraction(0)), b.get(name, Fraction(0)))
        for name in a.keys() | b.keys()
    }
