"""Live `describe`: the pods a workload owns land on the component instance they play.

The pods are written as the API server returns them (labels, phase, conditions, node);
the definitions are a custom one (a logical gang of a coordinator and pools of workers
split by instance) and the catalog's Job and Deployment (one pod-defining component,
with and without a type selector).
"""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from kai.cli.describe import describe_workload
from kai.cli.workload_tables import age, describe_table
from kai.workloads.catalog import load_catalog
from kai.workloads.jqeval import JqEvaluator
from kai.workloads.loader import load_definition
from kai.workloads.registry import DefinitionRegistry

FIXTURES = Path(__file__).parents[2] / "fixtures" / "workloads"


def pod(
    name: str,
    labels: dict[str, str],
    phase: str = "Pending",
    *,
    ready: bool = False,
    node: str | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True" if ready else "False", "reason": "NotReady"}]
    if unschedulable:
        conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable"})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team-a", "labels": labels},
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase, "conditions": conditions},
    }


@pytest.fixture(scope="module")
def registry() -> DefinitionRegistry:
    jq = JqEvaluator()
    trainer = yaml.safe_load((FIXTURES / "live" / "trainer-definition.yaml").read_text())
    return DefinitionRegistry(
        catalog=load_catalog(jq), cluster=[load_definition(trainer, jq, "file")], jq=jq
    )


def trainer_pods() -> list[dict[str, Any]]:
    role = "example.com/role"
    return [
        pod("run-coordinator", {role: "coordinator"}, "Running", ready=True, node="n1"),
        pod("run-a-0", {role: "worker", "example.com/pool": "a"}, "Running", ready=True, node="n1"),
        pod("run-a-1", {role: "worker", "example.com/pool": "a"}, unschedulable=True),
        pod("run-b-0", {role: "worker", "example.com/pool": "b"}, "Succeeded", node="n2"),
        pod("run-sidecar", {role: "monitor"}, "Running", node="n2"),
    ]


def live_of(document: dict[str, Any]) -> dict[str, tuple[int, dict[str, int], list[str]]]:
    return {
        entry["name"]: (
            entry["live"]["current"],
            entry["live"]["phases"],
            [p["name"] for p in entry["live"]["pods"]],
        )
        for entry in document["components"]
    }


def test_pods_go_to_the_component_instance_they_play(registry: DefinitionRegistry) -> None:
    trainer = yaml.safe_load((FIXTURES / "live" / "trainer.yaml").read_text())
    document = describe_workload(trainer, registry, file_mode=False, pods=trainer_pods())
    assert live_of(document) == {
        # the logical gang gathers its children's pods, the stray one is nobody's
        "gang": (
            4,
            {"Pending": 1, "Running": 2, "Succeeded": 1},
            ["run-a-0", "run-a-1", "run-b-0", "run-coordinator"],
        ),
        "coordinator": (1, {"Running": 1}, ["run-coordinator"]),
        "a": (2, {"Pending": 1, "Running": 1}, ["run-a-0", "run-a-1"]),
        "b": (1, {"Succeeded": 1}, ["run-b-0"]),
    }
    # what the spec asks for is unchanged by what is running
    assert [(e["name"], e["pods"]) for e in document["components"]] == [
        ("gang", 4),
        ("coordinator", 1),
        ("a", 2),
        ("b", 1),
    ]
    live = document["live"]
    assert (live["current"], live["ready"], live["nodes"]) == (5, 2, ["n1", "n2"])
    assert [p["name"] for p in live["unattributed"]] == ["run-sidecar"]
    pool_a = next(e for e in document["components"] if e["name"] == "a")["live"]
    assert pool_a["ready"] == 1
    assert pool_a["pods"][1] == {
        "name": "run-a-1",
        "phase": "Pending",
        "ready": False,
        "node": None,
        "reason": "Unschedulable",
    }


def test_file_mode_has_no_live_parts(registry: DefinitionRegistry) -> None:
    trainer = yaml.safe_load((FIXTURES / "live" / "trainer.yaml").read_text())
    document = describe_workload(trainer, registry)
    assert "live" not in document
    assert all("live" not in entry for entry in document["components"])


def test_a_sole_component_with_a_type_selector_takes_only_the_pods_that_pass_it(
    registry: DefinitionRegistry,
) -> None:
    job = yaml.safe_load((FIXTURES / "job.yaml").read_text())
    name = job["metadata"]["name"]
    pods = [
        pod(f"{name}-0", {"batch.kubernetes.io/job-name": name}, "Running"),
        pod(f"{name}-1", {"batch.kubernetes.io/job-name": name}, "Failed"),
        pod("adopted", {}, "Running"),
    ]
    document = describe_workload(job, registry, file_mode=False, pods=pods)
    assert live_of(document) == {
        "job": (2, {"Running": 1, "Failed": 1}, [f"{name}-0", f"{name}-1"])
    }
    assert [p["name"] for p in document["live"]["unattributed"]] == ["adopted"]


def test_a_sole_component_without_a_type_selector_takes_every_pod(
    registry: DefinitionRegistry,
) -> None:
    deployment = yaml.safe_load((FIXTURES / "deployment.yaml").read_text())
    pods = [pod("web-1", {"app": "web"}, "Running"), pod("web-2", {}, "Pending")]
    document = describe_workload(deployment, registry, file_mode=False, pods=pods)
    assert [e["live"]["current"] for e in document["components"]] == [2]
    assert document["live"]["unattributed"] == []


def test_the_table_lists_each_components_pods_once_with_phase_and_node(
    registry: DefinitionRegistry,
) -> None:
    trainer = yaml.safe_load((FIXTURES / "live" / "trainer.yaml").read_text())
    document = describe_workload(trainer, registry, file_mode=False, pods=trainer_pods())
    out = io.StringIO()
    describe_table(document, out)
    text = out.getvalue()
    assert "READY" in text.splitlines()[4]
    pods_section = text[text.index("Pods:") :]
    for line in (
        "  coordinator: 1 Running",
        "  a: 1 Pending, 1 Running",
        "    run-a-1  Pending (Unschedulable)  <none>",
        "  (no component): 1 Running",
        "    run-sidecar  Running (NotReady)  n2",
    ):
        assert line in pods_section
    assert "  gang:" not in pods_section  # its pods are its children's, listed there
    assert pods_section.count("run-a-0") == 1


def test_pod_limit_keeps_unhealthy_pods_first(registry: DefinitionRegistry) -> None:
    trainer = yaml.safe_load((FIXTURES / "live" / "trainer.yaml").read_text())
    document = describe_workload(trainer, registry, file_mode=False, pods=trainer_pods())
    out = io.StringIO()
    describe_table(document, out, pod_limit=1)
    pool_a = out.getvalue().split("  a: ")[1].split("  b: ")[0]
    assert "run-a-1" in pool_a and "run-a-0" not in pool_a
    assert "... and 1 more (1 of 1 unhealthy shown)" in pool_a


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (5, "5s"),
        (119, "119s"),
        (190, "3m10s"),
        (3600, "60m"),
        (4 * 3600 + 60, "4h1m"),
        (30 * 3600, "30h"),
        (3 * 86400, "3d"),
        (40 * 86400, "40d"),
        (800 * 86400, "2y70d"),
    ],
)
def test_age_reads_as_kubectl_writes_it(seconds: int, expected: str) -> None:
    now = datetime(2026, 6, 1, tzinfo=UTC)
    created = (now - timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")
    assert age(created, now) == expected
    assert age(None, now) == "<unknown>"
