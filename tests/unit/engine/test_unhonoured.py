"""A pod with a requirement kai cannot honour yet waits, told why; kai never places it by guess.

kai bound a pod with DRA claims it never allocated (the pod never started), and read an
inter-pod term that selects namespaces by their labels, which kai does not read, as no
term. (MIG slices waited too until kai placed them: `test_mig.py`.) Now the parser records
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
SELECTED_NAMESPACES = f"spec.affinity.podAntiAffinity.{REQUIRED}[1].namespaceSelector"
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
    ("affinity", "field"),
    [
        (None, None),
        ({"podAntiAffinity": {REQUIRED: [TERM, BY_NAMESPACE_LABEL]}}, SELECTED_NAMESPACES),
        (
            {"podAffinity": {REQUIRED: [BY_NAMESPACE_LABEL]}},
            f"spec.affinity.podAffinity.{REQUIRED}[0].namespaceSelector",
        ),
        # kai keeps these (`kai.engine.pod_affinity`): an empty namespace selector is every
        # namespace, and names need no namespace labels.
        ({"podAntiAffinity": {REQUIRED: [TERM, EVERY_NAMESPACE]}}, None),
        ({"podAffinity": {REQUIRED: [{**TERM, "namespaces": ["a", "b"]}]}}, None),
        ({"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [ZONE_TERM]}}}, None),
    ],
)
def test_the_parser_records_a_term_that_selects_namespaces_by_their_labels(
    affinity: dict[str, Any] | None, field: str | None
) -> None:
    assert parse_pod(_manifest(affinity), "default/pg").unhonoured == field
    warnings = pod_admission_warnings(_manifest(affinity))
    assert [warning.split(": ")[0] for warning in warnings] == ([field] if field else [])


def test_dra_resource_claims_are_recorded_and_warned_of() -> None:
    """A pod bound with its claims unallocated never starts: kai, which does not allocate
    them, leaves it pending."""
    claims = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    manifest = _manifest(
        {"podAntiAffinity": {REQUIRED: [BY_NAMESPACE_LABEL]}}, resourceClaims=claims
    )
    assert parse_pod(manifest, "default/pg").unhonoured == "spec.resourceClaims"
    [warning] = pod_admission_warnings(manifest)
    assert warning.startswith("spec.resourceClaims: kai does not allocate DRA resource claims")


def test_an_unreadable_affinity_gets_no_warning_the_api_server_refuses_it() -> None:
    assert pod_admission_warnings(_manifest({"podAntiAffinity": {REQUIRED: ["x"]}})) == []


def _apart(key_pod: Pod) -> Pod:
    return dataclasses.replace(key_pod, unhonoured=SELECTED_NAMESPACES)


def test_the_gang_waits_told_why_and_others_are_placed() -> None:
    """Two 1-GPU replicas, one with the term; a third pod. One node of 2 GPUs."""
    snap = snapshot(
        [node("n", gpus=2)],
        [_apart(pod("web-0", "web", 1)), pod("web-1", "web", 1), pod("other-0", "other", 1)],
        [group("web", "q", min_member=2), group("other", "q")],
        [queue("q")],
    )
    result = run_cycle(snap, EngineConfig(time_limit_seconds=0))
    web = result.groups["ns/web"]
    assert (web.scheduled, web.reason) == (False, UNHONOURED_CONSTRAINT)
    assert web.message.startswith(
        f"pod ns/web-0: {SELECTED_NAMESPACES}: kai does not read namespaces' labels"
    )
    assert [binding.pod for binding in result.bindings] == ["ns/other-0"]


def test_a_running_gang_keeps_running_while_its_pod_with_the_term_waits() -> None:
    snap = snapshot(
        [node("n", gpus=4)],
        [pod("el-0", "el", 1, node_name="n"), _apart(pod("el-1", "el", 1))],
        [group("el", "q", min_member=1)],
        [queue("q")],
    )
    result = run_cycle(snap, EngineConfig(time_limit_seconds=0))
    decision = result.groups["ns/el"]
    assert (decision.scheduled, decision.reason) == (True, UNHONOURED_CONSTRAINT)
    assert decision.message.startswith("the gang runs; pod ns/el-1: ")
    assert result.bindings == ()


def test_a_running_pod_with_the_term_is_counted_and_never_moved() -> None:
    """n0 is full with a's pod beside b's; n1 runs c's; a 2-GPU pod waits. Consolidation
    could move a's pod to free n0, but it would re-place it by node predicates alone: with
    the term, a's pod is no victim consolidation may take."""

    def movable(term: bool) -> list[str]:
        first = pod("a-0", "a", 1, node_name="n0")
        snap = snapshot(
            [node("n0", gpus=2), node("n1", gpus=2)],
            [
                _apart(first) if term else first,
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

    assert "ns/a" in movable(term=False)
    assert "ns/a" not in movable(term=True)


def test_the_validator_refuses_an_answer_that_places_a_pod_with_the_term() -> None:
    snap = snapshot(
        [node("n", gpus=1)], [_apart(pod("web-0", "web", 1))], [group("web", "q")], [queue("q")]
    )
    problems = validate(snap, [ProposedBinding("ns/web-0", "n", ())])
    assert problems == [f"pod ns/web-0 is bound with {SELECTED_NAMESPACES}, which kai cannot keep"]
