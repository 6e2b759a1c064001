"""Wire models of what a pod's volumes depend on: PersistentVolumeClaim, PersistentVolume
and StorageClass, as far as kube-scheduler's volume filters read them (`kai.api.volumes`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kai.api.corev1 import NodeSelector
from kai.api.fields import ObjectMeta, WireModel

BindingMode = Literal["Immediate", "WaitForFirstConsumer"]


class ClaimSpec(WireModel):
    storage_class_name: str | None = None
    volume_name: str = ""


class PersistentVolumeClaim(WireModel):
    metadata: ObjectMeta
    spec: ClaimSpec = ClaimSpec()


class VolumeNodeAffinity(WireModel):
    required: NodeSelector | None = None


class VolumeSpec(WireModel):
    node_affinity: VolumeNodeAffinity | None = None


class PersistentVolume(WireModel):
    metadata: ObjectMeta
    spec: VolumeSpec = VolumeSpec()


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
