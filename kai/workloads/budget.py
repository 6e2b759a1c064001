"""A bound on how many objects one workload's expansion may create.

`kai simulate` and `kai workload describe` play a workload's controllers and make, in
memory, every object those would create. A count the API server accepts can still be
far beyond any cluster (a Deployment's replicas is any int32; a custom resource whose
schema allows anything can ask for 10^12 pods), and expanding it would exhaust memory
before anything is reported. So every count is read here, and reserved from the
workload's budget before its objects are made: a count that is not a whole number, or
that would take the workload past the bound, is a ManifestError naming the workload and
the field, and the other objects are expanded as usual.

The bound is on loop iterations, each of which makes at least one object; counts that
multiply (a JobSet's replicated Jobs times each Job's pods) are reserved as they nest,
so their product is bounded too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kai.api.errors import ObjectRef

MAX_EXPANDED_OBJECTS = 100_000
"""Objects one workload may expand into: Kubernetes' largest tested cluster holds 150,000
pods in all, and a workload beyond this is a typo or a test of the tools, not a plan."""


@dataclass
class _Remaining:
    objects: int


class ExpansionBudget:
    """What one workload may still create, and where its fields are, for error messages.

    `within` gives the view a nested controller reads through (a JobSet's Job template):
    the same budget, its fields named from the workload's root.
    """

    def __init__(
        self,
        ref: ObjectRef,
        limit: int = MAX_EXPANDED_OBJECTS,
        *,
        prefix: str = "",
        remaining: _Remaining | None = None,
    ) -> None:
        self.ref = ref
        self.limit = limit
        self._prefix = prefix
        self._remaining = _Remaining(limit) if remaining is None else remaining

    def within(self, path: str) -> ExpansionBudget:
        """The same budget, for values found under `path` of the workload."""
        return ExpansionBudget(
            self.ref, self.limit, prefix=self._field(path), remaining=self._remaining
        )

    def number(self, value: Any, default: int, field: str) -> int:
        """A count as written (an integer, or a string of one), `default` when absent."""
        if value is None:
            return default
        count: int | None = None
        if isinstance(value, int) and not isinstance(value, bool):
            count = value
        elif isinstance(value, str):
            try:
                count = int(value)
            except ValueError:
                count = None
        if count is None or count < 0:
            raise self.ref.error(self._field(field), f"must be a whole number >= 0, got {value!r}")
        return count

    def spend(self, count: int, field: str) -> range:
        """range(count), once `count` more objects are known to fit the budget."""
        if count > self._remaining.objects:
            raise self.ref.error(
                self._field(field),
                f"{count:,} more would take the workload past {self.limit:,} objects,"
                " more than kai expands for one workload",
            )
        self._remaining.objects -= count
        return range(count)

    def copies(self, value: Any, default: int, field: str) -> range:
        """One index per copy the count at `field` asks for, reserved from the budget."""
        return self.spend(self.number(value, default, field), field)

    def _field(self, field: str) -> str:
        return f"{self._prefix}.{field}" if self._prefix and field else self._prefix or field
