"""Between two answers as good in KAI's order, GPUs and pods, the greedy pass's is kept,
whatever either leaves free: the solver's answer replaces KAI's placements only when it
places more, and under bin-packing strands no more of the free GPUs. Ties used to go to
the answer leaving the free GPUs less fragmented, and on the openb trace in batches of
100 that put kai below its own greedy pass on two seeds."""

from __future__ import annotations

from collections.abc import Callable

from kai.engine.cycle import _verdict
from kai.engine.greedy import AllocationOutcome, PodPlacement
from kai.engine.model import Pod
from tests.unit.engine.builders import pod

A, B = pod("a", "ga", gpus=1), pod("b", "gb", gpus=1)
OFFERS = [("ns/ga", 0), ("ns/gb", 0)]  # what the greedy pass tried, in KAI's order


def _outcome(*placed: tuple[Pod, str]) -> AllocationOutcome:
    return AllocationOutcome(
        placements={p.key: PodPlacement(p, where, ()) for p, where in placed},
        admitted=[p.group for p, _ in placed],
        offers=list(OFFERS),
    )


TOGETHER = _outcome((A, "n1"), (B, "n1"))
APART = _outcome((A, "n1"), (B, "n2"))


def test_a_tie_keeps_the_greedy_answer_whichever_of_the_two_it_is() -> None:
    for candidate, greedy in ((APART, TOGETHER), (TOGETHER, APART)):
        verdict = _verdict(candidate, greedy, 40_000, {})
        assert verdict.tie and not verdict.use_solver


def test_an_answer_better_in_kais_order_wins_where_no_measure_is_given() -> None:
    only_a = _outcome((A, "n1"))
    better = _verdict(APART, only_a, 40_000, {})
    assert better.use_solver and not better.tie
    worse = _verdict(only_a, APART, 40_000, {})
    assert not worse.use_solver and not worse.tie


def test_an_answer_better_in_kais_order_must_strand_no_more_than_greedys() -> None:
    """Under bin-packing the answer that places more is used only if the free GPUs it
    leaves are no more stranded (by the fragmentation measure) than greedy's."""
    only_a = _outcome((A, "n1"))

    def stranded_by(amounts: dict[int, float]) -> Callable[[AllocationOutcome], float]:
        return lambda outcome: amounts[id(outcome)]

    strands_more = stranded_by({id(APART): 3.5, id(only_a): 3.0})
    assert not _verdict(APART, only_a, 40_000, {}, strands_more).use_solver
    strands_as_much = stranded_by({id(APART): 3.0, id(only_a): 3.0})
    assert _verdict(APART, only_a, 40_000, {}, strands_as_much).use_solver
    # the measure never makes a worse answer win
    strands_less = stranded_by({id(APART): 3.0, id(only_a): 1.0})
    assert not _verdict(only_a, APART, 40_000, {}, strands_less).use_solver


def test_more_gpus_in_the_same_order_win() -> None:
    """b asks for two GPUs in one answer and one in the other: the same attempts are
    satisfied, and the answer placing more GPUs is the better one."""
    big_b = pod("b", "gb", gpus=2)
    more = _outcome((A, "n1"), (big_b, "n1"))
    fewer = _outcome((A, "n1"), (B, "n2"))
    assert _verdict(more, fewer, 40_000, {}).use_solver
    assert not _verdict(fewer, more, 40_000, {}).use_solver
