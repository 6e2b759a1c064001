"""The input every grouping rule sees: the pod, its owner chain and the definitions.

Rules are pure functions of this value. `top` is the owner the group belongs to,
after the grouper has delegated past owners it must skip (CronJob to its Job, a
skip-top-owner kind to the owner below it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kai.api.errors import ManifestError
from kai.workloads.objects import annotations_of, labels_of, object_ref
from kai.workloads.registry import DefinitionRegistry


@dataclass(frozen=True)
class GroupingInput:
    pod: Mapping[str, Any]
    chain: tuple[Mapping[str, Any], ...]  # direct owner first, top owner last
    registry: DefinitionRegistry

    @property
    def top(self) -> Mapping[str, Any]:
        return self.chain[-1] if self.chain else self.pod

    def pod_label(self, key: str) -> str | None:
        """A label of the pod, else of the nearest owner that carries it."""
        for obj in (self.pod, *self.chain):
            value = labels_of(obj).get(key)
            if value is not None:
                return value
        return None

    def pod_annotation(self, key: str) -> str | None:
        return annotations_of(self.pod).get(key)

    def error(self, field: str, message: str) -> ManifestError:
        """An error about the top owner's field (the object whose spec is at fault)."""
        return object_ref(self.top).error(field, message)


def spec_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def whole_number(inp: GroupingInput, value: Any, field: str, default: int, minimum: int = 0) -> int:
    """An integer field of the top owner (numeric strings allowed, as annotations are strings)."""
    if value is None:
        return default
    try:
        number = int(str(value))
    except ValueError:
        raise inp.error(field, f"must be a whole number, got {value!r}") from None
    if number < minimum:
        raise inp.error(field, f"must be at least {minimum}, got {number}")
    return number
