"""Fractional GPUs the way KAI's binder does them (kai-semantics §13.4).

Each shared physical device is held by one reservation pod in the namespace
`kai-resource-reservation`, pinned to the node and requesting `nvidia.com/gpu: 1`,
so the device plugin accounts the card once; the pods sharing it carry the
`runai-gpu-group` label naming the device's group. A sharing pod learns its device
through two ConfigMaps (names and container choice from `kai.api.gpu_sharing`):
`<prefix>-<n>` with `NVIDIA_VISIBLE_DEVICES`, `GPU_PORTION` and the legacy
`RUNAI_NUM_OF_GPUS`, the keys KAI's admission webhook wires into the container one by
one, and `<prefix>-<n>-evar` (its `envFrom`) with the portion keys again, for pods
that reference only it. The prefix is the pod's `runai/shared-gpu-configmap`
annotation (set by the webhook) or, without one, `<pod>-shared-gpu`, recorded in
that annotation.

The device's UUID is known only once the reservation pod runs and publishes it in
its `run.ai/reserve_for_gpu_index` annotation (through NVML, on a real node).
Binding does not wait for it: the visible-devices ConfigMap is created without the
key, and the kubelet retries starting the container until it is there. Each cycle
fills the key for pods whose reservation pods have published, and marks the pod
`kai.scheduler/gpu-devices-published` so the work is done once (also across
restarts). Reservation pods whose last user has left are deleted.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

import structlog

from kai.api.constants import (
    GPU_GROUP_LABEL,
    MULTI_GPU_GROUP_LABEL_PREFIX,
    NVIDIA_GPU_RESOURCE,
    SHARED_GPU_CONFIGMAP_ANNOTATION,
)
from kai.api.gpu_sharing import (
    GPU_PORTION_KEY,
    NUM_OF_GPUS_KEY,
    VISIBLE_DEVICES_KEY,
    FractionContainer,
    device_config_maps,
    fraction_container,
)
from kai.engine.model import Pod
from kai.kube.client import ApiError, Kube
from kai.kube.writes import run_bounded

log = structlog.get_logger(__name__)

CONFIGMAP_ANNOTATION = SHARED_GPU_CONFIGMAP_ANNOTATION
GPU_UUID_ANNOTATION = "run.ai/reserve_for_gpu_index"
RECEIVED_TYPE_ANNOTATION = "received-resource-type"
PUBLISHED_ANNOTATION = "kai.scheduler/gpu-devices-published"
RESERVATION_APP_LABEL = "app"
RESERVATION_APP = "kai-resource-reservation"
VISIBLE_DEVICES = VISIBLE_DEVICES_KEY
_CONFLICT = 409
_NOT_FOUND = 404


class GpuSharing:
    """Reservation pods, group labels and device ConfigMaps for fractional pods."""

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        image: str,
        runtime_class: str | None,
        concurrency: int,
    ) -> None:
        self._kube = kube
        self._namespace = namespace
        self._image = image
        self._runtime_class = runtime_class
        self._concurrency = concurrency
        self._locks: dict[str, asyncio.Lock] = {}
        self._created: dict[str, str] = {}  # group -> reservation pod made by this process

    @property
    def namespace(self) -> str:
        return self._namespace

    async def prepare(
        self,
        manifest: Mapping[str, Any],
        pod: Pod,
        node: str,
        groups: tuple[str, ...],
        portion: Fraction,
        reservations: Mapping[str, Mapping[str, Any]],
    ) -> None:
        """Everything a fractional pod needs before its bind; raises ApiError on failure."""
        for group in groups:
            await self._ensure_reservation(group, node, reservations)
        metadata = manifest.get("metadata") or {}
        annotations = metadata.get("annotations") or {}
        prefix = annotations.get(CONFIGMAP_ANNOTATION) or f"{pod.name}-shared-gpu"
        capabilities, direct_env = device_config_maps(prefix, _container(manifest))
        owner = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": pod.name,
            "uid": pod.uid,
        }
        uuids = [_uuid_of(reservations, group) for group in groups]
        devices: dict[str, str] = {}
        if all(uuids):
            devices[VISIBLE_DEVICES] = ",".join(str(u) for u in uuids)
        shares = {
            GPU_PORTION_KEY: _decimal(portion),
            NUM_OF_GPUS_KEY: _decimal(portion * len(groups)),
        }
        await self._apply_configmap(pod.namespace, capabilities, {**devices, **shares}, owner)
        await self._apply_configmap(pod.namespace, direct_env, shares, owner)
        labels = {GPU_GROUP_LABEL: groups[0]}
        if len(groups) > 1:
            labels.update({f"{MULTI_GPU_GROUP_LABEL_PREFIX}{group}": group for group in groups})
        new_annotations = {
            CONFIGMAP_ANNOTATION: prefix,
            RECEIVED_TYPE_ANNOTATION: "Fraction",
        }
        if devices:
            new_annotations[PUBLISHED_ANNOTATION] = "true"
        await self._kube.merge_patch(
            _pod_path(pod.namespace, pod.name),
            {"metadata": {"uid": pod.uid, "labels": labels, "annotations": new_annotations}},
        )

    async def undo(self, pod: Pod, groups: tuple[str, ...]) -> None:
        """After a failed bind: take the group labels off, so the pod is plainly pending again."""
        labels: dict[str, None] = {GPU_GROUP_LABEL: None}
        if len(groups) > 1:
            labels.update({f"{MULTI_GPU_GROUP_LABEL_PREFIX}{group}": None for group in groups})
        try:
            await self._kube.merge_patch(
                _pod_path(pod.namespace, pod.name), {"metadata": {"labels": labels}}
            )
        except ApiError as error:
            log.warning("group label not removed", pod=pod.key, error=str(error))

    async def _ensure_reservation(
        self, group: str, node: str, reservations: Mapping[str, Mapping[str, Any]]
    ) -> None:
        lock = self._locks.setdefault(group, asyncio.Lock())
        async with lock:
            if group in self._created or _reservation_of(reservations, group) is not None:
                return
            name = f"gpu-reservation-{node}-{secrets.token_hex(3)[:5]}"
            body: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": self._namespace,
                    "labels": {GPU_GROUP_LABEL: group, RESERVATION_APP_LABEL: RESERVATION_APP},
                },
                "spec": {
                    "nodeName": node,
                    "restartPolicy": "Always",
                    "terminationGracePeriodSeconds": 0,
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [
                        {
                            "name": "resource-reservation",
                            "image": self._image,
                            "resources": {
                                "requests": {NVIDIA_GPU_RESOURCE: "1"},
                                "limits": {NVIDIA_GPU_RESOURCE: "1"},
                            },
                        }
                    ],
                },
            }
            if self._runtime_class:
                body["spec"]["runtimeClassName"] = self._runtime_class
            await self._kube.create(f"/api/v1/namespaces/{self._namespace}/pods", body)
            self._created[group] = name
            log.info("reservation pod created", group=group, node=node, pod=name)

    async def _apply_configmap(
        self, namespace: str, name: str, data: Mapping[str, str], owner: Mapping[str, str]
    ) -> None:
        collection = f"/api/v1/namespaces/{namespace}/configmaps"
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "ownerReferences": [owner]},
            "data": dict(data),
        }
        try:
            await self._kube.create(collection, body)
        except ApiError as error:
            if error.status != _CONFLICT:
                raise
            await self._kube.merge_patch(f"{collection}/{name}", {"data": dict(data)})

    async def publish_devices(
        self, pods: Mapping[str, Mapping[str, Any]], reservations: Mapping[str, Mapping[str, Any]]
    ) -> None:
        """Fill NVIDIA_VISIBLE_DEVICES for bound sharing pods whose devices' UUIDs are known."""
        writes = []
        for key, manifest in pods.items():
            if not waits_for_devices(manifest):
                continue
            groups = _groups_of((manifest.get("metadata") or {}).get("labels") or {})
            uuids = [_uuid_of(reservations, group) for group in groups]
            if all(uuids):
                writes.append((key, self._publisher(manifest, ",".join(str(u) for u in uuids))))
        failures = await run_bounded(writes, self._concurrency)
        for key, error in failures.items():
            log.warning("device assignment not published", pod=key, error=str(error))

    def _publisher(self, manifest: Mapping[str, Any], devices: str) -> Any:
        metadata = manifest.get("metadata") or {}
        namespace, name = str(metadata["namespace"]), str(metadata["name"])
        prefix = metadata["annotations"][CONFIGMAP_ANNOTATION]
        capabilities, _ = device_config_maps(prefix, _container(manifest))
        configmap = f"/api/v1/namespaces/{namespace}/configmaps/{capabilities}"

        async def publish() -> None:
            await self._kube.merge_patch(configmap, {"data": {VISIBLE_DEVICES: devices}})
            await self._kube.merge_patch(
                _pod_path(namespace, name),
                {"metadata": {"annotations": {PUBLISHED_ANNOTATION: "true"}}},
            )

        return publish

    async def collect_garbage(
        self, reservations: Mapping[str, Mapping[str, Any]], in_use: Iterable[str]
    ) -> list[str]:
        """Delete reservation pods no user holds; the names of those deleted."""
        used = set(in_use)
        doomed = {
            key: manifest
            for key, manifest in reservations.items()
            if _group_label(manifest) not in used
            and (manifest.get("metadata") or {}).get("deletionTimestamp") is None
        }
        writes = [(key, self._deleter(manifest)) for key, manifest in doomed.items()]
        failures = await run_bounded(writes, self._concurrency)
        for key, error in failures.items():
            log.warning("reservation pod not deleted", pod=key, error=str(error))
        for manifest in doomed.values():
            self._created.pop(_group_label(manifest), None)
        return [key for key in doomed if key not in failures]

    def _deleter(self, manifest: Mapping[str, Any]) -> Any:
        name = str((manifest.get("metadata") or {}).get("name"))

        async def delete() -> None:
            try:
                # A reservation pod holds no work: it may go at once.
                await self._kube.delete(_pod_path(self._namespace, name), {"gracePeriodSeconds": 0})
            except ApiError as error:
                if error.status != _NOT_FOUND:
                    raise

        return delete

    def forget_created(self, reservations: Mapping[str, Mapping[str, Any]]) -> None:
        """Groups whose reservation pods the cache now shows need no local memory of them.

        Called between cycles, when no reservation is being made: a lock nobody holds
        for a group this process is not creating is dropped too, or one would stay for
        every shared device ever used (each gets a fresh group id).
        """
        for group in [g for g in self._created if _reservation_of(reservations, g) is not None]:
            del self._created[group]
        for group in [g for g, lock in self._locks.items() if not lock.locked()]:
            if group not in self._created:
                del self._locks[group]

    @property
    def remembered(self) -> int:
        """Groups this process keeps a lock or a created reservation for."""
        return len(self._locks.keys() | self._created.keys())


def holds_a_device(key: str, pod: Mapping[str, Any], namespace: str) -> bool:
    """A reservation pod: in the reservation namespace, holding a device (its group label)."""
    return key.startswith(f"{namespace}/") and bool(_group_label(pod))


def waits_for_devices(pod: Mapping[str, Any]) -> bool:
    """A sharing pod on a node whose devices are not published to it yet."""
    metadata = pod.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    return (
        bool((metadata.get("labels") or {}).get(GPU_GROUP_LABEL))
        and not annotations.get(PUBLISHED_ANNOTATION)
        and CONFIGMAP_ANNOTATION in annotations
        and bool((pod.get("spec") or {}).get("nodeName"))
    )


def _reservation_of(
    reservations: Mapping[str, Mapping[str, Any]], group: str
) -> Mapping[str, Any] | None:
    """The reservation pod holding a device; one being deleted holds nothing any more."""
    return next(
        (
            pod
            for pod in reservations.values()
            if _group_label(pod) == group
            and (pod.get("metadata") or {}).get("deletionTimestamp") is None
        ),
        None,
    )


def _uuid_of(reservations: Mapping[str, Mapping[str, Any]], group: str) -> str | None:
    pod = _reservation_of(reservations, group)
    if pod is None:
        return None
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(GPU_UUID_ANNOTATION)
    return str(value) if value else None


def _group_label(pod: Mapping[str, Any]) -> str:
    return str(((pod.get("metadata") or {}).get("labels") or {}).get(GPU_GROUP_LABEL) or "")


def _groups_of(labels: Mapping[str, str]) -> list[str]:
    groups = [labels[GPU_GROUP_LABEL]]
    for key in sorted(labels):
        if key.startswith(MULTI_GPU_GROUP_LABEL_PREFIX) and labels[key] not in groups:
            groups.append(labels[key])
    return groups


def _container(manifest: Mapping[str, Any]) -> FractionContainer:
    """The container the share goes to (KAI's choice); container 0 if the annotation names none."""
    metadata = manifest.get("metadata") or {}
    spec = manifest.get("spec") or {}

    def names(key: str) -> list[str]:
        return [str(container.get("name") or "") for container in spec.get(key) or []]

    annotations = metadata.get("annotations") or {}
    found = fraction_container(annotations, names("containers"), names("initContainers"))
    return found or FractionContainer(0)


def _decimal(value: Fraction) -> str:
    return format(float(value), "g")


def _pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{name}"
