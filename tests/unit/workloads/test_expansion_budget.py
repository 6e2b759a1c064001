"""A workload that asks for more objects than any cluster holds is refused by name.

`kai simulate` and `kai workload describe` expand each workload into the objects its
controllers would create. A Deployment's replicas may be any int32, and a custom
resource whose schema allows anything may ask for 10^12 pods: before the budget the
expansion built them in memory until the process died (a MemoryError after half a
minute, under a 3 GB limit). Each case here fails that way, or with the old loose
reading of counts, on the code before `kai.workloads.budget`.
"""

from __future__ import annotations

from typing import Any

import pytest

from kai.api.errors import ManifestError, ObjectRef
from kai.workloads.budget import MAX_EXPANDED_OBJECTS, ExpansionBudget
from kai.workloads.catalog import catalog_registry
from kai.workloads.expansion import expand_workload
from tests.unit.grouping.test_grouping_rules import obj, template

REGISTRY = catalog_registry()
PAST = "more than kai expands for one workload"


def _refusal(workload: dict[str, Any], limit: int = MAX_EXPANDED_OBJECTS) -> str:
    with pytest.raises(ManifestError) as raised:
        expand_workload(workload, REGISTRY, limit=limit)
    return str(raised.value)


def _pods(workload: dict[str, Any], limit: int = MAX_EXPANDED_OBJECTS) -> int:
    objects = expand_workload(workload, REGISTRY, limit=limit)
    return sum(1 for item in objects if item["kind"] == "Pod")


def test_a_count_far_beyond_any_cluster_is_refused_before_anything_is_made() -> None:
    deployment = obj(
        "apps/v1", "Deployment", "huge", {"replicas": 2**31 - 1, "template": template()}
    )
    assert _refusal(deployment) == (
        f"Deployment ns/huge: spec.replicas: 2,147,483,647 more would take the workload"
        f" past {MAX_EXPANDED_OBJECTS:,} objects, {PAST}"
    )


def test_counts_that_multiply_are_bounded_by_their_product() -> None:
    """Neither count is large; 30 Jobs of 30 pods each are 930 objects, past 500."""
    job = {"parallelism": 30, "template": template()}
    replicated = [{"name": "w", "replicas": 30, "template": {"spec": job}}]
    jobset = obj("jobset.x-k8s.io/v1alpha2", "JobSet", "js", {"replicatedJobs": replicated})
    assert _refusal(jobset, limit=500).startswith(
        "JobSet ns/js: spec.replicatedJobs[0].template.spec.parallelism: 30 more would take"
        " the workload past 500 objects"
    )
    assert _pods(jobset, limit=930) == 900


def test_a_leaderworkerset_counts_its_groups_and_their_workers() -> None:
    spec = {"replicas": 3, "leaderWorkerTemplate": {"size": 4, "workerTemplate": template()}}
    lws = obj("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "lws", spec)
    assert _pods(lws, limit=12) == 12
    assert "spec.leaderWorkerTemplate.size: 3 more would take" in _refusal(lws, limit=11)


def test_the_field_is_named_from_the_workload_root() -> None:
    group = {"groupName": "g", "replicas": 1000, "numOfHosts": 1000, "template": template()}
    cluster_spec = {"headGroupSpec": {"template": template()}, "workerGroupSpecs": [group]}
    rayjob = obj("ray.io/v1", "RayJob", "rj", {"rayClusterSpec": cluster_spec})
    assert "RayJob ns/rj: spec.rayClusterSpec.workerGroupSpecs[0].replicas: 1,000,000 more" in (
        _refusal(rayjob)
    )
    annotated = template(annotations={"autoscaling.knative.dev/min-scale": "5000000"})
    service = obj("serving.knative.dev/v1", "Service", "svc", {"template": annotated})
    assert (
        'spec.template.metadata.annotations["autoscaling.knative.dev/min-scale"]: 5,000,000 more'
        in _refusal(service)
    )


@pytest.mark.parametrize(
    ("value", "shown"), [("many", "'many'"), (-1, "-1"), (1.5, "1.5"), (True, "True")]
)
def test_a_count_that_is_not_a_whole_number_is_refused_by_field(value: Any, shown: str) -> None:
    statefulset = obj("apps/v1", "StatefulSet", "db", {"replicas": value, "template": template()})
    assert _refusal(statefulset) == (
        f"StatefulSet ns/db: spec.replicas: must be a whole number >= 0, got {shown}"
    )


def test_a_count_written_as_a_string_of_digits_is_read() -> None:
    statefulset = obj("apps/v1", "StatefulSet", "db", {"replicas": "3", "template": template()})
    assert _pods(statefulset) == 3


def test_a_workload_map_definition_is_bounded_by_its_scale_program() -> None:
    spec = {"replicas": 10**12, "template": template()["spec"]}
    service = obj("serving.kserve.io/v1alpha1", "LLMInferenceService", "llm", spec)
    assert _refusal(service).startswith(
        "LLMInferenceService ns/llm: .spec.replicas // 1: 1,000,000,000,000 more would take"
    )
    service["spec"]["replicas"] = 2
    assert _pods(service) == 2  # the main component's; the router has no template here


def test_an_infinite_count_from_a_definition_is_refused_not_a_crash() -> None:
    service = obj("serving.kserve.io/v1alpha1", "LLMInferenceService", "llm", {"replicas": "inf"})
    assert "must be a whole number >= 0, got 'inf'" in _refusal(service)


def test_a_budget_is_shared_by_the_views_of_nested_controllers() -> None:
    budget = ExpansionBudget(ObjectRef("JobSet", "ns", "js"), limit=5)
    nested = budget.within("spec.replicatedJobs[0]")
    assert len(budget.spend(3, "spec.x")) == 3
    with pytest.raises(ManifestError, match=r"spec\.replicatedJobs\[0\]\.replicas: 3 more"):
        nested.spend(3, "replicas")
    assert len(nested.spend(2, "replicas")) == 2
