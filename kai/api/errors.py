"""How a problem in a manifest is reported: the object, the field and what is wrong, on one line.

Every parser in `kai.api` reports bad input the same way so that `kai simulate` and the
live operator can print `Kind namespace/name: field: message` and a user can find the
line to fix. Field paths use the manifest's own (camelCase) names, dotted, with list
indexes in brackets: `spec.containers[0].resources.requests.cpu`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

ModelT = TypeVar("ModelT", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """Which object a problem is about; `namespace` is None for cluster-scoped kinds."""

    kind: str
    namespace: str | None
    name: str

    def __str__(self) -> str:
        if self.namespace is None:
            return f"{self.kind} {self.name}"
        return f"{self.kind} {self.namespace}/{self.name}"

    def error(self, field: str, message: str) -> ManifestError:
        return ManifestError(self.kind, self.namespace, self.name, field, message)

    def warning(self, field: str, message: str) -> ManifestWarning:
        return ManifestWarning(self, field, message)


class ManifestError(ValueError):
    """An object that cannot be used as written.

    A parser that finds several problems in one object raises the first and lists the
    rest in `also`, so a caller that wants them all (the `parse_objects` collector) can
    report every one, while a caller that wants one message still gets it from `str()`.
    """

    def __init__(self, kind: str, namespace: str | None, name: str, field: str, message: str):
        super().__init__(kind, namespace, name, field, message)
        self.ref = ObjectRef(kind, namespace, name)
        self.field = field
        self.message = message
        self.also: tuple[ManifestError, ...] = ()

    @property
    def kind(self) -> str:
        return self.ref.kind

    @property
    def namespace(self) -> str | None:
        return self.ref.namespace

    @property
    def name(self) -> str:
        return self.ref.name

    @property
    def all_errors(self) -> tuple[ManifestError, ...]:
        return (self, *self.also)

    def __str__(self) -> str:
        if not self.field:  # the problem could not be traced to one field
            return f"{self.ref}: {self.message}"
        return f"{self.ref}: {self.field}: {self.message}"


@dataclass(frozen=True, slots=True)
class ManifestWarning:
    """An object that is valid but almost certainly does not do what its author meant."""

    ref: ObjectRef
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.ref}: {self.field}: {self.message}"


def combined(errors: Sequence[ManifestError]) -> ManifestError:
    """The first of `errors`, carrying the others in `also`."""
    first = errors[0]
    first.also = tuple(errors[1:])
    return first


def raise_all(errors: Sequence[ManifestError]) -> None:
    """Raise every one of `errors` at once, or return when there are none."""
    if errors:
        raise combined(errors)


def validated(model: type[ModelT], ref: ObjectRef, manifest: Mapping[str, Any]) -> ModelT:
    """`manifest` read as `model`, or a ManifestError for every field pydantic rejected."""
    try:
        return model.model_validate(manifest)
    except ValidationError as exc:
        raise combined(validation_errors(ref, exc)) from None


def object_ref(kind: str, manifest: Mapping[str, Any], *, namespaced: bool) -> ObjectRef:
    """The reference of a manifest, read leniently so that even a broken object can be named.

    Namespaced objects without a namespace live in `default`, as `kubectl apply` puts them.
    """
    metadata = manifest.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    name = metadata.get("name")
    namespace = metadata.get("namespace")
    if not namespaced:
        namespace = None
    elif not isinstance(namespace, str) or not namespace:
        namespace = "default"
    return ObjectRef(kind, namespace, name if isinstance(name, str) and name else "<unnamed>")


def validation_errors(ref: ObjectRef, error: ValidationError) -> list[ManifestError]:
    """One ManifestError per problem pydantic found, with the field path the user wrote."""
    return [ref.error(field_path(item["loc"]), _message(item)) for item in error.errors()]


def field_path(loc: Sequence[int | str]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
    return path or "<object>"


def _message(item: Mapping[str, Any]) -> str:
    context = item.get("ctx") or {}
    if item["type"] == "value_error" and "error" in context:
        return str(context["error"])
    if item["type"] == "missing":
        return "required"
    message = str(item["msg"])
    return f"{message}, got {item['input']!r}" if "input" in item else message
