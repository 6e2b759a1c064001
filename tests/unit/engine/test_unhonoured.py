"""A pod with a requirement kai cannot honour yet waits, told why; kai never places it by guess.

kai bound a pod with DRA claims it never allocated (the pod never started). (Inter-pod
terms that select namespaces by their labels waited too until kai read the namespaces:
`test_namespace_selectors.py`; MIG slices until kai placed them: `test_mig.py`.) Now the
parser records
the field (`kai.api.unhonoured`), the cycle leaves the gang pending with
`UnhonouredConstraint` (`kai.engine.unhonoured`), consolidation does not move a running
pod that has one, the validator refuses an answer that places one, and the admission
webhook warns.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kai.api.admission import pod_admission_warnings
from kai.api.parse import parse_pod
from kai.engine.cycle import run_cycle
from kai.engine.evictions.decisions import Action
from kai.engine.evictions.rules import victim_options
from kai.engine.model import EngineConfig, Pod
from kai.engine.unhonoured import UNHONOURED_CONSTRAINT
from kai.engine.validator import ProposedBinding, validate
from tests.unit.engine.builders import group, node, pod, queue, snapshot
from tests.unit.evictions.helpers import eviction_state, preemptor

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
CLAIMS = "spec.resourceClaims"
DRA = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
ZONE_TERM = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
TERM = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
BY_NAMESPACE_LABEL = {**TERM, "namespaceSelector": {"matchLabels": {"team": "a"}}}
EVERY_NAMESPACE = {**TERM, "namespaceSelector": {}}


def _manifest(affinity: dict[str, Any] | None, **more: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": "kai-scheduler", "containers": [{"name": "c"}]}
    if affinity is not None:
        spec["affinity"] = affinity
    spec.update(more)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


@pytest.mark.parametrize(
    "affinity",
    [
        None,
        # kai keeps these (`kai.engine.pod_affinity`): a namespace selector with labels is
        # read against the namespaces (`kai.api.namespaces`), an empty one is every
        # namespace, and names need no namespace labels.
        {"podAntiAffinity": {REQUIRED: [TERM, BY_NAMESPACE_LABEL]}},
        {"podAffinity": {REQUIRED: [BY_NAMESPACE_LABEL]}},
        {"podAntiAffinity": {REQUIRED: [TERM, EVERY_NAMESPACE]}},
        {"podAffinity": {REQUIRED: [{**TERM, "namespaces": ["a", "b"]}]}},
        {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [ZONE_TERM]}}},
    ],
)
def test_affinity_kai_keeps_is_neither_recorded_nor_warned_of(
    affinity: dict[str, Any] | None,
) -> None:
    assert parse_pod(_manifest(affinity), "default/pg").unhonoured is None
    assert pod_admission_warnings(_manifest(affinity)) == []


def test_dra_resource_claims_are_recorded_and_warned_of() -> None:
    """A pod bound with its claims unallocated never starts: kai, which does not allocate
    them, leaves it pending."""
    manifest = _manifest({"podAntiAffinity": {REQUIRED: [BY_NAMESPACE_LABEL]}}, resourceClaims=DRA)
    assert parse_pod(manifest, "default/pg").unhonoured == CLAIMS
    [warning] = pod_admission_warnings(manifest)
    assert warning.startswith(f"{CLAIMS}: kai does not allocate DRA resource claims")


def test_an_unreadable_affinity_gets_no_warning_the_api_server_refuses_it() -> None:
    assert pod_admission_warnings(_manifest({"podAntiAffinity": {REQUIRED: ["x"]}})) == []


def _claiming(key_pod: Pod) -> Pod:
    return dataclasses.replace(key_pod, unhonoured=CLAIMS)


def test_the_gang_waits_told_why_and_others_are_placed() -> None:
    """Two 1-GPU replicas, one with DRA claims; a third pod. One node of 2 GPUs."""
    snap = snapshot(
        [node("n", gpus=2)],
        [_claiming(pod("web-0", "web", 1)), pod("web-1", "web", 1), pod("other-0", "other", 1)],
        [group("web", "q", min_member=2), group("other", "q")],
        [queue("q")],
    )
    result = run_cycle(snap, EngineConfig(time_limit_seconds=0))
    web = result.groups["ns/web"]
    assert (web.scheduled, web.reason) == (False, UNHONOURED_CONSTRAINT)
    assert web.message.startswith(f"pod ns/web-0: {CLAIMS}: kai does not allocate DRA")
    assert [binding.pod for binding in result.bindings] == ["ns/other-0"]


def test_a_running_gang_keeps_running_while_its_pod_with_dra_claims_waits() -> None:
    snap = snapshot(
        [node("n", gpus=4)],
        [pod("el-0", "el", 1, node_name="n"), _claiming(pod("el-1", "el", 1))],
        [group("el", "q", min_member=1)],
        [queue("q")],
    )
    result = run_cycle(snap, EngineConfig(time_limit_seconds=0))
    decision = result.groups["ns/el"]
    assert (decision.scheduled, decision.reason) == (True, UNHONOURED_CONSTRAINT)
    assert decision.message.startswith("the gang runs; pod ns/el-1: ")
    assert result.bindings == ()


def test_a_running_pod_with_dra_claims_is_counted_and_never_moved() -> None:
    """n0 is full with a's pod beside b's; n1 runs c's; a 2-GPU pod waits. Consolidation
    could move a's pod to free n0, but it would re-place it by node predicates alone: with
    its claims, a's pod is no victim consolidation may take."""

    def movable(claims: bool) -> list[str]:
        first = pod("a-0", "a", 1, node_name="n0")
        snap = snapshot(
            [node("n0", gpus=2), node("n1", gpus=2)],
            [
                _claiming(first) if claims else first,
                pod("b-0", "b", 1, node_name="n0"),
                pod("c-0", "c", 1, node_name="n1"),
                pod("wide-0", "wide", 2),
            ],
            [group("a", "q"), group("b", "q"), group("c", "q"), group("wide", "q")],
            [queue("q")],
        )
        state = eviction_state(snap)
        options = victim_options(state, Action.CONSOLIDATE, preemptor(state, "ns/wide"))
        return sorted(option.gang.key for option in options)

    assert "ns/a" in movable(claims=False)
    assert "ns/a" not in movable(claims=True)


def test_the_validator_refuses_an_answer_that_places_a_pod_with_dra_claims() -> None:
    snap = snapshot(
        [node("n", gpus=1)], [_claiming(pod("web-0", "web", 1))], [group("web", "q")], [queue("q")]
    )
    problems = validate(snap, [ProposedBinding("ns/web-0", "n", ())])
    assert problems == [f"pod ns/web-0 is bound with {CLAIMS}, which kai cannot keep"]
