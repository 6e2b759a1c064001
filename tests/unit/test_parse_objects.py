"""parse_objects: many files, every problem reported on one line, other objects passed through."""

from __future__ import annotations

from typing import Any

import yaml

from kai.api.parse import parse_objects

CLUSTER = """
apiVersion: v1
kind: Node
metadata: {name: node-1, labels: {nvidia.com/gpu.memory: "81920"}}
status: {allocatable: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8", pods: "110"}}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: root}
spec:
  resources:
    gpu: {quota: -1, limit: -1}
    cpu: {quota: -1, limit: -1}
    memory: {quota: -1, limit: -1}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: team-a}
spec:
  parentQueue: root
  resources:
    gpu: {quota: 8, limit: -1}
    cpu: {quota: -1, limit: -1}
    memory: {quota: -1, limit: -1}
"""

WORK = """
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata: {name: pg-train, namespace: ml}
spec: {minMember: 1, queue: team-a, priorityClassName: critical}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: critical}
value: 1000
---
apiVersion: v1
kind: Pod
metadata:
  name: train-0
  namespace: ml
  annotations: {pod-group-name: pg-train, gpu-fraction: "0.5"}
spec:
  schedulerName: kai-scheduler
  containers: [{name: main, resources: {requests: {cpu: "1", memory: 4Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: loose, namespace: ml}
spec:
  schedulerName: kai-scheduler
  containers: [{name: main}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: etl, namespace: ml}
spec: {parallelism: 2}
"""


def docs(source: str, text: str) -> list[tuple[str, Any]]:
    return [(source, doc) for doc in yaml.safe_load_all(text)]


def test_a_valid_cluster_is_read_completely() -> None:
    parsed = parse_objects(docs("cluster.yaml", CLUSTER) + docs("work.yaml", WORK))
    assert parsed.problems == []
    assert parsed.warnings == []
    assert [n.name for n in parsed.nodes] == ["node-1"]
    assert [q.name for q in parsed.queues] == ["root", "team-a"]
    # The class is defined after the group that names it.
    assert [(g.key, g.priority, g.preemptible) for g in parsed.pod_groups] == [
        ("ml/pg-train", 1000, False)
    ]
    assert parsed.priority_classes["critical"] == 1000
    assert parsed.priority_classes["train"] == 50
    assert [(p.pod.key, p.pod.group, p.source) for p in parsed.pods] == [
        ("ml/train-0", "ml/pg-train", "work.yaml"),
        ("ml/loose", "", "work.yaml"),
    ]
    assert parsed.pods[1].manifest["metadata"]["name"] == "loose"
    assert [(o.source, o.manifest["kind"]) for o in parsed.others] == [("work.yaml", "Job")]


def test_every_problem_in_every_file_is_reported_on_one_line() -> None:
    broken = """
apiVersion: v1
kind: Node
metadata: {name: node-2}
status: {allocatable: {cpu: lots, memory: 16GB}}
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml, annotations: {gpu-fraction: "1.5"}}
spec: {containers: [{name: main}]}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: orphan}
spec:
  parentQueue: nowhere
  resources: {gpu: {quota: -3, limit: -1}}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: loose}
spec:
  parentQueue: nowhere
  resources: {gpu: {limit: -1}, cpu: {limit: -1}}
"""
    parsed = parse_objects(docs("cluster.yaml", CLUSTER) + docs("broken.yaml", broken))
    assert parsed.problems == [
        "broken.yaml: Node node-2: status.allocatable.cpu: "
        "'lots' is not a quantity (expected e.g. 500m, 16Gi, 1e3)",
        "broken.yaml: Node node-2: status.allocatable.memory: "
        "'16GB' is not a quantity (expected e.g. 500m, 16Gi, 1e3)",
        "broken.yaml: Pod ml/p: metadata.annotations.gpu-fraction: must be a portion of one "
        "device in (0, 1] such as 0.5, or a whole number of devices, got '1.5'",
        "broken.yaml: Queue orphan: spec.resources.gpu.quota: "
        "must be -1 (unlimited) or at least 0, got -3",
        "broken.yaml: Queue loose: spec.parentQueue: parent queue 'nowhere' does not exist",
    ]
    assert parsed.warnings == [
        "broken.yaml: Queue loose: spec.resources.memory.limit: unset, which KAI reads as 0: "
        "no pod that requests memory can run in this queue or below it; write -1 for no limit"
    ]


def test_lists_are_opened_and_empty_documents_skipped() -> None:
    listed = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a"}},
            {
                "apiVersion": "v1",
                "kind": "NodeList",
                "items": [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "b"}}],
            },
        ],
    }
    parsed = parse_objects([("nodes.yaml", listed), ("nodes.yaml", None)])
    assert parsed.problems == []
    assert [n.name for n in parsed.nodes] == ["a", "b"]


def test_shapeless_documents_and_missing_kind_or_api_version_are_problems() -> None:
    parsed = parse_objects(
        [
            ("a.yaml", ["not", "an", "object"]),
            ("a.yaml", {"apiVersion": "v1", "metadata": {"name": "x"}}),
            ("a.yaml", {"kind": "Node", "metadata": {"name": "y"}}),
        ]
    )
    assert parsed.problems == [
        "a.yaml: document: expected an object, got list",
        "a.yaml: Object x: kind: required",
        "a.yaml: Node y: apiVersion: required",
    ]


def test_an_object_defined_twice_is_a_problem_naming_both_files() -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}}
    same_name_other_namespace = {**pod, "metadata": {"name": "p", "namespace": "other"}}
    parsed = parse_objects(
        [("a.yaml", node), ("b.yaml", node), ("a.yaml", pod), ("b.yaml", same_name_other_namespace)]
    )
    assert parsed.problems == ["b.yaml: Node n: metadata.name: also defined in a.yaml"]
    assert [p.pod.key for p in parsed.pods] == ["default/p", "other/p"]


def test_another_version_of_a_kai_kind_is_a_problem_and_another_groups_kind_passes_through() -> (
    None
):
    old_queue = {"apiVersion": "scheduling.run.ai/v1", "kind": "Queue", "metadata": {"name": "q"}}
    volcano_queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "q"},
    }
    parsed = parse_objects([("a.yaml", old_queue), ("b.yaml", volcano_queue)])
    assert parsed.problems == [
        "a.yaml: Queue q: apiVersion: scheduling.run.ai/v1 is not supported; use scheduling.run.ai/v2"
    ]
    assert [o.manifest for o in parsed.others] == [volcano_queue]
    assert parsed.queues == []


def test_all_problems_of_one_object_are_listed() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "annotations": {"gpu-memory": "lots", "gpu-fraction-num-devices": "0"},
        },
        "spec": {"containers": [{"name": "main"}]},
    }
    parsed = parse_objects([("p.yaml", pod)])
    assert parsed.problems == [
        "p.yaml: Pod default/p: metadata.annotations.gpu-fraction-num-devices: "
        "must be a positive whole number, got '0'",
        "p.yaml: Pod default/p: metadata.annotations.gpu-memory: "
        "must be a positive whole number of MiB, got 'lots'",
    ]
    assert parsed.pods == []


def test_queue_cycles_are_reported_with_each_queues_file() -> None:
    def queue(name: str, parent: str) -> dict[str, Any]:
        limits = {"limit": -1}
        return {
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {
                "parentQueue": parent,
                "resources": {"gpu": limits, "cpu": limits, "memory": limits},
            },
        }

    parsed = parse_objects([("a.yaml", queue("a", "b")), ("b.yaml", queue("b", "a"))])
    assert parsed.problems == [
        "a.yaml: Queue a: spec.parentQueue: queues form a cycle: a -> b -> a",
        "b.yaml: Queue b: spec.parentQueue: queues form a cycle: a -> b -> a",
    ]


def test_a_pod_group_naming_a_missing_priority_class_is_a_warning() -> None:
    group = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ml"},
        "spec": {"queue": "q", "priorityClassName": "urgent"},
    }
    parsed = parse_objects([("g.yaml", group)])
    assert parsed.problems == []
    assert parsed.warnings == [
        "g.yaml: PodGroup ml/pg: spec.priorityClassName: PriorityClass 'urgent' does not exist; "
        "the group gets priority 50"
    ]
    assert parsed.pod_groups[0].priority == 50


def test_a_priority_class_may_redefine_a_built_in_one() -> None:
    train = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "train"},
        "value": 10,
    }
    bad = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "x"},
        "value": "high",
    }
    parsed = parse_objects([("pc.yaml", train), ("pc.yaml", bad)])
    assert parsed.priority_classes["train"] == 10
    assert parsed.problems == [
        "pc.yaml: PriorityClass x: value: Input should be a valid integer, got 'high'"
    ]


def test_the_child_of_an_invalid_queue_is_not_called_an_orphan() -> None:
    limits = {"limit": -1}
    parent = {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": "dept"},
        "spec": {"resources": {"gpu": {"quota": -5}}},
    }
    child = {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": "team"},
        "spec": {
            "parentQueue": "dept",
            "resources": {"gpu": limits, "cpu": limits, "memory": limits},
        },
    }
    parsed = parse_objects([("q.yaml", parent), ("q.yaml", child)])
    assert parsed.problems == [
        "q.yaml: Queue dept: spec.resources.gpu.quota: must be -1 (unlimited) or at least 0, got -5"
    ]
