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
- a claim not bound, of a `WaitForFirstConsumer` class without a provisioner
  (`kubernetes.io/no-provisioner`, local volumes made beforehand): a volume whose
  `claimRef` names it holds the pod to where that volume can be used; otherwise the
  claim asks for one free volume on the pod's node, counted as scalar resources, and on
  binding that volume's `claimRef` is written (`kai.api.static_volumes`).

The pod's parse does not read these objects: they change on their own (a claim gets
bound), so the snapshot's makers apply this on top of it, for the pods that name claims.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kai.api.errors import ManifestError, ObjectRef, combined, object_ref, validated
from kai.api.placement import NODE_NAME_FIELD, node_selector_terms
from kai.api.static_volumes import Pool, StaticClaim, StaticVolumes
from kai.api.storage import PersistentVolume, PersistentVolumeClaim, StorageClass
from kai.engine.model import Pod, Prerequisite, Requirement
from kai.engine.prerequisites import VOLUME_CLAIM_NOT_READY
from kai.engine.scalars import Scalars

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

    @functools.cached_property
    def static(self) -> StaticVolumes:
        """The volumes made beforehand (`kai.api.static_volumes`), read when a claim first
        needs them (most cycles none does)."""
        waiting = {
            name
            for name, manifest in self.classes.items()
            if manifest.get("provisioner") == NO_PROVISIONER
            and manifest.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER
        }
        claimed = {
            str(spec.get("volumeName"))
            for claim in self.claims.values()
            if isinstance(spec := claim.get("spec"), Mapping) and spec.get("volumeName")
        }
        return StaticVolumes(self.volumes, waiting, claimed)

    def static_problems(self) -> list[ManifestError]:
        """The volumes made beforehand left out as unreadable, if `static` was read."""
        static = self.__dict__.get("static")  # where cached_property keeps it
        return static.problems if isinstance(static, StaticVolumes) else []


@dataclass(frozen=True)
class ClaimsReading:
    """What a pod's claims say about where it may run."""

    terms: tuple[NodeTerms, ...] = ()
    """Each claim's nodes, as node affinity terms; a node must meet every entry."""
    wait: str | None = None
    """Why the pod may run nowhere yet, naming the claim; None when it may."""
    to_provision: tuple[str, ...] = ()
    """The claims ("namespace/name") to tell the pod's node when it is bound."""
    asks: Scalars = ()
    """The free volumes made beforehand its claims ask of its node (`kai.api.static_volumes`)."""
    static: tuple[StaticClaim, ...] = ()
    """The claims that take such a volume when the pod is bound."""


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
    asks: dict[str, int] = {}
    static: list[StaticClaim] = []
    for key in keys:
        try:
            found = _claim_terms(key, objects)
        except ManifestError as error:
            return ClaimsReading(wait=f"claim {key}: {error}")
        if isinstance(found, str):
            return ClaimsReading(wait=f"claim {key} {found}")
        terms += found.terms
        if found.provision:
            to_provision.append(key)
        if found.static is not None:
            static.append(found.static)
            for name, amount in found.asks:
                asks[name] = asks.get(name, 0) + amount
    return ClaimsReading(
        tuple(dict.fromkeys(terms)),
        None,
        tuple(to_provision),
        tuple(sorted(asks.items())),
        tuple(static),
    )


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
            class_name = str(spec.get("storageClassName") or "")
            class_manifest = objects.classes.get(class_name)
            inputs.append(class_manifest)
            if _takes_static(spec, class_manifest):
                # the pool's volumes, and one naming the claim, decide its asks
                static = objects.static
                pool = Pool(class_name, str(spec.get("volumeMode") or "Filesystem"))
                inputs.append(tuple(static.free.get(pool, ())))
                inputs.append(static.naming.get(key))
    return tuple(inputs)


def _takes_static(spec: Mapping[str, Any], class_manifest: Mapping[str, Any] | None) -> bool:
    """Whether an unbound claim of this class takes a volume made beforehand."""
    return (
        not spec.get("volumeName")
        and class_manifest is not None
        and class_manifest.get("provisioner") == NO_PROVISIONER
        and class_manifest.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER
    )


def with_claims(pod: Pod, reading: ClaimsReading) -> Pod:
    """The pod with its claims' nodes in its placement, and why it waits if it does."""
    if not reading.terms and reading.wait is None and not reading.asks:
        return pod
    placement = dataclasses.replace(pod.placement, volume_terms=reading.terms)
    waits = None if reading.wait is None else Prerequisite(VOLUME_CLAIM_NOT_READY, reading.wait)
    scalars = pod.scalars
    if reading.asks:
        scalars = tuple(sorted((*pod.scalars, *reading.asks)))
    return dataclasses.replace(pod, placement=placement, waits_for=waits, scalars=scalars)


def claim_reference(key: str) -> tuple[str, str]:
    """A claim's namespace and name from its key."""
    namespace, _, name = key.partition("/")
    return namespace, name


@dataclass(frozen=True)
class _Found:
    """What one claim says: its node terms, whether it is to be provisioned, and the
    volume made beforehand it takes, with what that asks of the node."""

    terms: list[NodeTerms]
    provision: bool = False
    static: StaticClaim | None = None
    asks: Scalars = ()


def _claim_terms(key: str, objects: VolumeObjects) -> _Found | str:
    """What the claim says, or why the pod waits."""
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
        return _static_terms(key, claim, objects)
    selected = claim.metadata.annotations.get(SELECTED_NODE_ANNOTATION)
    if selected:  # its volume is being made for that node
        return _Found([((Requirement(NODE_NAME_FIELD, "In", (selected,)),),)])
    allowed = tuple(
        tuple(
            Requirement(requirement.key, "In", tuple(requirement.values))
            for requirement in term.match_label_expressions
        )
        for term in storage_class.allowed_topologies
        if term.match_label_expressions
    )
    return _Found([allowed] if allowed else [], provision=True)


def _static_terms(key: str, claim: PersistentVolumeClaim, objects: VolumeObjects) -> _Found | str:
    """An unbound claim of a class without a provisioner: the volume naming it, or one
    free volume of its pool on the pod's node (`kai.api.static_volumes`)."""
    static = objects.static
    naming = static.naming.get(key)
    reference = ((naming or {}).get("spec") or {}).get("claimRef") or {}
    if naming is not None and reference.get("uid") in (None, "", claim.metadata.uid):
        return _volume_terms(naming)
    if claim.spec.selector is not None:
        return (
            "is not bound and selects volumes by label (spec.selector): kai does not choose "
            "among volumes made beforehand by label; bind the claim to one (spec.volumeName)"
        )
    storage_class = claim.spec.storage_class_name or ""
    request = claim.spec.resources.requests.get("storage", Fraction(0))
    wanted = StaticClaim(
        key, claim.metadata.uid, Pool(storage_class, claim.spec.volume_mode), math.ceil(request)
    )
    asks = static.asks(wanted, claim.spec.access_modes)
    if isinstance(asks, str):
        return f"is not bound, and {asks}"
    return _Found([], static=wanted, asks=asks)


def _bound_terms(name: str, objects: VolumeObjects) -> _Found | str:
    manifest = objects.volumes.get(name)
    if manifest is None:
        return f"is bound to volume {name}, which does not exist"
    return _volume_terms(manifest)


def _volume_terms(manifest: Mapping[str, Any]) -> _Found:
    """Where the volume can be used: its required node affinity, as node terms."""
    ref = object_ref("PersistentVolume", manifest, namespaced=False)
    volume = validated(PersistentVolume, ref, manifest)
    affinity = volume.spec.node_affinity
    if affinity is None or affinity.required is None:
        return _Found([])
    errors: list[ManifestError] = []
    path = "spec.nodeAffinity.required.nodeSelectorTerms"
    terms = node_selector_terms(ref, path, affinity.required, errors)
    if errors:
        raise combined(errors)
    return _Found([terms])
