"""PodGroup manifests into engine PodGroups: priority, preemptibility, gang fields, subgroups."""

from __future__ import annotations

from typing import Any

import pytest

from kai.api.errors import ManifestError
from kai.api.parse import default_priority_classes, parse_pod_group
from kai.engine.model import SubGroup, TopologyConstraint

CLASSES = default_priority_classes()


def pod_group(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "team-a"},
        "spec": {"queue": "team-a", **spec},
    }


def error_fields(manifest: dict[str, Any]) -> list[str]:
    with pytest.raises(ManifestError) as caught:
        parse_pod_group(manifest, CLASSES)
    assert str(caught.value).startswith("PodGroup team-a/pg: ")
    return [e.field for e in caught.value.all_errors]


def test_built_in_priority_classes() -> None:
    assert default_priority_classes() == {
        "train": 50,
        "build-preemptible": 75,
        "build": 100,
        "inference": 125,
    }
    # A fresh dict each time: a caller adding the cluster's classes changes no one else's.
    default_priority_classes()["train"] = 1
    assert default_priority_classes()["train"] == 50


@pytest.mark.parametrize(
    ("class_name", "priority", "preemptible"),
    [
        ("train", 50, True),
        ("build-preemptible", 75, True),
        ("build", 100, False),
        ("inference", 125, False),
    ],
)
def test_priority_and_derived_preemptibility(
    class_name: str, priority: int, preemptible: bool
) -> None:
    parsed = parse_pod_group(pod_group(priorityClassName=class_name), CLASSES)
    assert (parsed.priority, parsed.preemptible, parsed.priority_class) == (
        priority,
        preemptible,
        class_name,
    )


def test_no_class_means_priority_50() -> None:
    parsed = parse_pod_group(pod_group(), CLASSES)
    assert (parsed.priority, parsed.preemptible, parsed.priority_class) == (50, True, None)


def test_an_unknown_class_means_priority_50_and_keeps_its_name() -> None:
    parsed = parse_pod_group(pod_group(priorityClassName="urgent"), CLASSES)
    assert (parsed.priority, parsed.priority_class) == (50, "urgent")


def test_classes_come_from_the_given_map() -> None:
    parsed = parse_pod_group(pod_group(priorityClassName="urgent"), {"urgent": 1000})
    assert (parsed.priority, parsed.preemptible) == (1000, False)


@pytest.mark.parametrize(
    ("class_name", "preemptibility", "preemptible"),
    [("inference", "preemptible", True), ("train", "non-preemptible", False), ("build", "", False)],
)
def test_explicit_preemptibility_wins(
    class_name: str, preemptibility: str, preemptible: bool
) -> None:
    parsed = parse_pod_group(
        pod_group(priorityClassName=class_name, preemptibility=preemptibility), CLASSES
    )
    assert parsed.preemptible is preemptible


def test_gang_fields_durations_and_topology() -> None:
    parsed = parse_pod_group(
        pod_group(
            minMember=4,
            preemptionDelay="5m",
            stalenessGracePeriod="-1s",
            schedulingBackoff=-1,
            markUnschedulable=True,
            topologyConstraint={"topology": "cluster", "requiredTopologyLevel": "zone"},
        ),
        CLASSES,
    )
    assert (parsed.key, parsed.queue, parsed.min_member) == ("team-a/pg", "team-a", 4)
    assert parsed.preemption_delay_seconds == 300.0
    assert parsed.staleness_grace_period_seconds == -1.0
    assert parsed.topology == TopologyConstraint("cluster", required_level="zone")


def test_min_member_defaults_to_one_and_to_zero_when_subgroups_are_counted() -> None:
    assert parse_pod_group(pod_group(), CLASSES).min_member == 1
    assert parse_pod_group(pod_group(minMember=0), CLASSES).min_member == 0
    counted = pod_group(minSubGroup=1, subGroups=[{"name": "a", "minMember": 1}])
    assert parse_pod_group(counted, CLASSES).min_member == 0


def test_a_subgroup_tree() -> None:
    parsed = parse_pod_group(
        pod_group(
            minSubGroup=1,
            subGroups=[
                {"name": "replica", "minSubGroup": 2},
                {"name": "leader", "parent": "replica", "minMember": 1},
                {
                    "name": "workers",
                    "parent": "replica",
                    "minMember": 3,
                    "topologyConstraint": {"topology": "cluster", "preferredTopologyLevel": "rack"},
                },
            ],
        ),
        CLASSES,
    )
    assert parsed.min_sub_group == 1
    assert parsed.subgroups == (
        SubGroup("replica", 0, None, min_sub_group=2),
        SubGroup("leader", 1, "replica"),
        SubGroup(
            "workers", 3, "replica", topology=TopologyConstraint("cluster", preferred_level="rack")
        ),
    )


def test_legacy_and_unknown_fields_are_ignored() -> None:
    manifest = pod_group(minMember=2, parallelism=3, completions=4, backoffLimit=1)
    manifest["status"] = {"phase": "Running", "running": 2}
    assert parse_pod_group(manifest, CLASSES).min_member == 2


def test_duplicate_subgroup_names_are_errors() -> None:
    manifest = pod_group(subGroups=[{"name": "w", "minMember": 1}, {"name": "w", "minMember": 2}])
    assert error_fields(manifest) == ["spec.subGroups[0].name", "spec.subGroups[1].name"]


def test_an_unknown_parent_is_an_error() -> None:
    manifest = pod_group(subGroups=[{"name": "w", "minMember": 1, "parent": "nowhere"}])
    assert error_fields(manifest) == ["spec.subGroups[0].parent"]


def test_a_subgroup_cycle_is_an_error_on_each_member() -> None:
    manifest = pod_group(
        subGroups=[
            {"name": "a", "parent": "b", "minSubGroup": 1},
            {"name": "b", "parent": "a", "minSubGroup": 1},
            {"name": "c", "parent": "c", "minSubGroup": 1},
        ]
    )
    with pytest.raises(ManifestError) as caught:
        parse_pod_group(manifest, CLASSES)
    cycle_errors = [e for e in caught.value.all_errors if "cycle" in e.message]
    assert [(e.field, e.message) for e in cycle_errors] == [
        ("spec.subGroups[0].parent", "subgroups form a cycle: a -> b -> a"),
        ("spec.subGroups[1].parent", "subgroups form a cycle: a -> b -> a"),
        ("spec.subGroups[2].parent", "subgroups form a cycle: c -> c"),
    ]


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (
            {"minMember": 2, "minSubGroup": 1, "subGroups": [{"name": "a", "minMember": 1}]},
            "spec.minSubGroup",
        ),
        ({"minSubGroup": 2, "subGroups": [{"name": "a", "minMember": 1}]}, "spec.minSubGroup"),
        ({"minSubGroup": 1}, "spec.minSubGroup"),
        ({"subGroups": [{"name": "a"}]}, "spec.subGroups[0].minMember"),
        (
            {"subGroups": [{"name": "a", "minMember": 1, "minSubGroup": 1}]},
            "spec.subGroups[0].minSubGroup",
        ),
        (
            {
                "subGroups": [
                    {"name": "p", "minMember": 2},
                    {"name": "c", "parent": "p", "minMember": 1},
                ]
            },
            "spec.subGroups[0].minMember",
        ),
        ({"subGroups": [{"name": "Bad_Name", "minMember": 1}]}, "spec.subGroups[0].name"),
        ({"minMember": -1}, "spec.minMember"),
        ({"schedulingBackoff": 2}, "spec.schedulingBackoff"),
        ({"preemptibility": "sometimes"}, "spec.preemptibility"),
        ({"preemptionDelay": "-5s"}, "spec.preemptionDelay"),
        ({"stalenessGracePeriod": "a while"}, "spec.stalenessGracePeriod"),
        (
            {"topologyConstraint": {"requiredTopologyLevel": "zone"}},
            "spec.topologyConstraint.topology",
        ),
    ],
)
def test_spec_errors_name_the_field(spec: dict[str, Any], field: str) -> None:
    assert error_fields(pod_group(**spec)) == [field]
