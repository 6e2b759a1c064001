"""Map a workload's native status onto the common statuses (workload-definitions §3.6).

Within one matcher every part present must hold; the matchers under one status are
alternatives; the result is every status that matched, in the canonical order
(Resuming, Suspending, Suspended, Running, Failed, Completed, Initializing,
Degraded), or `Undefined` when none did.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kai.api.errors import ManifestError
from kai.workloads.definition import (
    STATUS_ORDER,
    UNDEFINED_STATUS,
    StatusDefinition,
    StatusMatcher,
    WorkloadDefinition,
)
from kai.workloads.jqeval import JqError, JqEvaluator
from kai.workloads.objects import object_ref


def workload_phases(
    definition: WorkloadDefinition, obj: Mapping[str, Any], jq: JqEvaluator
) -> list[str]:
    """Every common status the object's native status matches, or ["Undefined"]."""
    status = definition.root.status
    if status is None:
        return [UNDEFINED_STATUS]
    evaluation = _Evaluation(definition, status, obj, jq)
    matched = {name for name, matchers in status.mappings if any(map(evaluation.holds, matchers))}
    return [name for name in STATUS_ORDER if name in matched] or [UNDEFINED_STATUS]


class _Evaluation:
    def __init__(
        self,
        definition: WorkloadDefinition,
        status: StatusDefinition,
        obj: Mapping[str, Any],
        jq: JqEvaluator,
    ) -> None:
        self.definition = definition
        self.status = status
        self.obj = obj
        self.jq = jq
        self.phase = self._first("phaseDefinition.path", status.phase_path)
        conditions = self._first("conditionsDefinition.path", status.conditions_path)
        self.conditions = [c for c in conditions or [] if isinstance(c, Mapping)]

    def holds(self, matcher: StatusMatcher) -> bool:
        if matcher.by_phase is not None and _text(self.phase) != matcher.by_phase:
            return False
        for wanted in matcher.by_conditions:
            if not any(
                _text(condition.get(self.status.type_field)) == wanted.type
                and (
                    wanted.status is None
                    or _text(condition.get(self.status.status_field)) == wanted.status
                )
                and (
                    wanted.reason is None
                    or _text(condition.get(self.status.reason_field)) == wanted.reason
                )
                for condition in self.conditions
            ):
                return False
        if matcher.by_expression is not None:
            program, expected = matcher.by_expression
            if _text(self._first("byExpression", program)) != expected:
                return False
        return True

    def _first(self, field: str, program: str | None) -> Any:
        if program is None:
            return None
        try:
            return self.jq.first(program, self.obj)
        except JqError as error:
            raise self._error(field, str(error)) from None

    def _error(self, field: str, message: str) -> ManifestError:
        return object_ref(self.obj).error(
            f"{self.definition.name}: statusDefinition.{field}", message
        )


def _text(value: Any) -> str:
    """A jq result as a string, the way the reference compares results (`true`, `3`, `Running`)."""
    if isinstance(value, str):
        return value
    return json.dumps(value)
