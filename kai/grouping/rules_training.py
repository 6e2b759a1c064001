"""Grouping rules for Kubeflow training jobs: PyTorchJob, TFJob, XGBoostJob, JAXJob, MPIJob.

The gang is the whole job (kai-semantics §14.3): `runPolicy.schedulingPolicy.minAvailable`
when set, else the sum of every replica spec's replicas (PyTorch counts its workers
at `elasticPolicy.minReplicas`). Some replica specs are mandatory. PyTorch jobs get
sub-groups `master` and `worker`; with `kai.scheduler/segment-size` on the Worker
template (or the pod), `worker` is split into fixed-size segments `worker-<i>`, each with
the segment topology constraint (KAI's segments, docs/topology.md). An MPIJob whose launcher waits for ready
workers (`launcherCreationPolicy: WaitForWorkersReady`) does not count the launcher
while the pod being grouped is a worker, since the launcher pod does not exist yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kai.grouping.context import GroupingInput, spec_of, whole_number
from kai.grouping.plan import GroupDecision, SubGroupSpec, default_group_name
from kai.workloads.objects import annotations_of

REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
SEGMENT_SIZE = "kai.scheduler/segment-size"
SEGMENT_REQUIRED = "kai.scheduler/segment-topology-required-placement"
SEGMENT_PREFERRED = "kai.scheduler/segment-topology-preferred-placement"
TOPOLOGY = "kai.scheduler/topology"
MAX_SEGMENTS = 10_000
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"


@dataclass(frozen=True, slots=True)
class TrainingKind:
    specs_field: str
    mandatory: tuple[str, ...] = ()


TRAINING_KINDS = {
    "PyTorchJob": TrainingKind("pytorchReplicaSpecs"),
    "TFJob": TrainingKind("tfReplicaSpecs"),
    "XGBoostJob": TrainingKind("xgbReplicaSpecs", ("Master", "Worker")),
    "JAXJob": TrainingKind("jaxReplicaSpecs", ("Worker",)),
    "MPIJob": TrainingKind("mpiReplicaSpecs", ("Launcher", "Worker")),
}


def training_rule(inp: GroupingInput) -> GroupDecision:
    job = inp.top
    kind = TRAINING_KINDS[str(job.get("kind"))]
    replicas = _replica_counts(inp, kind)
    if str(job.get("kind")) == "PyTorchJob":
        return _pytorch(inp, replicas)
    if str(job.get("kind")) == "MPIJob" and _launcher_not_started(inp):
        replicas.pop("Launcher", None)
    return GroupDecision(name=default_group_name(job), min_member=_min_available(inp, replicas))


def _pytorch(inp: GroupingInput, replicas: dict[str, int]) -> GroupDecision:
    elastic_min = (spec_of(inp.top).get("elasticPolicy") or {}).get("minReplicas")
    if elastic_min is not None and "Worker" in replicas:
        replicas["Worker"] = whole_number(inp, elastic_min, "spec.elasticPolicy.minReplicas", 0)
    subgroups = [
        SubGroupSpec(name=role.lower(), min_member=count)
        for role, count in replicas.items()
        if role in ("Master", "Worker") and count > 0
    ]
    role = (inp.pod_label(REPLICA_TYPE_LABEL) or "").lower()
    pod_subgroup = role if role in {sub.name for sub in subgroups} else None
    minimum = _min_available(inp, replicas)
    size = _segment_size(inp)
    if size is not None and any(sub.name == "worker" for sub in subgroups):
        workers = _worker_replicas(inp)
        worker_min = max(0, minimum - replicas.get("Master", 0))
        segments = _segments(inp, workers, worker_min, size)
        if segments:
            subgroups = [sub for sub in subgroups if sub.name != "worker"] + segments
            if role == "worker":
                pod_subgroup = f"worker-{_replica_index(inp) // size}"
    return GroupDecision(
        name=default_group_name(inp.top),
        min_member=minimum,
        subgroups=tuple(subgroups),
        pod_subgroup=pod_subgroup,
    )


def _worker_template_annotation(inp: GroupingInput, key: str) -> str | None:
    """An annotation of the pod, else of the Worker replica's pod template."""
    value = inp.pod_annotation(key)
    if value:
        return value
    worker = (spec_of(inp.top).get("pytorchReplicaSpecs") or {}).get("Worker") or {}
    template = worker.get("template") if isinstance(worker, Mapping) else None
    metadata = template.get("metadata") if isinstance(template, Mapping) else None
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    found = annotations.get(key) if isinstance(annotations, Mapping) else None
    return str(found) if found else None


def _segment_size(inp: GroupingInput) -> int | None:
    value = _worker_template_annotation(inp, SEGMENT_SIZE)
    if value is None:
        return None
    field = f"spec.pytorchReplicaSpecs.Worker.template.metadata.annotations[{SEGMENT_SIZE}]"
    return whole_number(inp, value, field, 0, minimum=1)


def _worker_replicas(inp: GroupingInput) -> int:
    worker = (spec_of(inp.top).get("pytorchReplicaSpecs") or {}).get("Worker") or {}
    replicas = worker.get("replicas") if isinstance(worker, Mapping) else None
    return whole_number(inp, replicas, "spec.pytorchReplicaSpecs.Worker.replicas", 1)


def _segments(inp: GroupingInput, workers: int, worker_min: int, size: int) -> list[SubGroupSpec]:
    """`worker` as a parent of ceil(workers / size) segments: those that cover the first
    `worker_min` workers must be whole (the last one may be partial), the rest are elastic
    (minimum 0), each with the segment topology constraint."""
    count = -(-workers // size)
    if count > MAX_SEGMENTS:
        raise inp.error(
            "spec.pytorchReplicaSpecs.Worker.replicas",
            f"{count} segments of {size} exceed the {MAX_SEGMENTS} allowed",
        )
    if count == 0:
        return []
    mandatory = -(-worker_min // size)
    partial = workers % size
    constraint = _segment_constraint(inp)
    segments = [SubGroupSpec("worker", min_subgroup=count)]
    for index in range(count):
        least = size if index < mandatory else 0
        if least and partial and index == count - 1:
            least = partial
        segments.append(
            SubGroupSpec(f"worker-{index}", min_member=least, parent="worker", topology=constraint)
        )
    return segments


def _segment_constraint(inp: GroupingInput) -> dict[str, str] | None:
    topology = _worker_template_annotation(inp, TOPOLOGY) or annotations_of(inp.top).get(TOPOLOGY)
    required = _worker_template_annotation(inp, SEGMENT_REQUIRED)
    preferred = _worker_template_annotation(inp, SEGMENT_PREFERRED)
    if not topology or not (required or preferred):
        return None
    constraint = {"topology": topology}
    if required:
        constraint["requiredTopologyLevel"] = required
    if preferred:
        constraint["preferredTopologyLevel"] = preferred
    return constraint


def _replica_index(inp: GroupingInput) -> int:
    value = inp.pod_label(REPLICA_INDEX_LABEL)
    if value is None:
        raise inp.error(
            "metadata.labels", f"worker pod has no {REPLICA_INDEX_LABEL} label to find its segment"
        )
    return whole_number(inp, value, f"metadata.labels[{REPLICA_INDEX_LABEL}]", 0)


def _replica_counts(inp: GroupingInput, kind: TrainingKind) -> dict[str, int]:
    specs = spec_of(inp.top).get(kind.specs_field)
    field = f"spec.{kind.specs_field}"
    if not isinstance(specs, Mapping) or not specs:
        raise inp.error(field, "needs at least one replica spec")
    for role in kind.mandatory:
        if role not in specs:
            raise inp.error(f"{field}.{role}", f"is required for a {inp.top.get('kind')}")
    counts = {}
    for role, spec in specs.items():
        replicas = spec.get("replicas") if isinstance(spec, Mapping) else None
        counts[str(role)] = whole_number(inp, replicas, f"{field}.{role}.replicas", 1)
    if sum(counts.values()) == 0:
        raise inp.error(field, "every replica spec has 0 replicas")
    return counts


def _min_available(inp: GroupingInput, replicas: Mapping[str, int]) -> int:
    policy = (spec_of(inp.top).get("runPolicy") or {}).get("schedulingPolicy") or {}
    field = "spec.runPolicy.schedulingPolicy.minAvailable"
    return whole_number(inp, policy.get("minAvailable"), field, sum(replicas.values()), minimum=1)


def _launcher_not_started(inp: GroupingInput) -> bool:
    policy: Any = spec_of(inp.top).get("launcherCreationPolicy")
    return policy == "WaitForWorkersReady" and inp.pod_label(JOB_ROLE_LABEL) != "launcher"
