"""Wire models of what a pod's volumes depend on: PersistentVolumeClaim, PersistentVolume
and StorageClass, as far as kube-scheduler's volume filters read them (`kai.api.volumes`,
`kai.api.static_volumes`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kai.api.corev1 import LabelSelector, NodeSelector
from kai.api.fields import ObjectMeta, Quantity, WireModel

BindingMode = Literal["Immediate", "WaitForFirstConsumer"]
AccessMode = Literal["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"]
VolumeMode = Literal["Filesystem", "Block"]


class ClaimResources(WireModel):
    requests: dict[str, Quantity] = Field(default_factory=dict)


class ClaimSpec(WireModel):
    storage_class_name: str | None = None
    volume_name: str = ""
    access_modes: list[AccessMode] = Field(default_factory=list)
    volume_mode: VolumeMode = "Filesystem"
    resources: ClaimResources = ClaimResources()
    selector: LabelSelector | None = None


class PersistentVolumeClaim(WireModel):
    metadata: ObjectMeta
    spec: ClaimSpec = ClaimSpec()


class VolumeNodeAffinity(WireModel):
    required: NodeSelector | None = None


class ClaimReference(WireModel):
    namespace: str = ""
    name: str = ""
    uid: str = ""


class VolumeSpec(WireModel):
    node_affinity: VolumeNodeAffinity | None = None
    storage_class_name: str = ""
    capacity: dict[str, Quantity] = Field(default_factory=dict)
    access_modes: list[AccessMode] = Field(default_factory=list)
    volume_mode: VolumeMode = "Filesystem"
    claim_ref: ClaimReference | None = None


class VolumeStatus(WireModel):
    phase: str = ""


class PersistentVolume(WireModel):
    metadata: ObjectMeta
    spec: VolumeSpec = VolumeSpec()
    status: VolumeStatus = VolumeStatus()


class TopologySelectorRequirement(WireModel):
    key: str = Field(min_length=1)
    values: list[str] = Field(min_length=1)


class TopologySelectorTerm(WireModel):
    match_label_expressions: list[TopologySelectorRequirement] = Field(default_factory=list)


class StorageClass(WireModel):
    metadata: ObjectMeta
    provisioner: str = Field(min_length=1)
    volume_binding_mode: BindingMode = "Immediate"
    allowed_topologies: list[TopologySelectorTerm] = Field(default_factory=list)
