"""The definitions kai knows, keyed by the workload type (root GVK) they describe.

A registry merges the built-in catalog with the `Karta` objects found in the
cluster; a cluster definition replaces the catalog one for the same GVK
(workload-definitions §11). It also owns the jq evaluator, so every consumer of a
definition (describe, the grouper, the expansion) runs programs with the same
bounds and cache.
"""

from __future__ import annotations

from collections.abc import Iterable

from kai.workloads.definition import GVK, WorkloadDefinition
from kai.workloads.jqeval import JqEvaluator


class DuplicateDefinitionError(ValueError):
    """Two definitions of one source for the same workload type."""


class DefinitionRegistry:
    def __init__(
        self,
        catalog: Iterable[WorkloadDefinition] = (),
        cluster: Iterable[WorkloadDefinition] = (),
        jq: JqEvaluator | None = None,
    ) -> None:
        self.jq = jq or JqEvaluator()
        self._by_gvk: dict[GVK, WorkloadDefinition] = {}
        for source in (catalog, cluster):
            seen: dict[GVK, str] = {}
            for definition in source:
                if definition.gvk in seen:
                    raise DuplicateDefinitionError(
                        f"definitions {seen[definition.gvk]} and {definition.name} both describe "
                        f"{definition.gvk}"
                    )
                seen[definition.gvk] = definition.name
                self._by_gvk[definition.gvk] = definition

    def get(self, gvk: GVK) -> WorkloadDefinition | None:
        """The definition for exactly this GVK."""
        return self._by_gvk.get(gvk)

    def find(self, gvk: GVK) -> WorkloadDefinition | None:
        """The exact definition, else one for the same group and kind at another version."""
        exact = self.get(gvk)
        if exact is not None:
            return exact
        same_kind = [
            definition
            for known, definition in self._by_gvk.items()
            if (known.group, known.kind) == (gvk.group, gvk.kind)
        ]
        return sorted(same_kind, key=lambda d: d.gvk.version)[-1] if same_kind else None

    def definitions(self) -> list[WorkloadDefinition]:
        """Every definition, sorted by group, kind and version."""
        return sorted(self._by_gvk.values(), key=lambda d: (d.gvk.group, d.gvk.kind, d.gvk.version))

    def named(self, name: str) -> WorkloadDefinition | None:
        return next((d for d in self._by_gvk.values() if d.name == name), None)

    def resolve_type(self, text: str) -> WorkloadDefinition | None:
        """The first of `types_matching(text)`, for callers that accept any match."""
        matches = self.types_matching(text)
        return matches[0] if matches else None

    def types_matching(self, text: str) -> list[WorkloadDefinition]:
        """Every definition a type written by a user names: `JobSet`, `jobsets`,
        `jobset.v1alpha2.jobset.x-k8s.io`, `jobset.jobset.x-k8s.io`, or the definition's name;
        case-insensitive. One kind at several versions gives several, for the caller to choose
        (the live CLI asks the API server which version it serves)."""
        wanted = text.lower()
        named = self.named(text)
        if named is not None:
            return [named]
        matches = []
        for definition in self.definitions():
            gvk = definition.gvk
            kind = gvk.kind.lower()
            spellings = {
                kind,
                f"{kind}s",
                f"{kind}.{gvk.group}",
                f"{kind}s.{gvk.group}",
                f"{kind}.{gvk.version}.{gvk.group}",
                f"{kind}s.{gvk.version}.{gvk.group}",
            }
            if wanted in spellings:
                matches.append(definition)
        return matches
