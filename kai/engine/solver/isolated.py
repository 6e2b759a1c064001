"""Run OR-Tools work in a forked child process, so that a native crash costs the answer, not the scheduler.

OR-Tools checks its own invariants with CHECKs that abort the whole process. One did
once in this project's engine benchmark (OR-Tools 9.15, the 1,000-node allocation model;
not again in about a hundred solves of the same model since):

    Check failed: solution->size() == postsolve_mapping.size() (0 vs. 8869)

In `kai run` that abort would take the leader down with every bind of the cycle. So
each stage of the allocation model is solved in a forked child (`kai.engine.forked`),
which inherits the model as it is in memory and writes the response back as text; a
child that died or hung costs the stage its response, and the greedy answer stands, as
when the solver finds nothing in time. The eviction actions, whose victim models are
many and small, run whole in one child (`kai.engine.evictions.actions`): a child per
victim model made a 1,000-node cycle 1.2 s longer, one for all of them costs nothing
measurable.
"""

from __future__ import annotations

from collections.abc import Callable

from ortools.sat.python import cp_model
from ortools.sat.python import cp_model_helper as helper

from kai.engine.forked import call_in_child
from kai.engine.solver.solve import in_process

ANSWER_GRACE_SECONDS = 5.0
"""How long past its own time limit a child may take to answer before it is killed."""


def solve_in_child(
    model: cp_model.CpModel,
    parameters: helper.SatParameters,
    started: Callable[[int], None] | None = None,
) -> helper.CpSolverResponse | None:
    """The response of solving `model` in a forked child; None if the child died or hung.

    `started`, when given, is told the child's pid (tests stop a child with it).
    """
    written = call_in_child(
        lambda: str(in_process(model, parameters)).encode(),
        parameters.max_time_in_seconds + ANSWER_GRACE_SECONDS,
        started,
    )
    if written is None:
        return None
    response = helper.CpSolverResponse()
    response.parse_text_format(written.decode())
    return response
