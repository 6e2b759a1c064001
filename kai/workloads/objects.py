"""Small, tolerant accessors for Kubernetes objects held as plain dicts.

Workload objects of arbitrary types reach the definition code, the grouper and
the expansion as parsed YAML/JSON; these helpers read their metadata without
each caller re-checking types. `object_uid` gives an object that has no uid (a
manifest file, not yet created) a stable one derived from its identity, so the
expansion and the grouper agree on owner references and PodGroup names.
"""

import uuid
from collections.abc import Mapping
from typing import Any

from kai.api.errors import ObjectRef
from kai.workloads.definition import GVK

_UID_NAMESPACE = uuid.UUID("5b0f8f0e-6f1d-4a8e-9a35-2f1f6d1c7a10")


def metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = obj.get("metadata")
    return value if isinstance(value, Mapping) else {}


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    value = metadata(obj).get("labels")
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    value = metadata(obj).get("annotations")
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def name_of(obj: Mapping[str, Any]) -> str:
    return str(metadata(obj).get("name") or "")


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str(metadata(obj).get("namespace") or "default")


def gvk_of(obj: Mapping[str, Any]) -> GVK:
    return GVK.of(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))


def derived_uid(*parts: str) -> str:
    """A deterministic uid for a synthesized object, from the parts that identify it."""
    return str(uuid.uuid5(_UID_NAMESPACE, "/".join(parts)))


def object_uid(obj: Mapping[str, Any]) -> str:
    """The object's uid, or one derived from apiVersion, kind, namespace and name."""
    uid = metadata(obj).get("uid")
    if uid:
        return str(uid)
    return derived_uid(
        str(obj.get("apiVersion") or ""),
        str(obj.get("kind") or ""),
        namespace_of(obj),
        name_of(obj),
    )


def object_ref(obj: Mapping[str, Any]) -> ObjectRef:
    return ObjectRef(
        str(obj.get("kind") or "object"), namespace_of(obj), name_of(obj) or "<unnamed>"
    )


def controller_reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An ownerReference that makes `obj` the controller of the object carrying it."""
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "name": name_of(obj),
        "uid": object_uid(obj),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_owner_uid(obj: Mapping[str, Any]) -> list[str]:
    """The uids of the object's controller owners (more than one is an error for the caller)."""
    references = metadata(obj).get("ownerReferences") or []
    controllers = [ref for ref in references if isinstance(ref, Mapping) and ref.get("controller")]
    chosen = controllers or [ref for ref in references if isinstance(ref, Mapping)]
    return [str(ref.get("uid") or "") for ref in chosen]
