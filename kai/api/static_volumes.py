"""Volumes made beforehand: which one an unbound claim takes, counted as scalar resources.

A claim of a StorageClass with no provisioner (`kubernetes.io/no-provisioner`) that
waits for its first consumer (local-static-provisioner's NVMe disks, local volumes made
by hand) is bound by the scheduler: kube-scheduler's VolumeBinding, which KAI runs as a
predicate and again in its binder, gives it on the chosen node the smallest free volume
of its class and volume mode that holds its request and has its access modes
(`FindMatchingVolume`), and writes the volume's `claimRef` before the pod's bind; the
volume controller then binds the claim. A volume already naming the claim in its
`claimRef` (pre-bound, by a user or by a bind that went no further) is the claim's, and
holds the pod to where it can be used.

kai counts these volumes as scalar resources (`kai.engine.scalars`), so every pass that
seats a pod, the victim searches and the validator keep them with no rule of their own:
- the free volumes of one class and volume mode are a pool; their distinct capacities
  in the cluster, c1 < c2 < ... < ck, are its sizes;
- a node offers, for each size c, how many of its free volumes hold at least c:
  `volume/<class>/<mode>/<c>+`;
- a claim asking s takes one of each size up to the smallest c that holds s.
So the claims a node is given fit it exactly when, for each size, those needing at
least that much are no more than its volumes of at least that much: Hall's condition
for sets that nest, which is exactly when each claim can have its own volume. The
binder then gives the node's claims its volumes smallest first (`choose`).

What kai reads as free: a volume of such a class that no claim names (in its own
`claimRef` or the claim's `volumeName`), not being deleted, in
phase Available (or none yet, as a manifest written for `kai simulate`), whose required
node affinity names one host (`kubernetes.io/hostname In [<host>]`, as every local
volume does) of exactly one node. A claim waits, saying so, where kai would decide
other than kube-scheduler: a label selector, or access modes some free volume of its
pool lacks (the pool would no longer be the set of volumes it may take).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kai.api.errors import ManifestError, object_ref, validated
from kai.api.placement import node_selector_terms
from kai.api.storage import PersistentVolume
from kai.engine.eligibility import terms_hold
from kai.engine.model import Node, Requirement
from kai.engine.scalars import MILLI, Scalars

VOLUME_PREFIX = "volume/"
HOSTNAME_LABEL = "kubernetes.io/hostname"
_AVAILABLE = ("", "Available")
_BINARY_SUFFIXES = ((4, "Ti"), (3, "Gi"), (2, "Mi"), (1, "Ki"))


@dataclass(frozen=True, order=True)
class Pool:
    """Volumes one claim may take alike: its StorageClass and volume mode."""

    storage_class: str
    volume_mode: str

    def resource(self, size: int) -> str:
        """The scalar resource "volumes of this pool holding at least `size` bytes"."""
        return f"{VOLUME_PREFIX}{self.storage_class}/{self.volume_mode}/{size_text(size)}+"


@dataclass(frozen=True)
class FreeVolume:
    name: str
    pool: Pool
    capacity: int
    """Bytes, rounded down."""
    access_modes: frozenset[str]
    host: str
    """The `kubernetes.io/hostname` its node affinity names."""
    terms: tuple[tuple[Requirement, ...], ...]
    """Its node affinity, as node terms, for the node that offers it."""
    resource_version: str


@dataclass(frozen=True)
class StaticClaim:
    """An unbound claim that takes a free volume on its pod's node at the bind."""

    key: str
    """"namespace/name"."""
    uid: str
    pool: Pool
    request: int
    """Bytes, rounded up."""


class StaticVolumes:
    """The free volumes made beforehand, by pool, and the volumes that name a claim."""

    def __init__(
        self,
        volumes: Mapping[str, Mapping[str, Any]],
        no_provisioner: set[str],
        claimed: set[str],
    ) -> None:
        """`no_provisioner`: the StorageClasses without a provisioner that wait for their
        first consumer; `claimed`: the volumes a claim names (`spec.volumeName`), which are
        no one else's even before the volume controller writes their `claimRef`."""
        self.free: dict[Pool, list[FreeVolume]] = defaultdict(list)
        self.naming: dict[str, Mapping[str, Any]] = {}
        """Claim key -> the volume whose `claimRef` names it."""
        self.problems: list[ManifestError] = []
        for name, manifest in volumes.items():
            if name in claimed:
                continue
            try:
                self._read(manifest, no_provisioner)
            except ManifestError as error:  # a broken volume is no one's: it is left out
                self.problems.append(error)
        self.sizes: dict[Pool, tuple[int, ...]] = {
            pool: tuple(sorted({volume.capacity for volume in free}))
            for pool, free in self.free.items()
        }

    def _read(self, manifest: Mapping[str, Any], no_provisioner: set[str]) -> None:
        spec = manifest.get("spec")
        if not isinstance(spec, Mapping):
            return
        reference = spec.get("claimRef")
        if isinstance(reference, Mapping):
            key = f"{reference.get('namespace') or 'default'}/{reference.get('name')}"
            self.naming[key] = manifest
            return
        if spec.get("storageClassName") not in no_provisioner:
            return
        ref = object_ref("PersistentVolume", manifest, namespaced=False)
        volume = validated(PersistentVolume, ref, manifest)
        free = volume.status.phase in _AVAILABLE and volume.metadata.deletion_timestamp is None
        affinity = volume.spec.node_affinity
        if not free or affinity is None or affinity.required is None:
            return
        errors: list[ManifestError] = []
        path = "spec.nodeAffinity.required.nodeSelectorTerms"
        terms = node_selector_terms(ref, path, affinity.required, errors)
        host = _named_host(terms)
        if errors or host is None:
            return
        pool = Pool(volume.spec.storage_class_name, volume.spec.volume_mode)
        capacity = math.floor(volume.spec.capacity.get("storage", Fraction(0)))
        modes = frozenset(volume.spec.access_modes)
        version = str((manifest.get("metadata") or {}).get("resourceVersion") or "")
        self.free[pool].append(
            FreeVolume(volume.metadata.name, pool, capacity, modes, host, terms, version)
        )

    def asks(self, claim: StaticClaim, access_modes: Iterable[str]) -> Scalars | str:
        """What the claim asks of its node's volumes, or why it takes none."""
        sizes = self.sizes.get(claim.pool, ())
        lacking = [
            volume.name
            for volume in self.free.get(claim.pool, ())
            if not volume.access_modes.issuperset(access_modes)
        ]
        pool = f"StorageClass {claim.pool.storage_class} ({claim.pool.volume_mode})"
        if lacking:
            return (
                f"asks for access modes {', '.join(sorted(access_modes))}, which free volume "
                f"{lacking[0]} of {pool} lacks: kai takes a volume made beforehand only where "
                f"every free volume of the class and mode could be the claim's"
            )
        if not sizes:
            return f"no volume of {pool} made beforehand is free"
        fitting = [size for size in sizes if size >= claim.request]
        if not fitting:
            return (
                f"asks for {size_text(claim.request)} of {pool}, and no free volume of it "
                f"holds that much (the largest is {size_text(sizes[-1])})"
            )
        return tuple(
            sorted((claim.pool.resource(size), MILLI) for size in sizes if size <= fitting[0])
        )

    def offers(self, nodes: Iterable[Node], asked: frozenset[str]) -> dict[str, Scalars]:
        """Node name -> the volume resources it offers, of those `asked` for."""
        offered: dict[str, dict[str, int]] = defaultdict(dict)
        for name, volumes in self.by_node(nodes).items():
            for volume in volumes:
                for size in self.sizes[volume.pool]:
                    resource = volume.pool.resource(size)
                    if size <= volume.capacity and resource in asked:
                        offered[name][resource] = offered[name].get(resource, 0) + MILLI
        return {name: tuple(sorted(amounts.items())) for name, amounts in offered.items()}

    def by_node(self, nodes: Iterable[Node]) -> dict[str, list[FreeVolume]]:
        """Node name -> its free volumes: each on the one node whose host it names, if that
        node meets the rest of its node affinity."""
        hosts: dict[str, list[Node]] = defaultdict(list)
        for node in nodes:
            host = dict(node.labels).get(HOSTNAME_LABEL)
            if host is not None:
                hosts[host].append(node)
        result: dict[str, list[FreeVolume]] = defaultdict(list)
        for free in self.free.values():
            for volume in free:
                named = hosts.get(volume.host, [])
                if len(named) == 1 and terms_hold(volume.terms, named[0]):
                    result[named[0].name].append(volume)
        return result


def choose(
    claims: Sequence[StaticClaim], volumes: Sequence[FreeVolume], taken: set[str]
) -> dict[str, FreeVolume] | None:
    """Each claim's volume among a node's free `volumes` (those in `taken` excepted, and
    added to it), as kube-scheduler's rule gives them: smallest first, to the smallest
    claim first, which seats all of them whenever any assignment does; None if none does."""
    chosen: dict[str, FreeVolume] = {}
    left = sorted((v for v in volumes if v.name not in taken), key=lambda v: (v.capacity, v.name))
    for claim in sorted(claims, key=lambda c: (c.request, c.key)):
        volume = next(
            (v for v in left if v.pool == claim.pool and v.capacity >= claim.request), None
        )
        if volume is None:
            return None
        left.remove(volume)
        chosen[claim.key] = volume
    taken.update(volume.name for volume in chosen.values())
    return chosen


def is_volume_resource(name: str) -> bool:
    return name.startswith(VOLUME_PREFIX)


def size_text(size: int) -> str:
    """Bytes as a quantity writes them: the largest binary suffix that keeps them whole."""
    for power, suffix in _BINARY_SUFFIXES:
        if size and size % 1024**power == 0:
            return f"{size // 1024**power}{suffix}"
    return str(size)


def _named_host(terms: tuple[tuple[Requirement, ...], ...]) -> str | None:
    """The one host a volume's node affinity names, if it has one term naming exactly one."""
    if len(terms) != 1:
        return None
    hosts = [
        req.values[0]
        for req in terms[0]
        if req.key == HOSTNAME_LABEL and req.operator == "In" and len(req.values) == 1
    ]
    return hosts[0] if len(hosts) == 1 else None
