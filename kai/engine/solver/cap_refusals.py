"""Greedy's answer proved the best on the model's first stage by its refusals alone, before any model is built.

The first stage of the allocation model ranks KAI's attempts from greedy's first refusal
on, `ORDER_WINDOW` of them, one tier each, and the solve stops after it when it cannot do
better than greedy (`solve.GREEDY_PROVED`). An answer better there satisfies an attempt
greedy refused while deciding every attempt before it as greedy did. If a queue's cap (a
limit, or quota for non-preemptible work) refused that attempt, the answer holds at least
what greedy held when it refused: every core greedy admitted before it, and as many of each
gang's elastic pods, the same amounts where a gang's elastic pods all ask the same. So the
cap refuses the answer too. When every refusal in a full window is of that kind, the stage's
answer is greedy's, and the model need not be built: at 1,000 nodes on the engine benchmark
its build and first stage took 0.45 s of a cycle's critical path and 0.7 s of CPU, to find
what this finds in microseconds.

A window shorter than `ORDER_WINDOW` is not judged: its stage may hold later tiers as well.
"""

from __future__ import annotations

from collections.abc import Sequence

from kai.engine.gangs import GangRequest, pod_resources
from kai.engine.greedy import AllocationOutcome
from kai.engine.solver.model import ORDER_WINDOW, order_window, ranked_attempts


def refused_only_by_caps(
    modelled: Sequence[GangRequest], greedy: AllocationOutcome, memory_mib: int
) -> bool:
    """Greedy's refusals in a full order window were all over queue caps, and every gang's
    elastic pods ask alike: the first stage would prove greedy's answer the best."""
    ranked = [greedy.offers[position] for position in ranked_attempts(greedy.offers, modelled)]
    accepted = greedy.accepted_in_order(
        ranked, {pod.key: gang.key for gang in modelled for pod in gang.elastic}
    )
    at = order_window(accepted)
    if len(at) < ORDER_WINDOW or not all(accepted[i] or ranked[i] in greedy.capped for i in at):
        return False
    return not any(_mixed(gang, memory_mib) for gang in modelled)


def _mixed(gang: GangRequest, memory_mib: int) -> bool:
    """Its elastic pods ask for different amounts: n of them need not hold what greedy's n held."""
    asks = {pod_resources(pod, memory_mib) for pod in gang.elastic}
    return len(asks) > 1
