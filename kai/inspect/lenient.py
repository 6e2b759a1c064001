"""Reading cluster objects without stopping at a bad one.

A summary of a live cluster shows everything that can be read and says, per object,
what cannot: a ManifestError from a `kai.api` parser becomes one line per problem
(`Kind namespace/name: field: message`), the line the scheduler logs for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from kai.api.constants import POD_GROUP_ANNOTATION
from kai.api.errors import ManifestError, object_ref
from kai.api.pods import annotated_pod_group_key, parse_pod
from kai.engine.model import Pod

T = TypeVar("T")


def parsed(parse: Callable[[], T], problems: list[str]) -> T | None:
    """What `parse` returns, or None with each of its ManifestError's problems in `problems`."""
    try:
        return parse()
    except ManifestError as error:
        problems.extend(str(each) for each in error.all_errors)
        return None


def read_pod(manifest: Mapping[str, Any], problems: list[str]) -> Pod | None:
    """The engine's view of a pod, in the group its `pod-group-name` annotation names."""
    return parsed(lambda: parse_pod(manifest, annotated_pod_group_key(manifest) or ""), problems)


def key_of(kind: str, manifest: Mapping[str, Any], *, namespaced: bool) -> str:
    """ "namespace/name" (or "name"), read leniently so that even a broken object is named."""
    ref = object_ref(kind, manifest, namespaced=namespaced)
    return f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name


def namespace_of(manifest: Mapping[str, Any]) -> str:
    """A namespaced object's namespace (`default` when it names none, as the API server does)."""
    return object_ref("Pod", manifest, namespaced=True).namespace or "default"


def group_name_of(manifest: Mapping[str, Any]) -> str | None:
    """The PodGroup name a pod's `pod-group-name` annotation gives, if any."""
    annotations = field(manifest, "metadata", "annotations")
    name = annotations.get(POD_GROUP_ANNOTATION) if isinstance(annotations, Mapping) else None
    return name if isinstance(name, str) and name else None


def field(manifest: Mapping[str, Any], *path: str) -> Any:
    """The value at `path` (keys), or None where a level is missing or not a mapping."""
    value: Any = manifest
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def text(manifest: Mapping[str, Any], *path: str) -> str:
    """The string at `path`, or "" when it is missing or not a string."""
    value = field(manifest, *path)
    return value if isinstance(value, str) else ""
