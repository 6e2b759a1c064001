"""Loading and validating Karta definitions: each invalid shape is refused, naming its field."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kai.workloads.jqeval import JqEvaluator
from kai.workloads.loader import InvalidDefinitionError, definition_problems, load_definition

BASE: dict[str, Any] = {
    "apiVersion": "run.ai/v1alpha1",
    "kind": "Karta",
    "metadata": {"name": "example-com-trainer-v1"},
    "spec": {
        "structureDefinition": {
            "rootComponent": {
                "name": "trainer",
                "kind": {"group": "example.com", "version": "v1", "kind": "Trainer"},
                "statusDefinition": {
                    "phaseDefinition": {"path": ".status.phase"},
                    "statusMappings": {"running": [{"byPhase": "Running"}]},
                },
                "suspendDefinition": {
                    "suspendActions": [{"path": ".spec.suspend", "value": "true"}],
                    "resumeActions": [{"path": ".spec.suspend", "value": "false"}],
                },
            },
            "childComponents": [
                {
                    "name": "worker",
                    "ownerRef": "trainer",
                    "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "specDefinition": {"podTemplateSpecPath": ".spec.workers[].template"},
                    "scaleDefinition": {"replicasPath": ".spec.workers[].replicas"},
                    "instanceIdPath": ".spec.workers[].name",
                    "podSelector": {
                        "componentTypeSelector": {"matchLabels": {"role": "worker"}},
                        "componentInstanceSelector": {"idPath": '.metadata.labels["group"]'},
                    },
                }
            ],
        },
        "optimizationInstructions": {
            "gangScheduling": {
                "podGroup": {"name": "job", "subGroups": [{"componentName": "worker"}]},
                "podGroups": [
                    {
                        "name": "job",
                        "members": [
                            {
                                "componentName": "worker",
                                "groupByKeyPaths": ['.metadata.labels["group"]'],
                            }
                        ],
                    }
                ],
            }
        },
    },
}


def variant(edit: Any) -> dict[str, Any]:
    document = copy.deepcopy(BASE)
    edit(document)
    return document


def child(document: dict[str, Any]) -> dict[str, Any]:
    component: dict[str, Any] = document["spec"]["structureDefinition"]["childComponents"][0]
    return component


def paths(document: dict[str, Any]) -> list[str]:
    return [problem.path for problem in definition_problems(document, JqEvaluator())]


def test_the_base_definition_is_valid_and_loads_every_section() -> None:
    definition = load_definition(BASE, JqEvaluator())
    assert definition.gvk.api_version == "example.com/v1"
    assert [c.name for c in definition.components] == ["trainer", "worker"]
    worker = definition.component("worker")
    assert worker.owner == "trainer"
    assert worker.pod_selector is not None and worker.pod_selector.instance_id_path
    assert definition.root.suspend is not None
    assert definition.root.suspend.suspend_actions[0].value is True
    assert definition.gang.pod_group is not None
    assert definition.gang.pod_group.sub_groups[0].component == "worker"
    assert definition.gang.pod_groups[0].members[0].group_by_key_paths == (
        '.metadata.labels["group"]',
    )


def test_unknown_parent_component_is_named() -> None:
    document = variant(lambda d: child(d).update(ownerRef="launcher"))
    assert paths(document) == ["spec.structureDefinition.childComponents[0].ownerRef"]
    with pytest.raises(InvalidDefinitionError, match="unknown parent component 'launcher'"):
        load_definition(document, JqEvaluator())


def test_an_ownership_cycle_is_named() -> None:
    def make_cycle(d: dict[str, Any]) -> None:
        children = d["spec"]["structureDefinition"]["childComponents"]
        children.append({"name": "a", "ownerRef": "b"})
        children.append({"name": "b", "ownerRef": "a"})

    problems = definition_problems(variant(make_cycle), JqEvaluator())
    assert {p.path for p in problems} == {
        "spec.structureDefinition.childComponents[1].ownerRef",
        "spec.structureDefinition.childComponents[2].ownerRef",
    }
    assert all("cycle" in p.message for p in problems)


def test_two_spec_modes_are_rejected() -> None:
    document = variant(lambda d: child(d)["specDefinition"].update(podSpecPath=".spec.x"))
    problems = definition_problems(document, JqEvaluator())
    assert [p.path for p in problems] == [
        "spec.structureDefinition.childComponents[0].specDefinition"
    ]
    assert "podTemplateSpecPath, podSpecPath/metadataPath" in problems[0].message


def test_a_writing_jq_expression_is_rejected_at_its_field() -> None:
    document = variant(
        lambda d: child(d)["scaleDefinition"].update(replicasPath=".spec.replicas = 3")
    )
    problems = definition_problems(document, JqEvaluator())
    assert [p.path for p in problems] == [
        "spec.structureDefinition.childComponents[0].scaleDefinition.replicasPath"
    ]
    assert "assignment operator '='" in problems[0].message


def test_a_recursing_jq_expression_is_rejected_at_its_field() -> None:
    document = variant(lambda d: child(d).update(instanceIdPath="[..|.name?][]"))
    problems = definition_problems(document, JqEvaluator())
    assert [p.path for p in problems] == [
        "spec.structureDefinition.childComponents[0].instanceIdPath"
    ]
    assert "'..'" in problems[0].message


def test_instance_id_path_without_its_selector_is_rejected() -> None:
    document = variant(lambda d: child(d)["podSelector"].pop("componentInstanceSelector"))
    problems = definition_problems(document, JqEvaluator())
    assert [p.path for p in problems] == [
        "spec.structureDefinition.childComponents[0].podSelector.componentInstanceSelector"
    ]
    assert "must be set together" in problems[0].message


def test_a_selector_without_instance_id_path_is_rejected() -> None:
    document = variant(lambda d: child(d).pop("instanceIdPath"))
    assert paths(document) == ["spec.structureDefinition.childComponents[0].instanceIdPath"]


def test_root_rules() -> None:
    def break_root(d: dict[str, Any]) -> None:
        root = d["spec"]["structureDefinition"]["rootComponent"]
        root["kind"]["group"] = ""
        root["ownerRef"] = "x"
        del root["statusDefinition"]

    assert set(paths(variant(break_root))) == {
        "spec.structureDefinition.rootComponent.kind.group",
        "spec.structureDefinition.rootComponent.ownerRef",
        "spec.structureDefinition.rootComponent.statusDefinition",
    }


def test_duplicate_names_unknown_gang_members_and_fields_are_all_listed() -> None:
    def break_many(d: dict[str, Any]) -> None:
        d["spec"]["structureDefinition"]["childComponents"].append(
            {"name": "worker", "ownerRef": "trainer", "podTemplatePath": ".x"}
        )
        d["spec"]["optimizationInstructions"]["gangScheduling"]["podGroup"]["subGroups"].append(
            {"componentName": "ghost"}
        )

    assert set(paths(variant(break_many))) == {
        "spec.structureDefinition.childComponents[1].podTemplatePath",
        "spec.structureDefinition.childComponents[1].name",
        "spec.optimizationInstructions.gangScheduling.podGroup.subGroups[1].componentName",
    }


def test_type_selector_cel_rules() -> None:
    def no_key(d: dict[str, Any]) -> None:
        child(d)["podSelector"]["componentTypeSelector"] = {"value": "worker"}

    assert set(paths(variant(no_key))) == {
        "spec.structureDefinition.childComponents[0].podSelector.componentTypeSelector",
        "spec.structureDefinition.childComponents[0].podSelector.componentTypeSelector.value",
    }


def test_suspend_paths_must_be_plain_paths_and_values_json() -> None:
    def break_suspend(d: dict[str, Any]) -> None:
        suspend = d["spec"]["structureDefinition"]["rootComponent"]["suspendDefinition"]
        suspend["suspendActions"] = [{"path": ".spec.suspend | not", "value": "yes"}]

    assert set(paths(variant(break_suspend))) == {
        "spec.structureDefinition.rootComponent.suspendDefinition.suspendActions[0].path",
        "spec.structureDefinition.rootComponent.suspendDefinition.suspendActions[0].value",
    }


def test_a_document_of_another_kind_is_refused() -> None:
    assert set(
        paths({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}, "spec": {}})
    ) >= {
        "apiVersion",
        "kind",
        "spec.structureDefinition",
    }


def test_a_definition_whose_metadata_is_not_a_mapping_is_refused_not_a_crash() -> None:
    document = variant(lambda d: d.update(metadata="example"))
    with pytest.raises(InvalidDefinitionError, match=r"^Karta <unnamed> is invalid: "):
        load_definition(document, JqEvaluator())
