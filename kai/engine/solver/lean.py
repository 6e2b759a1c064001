"""A CP-SAT model without the deprecated camelCase aliases OR-Tools adds to every new model.

`cp_model.CpModel()` walks its own attributes and binds a warning wrapper for each
`add_*` / `new_*` method under its old name (`AddBoolOr`, ...): 0.14 ms a model, which
the eviction actions pay for each of the 60 victim models of a 1,000-node cycle. kai
calls only the snake_case names, so the aliases are skipped; were the hook renamed in a
later OR-Tools, models would get their aliases back and be as slow as before, no less
correct.
"""

from __future__ import annotations

from ortools.sat.python import cp_model


class LeanCpModel(cp_model.CpModel):
    def _add_pre_pep8_methods(self) -> None:
        return None
