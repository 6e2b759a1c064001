"""The pod grouper, rule by rule (kai-semantics §4.4, §14.2-§14.5)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from kai.api.constants import default_priority_classes
from kai.api.errors import ManifestError
from kai.grouping import GroupingError, PodGroupPlan, plan_pod_group, resolve_owner_chain
from kai.workloads.catalog import catalog_registry
from kai.workloads.expansion import expand_workload
from kai.workloads.jqeval import JqEvaluator
from kai.workloads.loader import load_definition
from kai.workloads.registry import DefinitionRegistry

REGISTRY = catalog_registry()
CLASSES = default_priority_classes()
CONTAINER = {"name": "main", "resources": {"requests": {"nvidia.com/gpu": "1"}}}


def template(**metadata: Any) -> dict[str, Any]:
    return {
        "metadata": metadata,
        "spec": {"schedulerName": "kai-scheduler", "containers": [CONTAINER]},
    }


def obj(
    api_version: str, kind: str, name: str, spec: dict[str, Any], **metadata: Any
) -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "uid": f"uid-{name}", **metadata}
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec}


def plans(workload: dict[str, Any], registry: DefinitionRegistry = REGISTRY) -> list[PodGroupPlan]:
    objects = expand_workload(workload, registry)
    known = [workload, *objects]
    result = []
    for pod in (o for o in objects if o["kind"] == "Pod"):
        plan = plan_pod_group(pod, resolve_owner_chain(pod, known), registry, CLASSES)
        assert plan is not None
        result.append(plan)
    return result


def spec(plan: PodGroupPlan) -> dict[str, Any]:
    value: dict[str, Any] = plan.manifest["spec"]
    return value


def test_default_grouper_names_the_group_after_the_top_owner() -> None:
    sts = obj("apps/v1", "StatefulSet", "db", {"replicas": 2, "template": template()})
    first, second = plans(sts)
    assert first.name == second.name == "pg-db-uid-db"
    assert spec(first) == {"queue": "default-queue", "priorityClassName": "train", "minMember": 1}
    metadata = first.manifest["metadata"]
    assert metadata["ownerReferences"] == [
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "uid-db"}
    ]
    owner = yaml.safe_load(metadata["annotations"]["kai.scheduler/top-owner-metadata"])
    assert owner == {
        "group": "apps",
        "version": "v1",
        "kind": "StatefulSet",
        "name": "db",
        "uid": "uid-db",
    }
    assert first.pod_annotations == {"pod-group-name": "pg-db-uid-db"}
    assert first.pod_labels == {}


def test_queue_resolution_order() -> None:
    pod = obj("v1", "Pod", "p", template()["spec"], labels={"kai.scheduler/queue": "pod-queue"})
    owner = obj("batch/v1", "Job", "j", {}, labels={"kai.scheduler/queue": "owner-queue"})
    assert (
        spec(plan_pod_group(pod, [owner], REGISTRY, CLASSES) or pytest.fail())["queue"]
        == "owner-queue"
    )
    assert spec(plan_pod_group(pod, [], REGISTRY, CLASSES) or pytest.fail())["queue"] == "pod-queue"
    project_pod = obj(
        "v1",
        "Pod",
        "q",
        template()["spec"],
        labels={"project": "research", "kai.scheduler/node-pool": "a100"},
    )
    planned = plan_pod_group(project_pod, [], REGISTRY, CLASSES) or pytest.fail()
    assert spec(planned)["queue"] == "research-a100"
    assert planned.manifest["metadata"]["labels"]["kai.scheduler/node-pool"] == "a100"


def test_the_owners_node_pool_wins_over_the_pods_as_in_kai() -> None:
    """KAI's addNodePoolLabel copies the pod's pool only when the top owner has none."""
    pod = obj("v1", "Pod", "p", template()["spec"], labels={"kai.scheduler/node-pool": "pod-pool"})
    owner = obj("batch/v1", "Job", "j", {}, labels={"kai.scheduler/node-pool": "owner-pool"})
    planned = plan_pod_group(pod, [owner], REGISTRY, CLASSES) or pytest.fail()
    assert planned.manifest["metadata"]["labels"]["kai.scheduler/node-pool"] == "owner-pool"
    unlabelled = obj("batch/v1", "Job", "j", {})
    planned = plan_pod_group(pod, [unlabelled], REGISTRY, CLASSES) or pytest.fail()
    assert planned.manifest["metadata"]["labels"]["kai.scheduler/node-pool"] == "pod-pool"


def test_the_configured_node_pool_label_is_the_one_copied_as_kai_nodepoollabelkey() -> None:
    """`--node-pool-label example.com/pool`: that label goes onto the group and into a
    project queue's name; the default key is then an ordinary label."""
    key = "example.com/pool"
    labels = {"project": "research", key: "a100", "kai.scheduler/node-pool": "other"}
    pod = obj("v1", "Pod", "p", template()["spec"], labels=labels)
    planned = plan_pod_group(pod, [], REGISTRY, CLASSES, key) or pytest.fail()
    assert planned.manifest["metadata"]["labels"][key] == "a100"
    assert spec(planned)["queue"] == "research-a100"
    owner = obj("batch/v1", "Job", "j", {}, labels={key: "owner-pool"})
    planned = plan_pod_group(pod, [owner], REGISTRY, CLASSES, key) or pytest.fail()
    assert planned.manifest["metadata"]["labels"] == {key: "owner-pool"}  # not the default key
    unlabelled = obj("batch/v1", "Job", "j", {})
    planned = plan_pod_group(pod, [unlabelled], REGISTRY, CLASSES, key) or pytest.fail()
    assert planned.manifest["metadata"]["labels"] == {key: "a100"}


def test_priority_and_preemptibility_resolution() -> None:
    pod_spec = {**template()["spec"], "priorityClassName": "build"}
    pod = obj("v1", "Pod", "p", pod_spec, labels={"kai.scheduler/preemptibility": "preemptible"})
    planned = plan_pod_group(pod, [], REGISTRY, CLASSES) or pytest.fail()
    assert (spec(planned)["priorityClassName"], spec(planned)["preemptibility"]) == (
        "build",
        "preemptible",
    )
    unknown = obj("v1", "Pod", "u", {**template()["spec"], "priorityClassName": "no-such-class"})
    assert (
        spec(plan_pod_group(unknown, [], REGISTRY, CLASSES) or pytest.fail())["priorityClassName"]
        == "train"
    )
    owner = obj("batch/v1", "Job", "j", {}, labels={"priorityClassName": "inference"})
    assert (
        spec(plan_pod_group(pod, [owner], REGISTRY, CLASSES) or pytest.fail())["priorityClassName"]
        == "inference"
    )


def test_skip_podgrouper_annotation_on_pod_or_owner() -> None:
    pod = obj(
        "v1", "Pod", "p", template()["spec"], annotations={"kai.scheduler/skip-podgrouper": "true"}
    )
    assert plan_pod_group(pod, [], REGISTRY, CLASSES) is None
    plain = obj("v1", "Pod", "q", template()["spec"])
    owner = obj("batch/v1", "Job", "j", {}, annotations={"kai.scheduler/skip-podgrouper": "true"})
    assert plan_pod_group(plain, [owner], REGISTRY, CLASSES) is None


def test_deployment_pods_are_grouped_one_by_one_as_inference() -> None:
    deploy = obj("apps/v1", "Deployment", "web", {"replicas": 2, "template": template()})
    first, second = plans(deploy)
    assert first.name != second.name
    assert first.name.startswith("pg-web-")
    assert spec(first)["priorityClassName"] == "inference"
    assert spec(first)["minMember"] == 1


def test_job_batch_min_member_and_cronjob_delegation() -> None:
    job = obj(
        "batch/v1",
        "Job",
        "j",
        {"parallelism": 4, "template": template()},
        annotations={"kai.scheduler/batch-min-member": "3"},
    )
    assert {(p.name, spec(p)["minMember"]) for p in plans(job)} == {("pg-j-uid-j", 3)}
    cron = obj(
        "batch/v1",
        "CronJob",
        "c",
        {"jobTemplate": {"spec": {"parallelism": 2, "template": template()}}},
    )
    cron_plans = plans(cron)
    assert len({p.name for p in cron_plans}) == 1
    assert cron_plans[0].manifest["metadata"]["ownerReferences"][0]["kind"] == "Job"
    bad = obj(
        "batch/v1",
        "Job",
        "b",
        {"template": template()},
        annotations={"kai.scheduler/batch-min-member": "x"},
    )
    with pytest.raises(ManifestError, match=r"batch-min-member"):
        plans(bad)


def test_pytorch_min_available_override_and_subgroup_labels() -> None:
    job = obj(
        "kubeflow.org/v1",
        "PyTorchJob",
        "pt",
        {
            "runPolicy": {"schedulingPolicy": {"minAvailable": 2}},
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": template()},
                "Worker": {"replicas": 3, "template": template()},
            },
        },
    )
    planned = plans(job)
    assert {spec(p)["minMember"] for p in planned} == {2}
    assert spec(planned[0])["subGroups"] == [
        {"name": "master", "minMember": 1},
        {"name": "worker", "minMember": 3},
    ]
    assert sorted(p.pod_labels["kai.scheduler/subgroup-name"] for p in planned) == [
        "master",
        "worker",
        "worker",
        "worker",
    ]


def test_xgboost_without_its_mandatory_master_is_an_error_naming_the_field() -> None:
    job = obj(
        "kubeflow.org/v1",
        "XGBoostJob",
        "x",
        {"xgbReplicaSpecs": {"Worker": {"replicas": 2, "template": template()}}},
    )
    with pytest.raises(ManifestError, match=r"spec\.xgbReplicaSpecs\.Master"):
        plans(job)


def test_mpijob_waiting_for_workers_does_not_count_the_launcher_for_workers() -> None:
    job = obj(
        "kubeflow.org/v2beta1",
        "MPIJob",
        "m",
        {
            "launcherCreationPolicy": "WaitForWorkersReady",
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template()},
                "Worker": {"replicas": 2, "template": template()},
            },
        },
    )
    # The launcher pod comes first (its Job precedes the workers): it counts itself, workers do not.
    assert [spec(p)["minMember"] for p in plans(job)] == [3, 2, 2]


def test_ray_priority_label_overrides() -> None:
    cluster = obj(
        "ray.io/v1",
        "RayCluster",
        "r",
        {
            "headGroupSpec": {"template": template()},
            "workerGroupSpecs": [{"groupName": "W", "replicas": 2, "template": template()}],
        },
        labels={"ray.io/priority-class-name": "build"},
    )
    planned = plans(cluster)
    assert {spec(p)["priorityClassName"] for p in planned} == {"build"}
    assert {spec(p)["minMember"] for p in planned} == {3}
    assert sorted(p.pod_labels["kai.scheduler/subgroup-name"] for p in planned) == [
        "head",
        "w",
        "w",
    ]


def test_jobset_in_order_startup_needs_one_replicated_job() -> None:
    jobset = obj(
        "jobset.x-k8s.io/v1alpha2",
        "JobSet",
        "js",
        {
            "startupPolicy": {"startupPolicyOrder": "InOrder"},
            "replicatedJobs": [
                {"name": "driver", "replicas": 1, "template": {"spec": {"template": template()}}},
                {
                    "name": "workers",
                    "replicas": 2,
                    "template": {"spec": {"parallelism": 2, "template": template()}},
                },
            ],
        },
    )
    planned = plans(jobset)
    assert spec(planned[0])["minSubGroup"] == 1
    assert {"name": "workers-1", "minMember": 2, "parent": "workers"} in spec(planned[0])[
        "subGroups"
    ]
    assert sorted(p.pod_labels["kai.scheduler/subgroup-name"] for p in planned) == [
        "driver-0",
        "workers-0",
        "workers-0",
        "workers-1",
        "workers-1",
    ]


def test_leaderworkerset_leader_ready_leader_is_a_gang_of_one() -> None:
    lws = obj(
        "leaderworkerset.x-k8s.io/v1",
        "LeaderWorkerSet",
        "l",
        {
            "replicas": 1,
            "startupPolicy": "LeaderReady",
            "leaderWorkerTemplate": {"size": 3, "workerTemplate": template()},
        },
    )
    sizes = sorted(
        (p.pod_labels["kai.scheduler/subgroup-name"], spec(p)["minMember"]) for p in plans(lws)
    )
    assert sizes == [("leader", 1), ("workers", 3), ("workers", 3)]
    assert {p.name for p in plans(lws)} == {"pg-l-uid-l-group-0"}


def test_spark_pods_group_by_application() -> None:
    labels = {"spark-app-name": "etl", "spark-app-selector": "spark-123"}
    driver = obj("v1", "Pod", "driver", template()["spec"], labels=labels)
    executor = obj("v1", "Pod", "exec-1", template()["spec"], labels=labels)
    executor["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "driver",
            "uid": "uid-driver",
            "controller": True,
        }
    ]
    planned = plan_pod_group(executor, resolve_owner_chain(executor, [driver]), REGISTRY, CLASSES)
    assert planned is not None and planned.name == "spark-123"


def test_skip_top_owner_kind_groups_as_the_owner_below_with_its_labels() -> None:
    trainjob = obj(
        "trainer.kubeflow.org/v1alpha1",
        "TrainJob",
        "tj",
        {},
        labels={"kai.scheduler/queue": "research"},
    )
    jobset = obj(
        "jobset.x-k8s.io/v1alpha2",
        "JobSet",
        "tj",
        {
            "replicatedJobs": [
                {"name": "node", "replicas": 2, "template": {"spec": {"template": template()}}}
            ]
        },
    )
    jobset["metadata"]["uid"] = "uid-jobset"
    jobset["metadata"]["ownerReferences"] = [
        {
            "apiVersion": trainjob["apiVersion"],
            "kind": "TrainJob",
            "name": "tj",
            "uid": "uid-tj",
            "controller": True,
        }
    ]
    objects = expand_workload(jobset, REGISTRY)
    pod = next(o for o in objects if o["kind"] == "Pod")
    chain = resolve_owner_chain(pod, [trainjob, jobset, *objects])
    assert [o["kind"] for o in chain] == ["Job", "JobSet", "TrainJob"]
    planned = plan_pod_group(pod, chain, REGISTRY, CLASSES) or pytest.fail()
    assert spec(planned)["queue"] == "research"
    assert spec(planned)["minSubGroup"] == 1
    assert planned.manifest["metadata"]["ownerReferences"][0]["kind"] == "JobSet"


CUSTOM_DEFINITION = """
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: e2e-example-com-customjob-v1}
spec:
  structureDefinition:
    rootComponent:
      name: customjob
      kind: {group: e2e.example.com, version: v1, kind: CustomJob}
      statusDefinition: {statusMappings: {running: [{byPhase: Running}]}, phaseDefinition: {path: .status.phase}}
    childComponents:
    - name: coordinator
      ownerRef: customjob
      specDefinition: {podTemplateSpecPath: .spec.coordinator.template}
      scaleDefinition: {replicasPath: ".spec.coordinator.replicas // 1"}
      podSelector: {componentTypeSelector: {keyPath: '.metadata.labels["e2e.example.com/role"]', value: coordinator}}
    - name: worker
      ownerRef: customjob
      specDefinition: {podTemplateSpecPath: .spec.worker.template}
      scaleDefinition: {replicasPath: ".spec.worker.replicas // 1"}
      podSelector: {componentTypeSelector: {keyPath: '.metadata.labels["e2e.example.com/role"]', value: worker}}
  optimizationInstructions:
    gangScheduling:
      podGroup:
        name: customjob
        subGroups: [{componentName: coordinator}, {componentName: worker}]
        topology: {topologyName: cluster-topology, requiredTopologyLevel: topology.kubernetes.io/zone}
"""


def custom_registry() -> DefinitionRegistry:
    jq = JqEvaluator()
    return DefinitionRegistry(
        cluster=[load_definition(yaml.safe_load(CUSTOM_DEFINITION), jq, "cluster")], jq=jq
    )


def test_definition_fallback_current_form_with_subgroups_and_topology() -> None:
    custom = obj(
        "e2e.example.com/v1",
        "CustomJob",
        "cj",
        {
            "coordinator": {"template": template()},
            "worker": {"replicas": 3, "template": template()},
        },
    )
    planned = plans(custom, custom_registry())
    assert {p.name for p in planned} == {"pg-uid-cj-customjob"}
    group_spec = spec(planned[0])
    assert group_spec["minSubGroup"] == 2 and "minMember" not in group_spec
    assert group_spec["subGroups"] == [
        {"name": "coordinator", "minMember": 1},
        {"name": "worker", "minMember": 3},
    ]
    assert group_spec["topologyConstraint"] == {
        "topology": "cluster-topology",
        "requiredTopologyLevel": "topology.kubernetes.io/zone",
    }
    assert sorted(p.pod_labels["kai.scheduler/subgroup-name"] for p in planned) == [
        "coordinator",
        "worker",
        "worker",
        "worker",
    ]


def test_definition_fallback_rejects_an_empty_subgroup() -> None:
    custom = obj(
        "e2e.example.com/v1",
        "CustomJob",
        "cj",
        {
            "coordinator": {"template": template()},
            "worker": {"replicas": 0, "template": template()},
        },
    )
    pod = obj("v1", "Pod", "p", template()["spec"], labels={"e2e.example.com/role": "coordinator"})
    with pytest.raises(GroupingError, match=r"sub-group worker .* gang size 0"):
        plan_pod_group(pod, [custom], custom_registry(), CLASSES)


def test_a_type_without_rule_or_definition_gets_the_default_group() -> None:
    unknown = obj("example.com/v1", "Widget", "w", {})
    pod = obj("v1", "Pod", "p", template()["spec"])
    planned = plan_pod_group(pod, [copy.deepcopy(unknown)], REGISTRY, CLASSES) or pytest.fail()
    assert (planned.name, spec(planned)["minMember"]) == ("pg-w-uid-w", 1)


def test_two_controller_owners_is_an_error() -> None:
    pod = obj("v1", "Pod", "p", template()["spec"])
    pod["metadata"]["ownerReferences"] = [
        {"kind": "Job", "name": "a", "uid": "a", "controller": True},
        {"kind": "Job", "name": "b", "uid": "b", "controller": True},
    ]
    with pytest.raises(GroupingError, match="2 owners"):
        resolve_owner_chain(pod, [])


def test_grove_gang_per_replica_needs_each_cliques_min_available() -> None:
    pcs = obj(
        "grove.io/v1alpha1",
        "PodCliqueSet",
        "p",
        {
            "replicas": 2,
            "template": {
                "cliques": [
                    {"name": "prefill", "spec": {"replicas": 2, "podSpec": template()["spec"]}},
                    {
                        "name": "decode",
                        "spec": {"replicas": 3, "minAvailable": 1, "podSpec": template()["spec"]},
                    },
                ]
            },
        },
    )
    planned = plans(pcs)
    # prefill's minAvailable defaults to its replicas (2), decode needs 1: 3 of 5 pods per replica
    assert sorted((p.name, spec(p)["minMember"]) for p in planned) == sorted(
        [("pg-uid-p-p-0", 3)] * 5 + [("pg-uid-p-p-1", 3)] * 5
    )


REPLICATED_DEFINITION = """
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: e2e-example-com-shardset-v1}
spec:
  structureDefinition:
    rootComponent:
      name: shardset
      kind: {group: e2e.example.com, version: v1, kind: ShardSet}
      statusDefinition: {statusMappings: {}}
    childComponents:
    - name: shard
      ownerRef: shardset
      scaleDefinition: {replicasPath: ".spec.shards"}
      podSelector: {replicaSelector: {keyPath: '.metadata.labels["e2e.example.com/shard"]'}}
    - name: server
      ownerRef: shard
      specDefinition: {podTemplateSpecPath: .spec.template}
      scaleDefinition: {replicasPath: ".spec.shards * .spec.serversPerShard"}
"""


def test_expansion_splits_a_components_pods_over_the_replicas_of_its_group() -> None:
    jq = JqEvaluator()
    registry = DefinitionRegistry(
        cluster=[load_definition(yaml.safe_load(REPLICATED_DEFINITION), jq, "cluster")], jq=jq
    )
    shards = obj(
        "e2e.example.com/v1",
        "ShardSet",
        "s",
        {"shards": 2, "serversPerShard": 3, "template": template()},
    )
    pods = [o for o in expand_workload(shards, registry) if o["kind"] == "Pod"]
    # the replica count is the total for the workload: 2 shards x 3 servers, 3 in each shard
    assert [p["metadata"]["labels"]["e2e.example.com/shard"] for p in pods] == [
        "0",
        "0",
        "0",
        "1",
        "1",
        "1",
    ]


def _segmented_pytorch(workers: int, size: str, **worker_annotations: str) -> dict[str, Any]:
    """KAI's getPytorchJobWithSegments: one master, `workers` workers, the segment size on
    the Worker template (pods carry their template's annotations)."""
    annotations = {"kai.scheduler/segment-size": size, **worker_annotations}
    return obj(
        "kubeflow.org/v1",
        "PyTorchJob",
        "pt",
        {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": template()},
                "Worker": {"replicas": workers, "template": template(annotations=annotations)},
            }
        },
    )


def test_pytorch_segments_four_workers_two_per_segment() -> None:
    """TestGetPodGroupMetadata_Segments_HappyFlow_4Workers_2PerSegment: 1 master + 4
    workers; `worker` becomes a parent of two segments; each worker pod is in the segment of
    its replica index over the segment size."""
    planned = plans(_segmented_pytorch(4, "2"))
    assert {spec(p)["minMember"] for p in planned} == {5}
    assert spec(planned[0])["subGroups"] == [
        {"name": "master", "minMember": 1},
        {"name": "worker", "minSubGroup": 2},
        {"name": "worker-0", "minMember": 2, "parent": "worker"},
        {"name": "worker-1", "minMember": 2, "parent": "worker"},
    ]
    labels = [p.pod_labels["kai.scheduler/subgroup-name"] for p in planned]
    assert labels == ["master", "worker-0", "worker-0", "worker-1", "worker-1"]


def test_pytorch_segments_five_workers_end_with_a_partial_segment() -> None:
    """TestGetPodGroupMetadata_Segments_5Workers_2PerSegment: three segments, the last of one."""
    [first, *_] = plans(_segmented_pytorch(5, "2"))
    assert spec(first)["minMember"] == 6
    segments = [s for s in spec(first)["subGroups"] if s.get("parent") == "worker"]
    assert [(s["name"], s["minMember"]) for s in segments] == [
        ("worker-0", 2),
        ("worker-1", 2),
        ("worker-2", 1),
    ]


def test_pytorch_segments_carry_the_segment_topology_constraint() -> None:
    """docs/topology/segments.md, multi-level example: the job pinned to a zone by its own
    annotations, each segment of 4 workers to a rack by the Worker template's."""
    job = _segmented_pytorch(
        16, "4", **{"kai.scheduler/segment-topology-required-placement": "rack"}
    )
    job["metadata"]["annotations"] = {
        "kai.scheduler/topology": "cluster-topology",
        "kai.scheduler/topology-required-placement": "zone",
    }
    [first, *_] = plans(job)
    group = spec(first)
    assert group["topologyConstraint"] == {
        "topology": "cluster-topology",
        "requiredTopologyLevel": "zone",
    }
    segments = [s for s in group["subGroups"] if s.get("parent") == "worker"]
    assert len(segments) == 4
    assert all(
        s["topologyConstraint"] == {"topology": "cluster-topology", "requiredTopologyLevel": "rack"}
        for s in segments
    )


def test_pytorch_elastic_workers_beyond_the_minimum_are_optional_segments() -> None:
    """Segments past the workers minAvailable needs are elastic (minimum 0)."""
    job = _segmented_pytorch(6, "2")
    job["spec"]["runPolicy"] = {"schedulingPolicy": {"minAvailable": 3}}  # master + 2 workers
    [first, *_] = plans(job)
    segments = [s for s in spec(first)["subGroups"] if s.get("parent") == "worker"]
    assert [s["minMember"] for s in segments] == [2, 0, 0]


def test_a_segment_size_that_is_not_a_number_is_an_error_naming_the_annotation() -> None:
    with pytest.raises(ManifestError, match=r"segment-size"):
        plans(_segmented_pytorch(4, "not-a-number"))
