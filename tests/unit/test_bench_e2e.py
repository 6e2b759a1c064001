"""The end-to-end benchmark's arithmetic: the run plan interleaves sides, medians and percentiles."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, cast

import pytest

from bench.e2e import Cooldown, FirstSeen, Side, interleaved, summarize_bursts, summarize_streams
from bench.timing import nearest_rank
from kai.kube.client import Kube


def test_sides_alternate_round_by_round() -> None:
    sides = [Side(name, name, name, None) for name in ("kai", "kube", "ceiling")]
    plan = [(run, side.name) for run, side in interleaved(sides, 3)]
    assert plan == [
        (0, "kai"), (0, "kube"), (0, "ceiling"),
        (1, "kai"), (1, "kube"), (1, "ceiling"),
        (2, "kai"), (2, "kube"), (2, "ceiling"),
    ]  # fmt: skip


def test_nearest_rank_percentiles() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert nearest_rank(values, 0.5) == 50.0
    assert nearest_rank(values, 0.99) == 99.0
    assert nearest_rank([3.0, 1.0, 2.0], 0.99) == 3.0  # few samples: the slowest
    assert nearest_rank([7.0], 0.5) == 7.0


def test_a_burst_summary_is_the_median_run() -> None:
    rows = [
        {"seconds": 10.0, "firstBindSeconds": 1.0, "firstBindAfterCycleStartSeconds": 0.5},
        {"seconds": 40.0, "firstBindSeconds": 3.0},  # an outlier does not move the median
        {"seconds": 20.0, "firstBindSeconds": 2.0, "firstBindAfterCycleStartSeconds": 0.7},
    ]
    summary = summarize_bursts(1000, rows)
    assert summary["seconds"] == 20.0
    assert summary["podsBoundPerSecond"] == 50.0
    assert summary["firstBindSeconds"] == 2.0
    assert "firstBindAfterCycleStartSeconds" not in summary  # not every run has it: no median
    assert summary["runs"] == rows


def test_a_burst_summary_takes_the_steady_pods_medians() -> None:
    def steady(p50: float, p99: float, cpu: float, cycle: float | None) -> dict[str, Any]:
        found: dict[str, Any] = {
            "latencySeconds": {"p50": p50, "p99": p99, "max": p99},
            "cpuSecondsPerPod": cpu,
        }
        if cycle is not None:
            found["meanCycleSeconds"] = cycle
        return {"seconds": 1.0, "firstBindSeconds": 0.1, "steady": found}

    rows = [steady(0.2, 0.3, 1.0, 0.2), steady(0.4, 0.9, 0.5, None), steady(0.3, 0.5, 3.0, 0.1)]
    summary = summarize_bursts(100, rows)["steady"]
    assert summary == {"latencyP50Seconds": 0.3, "latencyP99Seconds": 0.5, "cpuSecondsPerPod": 1.0}


def test_a_stream_summary_takes_each_figure_s_median() -> None:
    rows = [
        {"firstBindSeconds": 0.5, "latencySeconds": {"p50": 0.2, "p99": 1.0, "max": 3.0}},
        {"firstBindSeconds": 0.7, "latencySeconds": {"p50": 0.4, "p99": 1.5, "max": 2.0}},
        {"firstBindSeconds": 0.6, "latencySeconds": {"p50": 0.3, "p99": 9.0, "max": 1.0}},
    ]
    summary = summarize_streams(rows)
    assert summary["firstBindSeconds"] == 0.6
    assert summary["latencySeconds"] == {"p50": 0.3, "p99": 1.5, "max": 2.0}


def _named(pod: Mapping[str, Any]) -> str | None:
    return str(pod["name"]) if pod.get("bound") else None


async def test_a_wait_ends_when_the_last_name_is_seen_and_only_then() -> None:
    seen = FirstSeen(cast(Kube, None), "/pods", _named)  # fed by hand: no watch runs
    seen._see({"name": "a", "bound": True})  # seen before the wait began
    waiting = asyncio.create_task(seen.wait(["a", "b", "c"], timeout=600))
    await asyncio.sleep(0)
    seen._see({"name": "b", "bound": True})
    seen._see({"name": "c", "bound": False})  # not in the state waited for
    await asyncio.sleep(0)
    assert not waiting.done()
    seen._see({"name": "c", "bound": True})
    await asyncio.wait_for(waiting, timeout=60)
    assert set(seen.bound) == {"a", "b", "c"}


async def test_a_wait_that_times_out_says_how_far_it_got() -> None:
    seen = FirstSeen(cast(Kube, None), "/pods", _named)
    seen._see({"name": "a", "bound": True})
    with pytest.raises(TimeoutError, match="only 1 of 2 pods seen"):
        await seen.wait(["a", "b"], timeout=0.01)
    seen._see({"name": "b", "bound": True})  # a later sighting with no waiter left is fine
    await seen.wait(["a", "b"], timeout=0.01)


async def test_the_first_run_does_not_wait_for_a_cooldown() -> None:
    cooling = Cooldown(3600)
    await asyncio.wait_for(cooling.wait(), timeout=60)  # no run before it


async def test_a_cooldown_that_has_passed_does_not_wait() -> None:
    cooling = Cooldown(0)
    cooling.restart()
    await asyncio.wait_for(cooling.wait(), timeout=60)
