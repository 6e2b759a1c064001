"""Which field of an object has the wrong shape, by the shapes Kubernetes' fields keep everywhere.

kai reads workloads of many kinds, custom resources among them, whose schemas may let a
string stand where an object goes. The code that reads them fails on such a value with a
TypeError deep inside a rule, which says nothing about where in the manifest the value is
(`kai.api.errors.naming_unreadable` turns it into the object's error). Kubernetes' API
conventions give a field name one shape across every kind that has it: `metadata`,
`template` and `labels` are always objects, `containers` and `tolerations` always lists,
`replicas` always a whole number. Searching the object for the first value that breaks
those conventions names the field to fix. A field with another shape in some kind (int or
string `minAvailable`, a `selector` that is a map in one kind and a label selector in
another, but a map in both) is left out, so a field named here is wrong in every kind.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from kai.api.errors import ObjectRef, field_path

OBJECT_FIELDS = frozenset(
    {
        "metadata",
        "spec",
        "status",
        "template",
        "jobTemplate",
        "podTemplate",
        "labels",
        "annotations",
        "selector",
        "matchLabels",
        "nodeSelector",
        "affinity",
        "nodeAffinity",
        "requests",
        "limits",
        "securityContext",
        "runPolicy",
        "schedulingPolicy",
        "elasticPolicy",
        "successPolicy",
        "pytorchReplicaSpecs",
        "tfReplicaSpecs",
        "mpiReplicaSpecs",
        "xgbReplicaSpecs",
        "paddleReplicaSpecs",
        "jaxReplicaSpecs",
        "headGroupSpec",
        "rayClusterSpec",
        "rayStartParams",
        "leaderWorkerTemplate",
        "leaderTemplate",
        "workerTemplate",
    }
)
"""Fields that are a JSON object in every Kubernetes kind kai reads."""

LIST_FIELDS = frozenset(
    {
        "containers",
        "initContainers",
        "tolerations",
        "volumes",
        "env",
        "ports",
        "ownerReferences",
        "finalizers",
        "conditions",
        "matchExpressions",
        "nodeSelectorTerms",
        "replicatedJobs",
        "workerGroupSpecs",
        "schedulingGates",
    }
)
"""Fields that are a JSON array in every Kubernetes kind kai reads."""

INTEGER_FIELDS = frozenset(
    {"replicas", "parallelism", "completions", "minReplicas", "maxReplicas", "backoffLimit"}
)
"""Fields that are a whole number in every Kubernetes kind kai reads (never int-or-string)."""


@contextmanager
def naming_unreadable(ref: ObjectRef, manifest: Mapping[str, Any]) -> Iterator[None]:
    """Report `manifest`, when the code reading it fails on a value's shape, as a
    ManifestError naming it and, where the conventions tell, the field.

    Workloads of every kind are read through rules and Workload Map definitions that
    expect each field's usual shape; a custom resource whose schema lets a string stand
    where an object goes makes that code fail with a TypeError or an AttributeError. Such
    a failure, raised out of a pod grouper or `kai simulate`, would stop the work of every
    other object: here it becomes this object's problem. kai's own errors pass through.
    """
    try:
        yield
    except (AttributeError, IndexError, KeyError, TypeError, ValueError) as error:
        if isinstance(error, ValueError) and type(error) is not ValueError:
            raise  # a problem kai reports itself (ManifestError and the others are ValueErrors)
        found = misshapen_field(manifest)
        if found is not None:
            raise ref.error(*found) from error
        raise ref.error(
            "", f"a value has a type or shape kai cannot read ({type(error).__name__}: {error})"
        ) from error


def misshapen_field(manifest: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first field, in the manifest's own order, whose value breaks the conventions, and
    what is wrong with it; None when every such field has its shape. `null` is no value (as
    in Go's JSON decoding), never a wrong one."""
    return next(_misshapen(manifest, ()), None)


def _misshapen(value: Any, path: tuple[int | str, ...]) -> Iterator[tuple[str, str]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            here = (*path, str(key))
            expected = _expected(str(key))
            if item is not None and expected is not None and not _has_shape(item, expected):
                yield field_path(here), f"{expected} expected, found {_shape_name(item)}"
            else:
                yield from _misshapen(item, here)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _misshapen(item, (*path, index))


def _expected(key: str) -> str | None:
    if key in OBJECT_FIELDS:
        return "an object"
    if key in LIST_FIELDS:
        return "a list"
    if key in INTEGER_FIELDS:
        return "a whole number"
    return None


def _has_shape(value: Any, expected: str) -> bool:
    if expected == "an object":
        return isinstance(value, Mapping)
    if expected == "a list":
        return isinstance(value, list)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return isinstance(value, int) or value.is_integer()  # YAML's 2.0 is the number 2


def _shape_name(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        shown = value if len(value) <= _SHOWN else value[: _SHOWN - 3] + "..."
        return f"the string {shown!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


_SHOWN = 40
"""Characters of a string value the message shows."""
