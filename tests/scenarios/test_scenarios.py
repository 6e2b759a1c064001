"""Scenario tests: a YAML cluster and a hand-written expected outcome, run through the real `kai simulate`.

Each `NAME.yaml` here is a cluster; `NAME.expect.yaml` says what must happen, written
from the rules (kai-semantics.md), not from the engine's output. The command runs
as a user runs it, in a subprocess, so its exit status and its output format are
tested along with the engine.

Multi-round expectations (`rounds`, `round`, `stableAfterRounds`, `neverEvicted`,
`noEvictions`) check what each round decided; `stableAfterRounds: K` runs five more
rounds after round K and requires that none of them binds or evicts anything
(KAI's multi-round pattern, which catches allocate/evict ping-pong). `greedyOnly` and
`spread` hold expectations for a second run with the solver off (`--time-limit 0`) or
with the spread placement strategy.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

HERE = Path(__file__).parent
SCENARIOS = sorted(p for p in HERE.glob("*.yaml") if not p.name.endswith(".expect.yaml"))
INVALID = sorted(
    p for p in (HERE / "invalid").glob("*.yaml") if not p.name.endswith(".expect.yaml")
)


def run_simulate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kai.cli.main", "simulate", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def simulate_json(path: Path, *extra: str) -> dict[str, Any]:
    result = run_simulate(str(path), "-o", "json", "--now", "2026-06-01T00:00:00Z", *extra)
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def expectation(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.with_name(path.stem + ".expect.yaml").read_text())
    return loaded


def check(document: dict[str, Any], expected: dict[str, Any]) -> None:
    pods = document["pods"]
    bound = {key for key, pod in pods.items() if pod["phase"] == "Running"}
    if "bound" in expected:
        wanted = expected["bound"]
        for key in wanted:
            assert key in bound, f"{key} should be bound; bound: {sorted(bound)}"
            if isinstance(wanted, dict):
                assert pods[key]["node"] == wanted[key], f"{key} on {pods[key]['node']}"
    if "boundCount" in expected:
        assert len(bound) == expected["boundCount"], sorted(bound)
    for key in expected.get("pending", []):
        assert pods[key]["phase"] == "Pending" and pods[key]["node"] is None, f"{key}: {pods[key]}"
    for key, gpus in expected.get("podGpus", {}).items():
        assert pods[key]["gpus"] == gpus
    for group in expected.get("sameDevice", []):
        devices = [tuple(pods[key]["gpuGroups"]) for key in group]
        assert len(devices[0]) == 1 and len(set(devices)) == 1, devices
    if "sameDeviceCount" in expected:
        shared = Counter(g for pod in pods.values() for g in pod["gpuGroups"])
        assert max(shared.values()) == expected["sameDeviceCount"], shared
    for group in expected.get("apartNodes", []):
        nodes = [pods[key]["node"] for key in group]
        assert None not in nodes and len(set(nodes)) == len(nodes), dict(
            zip(group, nodes, strict=True)
        )
    for node, most in expected.get("gpusPerNodeAtMost", {}).items():
        used = sum(pod["gpus"] for pod in pods.values() if pod["node"] == node)
        assert used <= most, f"{node} holds {used} GPUs"
    for key, wanted in expected.get("podGroups", {}).items():
        actual = document["podGroups"][key]
        for field in ("scheduled", "reasons"):
            if field in wanted:
                assert actual[field] == wanted[field], f"{key}.{field}: {actual}"
        for fragment in wanted.get("messageContains", []):
            assert fragment in actual["message"], f"{key}: {actual['message']!r} lacks {fragment!r}"
    for name, wanted in expected.get("queues", {}).items():
        for section, values in wanted.items():
            for resource, value in values.items():
                assert document["queues"][name][section][resource] == value, (
                    f"queue {name} {section}.{resource}: {document['queues'][name][section]}"
                )


STABLE_ROUNDS = 5


def rounds_to_run(expected: dict[str, Any]) -> int:
    rounds = int(expected.get("rounds", 1))
    if "stableAfterRounds" in expected:
        rounds = max(rounds, int(expected["stableAfterRounds"]) + STABLE_ROUNDS)
    return rounds


def check_rounds(document: dict[str, Any], expected: dict[str, Any]) -> None:
    rounds = document["rounds"]
    for number, round_doc in enumerate(rounds, start=1):
        violations = round_doc["engine"]["validatorViolations"]
        assert violations == 0, f"round {number}: the validator rejected {violations} answers"
    for number, wanted in expected.get("round", {}).items():
        check_round(rounds[int(number) - 1], wanted, int(number))
    if "stableAfterRounds" in expected:
        settled = int(expected["stableAfterRounds"])
        for later in rounds[settled : settled + STABLE_ROUNDS]:
            assert not later["bound"] and not later["evicted"], (
                f"round {later['round']} still changes the cluster: "
                f"bound {later['bound']}, evicted {later['evicted']}"
            )
    evicted_ever = {e["pod"] for r in rounds for e in r["evicted"]}
    for key in expected.get("neverEvicted", []):
        assert key not in evicted_ever, f"{key} was evicted"
    bound_ever = {b["pod"] for r in rounds for b in r["bound"]}
    for key in expected.get("neverBound", []):
        assert key not in bound_ever, f"{key} was bound"
    if expected.get("noEvictions"):
        assert not evicted_ever, sorted(evicted_ever)


def check_round(round_doc: dict[str, Any], wanted: dict[str, Any], number: int) -> None:
    where = f"round {number}"
    evicted = {e["pod"]: e for e in round_doc["evicted"]}
    if "evicted" in wanted:
        actions = {key: e["action"] for key, e in evicted.items()}
        assert actions == wanted["evicted"], f"{where} evicted {actions}"
    if "evictedCount" in wanted:
        assert len(evicted) == wanted["evictedCount"], f"{where} evicted {sorted(evicted)}"
    if "evictedAction" in wanted:
        assert {e["action"] for e in evicted.values()} == {wanted["evictedAction"]}, where
    for key, rule in wanted.get("evictedRules", {}).items():
        assert evicted[key]["rule"] == rule, f"{where} {key}: {evicted[key]}"
    if "evictedRuleCounts" in wanted:
        counts = Counter(e["rule"] for e in evicted.values())
        assert counts == Counter(wanted["evictedRuleCounts"]), f"{where} rules {counts}"
    if "takenBack" in wanted:
        taken = {t["pod"]: t["action"] for t in round_doc["takenBack"]}
        assert taken == wanted["takenBack"], f"{where} took back {taken}"
    pipelined = {p["pod"]: p["node"] for p in round_doc["pipelined"]}
    if "pipelined" in wanted:
        assert sorted(pipelined) == sorted(wanted["pipelined"]), f"{where} pipelined {pipelined}"
    if "pipelinedCount" in wanted:
        assert len(pipelined) == wanted["pipelinedCount"], f"{where} pipelined {pipelined}"
    bound = {b["pod"]: b["node"] for b in round_doc["bound"]}
    if "bound" in wanted:
        assert sorted(bound) == sorted(wanted["bound"]), f"{where} bound {sorted(bound)}"
    if "boundCount" in wanted:
        assert len(bound) == wanted["boundCount"], f"{where} bound {sorted(bound)}"
    for group, stamps in wanted.get("annotations", {}).items():
        written = round_doc["annotations"].get(group, {})
        for key, value in stamps.items():
            assert written.get(key) == value, f"{where} {group} annotations {written}"


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario(path: Path) -> None:
    expected = expectation(path)
    rounds = ("--rounds", str(rounds_to_run(expected)))
    document = simulate_json(path, *rounds)
    check(document, expected)
    check_rounds(document, expected)
    for key, flags in (
        ("greedyOnly", ("--time-limit", "0")),
        ("spread", ("--placement", "spread")),
    ):
        if key in expected:
            variant = simulate_json(path, *flags, "--rounds", str(rounds_to_run(expected[key])))
            check(variant, expected[key])
            check_rounds(variant, expected[key])


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_same_input_same_bytes(path: Path) -> None:
    first = run_simulate(str(path), "-o", "json", "--now", "2026-06-01T00:00:00Z")
    second = run_simulate(str(path), "-o", "json", "--now", "2026-06-01T00:00:00Z")
    assert first.returncode == 0 and first.stdout == second.stdout


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_input_is_rejected_with_one_line_per_problem(path: Path) -> None:
    result = run_simulate(str(path), "-o", "json")
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    for fragments in expectation(path)["lines"]:
        assert any(all(f in line for f in fragments) for line in lines), (fragments, lines)
