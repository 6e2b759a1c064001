"""`bench/churn.py` counts what the rounds undo, on KAI's basic reclaim case run as `kai simulate` does."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path

from bench.churn import churn, short_of_fair_share
from kai.engine.cycle import Binding
from kai.engine.model import EngineConfig
from kai.simulate.inputs import read_documents
from kai.simulate.rounds import simulate
from kai.simulate.scenario import load_scenario

CASE = Path(__file__).resolve().parents[2] / "scenarios" / "evict_reclaim_no_ping_pong.yaml"


def test_a_reclaim_that_holds_is_counted_as_made_and_not_undone() -> None:
    """queue0's running job is reclaimed in round 1 for queue1's, which binds in round 2."""
    start = load_scenario(read_documents([str(CASE)]), datetime(2026, 6, 1, tzinfo=UTC))
    run = simulate(start, 3, EngineConfig(time_limit_seconds=0))
    counted = churn(start, run.rounds, run.final)
    assert counted["evictions"] == 1 and counted["decisions"] == 1
    assert counted["evictionsOfPodsStartedInTheRun"] == 0  # it ran before the first round
    assert counted["decisionsUndoneNextRound"] == 0 and counted["podsEvictedMoreThanOnce"] == 0
    assert counted["decisionsWaitingNextRound"] == 0
    assert counted["lastRoundsEvictions"] == [1, 0, 0]
    assert counted["gpusRunningAtEnd"] == 1
    # Both queues deserve 1 GPU: queue1 lacked its GPU at the start, queue0 lacks one at the
    # end (its 2-GPU job does not fit on the GPU left).
    assert short_of_fair_share(start) == 1.0 and counted["gpusShortOfFairShareAtEnd"] == 1.0

    # Had round 2 bound the victim back instead of its reclaimer, the reclaim was undone.
    back = Binding("ml/queue0-job", "node0", Fraction(2), ())
    rounds = (run.rounds[0], dataclasses.replace(run.rounds[1], bindings=(back,)), run.rounds[2])
    recounted = churn(start, rounds, run.final)
    assert (recounted["decisionsWaitingNextRound"], recounted["decisionsUndoneNextRound"]) == (1, 1)
    # Had it bound neither, the reclaimer waited, and nothing was bound back.
    rounds = (run.rounds[0], dataclasses.replace(run.rounds[1], bindings=()), run.rounds[2])
    recounted = churn(start, rounds, run.final)
    assert (recounted["decisionsWaitingNextRound"], recounted["decisionsUndoneNextRound"]) == (1, 0)
