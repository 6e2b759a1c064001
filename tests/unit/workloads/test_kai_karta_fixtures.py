"""KAI-Scheduler's own Karta fixtures through `kai workload describe`, with KAI's expectations.

KAI's pod grouper tests a PyFlow definition under each form of gang instruction, and its e2e
suite groups a CustomJob by its definition (tests/fixtures/workload-map/kai). Each case here
is one of those tests: the object it builds, the instruction it sets, and the PodGroup it
asserts, read from the PodGroups describe plans.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from kai.cli.describe import describe_workload
from kai.workloads.jqeval import JqEvaluator
from kai.workloads.loader import InvalidDefinitionError, load_definition
from kai.workloads.registry import DefinitionRegistry

FIXTURES = Path(__file__).parents[2] / "fixtures" / "workload-map" / "kai"
PYFLOW_UID = "a1b2c3d4-e5f6-7890-abcd-ef1234567890"


def _fixture(name: str) -> dict[str, Any]:
    document = yaml.safe_load((FIXTURES / name).read_text())
    assert isinstance(document, dict)
    return document


def _describe(karta: Mapping[str, Any], obj: Mapping[str, Any]) -> dict[str, Any]:
    jq = JqEvaluator()
    definition = load_definition(dict(karta), jq, "cluster")
    return describe_workload(obj, DefinitionRegistry(cluster=[definition], jq=jq))


def _pyflow(workers: int = 2, *, templates: bool = True) -> dict[str, Any]:
    """getPyFlowObject: one master and two workers.

    KAI's object states replicas only: its grouper is handed a pod and reads the counts. In
    describe, as in upstream's, a component whose template path yields nothing has no pods
    and no gang size (a PyTorchJob without a Master), so the cases give each role the empty
    template KAI's e2e CustomJob carries; `templates=False` is KAI's object as it is.
    """
    roles: dict[str, dict[str, Any]] = {"master": {"replicas": 1}, "worker": {"replicas": workers}}
    if templates:
        for role in roles.values():
            role["template"] = {"spec": {}}
    return {
        "apiVersion": "jobs.example.com/v1",
        "kind": "PyFlow",
        "metadata": {"name": "pyflow-example", "namespace": "test-ns", "uid": PYFLOW_UID},
        "spec": roles,
    }


def _pyflow_karta(gang: Mapping[str, Any]) -> dict[str, Any]:
    karta = copy.deepcopy(_fixture("pyflow-karta.yaml"))
    karta["spec"]["optimizationInstructions"] = {"gangScheduling": dict(gang)}
    return karta


def _sub_groups(group: Mapping[str, Any]) -> list[tuple[str, int]]:
    return [(sub["name"], sub["minMember"]) for sub in group.get("subGroups", [])]


def test_pyflow_without_a_root_status_definition_is_rejected() -> None:
    """Upstream's KartaValidator: "root component must have status definition"."""
    karta = _pyflow_karta({"podGroup": {"name": "training"}})
    del karta["spec"]["structureDefinition"]["rootComponent"]["statusDefinition"]
    with pytest.raises(InvalidDefinitionError, match="statusDefinition"):
        load_definition(karta, JqEvaluator(), "cluster")


def test_pyflow_podgroup_with_subgroups() -> None:
    """TestGetPodGroupMetadata_PodGroupV2: one PodGroup named after the instruction, at least
    both subgroups, master needing 1 pod and worker 2."""
    gang = {
        "podGroup": {
            "name": "training",
            "subGroups": [{"componentName": "master"}, {"componentName": "worker"}],
        }
    }
    [group] = _describe(_pyflow_karta(gang), _pyflow())["podGroups"]
    assert group["name"] == f"pg-{PYFLOW_UID}-training"
    assert group["minSubGroup"] == 2
    assert _sub_groups(group) == [("master", 1), ("worker", 2)]


def test_pyflow_podgroup_without_subgroups() -> None:
    """TestGetPodGroupMetadata_PodGroupV2WithoutSubGroups: with one worker, master and worker
    share one PodGroup of 2 and no subgroups."""
    [group] = _describe(_pyflow_karta({"podGroup": {"name": "training"}}), _pyflow(workers=1))[
        "podGroups"
    ]
    assert group["name"] == f"pg-{PYFLOW_UID}-training"
    assert (group["minMember"], "minSubGroup" in group, _sub_groups(group)) == (2, False, [])


def test_pyflow_podgroup_without_spec_definitions() -> None:
    """TestGetPodGroupMetadata_PodGroupV2DoesNotRequireSpecDefinition: both subgroups stand."""
    karta = _pyflow_karta(
        {
            "podGroup": {
                "name": "training",
                "subGroups": [{"componentName": "master"}, {"componentName": "worker"}],
            }
        }
    )
    for child in karta["spec"]["structureDefinition"]["childComponents"]:
        del child["specDefinition"]
    [group] = _describe(karta, _pyflow(templates=False))["podGroups"]
    assert [name for name, _ in _sub_groups(group)] == ["master", "worker"]


def test_pyflow_podgroup_takes_precedence_over_alpha_podgroups() -> None:
    """TestGetPodGroupMetadata_PodGroupV2TakesPrecedenceOverAlphaPodGroups."""
    gang = {
        "podGroups": [
            {
                "name": "alpha",
                "members": [
                    {"componentName": "pyflow", "groupByKeyPaths": ['.metadata.labels["job-name"]']}
                ],
            }
        ],
        "podGroup": {"name": "v2", "subGroups": [{"componentName": "worker"}]},
    }
    [group] = _describe(_pyflow_karta(gang), _pyflow())["podGroups"]
    assert group["name"] == f"pg-{PYFLOW_UID}-v2"
    assert [name for name, _ in _sub_groups(group)] == ["worker"]
    assert "minSubGroup" in group


def test_pyflow_alpha_podgroups() -> None:
    """TestGetPodGroupMetadata_AlphaPodGroups: the pods sharing a job-name label form one
    PodGroup of 3, without subgroups."""
    gang = {
        "podGroups": [
            {
                "name": "job",
                "members": [
                    {"componentName": "pyflow", "groupByKeyPaths": ['.metadata.labels["job-name"]']}
                ],
            }
        ]
    }
    [group] = _describe(_pyflow_karta(gang), _pyflow())["podGroups"]
    assert (group["minMember"], "minSubGroup" in group, _sub_groups(group)) == (3, False, [])


@pytest.mark.parametrize(("coordinators", "workers"), [(1, 2)])
def test_customjob_groups_by_its_definition(coordinators: int, workers: int) -> None:
    """karta_test.go: no minMember of its own, both subgroups needed, each of its replicas."""
    obj = {
        "apiVersion": "e2e.example.com/v1",
        "kind": "CustomJob",
        "metadata": {"name": "customjob-sample", "namespace": "ns"},
        "spec": {
            "coordinator": {"replicas": coordinators, "template": {"spec": {}}},
            "worker": {"replicas": workers, "template": {"spec": {}}},
        },
    }
    [group] = _describe(_fixture("customjob-karta.yaml"), obj)["podGroups"]
    assert group["minSubGroup"] == 2
    assert _sub_groups(group) == [("coordinator", coordinators), ("worker", workers)]
