"""A step that fails after a cycle's binds loses neither the binds' record nor later cycles.

Issue 14 (CI at e450b6e): a Lease lost after a cycle's binds dropped the rest of the cycle,
its summary too, so the burst test waited in vain for the summaries of pods already bound.
And a cycle's status and events, written while the next cycle runs, were awaited without
being let go: one failure there failed that cycle and every cycle after it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import pytest

from kai.engine.cycle import Binding, CycleResult, SolverReport
from kai.operator.binder import BindReport
from kai.operator.loop import SchedulingLoop, _Decided
from kai.operator.metrics import Metrics
from kai.operator.snapshot import Assumed


class _EveryBindAccepted:
    async def bind(self, bindings: Iterable[Binding], *_: Any) -> BindReport:
        return BindReport(bound={b.pod: Assumed(b.node, b.gpu_groups) for b in bindings})


class _GroupsWritten:
    annotations: dict[str, dict[str, str]] = {}
    stamped: frozenset[str] = frozenset()

    async def finish(self, bound: Iterable[str]) -> None:
        pass


def _loop(leading: list[bool]) -> SchedulingLoop:
    return SchedulingLoop(  # only the binder, the metrics and the leadership matter here
        cache=None,
        builder=None,
        grouper=None,
        binder=_EveryBindAccepted(),
        sharing=SimpleNamespace(namespace="kai-resource-reservation"),
        status=None,
        stamps=None,
        events=SimpleNamespace(discard=lambda: None),
        backoff=None,
        metrics=Metrics(),
        engine=None,
        executor=None,
        period_seconds=60.0,
        debounce_seconds=0.0,
        is_leader=lambda: leading[-1],
        failed_cycles_unhealthy=5,
    )


def _decided(pods: list[str]) -> _Decided:
    bindings = tuple(Binding(pod, "node-a", Fraction(1), ()) for pod in pods)
    result = CycleResult(
        bindings, {}, {}, SolverReport("greedy", "", Fraction(0), Fraction(0), Fraction(0), 0)
    )
    return _Decided(
        cycle_id="c1",
        began=0.0,
        timings={},
        failed_before=0,
        now=None,
        view=SimpleNamespace(pods={}, pod_groups={}),
        plans=None,
        overlay=None,
        snapshot=SimpleNamespace(pods=(), pod_groups=(), changes=None),
        result=result,
        grouping=_GroupsWritten(),
        writes=contextlib.AsyncExitStack(),
    )


async def test_a_cycle_abandoned_after_its_binds_still_records_them() -> None:
    leading = [True]
    loop = _loop(leading)

    class _LeaseLostDuringBinds(_EveryBindAccepted):
        async def bind(self, bindings: Iterable[Binding], *rest: Any) -> BindReport:
            leading.append(False)  # the Lease lapses while the binds go out
            return await super().bind(bindings, *rest)

    loop._binder = _LeaseLostDuringBinds()
    await loop._guarded(loop._carry_out(_decided(["ns/p-0", "ns/p-1"]), earlier=()))
    assert loop.abandoned == 1  # the steps after the binds were dropped ...
    assert [summary.bound for summary in loop.recent] == [
        ("ns/p-0", "ns/p-1")
    ]  # ... not their record
    assert loop.cycles == 0  # the cycle did not finish


async def test_a_failed_status_write_fails_the_next_cycle_only() -> None:
    loop = _loop([True])

    async def failing_status() -> None:
        raise RuntimeError("status computation failed")

    loop._trailing = asyncio.ensure_future(failing_status())
    with pytest.raises(RuntimeError, match="status computation failed"):
        await loop._previous_status_done()
    await loop._previous_status_done()  # the cycle after that one does not see it again
