"""Node manifests into engine Nodes: allocatable, GPU memory label, taints and readiness."""

from __future__ import annotations

from typing import Any

import pytest

from kai.api.errors import ManifestError
from kai.api.parse import parse_node
from kai.engine.model import Taint
from kai.engine.resources import Resources


def node(
    allocatable: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
    conditions: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {"allocatable": allocatable or {}}
    if conditions is not None:
        status["conditions"] = conditions
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "gpu-1", "labels": labels or {}},
        "spec": spec or {},
        "status": status,
    }


def error_fields(manifest: dict[str, Any]) -> list[str]:
    with pytest.raises(ManifestError) as caught:
        parse_node(manifest)
    assert str(caught.value).startswith("Node gpu-1: ")
    return [e.field for e in caught.value.all_errors]


def test_allocatable_in_engine_units() -> None:
    parsed = parse_node(
        node(
            {
                "cpu": "63500m",
                "memory": "512Gi",
                "nvidia.com/gpu": "8",
                "pods": "250",
                "ephemeral-storage": "1Ti",
            }
        )
    )
    assert parsed.allocatable == Resources.of(gpu=8, cpu=63500, memory=512 * 1024**3)
    assert parsed.max_pods == 250
    assert parsed.gpus == 8
    assert parsed.scalars == (("ephemeral-storage", 1024**4 * 1000),)


def test_scalar_resources_are_kept_in_thousandths_rounded_down_and_zeros_dropped() -> None:
    parsed = parse_node(
        node(
            {
                "cpu": "8",
                "rdma/hca": "2",
                "example.com/slice": "1500m",
                "example.com/dust": "0.0001",
                "hugepages-2Mi": "0",
                "nvidia.com/gpu": "4",
                "pods": "110",
            }
        )
    )
    assert parsed.scalars == (("example.com/slice", 1500), ("rdma/hca", 2000))


def test_a_node_without_a_pods_count_takes_the_kubelet_default() -> None:
    assert parse_node(node({"cpu": "4"})).max_pods == 110


@pytest.mark.parametrize(
    ("label", "mib"), [("81559", 81500), ("40960", 40900), ("100", 100), ("24000", 24000)]
)
def test_gpu_memory_label_is_floored_to_a_multiple_of_100(label: str, mib: int) -> None:
    assert parse_node(node(labels={"nvidia.com/gpu.memory": label})).gpu_memory_mib == mib


def test_a_missing_gpu_memory_label_means_100_mib() -> None:
    assert parse_node(node()).gpu_memory_mib == 100


@pytest.mark.parametrize("label", ["abc", "80GiB", "-100", "50", ""])
def test_a_bad_gpu_memory_label_is_an_error(label: str) -> None:
    assert error_fields(node(labels={"nvidia.com/gpu.memory": label})) == [
        "metadata.labels.nvidia.com/gpu.memory"
    ]


@pytest.mark.parametrize(
    ("allocatable", "field"),
    [
        ({"cpu": "abc"}, "status.allocatable.cpu"),
        ({"memory": "16GB"}, "status.allocatable.memory"),
        ({"nvidia.com/gpu": "1.5"}, "status.allocatable.nvidia.com/gpu"),
        ({"pods": "-1"}, "status.allocatable.pods"),
        ({"nvidia.com/gpu": "1000000000000"}, "status.allocatable.nvidia.com/gpu"),
    ],
)
def test_bad_allocatable_values_name_the_resource(allocatable: dict[str, str], field: str) -> None:
    assert error_fields(node(allocatable)) == [field]


def test_a_node_with_more_devices_than_any_machine_is_refused_by_count() -> None:
    """The largest node kai reads has 4,096 devices: one that reports 10^12 (a broken device
    plugin) made every cycle fail for lack of memory, ranking nodes by free devices."""
    assert parse_node(node({"nvidia.com/gpu": "4096"})).gpus == 4096
    with pytest.raises(ManifestError) as caught:
        parse_node(node({"nvidia.com/gpu": "4097"}))
    assert str(caught.value) == (
        "Node gpu-1: status.allocatable.nvidia.com/gpu: 4097 devices on one node;"
        " kai reads at most 4,096"
    )


def test_taints_and_unschedulable() -> None:
    parsed = parse_node(
        node(
            spec={
                "unschedulable": True,
                "taints": [
                    {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
                    {"key": "team", "value": "a", "effect": "NoExecute"},
                ],
            }
        )
    )
    assert parsed.unschedulable
    assert parsed.taints == (
        Taint("nvidia.com/gpu", None, "NoSchedule"),
        Taint("team", "a", "NoExecute"),
    )


def test_a_taint_with_an_unknown_effect_is_an_error() -> None:
    assert error_fields(node(spec={"taints": [{"key": "k", "effect": "Sometimes"}]})) == [
        "spec.taints[0].effect"
    ]


@pytest.mark.parametrize(
    ("conditions", "ready"),
    [
        (None, True),
        ([], True),
        ([{"type": "MemoryPressure", "status": "False"}], True),
        ([{"type": "Ready", "status": "True"}], True),
        ([{"type": "Ready", "status": "False"}], False),
        ([{"type": "Ready", "status": "Unknown"}], False),
    ],
)
def test_readiness_comes_from_the_ready_condition(
    conditions: list[dict[str, str]] | None, ready: bool
) -> None:
    assert parse_node(node(conditions=conditions)).ready is ready


def test_labels_are_kept_sorted() -> None:
    parsed = parse_node(node(labels={"zone": "a", "rack": "r1"}))
    assert parsed.labels == (("rack", "r1"), ("zone", "a"))
    assert parsed.label("zone") == "a"
