"""Grouping rules for Kubeflow training jobs: PyTorchJob, TFJob, XGBoostJob, JAXJob, MPIJob.

The gang is the whole job (kai-semantics §14.3): `runPolicy.schedulingPolicy.minAvailable`
when set, else the sum of every replica spec's replicas (PyTorch counts its workers
at `elasticPolicy.minReplicas`). Some replica specs are mandatory. PyTorch jobs get
sub-groups `master` and `worker`. An MPIJob whose launcher waits for ready
workers (`launcherCreationPolicy: WaitForWorkersReady`) does not count the launcher
while the pod being grouped is a worker, since the launcher pod does not exist yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kai.grouping.context import GroupingInput, spec_of, whole_number
from kai.grouping.plan import GroupDecision, SubGroupSpec, default_group_name

REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
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
    subgroups = tuple(
        SubGroupSpec(name=role.lower(), min_member=count)
        for role, count in replicas.items()
        if role in ("Master", "Worker") and count > 0
    )
    role = (inp.pod_label(REPLICA_TYPE_LABEL) or "").lower()
    return GroupDecision(
        name=default_group_name(inp.top),
        min_member=_min_available(inp, replicas),
        subgroups=subgroups,
        pod_subgroup=role if role in {sub.name for sub in subgroups} else None,
    )


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
