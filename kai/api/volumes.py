"""Which nodes a pod's PersistentVolumeClaims let it use, and whether they let it run yet.

KAI runs kube-scheduler's VolumeBinding filter on every pod; this is its rule, read from
the claims, volumes and StorageClasses the pod's volumes name (a `persistentVolumeClaim`
volume, or an `ephemeral` one, whose claim is `<pod>-<volume>`):
- a claim bound to a volume (the volume controller has said so: `pv.kubernetes.io/
  bind-completed`): the pod goes where the volume's node affinity holds (a local disk's
  node, a zonal disk's zone);
- a claim not bound, of a `WaitForFirstConsumer` class with a provisioner: the pod goes
  where the class's allowed topologies hold, and on binding the claim is told the node
  (`volume.kubernetes.io/selected-node`), which is what makes the provisioner create the
  volume there; a claim already told a node (a provisioning under way) holds the pod to it;
- a claim that does not exist, is being deleted, is not bound and binds immediately, names
  a volume the volume controller has not bound it to yet, or names a class or volume that
  does not exist: the pod waits, told which claim and why;
- a claim of a class without a provisioner (`kubernetes.io/no-provisioner`, static local
  volumes) that is not bound: kube-scheduler would pick one of the volumes made
  beforehand; kai does not choose between volumes, so the pod waits and says so.

The pod's parse does not read these objects: they change on their own (a claim gets
bound), so the snapshot's makers apply this on top of it, for the pods that name claims.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kai.api.errors import ManifestError, ObjectRef, combined, object_ref, validated
from kai.api.placement import NODE_NAME_FIELD, node_selector_terms
from kai.api.storage import PersistentVolume, PersistentVolumeClaim, StorageClass
from kai.engine.model import Pod, Prerequisite, Requirement
from kai.engine.prerequisites import VOLUME_CLAIM_NOT_READY

SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
"""Set on a claim of a `WaitForFirstConsumer` class: the node its volume is to be made for."""
BIND_COMPLETED_ANNOTATION = "pv.kubernetes.io/bind-completed"
"""Set by the volume controller once a claim and its volume are bound to each other."""
NO_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"

NodeTerms = tuple[tuple[Requirement, ...], ...]
Objects = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class VolumeObjects:
    """The claims ("namespace/name"), volumes and StorageClasses (by name) of the cluster."""

    claims: Objects
    volumes: Objects
    classes: Objects


@dataclass(frozen=True)
class ClaimsReading:
    """What a pod's claims say about where it may run."""

    terms: tuple[NodeTerms, ...] = ()
    """Each claim's nodes, as node affinity terms; a node must meet every entry."""
    wait: str | None = None
    """Why the pod may run nowhere yet, naming the claim; None when it may."""
    to_provision: tuple[str, ...] = ()
    """The claims ("namespace/name") to tell the pod's node when it is bound."""


def names_claims(manifest: Mapping[str, Any]) -> bool:
    """Whether the pod has a volume that is a claim: cheap, for the many pods that do not."""
    spec = manifest.get("spec")
    volumes = spec.get("volumes") if isinstance(spec, Mapping) else None
    if not isinstance(volumes, list):
        return False
    return any(
        isinstance(volume, Mapping)
        and ("persistentVolumeClaim" in volume or volume.get("ephemeral") is not None)
        for volume in volumes
    )


def claim_keys(manifest: Mapping[str, Any]) -> tuple[str, ...]:
    """The claims ("namespace/name") the pod's volumes name, in their order. Read here, not
    with the pod: every pod has volumes of its own name (its API token's), which would set
    apart pods of one template (`kai.api.pods.SiblingParser`)."""
    metadata = manifest.get("metadata") or {}
    namespace = metadata.get("namespace") or "default"
    keys: list[str] = []
    for index, volume in enumerate((manifest.get("spec") or {}).get("volumes") or ()):
        path = f"spec.volumes[{index}]"
        source = volume.get("persistentVolumeClaim") if isinstance(volume, Mapping) else None
        if source is not None:
            claim = source.get("claimName") if isinstance(source, Mapping) else None
            if not isinstance(claim, str) or not claim:
                raise _pod_ref(manifest).error(
                    f"{path}.persistentVolumeClaim.claimName", "required: the claim's name"
                )
            keys.append(f"{namespace}/{claim}")
        elif isinstance(volume, Mapping) and volume.get("ephemeral") is not None:
            name = volume.get("name")
            if not isinstance(name, str) or not name:
                raise _pod_ref(manifest).error(f"{path}.name", "required: names its claim")
            keys.append(f"{namespace}/{metadata.get('name')}-{name}")
    return tuple(dict.fromkeys(keys))


def _pod_ref(manifest: Mapping[str, Any]) -> ObjectRef:
    return object_ref("Pod", manifest, namespaced=True)


def ephemeral_claims(manifest: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The claims the ephemeral volume controller makes for the pod's `ephemeral` volumes
    (from each volume's template), by key: a simulated cluster has no controller."""
    metadata = manifest.get("metadata") or {}
    namespace = metadata.get("namespace") or "default"
    claims: dict[str, Mapping[str, Any]] = {}
    for volume in (manifest.get("spec") or {}).get("volumes") or ():
        ephemeral = volume.get("ephemeral") if isinstance(volume, Mapping) else None
        if not isinstance(ephemeral, Mapping):
            continue
        name = f"{metadata.get('name')}-{volume.get('name')}"
        template = ephemeral.get("volumeClaimTemplate")
        spec = template.get("spec") if isinstance(template, Mapping) else None
        claims[f"{namespace}/{name}"] = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec if isinstance(spec, Mapping) else {},
        }
    return claims


def pod_claims(manifest: Mapping[str, Any], objects: VolumeObjects) -> ClaimsReading:
    """What the claims of the pod's volumes say (`read_claims`); a volume that names no
    claim properly holds the pod too (the API server refuses such a pod)."""
    try:
        keys = claim_keys(manifest)
    except ManifestError as error:
        return ClaimsReading(wait=str(error))
    return read_claims(keys, objects)


def read_claims(keys: tuple[str, ...], objects: VolumeObjects) -> ClaimsReading:
    """What the claims `keys` of one pod say, by the rule in this module's docstring."""
    terms: list[NodeTerms] = []
    to_provision: list[str] = []
    for key in keys:
        try:
            found = _claim_terms(key, objects)
        except ManifestError as error:
            return ClaimsReading(wait=f"claim {key}: {error}")
        if isinstance(found, str):
            return ClaimsReading(wait=f"claim {key} {found}")
        claim_terms, provision = found
        terms += claim_terms
        if provision:
            to_provision.append(key)
    return ClaimsReading(tuple(dict.fromkeys(terms)), None, tuple(to_provision))


def claim_inputs(keys: tuple[str, ...], objects: VolumeObjects) -> tuple[object, ...]:
    """The objects `read_claims` reads for these claims (None for one missing): a reading
    holds while they are the very same objects, as a watch cache replaces what changes."""
    inputs: list[object] = []
    for key in keys:
        claim = objects.claims.get(key)
        inputs.append(claim)
        spec = claim.get("spec") if claim is not None else None
        if isinstance(spec, Mapping):
            inputs.append(objects.volumes.get(str(spec.get("volumeName") or "")))
            inputs.append(objects.classes.get(str(spec.get("storageClassName") or "")))
    return tuple(inputs)


def with_claims(pod: Pod, reading: ClaimsReading) -> Pod:
    """The pod with its claims' nodes in its placement, and why it waits if it does."""
    if not reading.terms and reading.wait is None:
        return pod
    placement = dataclasses.replace(pod.placement, volume_terms=reading.terms)
    waits = None if reading.wait is None else Prerequisite(VOLUME_CLAIM_NOT_READY, reading.wait)
    return dataclasses.replace(pod, placement=placement, waits_for=waits)


def claim_reference(key: str) -> tuple[str, str]:
    """A claim's namespace and name from its key."""
    namespace, _, name = key.partition("/")
    return namespace, name


def _claim_terms(key: str, objects: VolumeObjects) -> tuple[list[NodeTerms], bool] | str:
    """The claim's node terms and whether it is to be provisioned, or why the pod waits."""
    manifest = objects.claims.get(key)
    if manifest is None:
        return "does not exist"
    claim = validated(
        PersistentVolumeClaim,
        object_ref("PersistentVolumeClaim", manifest, namespaced=True),
        manifest,
    )
    if claim.metadata.deletion_timestamp is not None:
        return "is being deleted"
    if claim.spec.volume_name:
        if BIND_COMPLETED_ANNOTATION not in claim.metadata.annotations:
            return (
                f"names volume {claim.spec.volume_name}, and waits for the volume controller "
                f"to bind them ({BIND_COMPLETED_ANNOTATION})"
            )
        return _bound_terms(claim.spec.volume_name, objects)
    class_name = claim.spec.storage_class_name or ""
    class_manifest = objects.classes.get(class_name) if class_name else None
    if class_name and class_manifest is None:
        return f"is not bound, and its StorageClass {class_name} does not exist"
    if class_manifest is None:
        return "is not bound, and has no StorageClass: it waits for a volume to be bound to it"
    storage_class = validated(
        StorageClass, object_ref("StorageClass", class_manifest, namespaced=False), class_manifest
    )
    if storage_class.volume_binding_mode != WAIT_FOR_FIRST_CONSUMER:
        return (
            f"is not bound, and its StorageClass {class_name} binds volumes at once "
            f"(Immediate): it waits for a volume to be bound to it"
        )
    if storage_class.provisioner == NO_PROVISIONER:
        return (
            f"is not bound, and its StorageClass {class_name} has no provisioner: kai does not "
            f"choose among volumes made beforehand; bind the claim to one (spec.volumeName)"
        )
    selected = claim.metadata.annotations.get(SELECTED_NODE_ANNOTATION)
    if selected:  # its volume is being made for that node
        return [((Requirement(NODE_NAME_FIELD, "In", (selected,)),),)], False
    allowed = tuple(
        tuple(
            Requirement(requirement.key, "In", tuple(requirement.values))
            for requirement in term.match_label_expressions
        )
        for term in storage_class.allowed_topologies
        if term.match_label_expressions
    )
    return ([allowed] if allowed else []), True


def _bound_terms(name: str, objects: VolumeObjects) -> tuple[list[NodeTerms], bool] | str:
    manifest = objects.volumes.get(name)
    if manifest is None:
        return f"is bound to volume {name}, which does not exist"
    ref = object_ref("PersistentVolume", manifest, namespaced=False)
    volume = validated(PersistentVolume, ref, manifest)
    affinity = volume.spec.node_affinity
    if affinity is None or affinity.required is None:
        return [], False
    errors: list[ManifestError] = []
    path = "spec.nodeAffinity.required.nodeSelectorTerms"
    terms = node_selector_terms(ref, path, affinity.required, errors)
    if errors:
        raise combined(errors)
    return [terms], False
