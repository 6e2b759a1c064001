"""Turns `scheduling.run.ai/v2` Queue manifests into the engine's `Queue`, and checks the tree.

Units and special values are KAI's (kai-semantics §1): gpu in devices, cpu in
millicores, memory in MB that the engine counts in bytes; -1 is unlimited; an unset
quota is 0; an unset limit is **also 0**, so nothing of that resource may be allocated
in the queue. That last rule is compatible and surprising, so it is kept and warned about.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from fractions import Fraction
from typing import Any

from pydantic import ValidationError

from kai.api import models as crd
from kai.api.durations import as_seconds
from kai.api.errors import ManifestError, ManifestWarning, ObjectRef, object_ref, validated
from kai.api.trees import cycles, describe
from kai.engine.model import UNLIMITED, Queue, QueueResource
from kai.engine.resources import RESOURCE_NAMES, ResourceName

BYTES_PER_QUEUE_MEMORY_UNIT = 10**6
"""Queue memory is written in MB (10^6 bytes, not MiB); the engine counts bytes."""

_UNIT_SCALE: Mapping[ResourceName, int] = {
    "gpu": 1,
    "cpu": 1,  # millicores in the Queue and in the engine alike
    "memory": BYTES_PER_QUEUE_MEMORY_UNIT,
}
_UNIT_NAME: Mapping[ResourceName, str] = {"gpu": "GPUs", "cpu": "CPU", "memory": "memory"}


def parse_queue(manifest: Mapping[str, Any]) -> Queue:
    """The engine's view of a Queue; raises ManifestError naming every bad field."""
    ref = object_ref("Queue", manifest, namespaced=False)
    wire = validated(crd.Queue, ref, manifest)
    spec = wire.spec
    resources = {name: _resource(getattr(spec.resources, name), name) for name in RESOURCE_NAMES}
    return Queue(
        name=wire.metadata.name,
        parent=spec.parent_queue or None,
        priority=spec.priority,
        gpu=resources["gpu"],
        cpu=resources["cpu"],
        memory=resources["memory"],
        created=wire.metadata.creation_timestamp,
        uid=wire.metadata.uid,
        preempt_min_runtime_seconds=as_seconds(spec.preempt_min_runtime),
        reclaim_min_runtime_seconds=as_seconds(spec.reclaim_min_runtime),
    )


def queue_warnings(manifest: Mapping[str, Any]) -> list[ManifestWarning]:
    """Valid settings that block work: each resource whose limit is left unset.

    KAI reads an unset limit as 0 (kai-semantics §1, "Trap"), so a queue that sets only
    gpu and cpu keeps every pod that requests memory pending. An invalid manifest gets
    no warnings; `parse_queue` reports its errors.
    """
    ref = object_ref("Queue", manifest, namespaced=False)
    try:
        resources = crd.Queue.model_validate(manifest).spec.resources
    except ValidationError:
        return []
    return [
        ref.warning(
            f"spec.resources.{name}.limit",
            f"unset, which KAI reads as 0: no pod that requests {_UNIT_NAME[name]} can run in "
            "this queue or below it; write -1 for no limit",
        )
        for name in RESOURCE_NAMES
        if getattr(resources, name).limit is None
    ]


def validate_queue_tree(
    queues: Iterable[Queue], *, also_defined: Collection[str] = ()
) -> list[ManifestError]:
    """A queue whose parent is missing, and every queue on a parent cycle, by queue name.

    KAI silently drops such queues and everything below them (kai-semantics §3.1); here
    they are errors so that a typo in `parentQueue` is found before pods sit pending.
    `also_defined` names queues that exist but could not be parsed (their own errors are
    reported already), so that their children are not said to have no parent.
    """
    return queue_tree_errors(
        {queue.name: queue.parent for queue in queues}, also_defined=also_defined
    )


def queue_tree_errors(
    parents: Mapping[str, str | None], *, also_defined: Collection[str] = ()
) -> list[ManifestError]:
    """`validate_queue_tree` on the tree given as queue name -> parent queue name (or None)."""
    errors: list[ManifestError] = []
    for name in sorted(parents):
        parent = parents[name]
        if parent is not None and parent not in parents and parent not in also_defined:
            errors.append(
                _ref(name).error("spec.parentQueue", f"parent queue {parent!r} does not exist")
            )
    for cycle in cycles(parents):
        errors.extend(
            _ref(name).error("spec.parentQueue", f"queues form a cycle: {describe(cycle)}")
            for name in cycle
        )
    return sorted(errors, key=lambda error: error.name)


def declared_parent(manifest: Mapping[str, Any]) -> str | None:
    """The `spec.parentQueue` a Queue manifest names, read leniently so that even a queue
    `parse_queue` refuses keeps its place in the tree; None for a top-level queue."""
    spec = manifest.get("spec")
    parent = spec.get("parentQueue") if isinstance(spec, Mapping) else None
    return parent if isinstance(parent, str) and parent else None


def _resource(wire: crd.QueueResource, name: ResourceName) -> QueueResource:
    scale = _UNIT_SCALE[name]
    return QueueResource(
        quota=_in_engine_units(wire.quota, scale),
        limit=_in_engine_units(wire.limit, scale),
        over_quota_weight=Fraction(1) if wire.over_quota_weight is None else wire.over_quota_weight,
    )


def _in_engine_units(value: Fraction | None, scale: int) -> Fraction:
    """Unset is 0 and -1 stays -1 (unlimited); anything else is converted."""
    if value is None:
        return Fraction(0)
    return value if value == UNLIMITED else value * scale


def _ref(queue_name: str) -> ObjectRef:
    return ObjectRef("Queue", None, queue_name)
