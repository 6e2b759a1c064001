"""Upstream's examples through `kai workload describe`: upstream's answers, upstream's definitions.

Each case is an object from upstream's public material (its README demo, its CLI test data
and the objects its describe tests build), with the answer upstream's test or README states
for it. Every case runs twice: through upstream's own definitions, as a cluster holding
them would describe it, and through kai's built-in catalog, which must agree. The
definitions themselves must load, and the catalog must name its components as upstream does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from kai.cli.describe import NoDefinitionError, describe_workload
from kai.workloads.catalog import catalog_registry
from kai.workloads.jqeval import JqEvaluator
from kai.workloads.loader import load_definition
from kai.workloads.objects import gvk_of
from kai.workloads.registry import DefinitionRegistry
from tests.unit.workloads.upstream_material import (
    definition_document,
    definition_files,
    upstream_registry,
)

GI = 1024**3
MI = 1024**2

Document = dict[str, Any]


def manifest(text: str) -> dict[str, Any]:
    loaded = yaml.safe_load(text)
    assert isinstance(loaded, dict)
    return loaded


README_LWS_DEMO = manifest("""
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: demo}
spec:
  replicas: 2
  leaderWorkerTemplate:
    size: 2
    leaderTemplate:
      spec:
        containers:
        - {name: inference-leader, image: ghcr.io/example/inference:latest,
           resources: {limits: {nvidia.com/gpu: 8}}}
    workerTemplate:
      spec:
        containers:
        - {name: inference-worker, image: ghcr.io/example/inference:latest,
           resources: {limits: {nvidia.com/gpu: 8}}}
""")
CLI_LEADERWORKERSET = manifest("""
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: serve-llm, namespace: ml-team}
spec:
  replicas: 2
  leaderWorkerTemplate:
    size: 4
    leaderTemplate:
      spec: {containers: [{name: leader, resources: {requests: {nvidia.com/gpu: "1"}}}]}
    workerTemplate:
      spec: {containers: [{name: worker, resources: {requests: {nvidia.com/gpu: "8"}}}]}
""")
CLI_PYTORCHJOB = manifest("""
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: llama-finetune, namespace: ml-team}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec: {containers: [{name: pytorch, resources: {requests: {nvidia.com/gpu: "1"}}}]}
    Worker:
      replicas: 4
      template:
        spec: {containers: [{name: pytorch, resources: {requests: {nvidia.com/gpu: "8"}}}]}
""")
CLI_DEPLOYMENT = manifest("""
apiVersion: apps/v1
kind: Deployment
metadata: {name: embed-svc, namespace: ml-team}
spec:
  replicas: 3
  template:
    spec:
      automountServiceAccountToken: false
      containers:
      - name: server
        resources: {limits: {nvidia.com/gpu: "2", cpu: 200m, memory: 2Gi}}
""")
DEPLOYMENT_SCALED_TO_ZERO = manifest("""
apiVersion: apps/v1
kind: Deployment
metadata: {name: embed-svc, namespace: ml-team}
spec:
  replicas: 0
  template:
    spec: {containers: [{name: server}]}
""")
DEPLOYMENT_CPU_MEMORY = manifest("""
apiVersion: apps/v1
kind: Deployment
metadata: {name: embed-svc, namespace: ml-team}
spec:
  replicas: 2
  template:
    spec:
      containers:
      - {name: server, resources: {requests: {cpu: "500m", memory: "1Gi"}}}
""")
DEPLOYMENT_POD_LEVEL = manifest("""
apiVersion: apps/v1
kind: Deployment
metadata: {name: embed-svc, namespace: ml-team}
spec:
  replicas: 2
  template:
    spec:
      overhead: {cpu: "100m", memory: "128Mi"}
      resources: {requests: {cpu: "2", memory: "4Gi"}}
      containers:
      - name: server
        resources: {requests: {cpu: "500m", memory: "1Gi", nvidia.com/gpu: "1"}}
""")
CLI_DYNAMO = manifest("""
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: my-pipeline, namespace: ml-team}
spec:
  services:
    Frontend: {replicas: 2, resources: {requests: {nvidia.com/gpu: "1"}}}
    PrefillWorker: {replicas: 4, resources: {requests: {nvidia.com/gpu: "8"}}}
""")
# CLI_DYNAMO at v1beta1, whose components are a list, each with a pod template whose container
# "main" runs it (upstream's v1beta1 definition reads that container alone).
DYNAMO_V1BETA1 = manifest("""
apiVersion: nvidia.com/v1beta1
kind: DynamoGraphDeployment
metadata: {name: my-pipeline, namespace: ml-team}
spec:
  components:
  - name: Frontend
    replicas: 2
    podTemplate:
      spec: {containers: [{name: main, resources: {requests: {nvidia.com/gpu: "1"}}}]}
  - name: PrefillWorker
    replicas: 4
    podTemplate:
      spec: {containers: [{name: main, resources: {requests: {nvidia.com/gpu: "8"}}}]}
""")
DYNAMO_CR_LEVEL_REQUEST = manifest("""
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: my-pipeline, namespace: ml-team}
spec:
  services:
    Frontend:
      replicas: 1
      resources: {requests: {nvidia.com/gpu: "4"}}
      extraPodSpec: {mainContainer: {name: main, image: "svc:v1"}}
""")
DYNAMO_SINGLE_INSTANCE = manifest("""
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: my-pipeline, namespace: ml-team}
spec:
  services:
    Frontend: {replicas: 1}
""")
GROVE_SCALING_GROUP = manifest("""
apiVersion: grove.io/v1alpha1
kind: PodCliqueSet
metadata: {name: serve, namespace: ml-team}
spec:
  replicas: 1
  template:
    cliques:
    - {name: worker, spec: {replicas: 2, podSpec: {containers: [{name: main}]}}}
    podCliqueScalingGroups:
    - {name: sg, replicas: 3}
""")
MILVUS_PROXY = manifest("""
apiVersion: milvus.io/v1beta1
kind: Milvus
metadata: {name: vectors, namespace: ml-team}
spec:
  components:
    proxy: {replicas: 1}
""")
CLI_INFERENCESERVICE = manifest("""
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: embed-svc, namespace: ml-team}
spec:
  predictor:
    minReplicas: 4
    model:
      storageUri: s3://models/embed
      resources: {requests: {nvidia.com/gpu: "2"}}
""")
CLI_JOBSET = manifest("""
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: preprocess, namespace: ml-team}
spec:
  replicatedJobs:
  - name: etl
    replicas: 1
    template:
      spec:
        parallelism: 3
        template:
          spec:
            containers: [{name: worker, resources: {requests: {nvidia.com/gpu: "2"}}}]
""")


def at_version(obj: Mapping[str, Any], api_version: str) -> dict[str, Any]:
    return {**obj, "apiVersion": api_version}


def component(document: Document, name: str) -> dict[str, Any]:
    """The describe entry of a component or instance, by its shown name."""
    entries: list[dict[str, Any]] = [
        entry for entry in document["components"] if entry["name"] == name
    ]
    assert entries, f"no component {name!r} in {[e['name'] for e in document['components']]}"
    return entries[0]


def pods_and_gpus(document: Document, name: str) -> tuple[int, int | float]:
    entry = component(document, name)
    return entry["pods"], entry["resources"]["gpus"]


def names(document: Document) -> list[str]:
    return [entry["name"] for entry in document["components"]]


def gangs(document: Document) -> list[tuple[int, int]]:
    return sorted((group["minMember"], group["pods"]) for group in document["podGroups"])


@dataclass(frozen=True)
class Case:
    """An upstream example, what to read from kai's answer, and the answer upstream states."""

    id: str
    obj: Mapping[str, Any]
    observe: Callable[[Document], object]
    answer: object


def _shown(document: Document, *wanted: str) -> list[str]:
    return [name for name in names(document) if name in wanted]


CASES = [
    # README, "From YAML to Workload Tree": 4 pods, 32 GPUs, one gang per group of a
    # leader and a worker at 8 GPUs each.
    Case(
        "readme-lws-demo",
        README_LWS_DEMO,
        lambda d: (
            pods_and_gpus(d, "leader"),
            pods_and_gpus(d, "worker"),
            d["resources"]["gpus"],
            gangs(d),
        ),
        ((2, 16), (2, 16), 32, [(2, 2), (2, 2)]),
    ),
    # cli describe_test: "leader 2 plus worker 6, not plus the group's own 2".
    Case("lws-group-scale", CLI_LEADERWORKERSET, lambda d: component(d, "group")["pods"], 8),
    # cli describe_test: master 1 (1 GPU), worker 4 ("8 per replica across 4 replicas"), 33.
    Case(
        "pytorchjob",
        CLI_PYTORCHJOB,
        lambda d: (pods_and_gpus(d, "master"), pods_and_gpus(d, "worker"), d["resources"]["gpus"]),
        ((1, 1), (4, 32), 33),
    ),
    # cli describe_test: one component, 3 replicas, 6 GPUs ("a limit counts when no request
    # is set"); the ReplicaSet child that carries nothing is collapsed.
    Case(
        "deployment",
        CLI_DEPLOYMENT,
        lambda d: (names(d), pods_and_gpus(d, "deployment")),
        (["deployment"], (3, 6)),
    ),
    # cli describe_test: "keeps a pod-bearing component scaled to zero".
    Case(
        "deployment-zero",
        DEPLOYMENT_SCALED_TO_ZERO,
        lambda d: (names(d), component(d, "deployment")["pods"]),
        (["deployment"], 0),
    ),
    # cli describe_test: "sums cpu as millicores and memory as bytes".
    Case(
        "deployment-cpu-memory",
        DEPLOYMENT_CPU_MEMORY,
        lambda d: d["resources"],
        {"gpus": 0, "cpuMillis": 1000, "memoryBytes": 2 * GI},
    ),
    # cli describe_test: "2000m pod-level plus 100m overhead, twice"; "a pod-level request
    # cannot name an extended resource".
    Case(
        "deployment-pod-level",
        DEPLOYMENT_POD_LEVEL,
        lambda d: d["resources"],
        {"gpus": 2, "cpuMillis": 2 * 2100, "memoryBytes": 2 * (4 * GI + 128 * MI)},
    ),
    # cli describe_test: "splits a multi-instance component into one child per instance".
    Case(
        "dynamo-services",
        CLI_DYNAMO,
        lambda d: (
            pods_and_gpus(d, "Frontend"),
            pods_and_gpus(d, "PrefillWorker"),
            d["resources"]["gpus"],
        ),
        ((2, 2), (4, 32), 34),
    ),
    # The same example at v1beta1: each component is an instance named as written.
    Case(
        "dynamo-v1beta1-components",
        DYNAMO_V1BETA1,
        lambda d: (
            pods_and_gpus(d, "Frontend"),
            pods_and_gpus(d, "PrefillWorker"),
            d["resources"]["gpus"],
        ),
        ((2, 2), (4, 32), 34),
    ),
    # Upstream's v1beta1 definition keys each gang by the component's name lower-cased, as a
    # PodGroup name must be: one gang per component, all of its pods.
    Case(
        "dynamo-v1beta1-gangs",
        DYNAMO_V1BETA1,
        lambda d: sorted((g["name"].rsplit("-", 1)[1], g["minMember"]) for g in d["podGroups"]),
        [("frontend", 2), ("prefillworker", 4)],
    ),
    # cli describe_test: "reads the CR-level request when a container override declares none".
    Case("dynamo-cr-level-request", DYNAMO_CR_LEVEL_REQUEST, lambda d: d["resources"]["gpus"], 4),
    # cli describe_test: "filters by instance when a component resolves to a single instance":
    # the Frontend row exists.
    Case(
        "dynamo-single-instance",
        DYNAMO_SINGLE_INSTANCE,
        lambda d: _shown(d, "Frontend"),
        ["Frontend"],
    ),
    # cli describe_test: "keeps a grouping component that declares its own scale": the
    # scalinggroup component, desired 3. Upstream's desired is a component's own scale when
    # it has no pods beneath it; kai's describe shows that as `replicas` and keeps `pods`
    # for pods, which a scaling group's cliques carry.
    Case(
        "grove-scaling-group",
        GROVE_SCALING_GROUP,
        lambda d: (component(d, "sg")["component"], component(d, "sg")["replicas"]),
        ("scalinggroup", 3),
    ),
    # cli describe_test: the proxy claims its pod; etcd, minio and pulsar-broker are shown.
    Case(
        "milvus-proxy",
        MILVUS_PROXY,
        lambda d: (component(d, "proxy")["pods"], _shown(d, "etcd", "minio", "pulsar-broker")),
        (1, ["etcd", "minio", "pulsar-broker"]),
    ),
    # issue 12 on the CLI test data: an InferenceService with only minReplicas counts from
    # the minimum, 4 pods and 8 GPUs.
    Case(
        "inferenceservice-min-replicas",
        CLI_INFERENCESERVICE,
        lambda d: pods_and_gpus(d, "predictor"),
        (4, 8),
    ),
    # cli describe cmd test: file mode shows the replicatedjob component.
    Case(
        "jobset-file-mode",
        CLI_JOBSET,
        lambda d: sorted({e["component"] for e in d["components"]}),
        ["replicatedjob"],
    ),
    # cli describe cmd test: a manifest at another served version of the kind resolves.
    Case(
        "jobset-other-version",
        at_version(CLI_JOBSET, "jobset.x-k8s.io/v1beta1"),
        lambda d: d["definition"],
        "jobset-x-k8s-io-jobset-v1alpha2",
    ),
]


SOURCES = ["upstream-definitions", "kai-catalog"]


@pytest.fixture(scope="module")
def catalog() -> DefinitionRegistry:
    return catalog_registry()


def registry_for(source: str, catalog: DefinitionRegistry) -> DefinitionRegistry:
    return upstream_registry() if source == "upstream-definitions" else catalog


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_describe_gives_upstreams_answer(
    case: Case, source: str, catalog: DefinitionRegistry
) -> None:
    assert case.observe(describe_workload(case.obj, registry_for(source, catalog))) == case.answer


@pytest.mark.parametrize("source", SOURCES)
def test_the_group_stays_strict_across_versions(source: str, catalog: DefinitionRegistry) -> None:
    """describe cmd test: the same kind in another group is another type."""
    with pytest.raises(NoDefinitionError):
        describe_workload(at_version(CLI_JOBSET, "example.com/v1"), registry_for(source, catalog))


def test_fragmented_containers_add_and_the_cr_level_request_defers_to_them() -> None:
    """describe_test: containers 2 + container 3 GPUs, the CR-level 99 restating them."""
    definition = load_definition(
        {
            "apiVersion": "run.ai/v1alpha1",
            "kind": "Karta",
            "metadata": {"name": "example-com-server-v1"},
            "spec": {
                "structureDefinition": {
                    "rootComponent": {
                        "name": "server",
                        "kind": {"group": "example.com", "version": "v1", "kind": "Server"},
                        "statusDefinition": {"statusMappings": {}},
                        "specDefinition": {
                            "fragmentedPodSpecDefinition": {
                                "containersPath": ".spec.containers",
                                "containerPath": ".spec.container",
                                "resourcesPath": ".spec.resources",
                            }
                        },
                    }
                }
            },
        },
        JqEvaluator(),
        "cluster",
    )
    gpus = {"requests": {"nvidia.com/gpu": "2"}}
    obj = {
        "apiVersion": "example.com/v1",
        "kind": "Server",
        "metadata": {"name": "s"},
        "spec": {
            "containers": [{"name": "main", "resources": gpus}],
            "container": {"name": "main", "resources": {"requests": {"nvidia.com/gpu": "3"}}},
            "resources": {"requests": {"nvidia.com/gpu": "99"}},
        },
    }
    document = describe_workload(obj, DefinitionRegistry(cluster=[definition]))
    assert document["resources"]["gpus"] == 5


@pytest.mark.parametrize("path", definition_files(), ids=[path.stem for path in definition_files()])
def test_upstream_definition_loads(path: Any) -> None:
    load_definition(yaml.safe_load(path.read_text()), JqEvaluator(), "cluster")


def _component_names(document: Mapping[str, Any]) -> set[str]:
    structure = document["spec"]["structureDefinition"]
    return {structure["rootComponent"]["name"]} | {
        child["name"] for child in structure.get("childComponents") or []
    }


@pytest.mark.parametrize("path", definition_files(), ids=[path.stem for path in definition_files()])
def test_catalog_has_the_type_with_upstreams_component_names(
    path: Any, catalog: DefinitionRegistry
) -> None:
    upstream = definition_document(path.stem)
    root = upstream["spec"]["structureDefinition"]["rootComponent"]["kind"]
    api_version = f"{root['group']}/{root['version']}" if root.get("group") else root["version"]
    ours = catalog.get(gvk_of({"apiVersion": api_version, "kind": root["kind"]}))
    assert ours is not None, f"the catalog has no definition for {api_version} {root['kind']}"
    assert ours.name == upstream["metadata"]["name"]
    assert {c.name for c in ours.components} == _component_names(upstream)


def test_status_keys_upstream_dropped_are_accepted_with_a_warning() -> None:
    """Older definitions map `pending` and `progressing`; upstream's loader now ignores them."""
    document = definition_document("apps-deployment-v1")
    mappings = document["spec"]["structureDefinition"]["rootComponent"]["statusDefinition"][
        "statusMappings"
    ]
    mappings["pending"] = [{"byConditions": [{"type": "Available", "status": "False"}]}]
    mappings["progressing"] = [{"byConditions": [{"type": "Progressing", "status": "True"}]}]
    definition = load_definition(document, JqEvaluator(), "cluster")
    base = "spec.structureDefinition.rootComponent.statusDefinition.statusMappings"
    assert [warning.path for warning in definition.warnings] == [
        f"{base}.pending",
        f"{base}.progressing",
    ]
    assert definition.root.status is not None
    assert {name for name, _ in definition.root.status.mappings} == {
        "Initializing",
        "Running",
        "Failed",
    }
