"""The pod template of a fragmented spec (spec mode 3): pod fields scattered through a CR.

Operators such as Milvus and Dynamo do not embed a pod template; they keep a
container, a list of containers, a resources block and the scheduling fields in
separate places. The pod is put together as upstream's describe counts it:

- the container list and the single container both run, so both are kept;
- the CR-level `resources` stand for the main container's when no container states
  requests or limits of its own, and are ignored otherwise (they restate them);
- the template exists when any fragment is present, or when the component's scale
  is (a Milvus proxy given only `replicas: 1` still runs a proxy pod).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAIN_CONTAINER = "main"


def fragmented_template(values: Mapping[str, Any], scale_given: bool) -> dict[str, Any] | None:
    """`{metadata, spec}` from the fragments' values; None when nothing describes a pod."""
    if not scale_given and all(value is None for value in values.values()):
        return None
    containers = _containers(values["containers"], values["container"])
    if values["resources"] is not None and not any(_declares_resources(c) for c in containers):
        containers[0]["resources"] = values["resources"]
    if values["image"] is not None and "image" not in containers[0]:
        containers[0]["image"] = values["image"]
    spec: dict[str, Any] = {"containers": containers}
    for key in ("schedulerName", "priorityClassName", "resourceClaims"):
        if values[key] is not None:
            spec[key] = values[key]
    affinity = {
        key: values[key] for key in ("podAffinity", "nodeAffinity") if values[key] is not None
    }
    if affinity:
        spec["affinity"] = affinity
    return {
        "metadata": {
            "labels": dict(values["labels"] or {}),
            "annotations": dict(values["annotations"] or {}),
        },
        "spec": spec,
    }


def _containers(listed: Any, single: Any) -> list[dict[str, Any]]:
    containers = (
        [dict(c) for c in listed if isinstance(c, Mapping)] if isinstance(listed, list) else []
    )
    if isinstance(single, Mapping):
        containers.append(dict(single))
    return containers or [{"name": MAIN_CONTAINER}]


def _declares_resources(container: Mapping[str, Any]) -> bool:
    resources = container.get("resources")
    return isinstance(resources, Mapping) and bool(
        resources.get("requests") or resources.get("limits")
    )
