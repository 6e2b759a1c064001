"""`kai workload get` and live `describe` on the real control plane.

The Job and ReplicaSet controllers of kube-controller-manager make the pods, with the
labels and owner references they really carry; the test moves pod phases on as a
kubelet would. Then `kai workload` runs as a user runs it (a process, with the
kubeconfig), and what it prints is checked against the pods the test itself reads:
which component each pod lands on, the phases, the counts, which workloads a listing
across types leaves out, and kli's exit codes.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
from pathlib import Path
from typing import Any

from kai_operator_support import body, wait_for
from kubernetes_asyncio import client

from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import set_pod_phase

REPO_ROOT = Path(__file__).resolve().parents[2]
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
MEMORY_LIMIT = 4 << 30
"""Address space of each `kai workload` process: a regression that expands a huge workload
ends in a MemoryError there, not in the machine's OOM killer."""


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


async def kai_workload(kubeconfig: Path, *argv: str) -> tuple[int | None, str, str]:
    """`kai workload ARGV... --kubeconfig K` as a process: its exit code, stdout and stderr."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kai.cli.main",
        "workload",
        *argv,
        "--kubeconfig",
        str(kubeconfig),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        preexec_fn=_limit_memory,
    )
    out, err = await process.communicate()
    return process.returncode, out.decode(), err.decode()


async def ok_json(kubeconfig: Path, *argv: str) -> Any:
    code, out, err = await kai_workload(kubeconfig, *argv, "-o", "json")
    assert code == 0, f"kai workload {' '.join(argv)} exited {code}: {err}"
    return json.loads(out)


def container(cpu: str) -> dict[str, Any]:
    return {"name": "main", "image": "example/app:1", "resources": {"requests": {"cpu": cpu}}}


def job(name: str, parallelism: int, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container("250m")]}},
        },
    }


PDB_DEFINITION = """\
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: policy-poddisruptionbudget-v1}
spec:
  structureDefinition:
    rootComponent:
      name: budget
      kind: {group: policy, version: v1, kind: PodDisruptionBudget}
      statusDefinition:
        statusMappings:
          running: [{byExpression: {expression: ".spec.minAvailable == 1", expectedResult: "true"}}]
"""


async def test_live_describe_and_get_attribute_pods_and_report_phases(
    api: client.ApiClient, namespace: str, control_plane: ClusterAccess, tmp_path: Path
) -> None:
    kubeconfig = control_plane.kubeconfig
    core, batch, apps = client.CoreV1Api(api), client.BatchV1Api(api), client.AppsV1Api(api)
    await batch.create_namespaced_job(namespace, body(job("train", 3, {"team": "a"})))
    await batch.create_namespaced_job(namespace, body(job("other", 1, {"team": "b"})))
    web = {"app": "web"}
    await apps.create_namespaced_deployment(
        namespace,
        body(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web"},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": web},
                    "template": {
                        "metadata": {"labels": web},
                        "spec": {"containers": [container("100m")]},
                    },
                },
            }
        ),
    )
    await core.create_namespaced_pod(
        namespace,
        body({"metadata": {"name": "solo"}, "spec": {"containers": [container("50m")]}}),
    )

    async def pods_of(selector: str) -> list[client.V1Pod]:
        listing = await core.list_namespaced_pod(namespace, label_selector=selector)
        return sorted(listing.items, key=lambda p: p.metadata.name)

    async def made() -> bool:
        counts = [
            len(await pods_of(s))
            for s in (f"{JOB_NAME_LABEL}=train", f"{JOB_NAME_LABEL}=other", "app=web")
        ]
        return counts == [3, 1, 1]

    await wait_for("the controllers' pods", made, timeout=60)
    train = [p.metadata.name for p in await pods_of(f"{JOB_NAME_LABEL}=train")]
    await set_pod_phase(api, namespace, train[0], "Running")
    await set_pod_phase(api, namespace, train[1], "Succeeded")

    async def counted() -> bool:
        status = (await batch.read_namespaced_job_status("train", namespace)).status
        return (status.succeeded, status.active) == (1, 2)

    await wait_for("the Job controller to count the succeeded pod", counted, timeout=60)

    # describe: every pod of the Job, none of the other Job's, on the Job's component
    described = await ok_json(kubeconfig, "describe", "job/train", "-n", namespace)
    assert described["fileMode"] is False
    assert (described["kind"], described["name"], described["origin"]) == (
        "Job",
        "train",
        "catalog",
    )
    # upstream's Job mapping: active pods none ready; some done while fewer than parallelism ready
    assert described["phases"] == ["Initializing", "Degraded"]
    [entry] = described["components"]
    assert (entry["name"], entry["replicas"], entry["pods"]) == ("job", 3, 3)
    live = entry["live"]
    assert [p["name"] for p in live["pods"]] == train
    assert {p["name"]: p["phase"] for p in live["pods"]} == {
        train[0]: "Running",
        train[1]: "Succeeded",
        train[2]: "Pending",
    }
    assert (live["current"], live["ready"]) == (3, 0)
    assert live["phases"] == {"Pending": 1, "Running": 1, "Succeeded": 1}
    assert described["live"]["unattributed"] == []
    assert described["resources"]["cpuMillis"] == 750

    # the TYPE NAME form and the table: the same pods, each with its phase
    code, table, err = await kai_workload(kubeconfig, "describe", "job", "train", "-n", namespace)
    assert code == 0, err
    assert "job: 1 Pending, 1 Running, 1 Succeeded" in table
    for name, phase in ((train[0], "Running"), (train[1], "Succeeded"), (train[2], "Pending")):
        assert any(line.split()[:2] == [name, phase] for line in table.splitlines())

    # a Deployment's pod is owned through its ReplicaSet; `deploy` is a name only discovery knows
    [web_pod] = [p.metadata.name for p in await pods_of("app=web")]
    deployment = await ok_json(kubeconfig, "describe", "deploy/web", "-n", namespace)
    assert [p["name"] for p in deployment["components"][0]["live"]["pods"]] == [web_pod]

    # get: one row per Job with its phase; selector; one by name comes bare
    listed = await ok_json(kubeconfig, "get", "jobs", "-n", namespace)
    assert listed["count"] == 2
    assert {(v["name"], tuple(v["phases"])) for v in listed["items"]} == {
        ("train", ("Initializing", "Degraded")),
        ("other", ("Initializing",)),
    }
    selected = await ok_json(kubeconfig, "get", "job", "-l", "team=a", "-n", namespace)
    assert [v["name"] for v in selected["items"]] == ["train"]
    one = await ok_json(kubeconfig, "get", "job/train", "-n", namespace)
    assert (one["name"], one["definition"]) == ("train", "batch-job-v1")
    running = await ok_json(kubeconfig, "get", "job", "--phase", "Running", "-n", namespace)
    assert running == {"items": [], "count": 0}
    code, table, err = await kai_workload(kubeconfig, "get", "job", "-n", namespace, "-o", "wide")
    assert code == 0, err
    assert table.splitlines()[0].split() == ["NAME", "NAMESPACE", "PHASE", "AGE", "ORIGIN"]
    assert sorted(line.split()[0] for line in table.splitlines()[1:]) == ["other", "train"]

    # every type: the workloads, not the Jobs' pods nor the Deployment's
    everything = await ok_json(kubeconfig, "get", "--all-types", "-n", namespace)
    assert sorted((v["kind"], v["name"]) for v in everything["items"]) == [
        ("Deployment", "web"),
        ("Job", "other"),
        ("Job", "train"),
        ("Pod", "solo"),
    ]

    # kli's exit codes: 3 no such workload, 4 no definition for the type
    for argv in (["describe", "job/absent"], ["get", "job", "absent"]):
        code, _, err = await kai_workload(kubeconfig, *argv, "-n", namespace)
        assert code == 3, err
        assert 'Job "absent" not found' in err
    code, out, err = await kai_workload(
        kubeconfig, "describe", "flinkdeployment/etl", "-n", namespace, "-o", "json"
    )
    assert code == 4, err
    assert json.loads(out)["error"] == "no_definition_for_type"

    # a type only a --definition file covers, found by a short name only discovery knows
    await client.PolicyV1Api(api).create_namespaced_pod_disruption_budget(
        namespace,
        body(
            {
                "metadata": {"name": "guard"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": web}},
            }
        ),
    )
    code, _, err = await kai_workload(kubeconfig, "get", "pdb", "-n", namespace)
    assert code == 4, err
    definition = tmp_path / "pdb.yaml"
    definition.write_text(PDB_DEFINITION)
    budget = await ok_json(
        kubeconfig, "get", "pdb/guard", "--definition", str(definition), "-n", namespace
    )
    assert (budget["definition"], budget["origin"], budget["phases"]) == (
        "policy-poddisruptionbudget-v1",
        "file",
        ["Running"],
    )


async def test_live_describe_names_a_count_beyond_any_cluster(
    api: client.ApiClient, namespace: str, control_plane: ClusterAccess
) -> None:
    """The API server takes any int32 for replicas; a paused Deployment makes no ReplicaSet, so
    nothing is created. Describe expanded all 2^31-1 pods in memory; it now names the field."""
    labels = {"app": "huge"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "huge"},
        "spec": {
            "replicas": 2**31 - 1,
            "paused": True,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container("1")]}},
        },
    }
    await client.AppsV1Api(api).create_namespaced_deployment(namespace, body(deployment))
    code, out, err = await kai_workload(
        control_plane.kubeconfig, "describe", "deployment/huge", "-n", namespace
    )
    assert (code, out) == (1, ""), err
    assert err.strip() == (
        f"ERROR: Deployment {namespace}/huge: spec.replicas: 2,147,483,647 more would take the"
        " workload past 100,000 objects, more than kai expands for one workload"
    )
    listed = await ok_json(control_plane.kubeconfig, "get", "deployment/huge", "-n", namespace)
    assert listed["name"] == "huge"  # the listing reads counts, and expands nothing
