"""A JobSet of more Jobs than one PodGroup can hold is refused by field, not built in memory.

Each Job of a JobSet is a sub-group of its PodGroup. The JobSet's replicas may be any int32,
and the live grouper built one sub-group per replica: 2^31 - 1 of them, for every pending
pod of the JobSet, every cycle, until the operator ran out of memory. Past 10,000 Jobs
(a PodGroup of 0.5 MiB; etcd stores no object past 1.5 MiB) the pod's grouping now
fails with an error naming the field, which the operator reports on the pod.
"""

from __future__ import annotations

from typing import Any

import pytest

from kai.api.errors import ManifestError
from kai.grouping import plan_pod_group, resolve_owner_chain
from kai.grouping.plan import PodGroupPlan
from kai.workloads.expansion import expand_workload
from tests.unit.grouping.test_grouping_rules import CLASSES, REGISTRY, obj, template


def _jobset(*replicas: int) -> dict[str, Any]:
    jobs = [
        {"name": f"w{i}", "replicas": count, "template": {"spec": {"template": template()}}}
        for i, count in enumerate(replicas)
    ]
    return obj("jobset.x-k8s.io/v1alpha2", "JobSet", "js", {"replicatedJobs": jobs})


def _plan(*replicas: int) -> PodGroupPlan | None:
    """The first pod's plan, the JobSet edited to `replicas` after one Job each was made."""
    jobset = _jobset(*(1 for _ in replicas))
    objects = expand_workload(jobset, REGISTRY)
    pod = next(item for item in objects if item["kind"] == "Pod")
    for replicated, count in zip(jobset["spec"]["replicatedJobs"], replicas, strict=True):
        replicated["replicas"] = count
    return plan_pod_group(pod, resolve_owner_chain(pod, [jobset, *objects]), REGISTRY, CLASSES)


def test_a_jobset_of_more_jobs_than_a_pod_group_holds_is_refused_by_its_replicas() -> None:
    """10,001 stands for 2^31 - 1: the same refusal, and a regression fails here at once
    instead of filling this process's memory."""
    with pytest.raises(ManifestError) as raised:
        _plan(10_001)
    assert str(raised.value) == (
        "JobSet ns/js: spec.replicatedJobs[0].replicas: 10,001 more Jobs would take the"
        " JobSet past 10,000, the sub-groups kai writes in one PodGroup"
    )


def test_the_bound_counts_the_jobs_of_every_replicated_job() -> None:
    plan = _plan(4_000, 6_000)
    assert plan is not None
    assert len(plan.manifest["spec"]["subGroups"]) == 2 + 10_000  # a parent per replicatedJob
    with pytest.raises(ManifestError, match=r"spec\.replicatedJobs\[1\]\.replicas: 6,001 more"):
        _plan(4_000, 6_001)
