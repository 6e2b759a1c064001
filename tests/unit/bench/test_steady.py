"""The steady-state snapshot of `bench/engine.py --steady`: one pod pending, the rest running, all fitting."""

from __future__ import annotations

import pytest

from bench import engine, steady
from bench.trace import overcommitted
from kai.engine.cycle import run_cycle
from kai.engine.model import EngineConfig, PodPhase


def test_the_filled_cluster_runs_its_pods_and_one_more_fits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(steady, "RUNNING_TARGET", 600)  # the benchmark's 8,000 take a minute
    snapshot = steady.steady_state_snapshot()
    phases = [pod.phase for pod in snapshot.pods]
    assert phases.count(PodPhase.PENDING) == 1
    assert phases.count(PodPhase.BOUND) == len(phases) - 1 >= 600
    assert overcommitted(snapshot) == []
    assert {pod.group for pod in snapshot.pods} == {group.key for group in snapshot.pod_groups}
    result = run_cycle(snapshot, EngineConfig(time_limit_seconds=0))
    assert len(result.bindings) == 1


def test_steady_is_its_own_size(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        engine.main(["--steady", "--nodes", "10", "--pods", "10"])
    assert "give one of --all, --steady" in capsys.readouterr().err
