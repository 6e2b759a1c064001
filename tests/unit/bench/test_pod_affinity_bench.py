"""`bench/pod_affinity.py` builds replicas that already run apart, and catches an answer that is not."""

from __future__ import annotations

import dataclasses
import json
from fractions import Fraction

import pytest

from bench.pod_affinity import main, replicas_apart, sharing
from kai.engine.cycle import Binding, run_cycle
from kai.engine.model import EngineConfig


def test_the_running_replicas_start_apart_and_the_burst_is_placed_apart() -> None:
    snap = replicas_apart(nodes=4, running=6, pending=4, apps=2, terms=True)
    result = run_cycle(snap, EngineConfig(time_limit_seconds=0))
    assert sharing(snap, dataclasses.replace(result, bindings=())) == 0
    assert len(result.bindings) == 2  # two applications, four nodes: each has one node left
    assert sharing(snap, result) == 0
    app_of = {p.key: dict(p.labels)["app"] for p in snap.pods}
    pending = result.bindings[0].pod
    taken = next(p.node for p in snap.pods if p.node and app_of[p.key] == app_of[pending])
    beside = Binding(pending, taken, Fraction(1), ())  # on a node its application runs on
    assert sharing(snap, dataclasses.replace(result, bindings=(beside,))) == 1


def test_the_report_compares_the_cycle_with_and_without_the_terms(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--nodes", "4", "--running", "6", "--pending", "4", "--apps", "2", "--runs", "1"]
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["withTerms"]["bound"], report["withoutTerms"]["bound"]) == (2, 4)


def test_preferences_keep_the_replicas_apart_where_there_is_room_and_are_counted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Four nodes, two applications of three replicas running; four pending. With the
    terms preferred, each pending replica goes to the one node its application is not on
    while it has room, and the rest share; without them, bin-packing stacks them."""
    argv = ["--nodes", "4", "--running", "6", "--pending", "4", "--apps", "2", "--runs", "1"]
    assert main([*argv, "--preferred", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["preferred"] is True
    assert (report["withTerms"]["bound"], report["withoutTerms"]["bound"]) == (4, 4)
    assert report["withTerms"]["sharingANode"] == 2
    assert report["withoutTerms"]["sharingANode"] > 2
