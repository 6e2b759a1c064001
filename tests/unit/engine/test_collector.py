"""The cyclic garbage collector waits while a cycle runs and collects once after it.

With CPython's default threshold the collector ran about 1,100 times in a 5,000-node
greedy-only cycle, a fifth of its time (kai.engine.collector). These tests count the
collections `gc.callbacks` sees during a cycle, so they fail if the pause goes.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

import pytest

from bench.synthetic import ClusterSpec, synthetic_cluster
from kai.engine.collector import collection_paused
from kai.engine.cycle import run_cycle
from kai.engine.model import EngineConfig

GREEDY_ONLY = EngineConfig(time_limit_seconds=0.0)


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generation of every collection that starts, at CPython's default thresholds."""
    seen: list[int] = []

    def record(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    thresholds, enabled = gc.get_threshold(), gc.isenabled()
    gc.set_threshold(700, 10, 10)
    gc.enable()
    gc.callbacks.append(record)
    try:
        yield seen
    finally:
        gc.callbacks.remove(record)
        gc.set_threshold(*thresholds)
        if not enabled:
            gc.disable()


def test_a_cycle_collects_once_at_its_end(collections: list[int]) -> None:
    snapshot = synthetic_cluster(ClusterSpec(100, 1000, 1))
    collections.clear()  # building the snapshot is not the cycle
    run_cycle(snapshot, GREEDY_ONLY)
    assert collections == [0]
    assert gc.isenabled()


def test_the_same_cycle_without_the_pause_collects_many_times(collections: list[int]) -> None:
    """The other side of the test above: this cycle does allocate enough to be collected."""
    snapshot = synthetic_cluster(ClusterSpec(100, 1000, 1))
    collections.clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("kai.engine.cycle.collection_paused", contextlib.nullcontext)
        run_cycle(snapshot, GREEDY_ONLY)
    assert len(collections) > 10


def test_a_collector_turned_off_by_the_caller_stays_off(collections: list[int]) -> None:
    snapshot = synthetic_cluster(ClusterSpec(20, 100, 1))
    collections.clear()
    gc.disable()
    run_cycle(snapshot, GREEDY_ONLY)
    assert not gc.isenabled()
    assert collections == []


def test_the_collector_is_on_again_when_the_cycle_raises(collections: list[int]) -> None:
    collections.clear()
    kept: list[list[None]] = []
    with pytest.raises(RuntimeError, match="engine bug"), collection_paused():
        assert not gc.isenabled()
        kept.extend([] for _ in range(2 * gc.get_threshold()[0]))  # past the threshold
        raise RuntimeError("engine bug")
    assert gc.isenabled()
    assert collections == [0]


def test_a_cycle_below_the_young_threshold_leaves_the_collection_for_later(
    collections: list[int],
) -> None:
    """As `kai run`'s threshold leaves a live steady cycle: collecting after it would walk
    what was allocated since the last collection, before the collector would have."""
    snapshot = synthetic_cluster(ClusterSpec(20, 100, 1))
    gc.set_threshold(10_000_000, 10, 10)
    gc.collect(0)
    collections.clear()
    run_cycle(snapshot, GREEDY_ONLY)
    assert collections == []
    assert gc.isenabled() and 0 < gc.get_count()[0] < 10_000_000
