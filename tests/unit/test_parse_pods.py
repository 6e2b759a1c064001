"""Pod manifests into engine Pods: effective requests, GPU asks, phases, placement and labels."""

from __future__ import annotations

from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import pytest
import yaml

from kai.api.errors import ManifestError
from kai.api.parse import parse_pod
from kai.api.pods import annotated_pod_group_key, gpu_groups
from kai.engine.model import GpuRequest, PodPhase, Requirement, Toleration

GIB = 1024**3
MIB = 1024**2


def container(name: str = "main", **requests: Any) -> dict[str, Any]:
    return {"name": name, "resources": {"requests": dict(requests)}}


def pod(
    *,
    containers: list[dict[str, Any]] | None = None,
    spec: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "team-a",
            "annotations": annotations or {},
            "labels": labels or {},
            **(metadata or {}),
        },
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": containers if containers is not None else [container(cpu="1")],
            **(spec or {}),
        },
        "status": status or {},
    }


def parse_error(manifest: dict[str, Any]) -> ManifestError:
    with pytest.raises(ManifestError) as caught:
        parse_pod(manifest, "team-a/pg")
    return caught.value


def fields(error: ManifestError) -> list[str]:
    return [e.field for e in error.all_errors]


# --- effective requests -------------------------------------------------------------------


def test_regular_containers_add_up() -> None:
    parsed = parse_pod(
        pod(
            containers=[
                container(cpu="1", memory="1Gi"),
                container("b", cpu="500m", memory="512Mi"),
            ]
        ),
        "team-a/pg",
    )
    assert parsed.request.cpu == 1500
    assert parsed.request.memory == GIB + 512 * MIB


def test_a_classic_init_container_counts_only_when_it_is_the_largest_phase() -> None:
    manifest = pod(
        containers=[container(cpu="1", memory="1Gi")],
        spec={"initContainers": [container("init", cpu="3", memory="100Mi")]},
    )
    parsed = parse_pod(manifest, "team-a/pg")
    assert parsed.request.cpu == 3000  # init phase is larger on cpu
    assert parsed.request.memory == GIB  # running phase is larger on memory


def test_sidecars_add_to_the_running_pod_and_to_init_containers_started_after_them() -> None:
    # The sidecar starts first and keeps running, so the classic init container that
    # follows runs beside it (2 + 1), and the main container too (1 + 1). KEP-753.
    manifest = pod(
        containers=[container(cpu="1")],
        spec={
            "initContainers": [
                {**container("sidecar", cpu="1"), "restartPolicy": "Always"},
                container("migrate", cpu="2"),
            ]
        },
    )
    assert parse_pod(manifest, "team-a/pg").request.cpu == 3000


def test_a_sidecar_started_after_a_classic_init_container_does_not_run_beside_it() -> None:
    manifest = pod(
        containers=[container(cpu="500m")],
        spec={
            "initContainers": [
                container("migrate", cpu="2"),
                {**container("sidecar", cpu="1"), "restartPolicy": "Always"},
            ]
        },
    )
    # init phase: max(2, 1) = 2; running: 0.5 + 1 = 1.5.
    assert parse_pod(manifest, "team-a/pg").request.cpu == 2000


def test_overhead_is_added_and_limits_stand_in_for_missing_requests() -> None:
    manifest = pod(
        containers=[
            {"name": "a", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}},
            {"name": "b", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}}},
        ],
        spec={"overhead": {"cpu": "250m", "memory": "64Mi"}},
    )
    parsed = parse_pod(manifest, "team-a/pg")
    assert parsed.request.cpu == 2000 + 100 + 250
    assert parsed.request.memory == GIB + 64 * MIB


def test_scalar_requests_follow_the_same_phases_rounded_up() -> None:
    """An RDMA device asked by the main container and by a sidecar; a classic init container
    asking for more scratch space than the rest; hugepages at the pod's level."""
    manifest = pod(
        containers=[
            {"name": "main", "resources": {"limits": {"rdma/hca": "1", "nvidia.com/gpu": "1"}}},
        ],
        spec={
            "initContainers": [
                container("fetch", **{"ephemeral-storage": "20Gi"}),
                {**container("relay", **{"rdma/hca": "1"}), "restartPolicy": "Always"},
            ],
            "resources": {"requests": {"hugepages-2Mi": "4Mi"}},
            "overhead": {"example.com/sandbox": "0.0001"},
        },
    )
    assert parse_pod(manifest, "team-a/pg").scalars == (
        ("ephemeral-storage", 20 * GIB * 1000),
        ("example.com/sandbox", 1),
        ("hugepages-2Mi", 4 * MIB * 1000),
        ("rdma/hca", 2000),
    )


def test_an_extended_resource_is_whole_and_not_overcommitted_as_the_api_server_says() -> None:
    error = parse_error(
        pod(
            containers=[
                {
                    "name": "main",
                    "resources": {
                        "requests": {"rdma/hca": "2", "example.com/slice": "1500m"},
                        "limits": {"rdma/hca": "1", "example.com/slice": "1500m"},
                    },
                },
                {
                    "name": "native",
                    "resources": {
                        "requests": {"ephemeral-storage": "1Gi", "x.kubernetes.io/y": "500m"},
                        "limits": {"ephemeral-storage": "2Gi", "x.kubernetes.io/y": "1"},
                    },
                },
            ]
        )
    )
    said = {e.field: e.message for e in error.all_errors}
    assert said == {
        "spec.containers[0].resources.requests.rdma/hca": (
            "must equal the limit (devices cannot be overcommitted)"
        ),
        "spec.containers[0].resources.requests.example.com/slice": (
            "must be a whole number of devices, got 1.5"
        ),
        "spec.containers[0].resources.limits.example.com/slice": (
            "must be a whole number of devices, got 1.5"
        ),
    }


def test_a_pod_level_request_replaces_the_containers_and_the_overhead_adds_to_it() -> None:
    # workload-map's describe test: pod-level 2 cpu / 4Gi over containers asking 500m / 1Gi,
    # plus 100m / 128Mi overhead; the GPU still comes from the container (KEP-2837).
    manifest = pod(
        containers=[container(cpu="500m", memory="1Gi", **{"nvidia.com/gpu": "1"})],
        spec={
            "overhead": {"cpu": "100m", "memory": "128Mi"},
            "resources": {"requests": {"cpu": "2", "memory": "4Gi"}},
        },
    )
    parsed = parse_pod(manifest, "team-a/pg")
    assert parsed.request.cpu == 2100
    assert parsed.request.memory == 4 * GIB + 128 * MIB
    assert parsed.request.gpu == 1


def test_a_pod_level_limit_stands_in_for_its_missing_request() -> None:
    manifest = pod(containers=[container(cpu="1")], spec={"resources": {"limits": {"cpu": "3"}}})
    assert parse_pod(manifest, "team-a/pg").request.cpu == 3000


def test_a_pod_level_request_for_an_extended_resource_is_an_error() -> None:
    manifest = pod(spec={"resources": {"requests": {"nvidia.com/gpu": "1"}}})
    assert fields(parse_error(manifest)) == ["spec.resources.requests.nvidia.com/gpu"]


def test_cpu_rounds_up_to_whole_millicores() -> None:
    assert parse_pod(pod(containers=[container(cpu="1n")]), "team-a/pg").request.cpu == 1


def test_a_request_above_its_limit_is_an_error() -> None:
    manifest = pod(
        containers=[{"name": "a", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}]
    )
    assert fields(parse_error(manifest)) == ["spec.containers[0].resources.requests.cpu"]


def test_an_invalid_quantity_names_its_container_and_resource() -> None:
    error = parse_error(pod(containers=[container(cpu="1"), container("b", memory="16GB")]))
    assert fields(error) == ["spec.containers[1].resources.requests.memory"]
    assert "16GB" in error.message


# --- GPUs ---------------------------------------------------------------------------------


def test_whole_gpus_come_from_the_nvidia_resource() -> None:
    parsed = parse_pod(pod(containers=[container(cpu="1", **{"nvidia.com/gpu": "2"})]), "team-a/pg")
    assert parsed.gpu == GpuRequest(whole=2)
    assert parsed.request.gpu == 2


def test_a_fractional_nvidia_gpu_request_is_an_error() -> None:
    error = parse_error(pod(containers=[container(**{"nvidia.com/gpu": "500m"})]))
    assert fields(error) == ["spec.containers[0].resources.requests.nvidia.com/gpu"]


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({"gpu-fraction": "0.5"}, GpuRequest(portion=Fraction(1, 2))),
        ({"gpu-fraction": ".25"}, GpuRequest(portion=Fraction(1, 4))),
        ({"gpu-fraction": "1"}, GpuRequest(portion=Fraction(1))),
        ({"gpu-fraction": "2"}, GpuRequest(whole=2)),
        (
            {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "4"},
            GpuRequest(portion=Fraction(1, 2), devices=4),
        ),
        ({"gpu-memory": "2000"}, GpuRequest(memory_mib=2000)),
        (
            {"gpu-memory": "2000", "gpu-fraction-num-devices": "2"},
            GpuRequest(memory_mib=2000, devices=2),
        ),
        ({"gpu-fraction": ""}, GpuRequest()),
    ],
)
def test_gpu_annotation_forms(annotations: dict[str, str], expected: GpuRequest) -> None:
    parsed = parse_pod(pod(annotations=annotations), "team-a/pg")
    assert parsed.gpu == expected
    assert parsed.request.gpu == expected.whole


def test_a_share_spans_at_most_the_devices_of_the_largest_node() -> None:
    """A running share whose devices are not named is put on that many devices of its node:
    10^12 of them made the cycle build a list of 10^12 names, and run out of memory."""
    annotations = {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "4096"}
    assert parse_pod(pod(annotations=annotations), "team-a/pg").gpu.devices == 4096
    error = parse_error(pod(annotations={**annotations, "gpu-fraction-num-devices": "4097"}))
    assert str(error) == (
        "Pod team-a/p: metadata.annotations.gpu-fraction-num-devices: 4097 devices;"
        " no node kai reads has more than 4,096"
    )


@pytest.mark.parametrize(
    ("annotations", "field"),
    [
        ({"gpu-fraction": "1.5"}, "metadata.annotations.gpu-fraction"),
        ({"gpu-fraction": "abc"}, "metadata.annotations.gpu-fraction"),
        ({"gpu-fraction": "0"}, "metadata.annotations.gpu-fraction"),
        ({"gpu-fraction": "-0.5"}, "metadata.annotations.gpu-fraction"),
        ({"gpu-fraction": "1e-1"}, "metadata.annotations.gpu-fraction"),
        ({"gpu-memory": "1.5"}, "metadata.annotations.gpu-memory"),
        ({"gpu-memory": "0"}, "metadata.annotations.gpu-memory"),
        ({"gpu-memory": "2Gi"}, "metadata.annotations.gpu-memory"),
        (
            {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "0"},
            "metadata.annotations.gpu-fraction-num-devices",
        ),
        (
            {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "x"},
            "metadata.annotations.gpu-fraction-num-devices",
        ),
        ({"gpu-fraction-num-devices": "2"}, "metadata.annotations.gpu-fraction-num-devices"),
        (
            {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "1000000000000"},
            "metadata.annotations.gpu-fraction-num-devices",
        ),
        (
            {"gpu-fraction": "2", "gpu-fraction-num-devices": "2"},
            "metadata.annotations.gpu-fraction-num-devices",
        ),
        ({"gpu-fraction": "0.5", "gpu-memory": "2000"}, "metadata.annotations.gpu-fraction"),
    ],
)
def test_bad_gpu_annotations_name_the_annotation(annotations: dict[str, str], field: str) -> None:
    error = parse_error(pod(annotations=annotations))
    assert fields(error) == [field]
    assert str(error).startswith(f"Pod team-a/p: {field}: ")
    assert "\n" not in str(error)


@pytest.mark.parametrize(
    "manifest",
    [
        pod(annotations={"gpu-fraction": "0.5"}, containers=[container(**{"nvidia.com/gpu": "1"})]),
        pod(
            annotations={"gpu-memory": "1000"},
            containers=[{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        ),
        pod(
            annotations={"gpu-fraction": "0.5"},
            spec={"initContainers": [container("init", **{"nvidia.com/gpu": "0"})]},
        ),
    ],
)
def test_a_gpu_share_and_whole_gpus_on_one_pod_is_an_error(manifest: dict[str, Any]) -> None:
    error = parse_error(manifest)
    assert len(error.all_errors) == 1
    assert error.field in ("metadata.annotations.gpu-fraction", "metadata.annotations.gpu-memory")
    assert "nvidia.com/gpu" in error.message


# --- phase --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("node", "phase", "deleting", "gates", "expected"),
    [
        (None, "Pending", False, False, PodPhase.PENDING),
        (None, "Pending", False, True, PodPhase.GATED),
        ("n1", "Pending", False, False, PodPhase.BOUND),
        ("n1", "Running", False, False, PodPhase.BOUND),
        ("n1", "Running", True, False, PodPhase.RELEASING),
        (None, "Pending", True, False, PodPhase.RELEASING),
        ("n1", "Succeeded", True, False, PodPhase.SUCCEEDED),
        ("n1", "Failed", False, False, PodPhase.FAILED),
    ],
)
def test_phase_mapping(
    node: str | None, phase: str, deleting: bool, gates: bool, expected: PodPhase
) -> None:
    spec: dict[str, Any] = {}
    if node:
        spec["nodeName"] = node
    if gates:
        spec["schedulingGates"] = [{"name": "wait"}]
    metadata = {"deletionTimestamp": "2024-05-01T12:00:00Z"} if deleting else {}
    parsed = parse_pod(pod(spec=spec, status={"phase": phase}, metadata=metadata), "team-a/pg")
    assert parsed.phase is expected
    assert parsed.node == node


def test_a_running_pod_without_a_node_is_an_error() -> None:
    assert fields(parse_error(pod(status={"phase": "Running"}))) == ["status.phase"]


def test_an_unknown_phase_is_an_error() -> None:
    assert fields(parse_error(pod(status={"phase": "Lost"}))) == ["status.phase"]


# --- placement ----------------------------------------------------------------------------


def _affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
            }
        }
    }


def test_node_selector_affinity_and_tolerations() -> None:
    spec = {
        "nodeSelector": {"zone": "a", "gpu": "h100"},
        **_affinity(
            {
                "matchExpressions": [
                    {"key": "rack", "operator": "In", "values": ["r1", "r2"]},
                    {"key": "cores", "operator": "Gt", "values": ["8"]},
                ]
            },
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-7"]}]},
            {},  # an empty term matches nothing, so it adds nothing to the OR
        ),
        "tolerations": [
            {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "team", "value": "a"},
        ],
    }
    placement = parse_pod(pod(spec=spec), "team-a/pg").placement
    assert placement.node_selector == (("gpu", "h100"), ("zone", "a"))
    assert placement.affinity_terms == (
        (Requirement("rack", "In", ("r1", "r2")), Requirement("cores", "Gt", ("8",))),
        (Requirement("metadata.name", "In", ("node-7",)),),
    )
    assert placement.tolerations == (
        Toleration("gpu", "Exists", None, "NoSchedule"),
        Toleration("team", "Equal", "a", None),
    )


@pytest.mark.parametrize(
    ("expression", "field_suffix"),
    [
        ({"key": "cores", "operator": "Gt", "values": ["eight"]}, "matchExpressions[0].values"),
        ({"key": "cores", "operator": "Lt", "values": ["1", "2"]}, "matchExpressions[0].values"),
        ({"key": "rack", "operator": "In", "values": []}, "matchExpressions[0].values"),
        ({"key": "rack", "operator": "Exists", "values": ["x"]}, "matchExpressions[0].values"),
        ({"key": "rack", "operator": "Near", "values": ["x"]}, "matchExpressions[0].operator"),
    ],
)
def test_bad_affinity_requirements_name_the_field(
    expression: dict[str, Any], field_suffix: str
) -> None:
    error = parse_error(pod(spec=_affinity({"matchExpressions": [expression]})))
    terms = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    assert fields(error) == [f"{terms}[0].{field_suffix}"]


def test_match_fields_may_only_name_the_node() -> None:
    term = {"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["x"]}]}
    assert fields(parse_error(pod(spec=_affinity(term))))[0].endswith("matchFields[0].key")


def test_only_empty_affinity_terms_match_no_node_and_are_an_error() -> None:
    error = parse_error(pod(spec=_affinity({})))
    assert error.field.endswith("nodeSelectorTerms")


def test_bad_tolerations_are_errors() -> None:
    spec = {"tolerations": [{"operator": "Exists", "key": "a", "value": "x"}, {"value": "x"}]}
    assert fields(parse_error(pod(spec=spec))) == [
        "spec.tolerations[0].value",
        "spec.tolerations[1].key",
    ]


# --- labels, annotations and metadata -----------------------------------------------------


def test_labels_metadata_and_scheduler_name() -> None:
    manifest = yaml.safe_load(
        """
        apiVersion: v1
        kind: Pod
        metadata:
          name: worker-0
          uid: u-1
          creationTimestamp: 2024-05-01T12:00:00Z
          labels:
            kai.scheduler/subgroup-name: workers
            kai.scheduler/task-priority: "-3"
            runai-gpu-group: g1
        spec:
          schedulerName: kai-scheduler
          containers: [{name: main}]
        """
    )
    parsed = parse_pod(manifest, "default/pg")
    assert (parsed.namespace, parsed.name, parsed.uid, parsed.group) == (
        "default",
        "worker-0",
        "u-1",
        "default/pg",
    )
    assert parsed.subgroup == "workers"
    assert parsed.task_priority == -3
    assert parsed.gpu_groups == ("g1",)
    assert parsed.created == datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert parsed.scheduler_is_ours


def test_other_schedulers_pods_are_marked_and_timestamps_may_be_strings() -> None:
    manifest = pod(metadata={"creationTimestamp": "2024-05-01T14:00:00+02:00"})
    manifest["spec"]["schedulerName"] = "default-scheduler"
    parsed = parse_pod(manifest, "team-a/pg")
    assert not parsed.scheduler_is_ours
    assert parsed.created == datetime(2024, 5, 1, 12, tzinfo=UTC)


def test_multi_device_gpu_groups_follow_the_single_device_label() -> None:
    labels = {"runai-gpu-group": "g1", "runai-gpu-group/g1": "g1", "runai-gpu-group/g2": "g2"}
    assert gpu_groups(labels) == ("g1", "g2")
    # As in KAI, the per-device labels count only beside the single-device one.
    assert gpu_groups({"runai-gpu-group/g2": "g2"}) == ()


def test_a_bad_task_priority_is_an_error() -> None:
    error = parse_error(pod(labels={"kai.scheduler/task-priority": "high"}))
    assert fields(error) == ["metadata.labels.kai.scheduler/task-priority"]


def test_every_malformed_field_is_reported_at_once() -> None:
    manifest = pod(
        containers=[container(cpu="lots")],
        metadata={"creationTimestamp": "yesterday"},
        spec={"nodeName": 7},
    )
    assert sorted(fields(parse_error(manifest))) == [
        "metadata.creationTimestamp",
        "spec.containers[0].resources.requests.cpu",
        "spec.nodeName",
    ]


def test_every_problem_of_a_well_formed_pod_is_reported() -> None:
    # Malformed fields are reported first; rules spanning fields run on a well-formed pod.
    manifest = pod(annotations={"gpu-fraction": "abc"}, containers=[container(cpu="lots")])
    assert fields(parse_error(manifest)) == ["spec.containers[0].resources.requests.cpu"]
    manifest = pod(annotations={"gpu-fraction": "abc"}, status={"phase": "Running"})
    assert fields(parse_error(manifest)) == ["metadata.annotations.gpu-fraction", "status.phase"]


def test_pod_group_key_comes_from_the_annotation_in_the_pods_namespace() -> None:
    assert annotated_pod_group_key(pod(annotations={"pod-group-name": "pg-1"})) == "team-a/pg-1"
    assert annotated_pod_group_key(pod()) is None
    assert annotated_pod_group_key({"metadata": "broken"}) is None


def test_the_node_a_pod_is_nominated_to_is_read_from_its_status() -> None:
    nominated = parse_pod(pod(status={"nominatedNodeName": "gpu-3"}), "team-a/pg")
    assert nominated.nominated_node == "gpu-3"
    assert parse_pod(pod(status={"nominatedNodeName": ""}), "team-a/pg").nominated_node is None
    assert fields(parse_error(pod(status={"nominatedNodeName": 3}))) == ["status.nominatedNodeName"]
    # A bound pod keeps the field; it no longer says where the pod is to go.
    running = pod(spec={"nodeName": "gpu-1"}, status={"phase": "Running", "nominatedNodeName": "x"})
    assert parse_pod(running, "team-a/pg").nominated_node is None
