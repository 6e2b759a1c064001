"""The ConfigMaps a pod cannot start without, and whether they exist: KAI's ConfigMap predicate.

KAI keeps a pod pending while a ConfigMap it requires is missing
(`pkg/scheduler/k8s_internal/predicates/config_maps.go`), where kube-scheduler would bind
it and the kubelet hold it on its node (`CreateContainerConfigError`) with its GPUs
taken. Required, as KAI reads it: a `configMap` volume, or a ConfigMap source of a
`projected` volume, that some container mounts; a ConfigMap an init, regular or
ephemeral container reads into its environment (`env[].valueFrom.configMapKeyRef`,
`envFrom[].configMapRef`); in each case unless marked `optional`. The ConfigMaps of
KAI's GPU sharing (named with the pod's `runai/shared-gpu-configmap` prefix) are left
out: the binder makes them when it binds the pod. So is `kube-root-ca.crt`, which every
pod's API token volume mounts and the control plane publishes in every namespace: were
it read, every pod would depend on a ConfigMap, and the live scheduler would read each
pending pod again every cycle (a burst's thousands) for one that is always there.

Read from the pod's manifest, leniently (the API server has validated it), on top of
its parse: ConfigMaps come and go without the pod.
"""

from __future__ import annotations

from collections.abc import Container, Iterator, Mapping
from typing import Any

from kai.api.constants import SHARED_GPU_CONFIGMAP_ANNOTATION

_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
ROOT_CA_CONFIG_MAP = "kube-root-ca.crt"
"""Published in every namespace by the control plane; each pod's API token volume mounts it."""
_ALWAYS_THERE = frozenset({ROOT_CA_CONFIG_MAP})


def required_config_maps(manifest: Mapping[str, Any]) -> tuple[str, ...]:
    """The names of the ConfigMaps (in the pod's namespace) the pod cannot start without,
    sorted; () for most pods, cheaply."""
    spec = manifest.get("spec")
    if not isinstance(spec, Mapping):
        return ()
    containers = [c for key in _CONTAINER_LISTS for c in _mappings(spec.get(key))]
    names = set(_from_environment(containers))
    mounted = {m.get("name") for c in containers for m in _mappings(c.get("volumeMounts"))}
    for volume in _mappings(spec.get("volumes")):
        if volume.get("name") in mounted:
            names.update(_from_volume(volume))
    names -= _ALWAYS_THERE
    if not names:
        return ()
    metadata = manifest.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    prefix = annotations.get(SHARED_GPU_CONFIGMAP_ANNOTATION) if annotations else None
    if isinstance(prefix, str) and prefix:
        names = {name for name in names if not name.startswith(prefix)}
    return tuple(sorted(names))


def missing_message(namespace: str, names: tuple[str, ...], existing: Container[str]) -> str | None:
    """Why the pod waits, naming the required ConfigMaps that do not exist; None when all
    do. `existing`: the cluster's ConfigMaps, "namespace/name"."""
    missing = [name for name in names if f"{namespace}/{name}" not in existing]
    if not missing:
        return None
    listed = ", ".join(missing)
    return f"missing required ConfigMaps in namespace {namespace}: {listed}"


def _from_environment(containers: list[Mapping[str, Any]]) -> Iterator[str]:
    for container in containers:
        for variable in _mappings(container.get("env")):
            source = variable.get("valueFrom")
            if isinstance(source, Mapping):
                yield from _required(source.get("configMapKeyRef"))
        for source in _mappings(container.get("envFrom")):
            yield from _required(source.get("configMapRef"))


def _from_volume(volume: Mapping[str, Any]) -> Iterator[str]:
    yield from _required(volume.get("configMap"))
    projected = volume.get("projected")
    if isinstance(projected, Mapping):
        for source in _mappings(projected.get("sources")):
            yield from _required(source.get("configMap"))


def _required(reference: object) -> Iterator[str]:
    """The name a ConfigMap reference holds, unless it is optional."""
    if isinstance(reference, Mapping) and reference.get("optional") is not True:
        name = reference.get("name")
        if isinstance(name, str) and name:
            yield name


def _mappings(items: object) -> Iterator[Mapping[str, Any]]:
    if isinstance(items, list):
        yield from (item for item in items if isinstance(item, Mapping))
