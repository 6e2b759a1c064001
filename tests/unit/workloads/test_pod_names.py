"""The pods `kai simulate` makes for one workload have distinct names, however many there are.

Controllers name pods with a random five-character suffix and retry a name that is taken;
kai's stand-in is a hash of the owner and the pod's index, five hex digits. Within a Job of
2,000 pods such suffixes collide (one time in three already at 1,000), and `kai simulate`
refused the second pod of each pair as "also defined". A taken suffix is now drawn again.
"""

from __future__ import annotations

from typing import Any

import pytest

from kai.workloads.catalog import catalog_registry
from kai.workloads.expansion import expand_workload
from tests.unit.grouping.test_grouping_rules import obj, template

REGISTRY = catalog_registry()
PODS = 2000


def _pod_names(workload: dict[str, Any]) -> list[str]:
    objects = expand_workload(workload, REGISTRY)
    return [item["metadata"]["name"] for item in objects if item["kind"] == "Pod"]


WORKLOADS = {
    "Job": obj("batch/v1", "Job", "sweep", {"parallelism": PODS, "template": template()}),
    "Deployment": obj("apps/v1", "Deployment", "web", {"replicas": PODS, "template": template()}),
    "RayCluster": obj(
        "ray.io/v1",
        "RayCluster",
        "ray",
        {
            "headGroupSpec": {"template": template()},
            "workerGroupSpecs": [{"groupName": "w", "replicas": PODS, "template": template()}],
        },
    ),
    "PodCliqueSet": obj(
        "grove.io/v1alpha1",
        "PodCliqueSet",
        "grove",
        {"template": {"cliques": [{"name": "c", "spec": {"replicas": PODS, "podSpec": {}}}]}},
    ),
}


@pytest.mark.parametrize("kind", sorted(WORKLOADS))
def test_every_pod_of_a_large_workload_has_its_own_name(kind: str) -> None:
    names = _pod_names(WORKLOADS[kind])
    assert len(names) >= PODS
    assert len(set(names)) == len(names)
    assert names == _pod_names(WORKLOADS[kind])  # and the same names every time
