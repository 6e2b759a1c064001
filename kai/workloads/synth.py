"""Build the objects a controller would create: owned objects and pods, with stable names and uids.

The simulator has no controllers, so `expand_workload` plays them; these helpers
give every synthesized object what the real controller would set that matters for
scheduling: a controller ownerReference to its parent, the controller's labels and
annotations on top of the template's, the template's schedulerName (the API
server's `default-scheduler` when unset) and a deterministic uid derived from the
object's identity, so repeated expansions agree.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from typing import Any

from kai.workloads.objects import controller_reference, derived_uid, namespace_of


def short_hash(*parts: str, length: int = 5) -> str:
    """A stable stand-in for the random suffixes controllers add to names."""
    digest = hashlib.sha256("/".join(parts).encode()).hexdigest()
    return digest[:length]


def distinct_suffixes(count: int, *parts: str) -> list[str]:
    """Stable stand-ins for the random suffixes of `count` pods of one owner, all different.

    Pod i's is `short_hash(*parts, str(i))`, drawn again while an earlier pod has it, as the
    API server makes a controller retry a generated name that is taken: five hex digits
    alone collide within a Job of 1,000 pods one time in three, and `kai simulate` refused
    the second pod as a duplicate.
    """
    taken: set[str] = set()
    suffixes: list[str] = []
    for index in range(count):
        suffix = short_hash(*parts, str(index))
        draw = 0
        while suffix in taken:
            draw += 1
            suffix = short_hash(*parts, str(index), str(draw))
        taken.add(suffix)
        suffixes.append(suffix)
    return suffixes


def owned_object(
    api_version: str,
    kind: str,
    name: str,
    owner: Mapping[str, Any],
    spec: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """An object `owner` controls, in the owner's namespace."""
    namespace = namespace_of(owner)
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": derived_uid(api_version, kind, namespace, name),
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
            "ownerReferences": [controller_reference(owner)],
        },
        "spec": copy.deepcopy(dict(spec or {})),
    }


def pod_from_template(
    template: Mapping[str, Any],
    name: str,
    owner: Mapping[str, Any],
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A pending pod made from a PodTemplateSpec, with the controller's labels and annotations."""
    template_meta = template.get("metadata") or {}
    pod = owned_object(
        "v1",
        "Pod",
        name,
        owner,
        spec=template.get("spec") or {},
        labels={**(template_meta.get("labels") or {}), **(labels or {})},
        annotations={**(template_meta.get("annotations") or {}), **(annotations or {})},
    )
    pod["spec"].setdefault("schedulerName", "default-scheduler")
    pod["status"] = {"phase": "Pending"}
    return pod


def template_with_labels(template: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, Any]:
    """A copy of a pod template with extra labels, as controllers stamp their children's templates."""
    result = copy.deepcopy(dict(template))
    metadata = result.setdefault("metadata", {})
    metadata["labels"] = {**(metadata.get("labels") or {}), **labels}
    return result
