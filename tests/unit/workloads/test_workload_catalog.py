"""Every catalog definition against a realistic manifest of its type: describe and grouping.

Expected values are worked out by hand from each manifest (replicas x GPUs per pod,
and the gang rule of the kind, kai-semantics §14.3 / workload-definitions §9).
Components are listed as upstream's describe lists them: every component that has a
scale or pods, with 0 pods when the manifest leaves it out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kai.cli.describe import describe_workload
from kai.workloads.catalog import catalog_registry, load_catalog
from kai.workloads.jqeval import JqEvaluator
from kai.workloads.loader import load_definition
from kai.workloads.registry import DefinitionRegistry

FIXTURES = Path(__file__).parents[2] / "fixtures" / "workloads"


@dataclass(frozen=True)
class Expected:
    fixture: str
    definition: str
    components: list[tuple[str, int, int]]  # (name, pods, GPUs)
    gpus: int
    groups: list[tuple[int, int, list[str]]]  # (gang size, pods, top-level sub-groups)
    phases: list[str]


CASES = [
    Expected("job.yaml", "batch-job-v1", [("job", 4, 4)], 4, [(1, 4, [])], ["Initializing"]),
    Expected(
        "cronjob.yaml", "batch-cronjob-v1", [("cronjob", 2, 2)], 2, [(1, 2, [])], ["Initializing"]
    ),
    Expected(
        "deployment.yaml",
        "apps-deployment-v1",
        [("deployment", 3, 3)],
        3,
        [(1, 1, [])] * 3,
        ["Initializing"],
    ),
    Expected(
        "statefulset.yaml",
        "apps-statefulset-v1",
        [("statefulset", 2, 0)],
        0,
        [(1, 2, [])],
        ["Initializing"],
    ),
    Expected("pod.yaml", "core-pod-v1", [("pod", 1, 1)], 1, [(1, 1, [])], ["Running"]),
    Expected(
        "jobset.yaml",
        "jobset-x-k8s-io-jobset-v1alpha2",
        [("leader", 1, 4), ("workers", 2, 8)],
        12,
        [(3, 3, ["leader", "workers"])],
        ["Initializing"],
    ),
    Expected(
        "pytorchjob.yaml",
        "kubeflow-org-pytorchjob-v1",
        [("master", 1, 1), ("worker", 4, 4)],
        5,
        [(3, 5, ["master", "worker"])],
        ["Running", "Initializing"],
    ),
    Expected(
        "mpijob.yaml",
        "kubeflow-org-mpijob-v2beta1",
        [("launcher", 1, 0), ("worker", 3, 3)],
        3,
        [(4, 4, [])],
        ["Undefined"],
    ),
    Expected(
        "raycluster.yaml",
        "ray-io-raycluster-v1",
        [("head", 1, 0), ("gpu-small", 4, 4), ("gpu-multi", 2, 2)],
        6,
        [(5, 7, ["head", "gpu-small", "gpu-multi"])],
        ["Running"],
    ),
    Expected(
        "rayjob.yaml",
        "ray-io-rayjob-v1",
        [("head", 1, 0), ("gpu-small", 4, 4), ("gpu-multi", 2, 2)],
        6,
        [(5, 7, ["head", "gpu-small", "gpu-multi"])],
        ["Running"],
    ),
    Expected(
        "rayservice.yaml",
        "ray-io-rayservice-v1",
        [("head", 1, 0), ("gpu-small", 4, 4), ("gpu-multi", 2, 2)],
        6,
        [(5, 7, ["head", "gpu-small", "gpu-multi"])],
        # No status yet: upstream's definition maps nothing for it.
        ["Undefined"],
    ),
    Expected(
        "leaderworkerset.yaml",
        "leaderworkerset-x-k8s-io-leaderworkerset-v1",
        [("group", 8, 8), ("leader", 2, 2), ("worker", 6, 6)],
        8,
        [(4, 4, ["leader", "workers"])] * 2,
        ["Initializing"],
    ),
    Expected(
        "inferenceservice.yaml",
        "serving-kserve-io-inferenceservice-v1beta1",
        [("predictor", 2, 2), ("transformer", 1, 0)],
        2,
        [(3, 3, [])],
        ["Undefined"],  # no status yet: KServe has said nothing (upstream's recordings)
    ),
    Expected(
        "knative-service.yaml",
        "serving-knative-dev-service-v1",
        [("revision", 2, 2)],
        2,
        [(1, 1, [])] * 2,
        ["Initializing"],
    ),
    Expected(
        "nimservice.yaml",
        "apps-nvidia-com-nimservice-v1alpha1",
        [("nimservice", 2, 4)],
        4,
        [(2, 2, [])],
        ["Running"],
    ),
    Expected(
        "nimcache.yaml",
        "apps-nvidia-com-nimcache-v1alpha1",
        [("nimcache", 1, 0)],
        0,
        [(1, 1, [])],
        ["Running"],
    ),
    Expected(
        "milvus.yaml",
        "milvus-io-milvus-v1beta1",
        [
            ("standalone", 0, 0),  # cluster mode
            ("proxy", 2, 0),
            ("mixcoord", 1, 0),
            ("datanode", 2, 0),
            ("querynode", 3, 3),
            ("streamingnode", 2, 0),
            ("indexnode", 1, 0),
            # not configured: the separate coordinators, cdc and the in-cluster dependencies
            *[
                (name, 0, 0)
                for name in (
                    "rootcoord",
                    "datacoord",
                    "querycoord",
                    "indexcoord",
                    "cdc",
                    "etcd",
                    "minio",
                    "pulsar-zookeeper",
                    "pulsar-bookkeeper",
                    "pulsar-broker",
                    "pulsar-proxy",
                )
            ],
        ],
        3,
        # proxy, mixcoord and indexnode are in no gang: the default group; then one gang per node kind
        [(1, 4, []), (2, 2, []), (3, 3, []), (2, 2, [])],
        ["Running"],
    ),
    Expected(
        "podcliqueset.yaml",
        "grove-io-podcliqueset-v1alpha1",
        [("prefill", 4, 4), ("decode", 6, 6)],  # totals over the 2 replicas
        10,
        [(4, 5, [])] * 2,  # per replica: prefill minAvailable 1 + decode 3
        ["Initializing"],
    ),
    Expected(
        "dynamo-v1alpha1.yaml",
        "nvidia-com-dynamographdeployment-v1alpha1",
        [("Frontend", 1, 0), ("VllmDecodeWorker", 4, 16)],
        16,
        [(1, 1, []), (4, 4, [])],
        ["Running"],
    ),
    Expected(
        "dynamo-v1beta1.yaml",
        "nvidia-com-dynamographdeployment-v1beta1",
        # Instances are named as the manifest writes them, as upstream's definition does.
        [("Frontend", 1, 0), ("Decode", 3, 3)],
        3,
        [(1, 1, []), (3, 3, [])],
        ["Initializing"],
    ),
    Expected(
        "llminferenceservice.yaml",
        "serving-kserve-io-llminferenceservice-v1alpha1",
        [("main", 2, 2), ("worker", 0, 0), ("prefill", 1, 1), ("router-scheduler", 1, 0)],
        3,
        [(2, 2, []), (1, 1, []), (1, 1, [])],
        ["Undefined"],  # no status yet
    ),
    Expected(
        "llminferenceservice-v1alpha2.yaml",
        "serving-kserve-io-llminferenceservice-v1alpha2",
        # multi-node: replicas 1 x (data 4 / dataLocal 2) worker pods at 8 GPUs, no main pods
        [("main", 0, 0), ("worker", 2, 16), ("prefill", 0, 0), ("router-scheduler", 1, 0)],
        16,
        [(2, 2, []), (1, 1, [])],
        ["Initializing"],  # Ready False, MinimumReplicasUnavailable
    ),
    Expected(
        "sandbox.yaml",
        "agents-x-k8s-io-sandbox-v1beta1",
        [("agent", 1, 1)],
        1,
        [(1, 1, [])],
        ["Running"],
    ),
]


@pytest.fixture(scope="module")
def registry() -> DefinitionRegistry:
    return catalog_registry()


def describe(name: str, registry: DefinitionRegistry) -> dict[str, Any]:
    return describe_workload(yaml.safe_load((FIXTURES / name).read_text()), registry)


def test_every_catalog_definition_has_a_case() -> None:
    names = {d.name for d in load_catalog(JqEvaluator())}
    assert len(names) >= 20
    assert names == {case.definition for case in CASES}


CATALOG = Path(__file__).parents[3] / "kai" / "workloads" / "catalog"


@pytest.mark.parametrize("path", sorted(CATALOG.glob("*.yaml")), ids=lambda path: path.name)
def test_every_catalog_program_compiles(path: Path) -> None:
    """A start loads the catalog without compiling it (kai.workloads.loader): this is where a
    program of it that libjq refuses is caught, as it is for a user's definition file."""
    compiled = JqEvaluator()
    load_definition(yaml.safe_load(path.read_text()), compiled, "file")


def test_loading_the_catalog_compiles_no_program() -> None:
    jq = JqEvaluator()
    catalog = load_catalog(jq)
    assert catalog and jq.compiled_programs == 0
    assert JqEvaluator().check(".spec | .replicas(", compile_program=False) == []
    assert JqEvaluator().check(".spec | .replicas(") != []


@pytest.mark.parametrize("case", CASES, ids=[case.fixture for case in CASES])
def test_describe_and_group(case: Expected, registry: DefinitionRegistry) -> None:
    document = describe(case.fixture, registry)
    assert document["definition"] == case.definition
    assert document["origin"] == "catalog"
    assert [
        (c["name"], c["pods"], c["resources"]["gpus"]) for c in document["components"]
    ] == case.components
    assert document["resources"]["gpus"] == case.gpus
    groups = [
        (g["minMember"], g["pods"], [s["name"] for s in g.get("subGroups", [])])
        for g in document["podGroups"]
    ]
    assert groups == case.groups
    assert document["phases"] == case.phases


def test_reference_jobset_is_one_workload_of_12_gpus_in_one_gang(
    registry: DefinitionRegistry,
) -> None:
    document = describe("jobset.yaml", registry)
    assert document["resources"] == {"gpus": 12, "cpuMillis": 24000, "memoryBytes": 103079215104}
    assert document["components"][1]["kind"] == "batch/v1 Job"
    assert document["components"][1]["replicas"] == 2
    group = document["podGroup"]
    assert group["minMember"] == 3
    assert [(s["name"], s["minMember"]) for s in group["subGroups"]] == [
        ("leader", 1),
        ("workers", 2),
    ]
    assert [s["name"] for s in group["subGroups"][1]["subGroups"]] == ["workers-0", "workers-1"]
    assert group["queue"] == "team-a"


def test_file_mode_falls_back_to_another_version_of_the_kind(registry: DefinitionRegistry) -> None:
    obj = yaml.safe_load((FIXTURES / "raycluster.yaml").read_text())
    obj["apiVersion"] = "ray.io/v1alpha1"
    document = describe_workload(obj, registry)
    assert document["definition"] == "ray-io-raycluster-v1"
    assert document["resources"]["gpus"] == 6


def test_a_cluster_definition_overrides_the_catalog_one() -> None:
    jq = JqEvaluator()
    catalog = load_catalog(jq)
    job_definition = next(d for d in catalog if d.name == "batch-job-v1")
    document = dict(job_definition.document)
    document["metadata"] = {"name": "my-job-definition"}
    override = load_definition(document, jq, "cluster")
    registry = DefinitionRegistry(catalog=catalog, cluster=[override], jq=jq)
    described = describe_workload(yaml.safe_load((FIXTURES / "job.yaml").read_text()), registry)
    assert (described["definition"], described["origin"]) == ("my-job-definition", "cluster")
    assert len(registry.definitions()) == len(catalog)
