"""Manifests of pods with volume claims, and the claims, volumes and classes they name."""

from __future__ import annotations

from typing import Any

from kai.api.volumes import BIND_COMPLETED_ANNOTATION, VolumeObjects

BOUND = {BIND_COMPLETED_ANNOTATION: "yes"}


def claimant(*volumes: dict[str, Any]) -> dict[str, Any]:
    """Pod ml/p with these volumes besides the API token's every pod has."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml", "uid": "u"},
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [{"name": "c"}],
            "volumes": [{"name": "kube-api-access-x1", "projected": {}}, *volumes],
        },
    }


def claim_volume(claim: str) -> dict[str, Any]:
    return {"name": f"v-{claim}", "persistentVolumeClaim": {"claimName": claim}}


def claim(name: str, annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    metadata = {"name": name, "namespace": "ml", "annotations": annotations or {}}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec}


def storage_class(
    name: str, mode: str, provisioner: str = "csi.example.com", **rest: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
        **rest,
    }


def local_volume(name: str, node_name: str) -> dict[str, Any]:
    terms = [
        {
            "matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node_name]}
            ]
        }
    ]
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": terms}}},
    }


def local_disk(name: str, host: str, size: str, **spec: Any) -> dict[str, Any]:
    """A free local volume of class `local`, of `size`, on host `host`."""
    manifest = local_volume(name, host)
    manifest["metadata"]["resourceVersion"] = "7"
    manifest["spec"] |= {
        "storageClassName": "local",
        "capacity": {"storage": size},
        "accessModes": ["ReadWriteOnce"],
        **spec,
    }
    return manifest


def volume_objects(*manifests: dict[str, Any]) -> VolumeObjects:
    claims = {
        f"ml/{m['metadata']['name']}": m for m in manifests if m["kind"] == "PersistentVolumeClaim"
    }
    volumes = {m["metadata"]["name"]: m for m in manifests if m["kind"] == "PersistentVolume"}
    classes = {m["metadata"]["name"]: m for m in manifests if m["kind"] == "StorageClass"}
    return VolumeObjects(claims, volumes, classes)
