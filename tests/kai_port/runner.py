"""Run one converted KAI case in-process and list how kai's answer differs from KAI's expectation.

Shared by the pytest module (test_kai_cases.py) and the report (report.py). The mapping
from KAI's expectations to kai's rounds is described in README.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

from kai.engine.cycle import CycleResult, run_cycle
from kai.engine.model import (
    EngineConfig,
    EvictionConfig,
    PlacementStrategy,
    Pod,
    PodPhase,
    Snapshot,
)
from kai.simulate.rounds import apply
from kai.simulate.scenario import load_scenario

HERE = Path(__file__).parent
CASES = HERE / "cases"
KNOWN = HERE / "known_differences.yaml"
NOW = datetime(2026, 6, 1, tzinfo=UTC)
TIME_LIMIT_SECONDS = 0.5


def case_paths() -> list[Path]:
    return sorted(CASES.rglob("*.yaml"))


def case_id(path: Path) -> str:
    return path.relative_to(CASES).with_suffix("").as_posix()


def known_differences() -> dict[str, str]:
    if not KNOWN.exists():
        return {}
    loaded = yaml.safe_load(KNOWN.read_text()) or {}
    return {str(k): str(v) for k, v in loaded.items()}


@dataclass
class Run:
    rounds: list[CycleResult]
    states: list[Snapshot]  # states[i] = the cluster after round i+1 was applied
    initial: Snapshot


def engine_config(case: dict[str, Any]) -> EngineConfig:
    engine = case.get("engine") or {}
    evictions = EvictionConfig(
        max_consolidation_preemptees=16 if engine.get("consolidation", True) else 0,
        staleness_grace_seconds=_stale_grace(case, engine),
    )
    placement = PlacementStrategy(engine.get("placement", "binpack"))
    devices = PlacementStrategy(engine.get("devicePlacement", "binpack"))
    return EngineConfig(
        time_limit_seconds=TIME_LIMIT_SECONDS,
        placement_strategy=placement,
        device_strategy=devices,
        evictions=evictions,
    )


def _stale_grace(case: dict[str, Any], engine: dict[str, Any]) -> float:
    """KAI's multi-round harness leaves the scheduler's default staleness grace period at
    Go's zero value (it never sets SchedulerParams' GlobalDefaultStalenessGracePeriod), so
    a stale gang is evicted in the round it is found; a live scheduler defaults to 60 s."""
    if not engine.get("staleGangEviction", True):
        return -1.0
    return 0.0 if case["kai"]["kind"] == "integration" else 60.0


def run_rounds(case: dict[str, Any], rounds: int, interval_seconds: float) -> Run:
    source = str(case["kai"]["source"])
    snapshot = load_scenario([(source, obj) for obj in case["objects"]], NOW)
    config = engine_config(case)
    results: list[CycleResult] = []
    states: list[Snapshot] = []
    state = snapshot
    for number in range(rounds):
        if number and interval_seconds:
            state = dataclasses.replace(state, now=state.now + timedelta(seconds=interval_seconds))
        result = run_cycle(state, config)
        results.append(result)
        state = apply(state, result)
        states.append(state)
    return Run(results, states, snapshot)


def _pods(snapshot: Snapshot) -> dict[str, Pod]:
    return {pod.key: pod for pod in snapshot.pods}


def _gpus(pod: Pod) -> Fraction:
    if pod.gpu.whole:
        return Fraction(pod.gpu.whole)
    return pod.gpu.portion * pod.gpu.devices


def check_case(case: dict[str, Any]) -> list[str]:
    """Every way kai's rounds differ from KAI's expectation; empty when the case passes."""
    expect = case["expect"]
    integration = case["kai"]["kind"] == "integration"
    until = int(expect.get("roundsUntilMatch", 1))
    after = int(expect.get("roundsAfterMatch", 0)) if integration else 0
    run = run_rounds(case, until + after, float(expect.get("roundInterval", 0)))
    problems: list[str] = []
    for number, result in enumerate(run.rounds, start=1):
        violations = result.report.validator_violations
        if result.eviction_report is not None:
            violations += result.eviction_report.validator_violations
        if violations:
            problems.append(f"round {number}: {violations} validator violation(s)")
    problems += _counts(expect, run.rounds)
    problems += _job_gpus(expect, run.initial)
    if integration:
        problems += _integration(expect, run, until, after)
    else:
        problems += _unit(expect, run)
    return problems


def _counts(expect: dict[str, Any], rounds: Iterable[CycleResult]) -> list[str]:
    problems = []
    for number, result in enumerate(rounds, start=1):
        for key, made in (
            ("maxBinds", len(result.bindings)),
            ("maxEvictions", len(result.evictions)),
            ("maxPipelined", len(result.pipelined)),
        ):
            if key in expect and made > int(expect[key]):
                problems.append(
                    f"round {number}: {made} {key[3:].lower()}, KAI allows {expect[key]}"
                )
    return problems


def _job_gpus(expect: dict[str, Any], snapshot: Snapshot) -> list[str]:
    problems = []
    for group, wanted in (expect.get("jobs") or {}).items():
        total = sum((_gpus(p) for p in snapshot.pods if p.group == group), Fraction(0))
        if abs(float(total) - float(wanted["gpusRequired"])) > 1e-9:
            problems.append(
                f"{group}: pods request {float(total)} GPUs, KAI expects {wanted['gpusRequired']}"
            )
    return problems


def _unit(expect: dict[str, Any], run: Run) -> list[str]:
    result, after = run.rounds[0], _pods(run.states[0])
    bound = {b.pod: b.node for b in result.bindings}
    evicted = {e.pod for e in result.evictions}
    pipelined = {p.pod: p.node for p in result.pipelined}
    problems = []
    for key, wanted in expect["pods"].items():
        outcome, node = wanted["outcome"], wanted.get("node")
        pod = after.get(key)
        if pod is None:
            problems.append(f"{key}: missing from the cluster")
            continue
        said = f"{key} (KAI: {wanted['kaiStatus']}{' on ' + node if node else ''})"
        if outcome == "running":
            if key in evicted:
                problems.append(f"{said}: evicted")
            elif node and pod.node != node:
                problems.append(f"{said}: runs on {pod.node}")
        elif outcome == "bound":
            if key not in bound:
                where = f"pipelined on {pipelined[key]}" if key in pipelined else "not bound"
                problems.append(f"{said}: {where}")
            elif node and bound[key] != node:
                problems.append(f"{said}: bound on {bound[key]}")
        elif outcome == "pending":
            if key in bound:
                problems.append(f"{said}: bound on {bound[key]}")
            elif key in pipelined:
                problems.append(f"{said}: pipelined on {pipelined[key]}")
        elif outcome == "pipelined":
            if key in bound:
                problems.append(f"{said}: bound on {bound[key]}")
            elif key not in pipelined:
                problems.append(f"{said}: not pipelined")
            elif node and pipelined[key] != node:
                problems.append(f"{said}: pipelined on {pipelined[key]}")
        elif outcome in ("evicted", "moved"):
            if key not in evicted:
                problems.append(f"{said}: not evicted")
        elif outcome == "releasing" and (key in bound or pod.phase is not PodPhase.RELEASING):
            problems.append(f"{said}: {pod.phase.value} on {pod.node}")
    return problems


def _integration(expect: dict[str, Any], run: Run, until: int, after: int) -> list[str]:
    problems = []
    state = _pods(run.states[until - 1])
    for key, wanted in expect["pods"].items():
        outcome, node = wanted["outcome"], wanted.get("node")
        pod = state.get(key)
        if pod is None:
            problems.append(f"{key}: missing from the cluster")
            continue
        said = f"{key} after {until} rounds (KAI: {wanted['kaiStatus']}{' on ' + node if node else ''})"
        if outcome == "running":
            if pod.phase is not PodPhase.BOUND:
                problems.append(f"{said}: {pod.phase.value}")
            elif node and pod.node != node:
                problems.append(f"{said}: runs on {pod.node}")
        elif outcome == "pending" and pod.phase is not PodPhase.PENDING:
            problems.append(f"{said}: {pod.phase.value} on {pod.node}")
        elif outcome == "releasing" and pod.phase is not PodPhase.RELEASING:
            problems.append(f"{said}: {pod.phase.value}")
    watched = set(expect["pods"])
    for number in range(until, until + after):
        result = run.rounds[number]
        changed = (
            [f"bound {b.pod}" for b in result.bindings]
            + [f"evicted {e.pod}" for e in result.evictions]
            + [f"pipelined {p.pod}" for p in result.pipelined if p.pod in watched]
        )
        if changed:
            problems.append(
                f"round {number + 1} (after the match) still changes: {', '.join(sorted(changed))}"
            )
    return problems
