"""Past the window, the solver keeps every attempt the greedy pass satisfied.

The first stage orders the window's attempts exactly; the attempts after it share one
rank-weighted tier, which would give up an earlier satisfied attempt for two later ones.
That answer is worse in KAI's order than greedy's, so the cycle threw it away: on the
1,000-node benchmark the solver's answer gave up attempt 457 that way in every run.
"""

from __future__ import annotations

from typing import Any

import pytest

from kai.engine import cycle
from kai.engine.model import EngineConfig
from kai.engine.solver import model as model_module
from tests.unit.engine.builders import group, node, pod, queue, snapshot

CONFIG = EngineConfig(time_limit_seconds=5, solver_workers=1)


def test_a_satisfied_later_attempt_is_not_traded_for_two_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One node of 2 GPUs. In KAI's order: "a" (3 GPUs) never fits, "b" (2) fits and fills
    # the node, so the greedy pass refuses "c", "d" and "e" (1 each). With a window of one
    # attempt ("a"), the rest ("b" to "e") weigh 4, 3, 2, 1: "c" and "d" outweigh "b".
    monkeypatch.setattr(model_module, "ORDER_WINDOW", 1)
    asks = {"a": 3, "b": 2, "c": 1, "d": 1, "e": 1}
    pods = [pod(name, name, gpus=gpus) for name, gpus in asks.items()]
    groups = [group(name, "q", priority=100 - 10 * i) for i, name in enumerate(asks)]
    seen: list[tuple[tuple[bool, ...], tuple[bool, ...]]] = []
    real_verdict = cycle._verdict

    def recording(
        candidate: Any, baseline: Any, memory_mib: int, elastic_of: Any, *rest: Any
    ) -> Any:
        seen.append(
            (
                candidate.accepted_in_order(baseline.offers, elastic_of),
                baseline.accepted_in_order(baseline.offers, elastic_of),
            )
        )
        return real_verdict(candidate, baseline, memory_mib, elastic_of, *rest)

    monkeypatch.setattr(cycle, "_verdict", recording)
    result = cycle.run_cycle(snapshot([node("n", gpus=2)], pods, groups, [queue("q")]), CONFIG)
    [(solver, greedy)] = seen
    assert greedy == (False, True, False, False, False)
    assert solver == greedy  # "b" kept; before, (False, False, True, True, False)
    assert result.report.greedy_kept_on_tie
    assert [b.pod for b in result.bindings] == ["ns/b"]
