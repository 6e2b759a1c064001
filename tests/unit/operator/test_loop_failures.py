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
from typing import Any

import pytest
from immutables import Map

from kai.api.volumes import VolumeObjects
from kai.engine.cycle import Binding, CycleResult, SolverReport
from kai.operator.binder import BindReport
from kai.operator.loop import SchedulingLoop, _Decided
from kai.operator.metrics import Metrics
from kai.operator.snapshot import Assumed
from tests.unit.operator.partial_loop import ABSENT, loop_reaching, stand_in


class _EveryBindAccepted:
    async def bind(self, bindings: Iterable[Binding], *_: Any) -> BindReport:
        return BindReport(bound={b.pod: Assumed(b.node, b.gpu_groups) for b in bindings})


async def _no_writes(bound: Iterable[str]) -> None:
    pass


def _loop(leading: list[bool], binder: Any = None) -> SchedulingLoop:
    return loop_reaching(  # only the binder, the metrics and the leadership matter here
        binder=binder or _EveryBindAccepted(),
        sharing=stand_in(namespace="kai-resource-reservation"),
        events=stand_in(discard=lambda: None),
        metrics=Metrics(),
        period_seconds=60.0,
        is_leader=lambda: leading[-1],
    )


def _decided(pods: list[str]) -> _Decided:
    bindings = tuple(Binding(pod, "node-a", Fraction(1), ()) for pod in pods)
    result = CycleResult(
        bindings, Map(), {}, SolverReport("greedy", "", Fraction(0), Fraction(0), Fraction(0), 0)
    )
    return _Decided(
        cycle_id="c1",
        began=0.0,
        timings={},
        failed_before=0,
        now=ABSENT,
        view=stand_in(pods={}, pod_groups={}, volume_objects=VolumeObjects({}, {}, {})),
        plans=ABSENT,
        overlay=ABSENT,
        snapshot=stand_in(pods=(), pod_groups=(), nodes=(), changes=None),
        result=result,
        grouping=stand_in(annotations={}, stamped=frozenset(), finish=_no_writes),
        writes=contextlib.AsyncExitStack(),
    )


async def test_a_cycle_abandoned_after_its_binds_still_records_them() -> None:
    leading = [True]

    class _LeaseLostDuringBinds(_EveryBindAccepted):
        async def bind(self, bindings: Iterable[Binding], *rest: Any) -> BindReport:
            leading.append(False)  # the Lease lapses while the binds go out
            return await super().bind(bindings, *rest)

    loop = _loop(leading, _LeaseLostDuringBinds())
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
