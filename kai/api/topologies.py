"""Turns `kai.scheduler/v1alpha1` Topology manifests into the engine's `Topology`, with KAI's rules.

A Topology lists node labels from the widest level to the most local one. KAI's CRD
refuses a list of 0 or more than 16 levels, a label that is not a label key, a label
used twice and `kubernetes.io/hostname` anywhere but last; its webhook refuses an
alias used twice or equal to a level's label. The same rules hold here, each reported
with the field, so `kai simulate`, the webhook and the operator agree on what is valid.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from kai.api.errors import ManifestError, object_ref, raise_all, validated
from kai.api.fields import ObjectMeta, WireModel
from kai.engine.model import Topology, TopologyLevel

TOPOLOGY_API_VERSION = "kai.scheduler/v1alpha1"
HOSTNAME_LABEL = "kubernetes.io/hostname"
MAX_LEVELS = 16
_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
_MAX_LABEL = 316


class _Level(WireModel):
    node_label: str = ""
    alias: str = ""


class _Spec(WireModel):
    levels: list[_Level] = Field(default_factory=list)


class _Topology(WireModel):
    metadata: ObjectMeta
    spec: _Spec = _Spec()


def parse_topology(manifest: Mapping[str, Any]) -> Topology:
    """The engine's view of a Topology; raises ManifestError naming every bad field."""
    ref = object_ref("Topology", manifest, namespaced=False)
    wire = validated(_Topology, ref, manifest)
    levels = wire.spec.levels
    errors: list[ManifestError] = []
    if not 1 <= len(levels) <= MAX_LEVELS:
        errors.append(
            ref.error("spec.levels", f"must list 1 to {MAX_LEVELS} levels, got {len(levels)}")
        )
    labels = [level.node_label for level in levels]
    for index, level in enumerate(levels):
        path = f"spec.levels[{index}]"
        for field, value in (("nodeLabel", level.node_label), ("alias", level.alias)):
            if field == "alias" and not value:
                continue
            if not value:
                errors.append(ref.error(f"{path}.{field}", "required"))
            elif len(value) > _MAX_LABEL or not _LABEL_KEY.match(value):
                errors.append(ref.error(f"{path}.{field}", f"{value!r} is not a valid label key"))
        if level.node_label and labels.index(level.node_label) != index:
            errors.append(ref.error(f"{path}.nodeLabel", f"{level.node_label!r} is used twice"))
        if level.node_label == HOSTNAME_LABEL and index != len(levels) - 1:
            errors.append(
                ref.error(
                    f"{path}.nodeLabel", f"{HOSTNAME_LABEL} may only be the last (most local) level"
                )
            )
        aliases = [other.alias for other in levels[:index]]
        if level.alias and level.alias in aliases:
            errors.append(ref.error(f"{path}.alias", f"{level.alias!r} is used twice"))
        if level.alias and level.alias in labels:
            errors.append(
                ref.error(f"{path}.alias", f"{level.alias!r} is also a level's nodeLabel")
            )
    raise_all(errors)
    return Topology(
        wire.metadata.name,
        tuple(TopologyLevel(level.node_label, level.alias or None) for level in levels),
    )
