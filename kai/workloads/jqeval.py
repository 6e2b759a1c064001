"""Evaluate the jq programs of workload definitions, read-only and bounded.

Every path in a definition is a jq program (workload-definitions §4). This module
is the only place that runs them: it refuses programs that fail the static
read-only check, caches compiled programs, and bounds each run to a number of
results and a wall-clock budget, as the reference runner does (1000 results,
10 s). The clock is injected so that tests can drive the deadline; the static
check already rules out loops, so the deadline is a last line of defence checked
between results.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jq

from kai.workloads.jqsafe import read_only_problems


class JqError(ValueError):
    """A jq program that cannot be compiled or run on a document; names the program."""

    def __init__(self, program: str, message: str) -> None:
        super().__init__(f"jq {program!r}: {message}")
        self.program = program
        self.message = message


@dataclass(frozen=True, slots=True)
class JqLimits:
    max_results: int = 1000
    timeout_seconds: float = 10.0


class JqEvaluator:
    """Runs checked jq programs on JSON-like documents; one per registry, reused across calls."""

    def __init__(
        self, limits: JqLimits | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._limits = limits or JqLimits()
        self._clock = clock
        self._programs: dict[str, Any] = {}

    def check(self, program: str, compile_program: bool = True) -> list[str]:
        """Why `program` is unusable (unsafe construct or syntax error); empty if it is fine.
        Without `compile_program`, only the read-only check: syntax errors show on first use."""
        problems = read_only_problems(program)
        if problems or not compile_program:
            return problems
        try:
            self._compiled(program)
        except JqError as error:
            return [error.message]
        return []

    @property
    def compiled_programs(self) -> int:
        return len(self._programs)

    def all(self, program: str, document: Any) -> list[Any]:
        """Every result of `program` on `document`, within the result and time bounds."""
        problems = read_only_problems(program)
        if problems:
            raise JqError(program, "; ".join(problems))
        compiled = self._compiled(program)
        deadline = self._clock() + self._limits.timeout_seconds
        results: list[Any] = []
        try:
            for result in compiled.input_value(document):
                results.append(result)
                if len(results) > self._limits.max_results:
                    raise JqError(program, f"produced more than {self._limits.max_results} results")
                if self._clock() > deadline:
                    raise JqError(
                        program, f"ran longer than {self._limits.timeout_seconds} seconds"
                    )
        except ValueError as error:
            if isinstance(error, JqError):
                raise
            raise JqError(program, str(error)) from error
        return results

    def first(self, program: str, document: Any) -> Any:
        """The first result, or None when the program yields nothing."""
        results = self.all(program, document)
        return results[0] if results else None

    def _compiled(self, program: str) -> Any:
        compiled = self._programs.get(program)
        if compiled is None:
            try:
                compiled = jq.compile(program)
            except ValueError as error:
                message = str(error).splitlines()[0].removeprefix("jq: error: ")
                raise JqError(program, message) from error
            self._programs[program] = compiled
        return compiled
