"""How much searching each eviction action may do in one cycle: solver time and counted work.

A cycle must finish in about a second even when thousands of gangs wait and
hundreds of them could in principle trigger an eviction. The CP-SAT models are
bounded by solver time, counted in the solver's deterministic time (the wall clock is
only a backstop), and, for building them, by their size; KAI's greedy search by work
units, one per node looked at. Counted work makes the bound deterministic: the same
snapshot is searched the same way on any machine, loaded or not. (Counted in wall
time, a 500-node cycle under two CPU hogs evicted 20-35 pods where a quiet machine
evicted 54.) Once models are out of budget the action goes on with the greedy search
alone; once that is out of budget too, the gangs left wait for the next cycle, as
in KAI, whose search is bounded by time budgets instead (kai-semantics §8.6).
"""

from __future__ import annotations

from dataclasses import dataclass

SEARCH_WORK_PER_ACTION = 200_000
"""Nodes the greedy search may look at per action and cycle."""

LOOK_OFFER_WORK = 30
"""What one attempt of the look at the next cycle costs, in nodes looked at: an attempt
(ranking the queues, asking the node index) took about as long as the search looking at 30
nodes, at 1,000 nodes. A look walks the order up to its preemptor, hundreds of attempts
when the preemptor comes late."""

CONSOLIDATION_SHARE = 4
"""Consolidation gets a quarter of the work: it only moves work around, and most of its
attempts on a busy cluster find nothing."""

MODELS_AHEAD = 8
"""Solver time is shared as if at most this many more models were to come in the action."""

MODEL_WORK_PER_ACTION = 60_000
"""Model size (nodes and victim pods) the CP-SAT models may add up to per action and cycle."""

SMALLEST_MODEL_SECONDS = 0.01
"""Below this much solver time a model is not worth building."""


@dataclass
class SearchBudget:
    solver_seconds: float
    search_work: int = SEARCH_WORK_PER_ACTION
    model_work: int = MODEL_WORK_PER_ACTION
    solver_spent: float = 0.0
    search_spent: int = 0
    model_spent: int = 0

    def spend(self, units: int) -> None:
        """Charge greedy search work (the seating code's meter)."""
        self.search_spent += units

    @property
    def exhausted(self) -> bool:
        return self.search_spent >= self.search_work

    def model_seconds(self, models_left: int) -> float:
        """Solver time for the next model: an even share of what is left among those to come.

        Most gangs still waiting end without a model (no victims, or a twin already failed),
        so no more than a few are counted: early models get more, later ones what is left.
        """
        left = max(0.0, self.solver_seconds - self.solver_spent)
        return left / max(1, min(models_left, MODELS_AHEAD))

    def may_model(self, size: int, models_left: int) -> bool:
        return (
            self.model_spent + size <= self.model_work
            and self.model_seconds(models_left) >= SMALLEST_MODEL_SECONDS
        )

    def spend_model(self, size: int) -> None:
        self.model_spent += size
