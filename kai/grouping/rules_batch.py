"""Grouping rules for batch kinds: Job and JobSet (kai-semantics §14.3, v0.17).

A Job is one gang of minimum 1 unless `kai.scheduler/batch-min-member` says more.
A JobSet is one PodGroup whose sub-groups mirror it: a parent per replicatedJob
needing all of its replicas (minSubGroup = replicas), a leaf per replica (one Job)
needing its parallelism; the root needs every replicatedJob, or only the first to
start under `InOrder` startup.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kai.grouping.context import GroupingInput, spec_of, whole_number
from kai.grouping.plan import GroupDecision, SubGroupSpec, default_group_name
from kai.workloads.objects import annotations_of

BATCH_MIN_MEMBER_ANNOTATION = "kai.scheduler/batch-min-member"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
MAX_JOBSET_JOBS = 10_000
"""Jobs of one JobSet kai groups: each is a sub-group of its PodGroup, which kai writes to
the API server (0.5 MiB at 10,000; etcd stores no object past 1.5 MiB). A JobSet's replicas
may be any int32; one of 10^9 made the grouper build that many sub-groups in memory."""


def job_rule(inp: GroupingInput) -> GroupDecision:
    job = inp.top
    value = annotations_of(job).get(BATCH_MIN_MEMBER_ANNOTATION) or inp.pod_annotation(
        BATCH_MIN_MEMBER_ANNOTATION
    )
    field = f"metadata.annotations[{BATCH_MIN_MEMBER_ANNOTATION}]"
    return GroupDecision(
        name=default_group_name(job), min_member=whole_number(inp, value, field, 1, minimum=1)
    )


def jobset_rule(inp: GroupingInput) -> GroupDecision:
    jobset = inp.top
    replicated_jobs = spec_of(jobset).get("replicatedJobs") or []
    if not replicated_jobs:
        raise inp.error("spec.replicatedJobs", "a JobSet needs at least one replicatedJob")
    subgroups: list[SubGroupSpec] = []
    for index, replicated in enumerate(replicated_jobs):
        jobs_left = MAX_JOBSET_JOBS - (len(subgroups) - index)  # a parent per replicatedJob
        subgroups.extend(
            _replicated_job_subgroups(inp, replicated, f"spec.replicatedJobs[{index}]", jobs_left)
        )
    startup = (spec_of(jobset).get("startupPolicy") or {}).get("startupPolicyOrder")
    root_min = 1 if startup == "InOrder" else len(replicated_jobs)
    override = annotations_of(jobset).get(BATCH_MIN_MEMBER_ANNOTATION)
    if override is not None:
        field = f"metadata.annotations[{BATCH_MIN_MEMBER_ANNOTATION}]"
        root_min = min(root_min, whole_number(inp, override, field, root_min, minimum=1))
    replicated_name = inp.pod_label(REPLICATED_JOB_LABEL)
    job_index = inp.pod_label(JOB_INDEX_LABEL)
    pod_subgroup = (
        f"{replicated_name}-{job_index}" if replicated_name and job_index is not None else None
    )
    return GroupDecision(
        name=default_group_name(jobset),
        min_member=None,
        min_subgroup=root_min,
        subgroups=tuple(subgroups),
        pod_subgroup=pod_subgroup,
    )


def _replicated_job_subgroups(
    inp: GroupingInput, replicated: Mapping[str, Any], field: str, jobs_left: int
) -> list[SubGroupSpec]:
    name = str(replicated.get("name") or "")
    if not name:
        raise inp.error(f"{field}.name", "is required")
    replicas = whole_number(inp, replicated.get("replicas"), f"{field}.replicas", 1, minimum=1)
    if replicas > jobs_left:
        raise inp.error(
            f"{field}.replicas",
            f"{replicas:,} more Jobs would take the JobSet past {MAX_JOBSET_JOBS:,}, the sub-groups"
            " kai writes in one PodGroup",
        )
    template = replicated.get("template") or {}
    job_spec = template.get("spec") or {}
    template_override = (
        (template.get("metadata") or {}).get("annotations", {}).get(BATCH_MIN_MEMBER_ANNOTATION)
    )
    leaf_min = whole_number(
        inp, job_spec.get("parallelism"), f"{field}.template.spec.parallelism", 1, minimum=1
    )
    if template_override is not None:
        leaf_min = whole_number(
            inp,
            template_override,
            f"{field}.template.metadata.annotations[{BATCH_MIN_MEMBER_ANNOTATION}]",
            leaf_min,
            minimum=1,
        )
    parent = SubGroupSpec(name=name, min_subgroup=replicas)
    leaves = [
        SubGroupSpec(name=f"{name}-{index}", min_member=leaf_min, parent=name)
        for index in range(replicas)
    ]
    return [parent, *leaves]
