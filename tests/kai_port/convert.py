"""Convert KAI's table-driven action tests into kai scenarios (one YAML file per test case).

    python tests/kai_port/convert.py KAI_GIT_DIR [--tag v0.17.0] [--out tests/kai_port/cases]

KAI_GIT_DIR is a KAI checkout or bare mirror; files are read with `git show TAG:PATH`.
Only the tests' data is taken: the cluster each case describes (nodes, queues, jobs and
their tasks) becomes ordinary manifests in the `kai simulate` input format, and KAI's
expected per-task results and bind/evict/pipeline counts become an `expect` section.
How KAI's single-action expectations map onto kai's whole cycle is in README.md here.

A case that cannot be expressed is listed, with the reason, in UNCONVERTED.md; cases
that need features kai does not model (MIG, DRA, NUMA) are listed there too,
as "not supported".
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).parents[2]))  # run as a script: the repository root
from tests.kai_port.goeval import (
    Evaluator,
    GoStruct,
    SubGroupSet,
    Symbol,
    UnsupportedError,
    text,
)

NOW = datetime(2026, 6, 1, tzinfo=UTC)
NAMESPACE = "default"
MIG_STRATEGIES = {
    "MigStrategyMixed": "mixed",
    "MigStrategySingle": "single",
    "MigStrategyNone": "none",
}
"""KAI's `node_info.MigStrategy*` constants, as the node label spells them."""
ACTION_DIRS = ("allocate", "reclaim", "preempt", "consolidation", "stalegangeviction")
ACTIONS = set(ACTION_DIRS)
ALLOCATED = {"Running", "Bound", "Allocated", "Binding"}  # KAI's AllocatedStatus
ACTIVE_USED = ALLOCATED | {"Pipelined", "Releasing", "StuckInReleasing"}
DEFAULT_ROUNDS_UNTIL_MATCH = 2
DEFAULT_ROUNDS_AFTER_MATCH = 5
# Harness calls that mean the test checks or changes more than the table says.
CUSTOM_HARNESS = re.compile(
    r"AddOnJobSolutionStartFn|require\.|featuregates\.|ScenarioSearchBudgets|ssn\.Config|"
    r"Override(?!GlobalDefaultStalenessGracePeriod\(60 \* time\.Second\))[A-Za-z]*\("
)


FEATURE_MARKERS = re.compile(r"Numa|NUMA|ResourceClaim|ResourceSlice|DeviceClass|Mig[A-Z]")


class NotSupportedError(Exception):
    """The case needs a feature kai does not model (MIG, DRA, NUMA, ...)."""


@dataclass
class Driver:
    function: str
    kind: str  # "unit" or "integration"
    action: str | None  # the single KAI action a unit test runs


@dataclass
class Outcome:
    converted: list[dict[str, Any]] = field(default_factory=list)
    unconverted: list[tuple[str, str, str]] = field(default_factory=list)  # (id, test, reason)
    not_supported: list[tuple[str, str, str]] = field(default_factory=list)


# --- reading the KAI repository ---------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


def test_files(repo: Path, tag: str) -> list[str]:
    names = git(repo, "ls-tree", "-r", "--name-only", tag, "pkg/scheduler/actions").splitlines()
    prefixes = tuple(f"pkg/scheduler/actions/{d}/" for d in (*ACTION_DIRS, "integration_tests"))
    return sorted(n for n in names if n.endswith("_test.go") and n.startswith(prefixes))


def file_stem(path: str) -> str:
    parts = Path(path).parts
    stem = Path(path).stem
    if "integration_tests" in parts:
        return f"integration_{parts[-2]}_{stem}"
    return stem


def category(path: str) -> str:
    parts = Path(path).parts
    if "integration_tests" in parts:
        return f"integration/{parts[-2]}"
    return parts[-2]


# --- finding the cases and the harness that runs them --------------------------------------

CASE_TYPES = {"TestTopologyMetadata", "TestTopologyBasic"}


def _type_last(node: Any) -> str:
    while node is not None and node.type == "pointer_type":
        node = node.named_children[0]
    return text(node).rsplit(".", 1)[-1] if node is not None else ""


def find_cases(node: Any) -> list[Any]:
    """Outermost case literals: typed TestTopology* literals and elements of []TestTopology*."""
    found: list[Any] = []
    if node.type == "composite_literal":
        type_node = node.child_by_field_name("type")
        if (
            type_node is not None
            and type_node.type != "slice_type"
            and _type_last(type_node) in CASE_TYPES
        ):
            return [node]
        if type_node is not None and type_node.type == "slice_type":
            element = type_node.child_by_field_name("element")
            if _type_last(element) in CASE_TYPES:
                body = node.child_by_field_name("body")
                return [
                    c.named_children[0] if c.type == "literal_element" else c
                    for c in body.named_children
                    if c.type in ("literal_element",)
                ]
    for child in node.named_children:
        found += find_cases(child)
    return found


def sibling_name(case: Any) -> str | None:
    """`name: "..."` beside a `topology: TestTopologyBasic{...}` field, if the table has one."""
    parent = case.parent
    if parent is None or parent.type != "literal_element":
        return None
    keyed = parent.parent
    if keyed is None or keyed.type != "keyed_element":
        return None
    body = keyed.parent
    for element in body.named_children:
        if element.type == "keyed_element" and element is not keyed:
            key = element.named_children[0]
            if text(key).lower() == "name":
                value = element.named_children[-1]
                raw = text(value)
                return raw.strip('"`')
    return None


def drivers(evaluator: Evaluator) -> dict[str, tuple[Driver | None, str]]:
    """For each function holding cases: the standard harness running it, or why it is not one."""
    calls: dict[str, set[str]] = {
        name: set(re.findall(r"\b([A-Za-z_]\w*)\(", text(function)))
        & set(evaluator.functions) - {name}
        for name, function in evaluator.functions.items()
    }

    def reach(name: str) -> set[str]:
        seen, todo = {name}, [name]
        while todo:
            for callee in calls[todo.pop()]:
                if callee not in seen:
                    seen.add(callee)
                    todo.append(callee)
        return seen

    result: dict[str, tuple[Driver | None, str]] = {}
    for name in evaluator.functions:
        if not name.startswith("Test"):
            continue
        reached = reach(name)
        body = "\n".join(text(evaluator.functions[f]) for f in sorted(reached))
        actions = set(
            re.findall(
                r"\b(allocate|reclaim|preempt|consolidation|stalegangeviction)\.New\(\)", body
            )
        )
        if "RunTests(" in body or "RunTest(" in body:
            driver: Driver | None = Driver(name, "integration", None)
            reason = ""
        elif "BuildSession(" in body and "MatchExpectedAndRealTasks(" in body and len(actions) == 1:
            driver = Driver(name, "unit", actions.pop())
            reason = ""
        else:
            driver, reason = None, f"custom Go harness in {name} (not the table-driven one)"
        if driver is not None and CUSTOM_HARNESS.search(body):
            driver, reason = None, f"{name} changes or checks the session beyond the table"
        for target in reached:
            if target not in result or result[target][0] is None:
                result[target] = (driver, reason)
    return result


# --- helpers ------------------------------------------------------------------------------


def number(value: float | int) -> str:
    """Go's FormatFloat(v, 'f', -1, 64): no exponent."""
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return format(Decimal(repr(float(value))).normalize(), "f")


def duration(seconds: float) -> str:
    if float(seconds).is_integer():
        return f"{int(seconds)}s"
    return f"{round(seconds * 1000)}ms"


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def k8s_name(name: str) -> str:
    return re.sub(r"[^a-z0-9.-]", "-", name.lower())


def status_of(value: Any) -> str:
    if isinstance(value, Symbol):
        return value.short
    if value is None:
        return "Pending"  # the zero PodStatus is not a status; the tables always set one
    raise UnsupportedError(f"status {value!r}")


def get(struct: Any, key: str, default: Any = None) -> Any:
    if isinstance(struct, dict):
        value = struct.get(key, default)
        return default if value is None else value
    return default


# --- one case -----------------------------------------------------------------------------


def check_supported(topo: GoStruct) -> None:
    for key in ("ResourceSlices", "ResourceClaims", "DeviceClasses", "TestDRAObjects"):
        if get(topo, key):
            raise NotSupportedError("DRA")
    for name, node in get(topo, "Nodes", {}).items():
        if get(node, "NumaTopology"):
            raise NotSupportedError(f"NUMA (node {name})")
    for job in get(topo, "Jobs", []):
        for task in get(job, "Tasks", []):
            if get(task, "IsLegacyMigTask"):
                raise NotSupportedError("legacy MIG (a pod whose slices are in annotations)")
            if get(task, "ResourceClaimNames") or get(task, "ResourceClaimTemplates"):
                raise NotSupportedError("DRA")
            if get(task, "PersistentVolumeClaimNames"):
                raise NotSupportedError("persistent volume claims")
    for expected in [
        *get(topo, "JobExpectedResults", {}).values(),
        *get(topo, "TaskExpectedResults", {}).values(),
    ]:
        if get(expected, "NUMAZones") is not None:
            raise NotSupportedError("NUMA expectations")
    for expected in get(topo, "ExpectedNodesResources", {}).values():
        if get(expected, "NUMAZonesAvailable"):
            raise NotSupportedError("NUMA expectations")


def placement_strategy(topo: GoStruct) -> tuple[str, str] | None:
    """(node placement, shared-device placement) from a test's own scheduler configuration.

    KAI sets them apart: the nodeplacement plugin's `gpu` argument ranks nodes, and the
    gpupack or gpuspread plugin picks the shared device a fraction joins.
    """
    conf = get(get(topo, "Mocks"), "SchedulerConf")
    if not conf:
        return None
    node, device = "binpack", "binpack"
    for tier in get(conf, "Tiers", []):
        for plugin in get(tier, "Plugins", []):
            name = get(plugin, "Name")
            arguments = get(plugin, "Arguments", {})
            if name == "gpuspread":
                device = "spread"
            if name == "nodeplacement" and arguments.get("gpu") == "spread":
                node = "spread"
    return node, device


def convert_case(topo: GoStruct, meta: GoStruct | None, driver: Driver) -> dict[str, Any]:
    check_supported(topo)
    jobs = list(get(topo, "Jobs", []))
    # KAI sorts the jobs by priority (stable) before giving them ages: older = earlier here.
    jobs.sort(key=lambda j: -int(get(j, "Priority", 0)))
    objects: list[dict[str, Any]] = []
    notes: list[str] = []

    # Nodes
    for name, node in sorted(get(topo, "Nodes", {}).items()):
        gpus = int(get(node, "GPUs", 0))
        strategy = get(node, "MigStrategy")
        strategy = strategy.short if isinstance(strategy, Symbol) else str(strategy or "")
        labels = {
            "nvidia.com/gpu.count": str(gpus),
            "nvidia.com/gpu.memory": str(int(get(node, "GPUMemory", 0)) or 100),
            "kai.scheduler/type": name,
        }
        if strategy:  # as KAI's fake labels it; a mixed node offers its GPUs as slices alone
            labels["node-role.kubernetes.io/mig-enabled"] = "true"
            labels["nvidia.com/mig.strategy"] = MIG_STRATEGIES.get(strategy, strategy)
        labels.update({str(k): str(v) for k, v in get(node, "Labels", {}).items()})
        allocatable = {
            "cpu": number(get(node, "CPUMillis", 0)) if get(node, "CPUMillis", 0) else "20000",
            "memory": number(get(node, "CPUMemory", 0)) if get(node, "CPUMemory", 0) else "20G",
            "nvidia.com/gpu": "0" if strategy == "MigStrategyMixed" else str(gpus),
            "pods": str(get(node, "MaxTaskNum", 110)),
            **{str(k): str(int(v)) for k, v in get(node, "MigInstances", {}).items()},
        }
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels},
                "status": {"allocatable": allocatable},
            }
        )

    # Topologies (cluster-scoped), widest level first as in KAI's TopologySpec.
    for topology in get(topo, "Topologies", []):
        levels = []
        for level in get(get(topology, "Spec"), "Levels", []):
            entry = {"nodeLabel": str(level["NodeLabel"])}
            if get(level, "Alias"):
                entry["alias"] = str(get(level, "Alias"))
            levels.append(entry)
        objects.append(
            {
                "apiVersion": "kai.scheduler/v1alpha1",
                "kind": "Topology",
                "metadata": {"name": str(get(get(topology, "ObjectMeta"), "Name"))},
                "spec": {"levels": levels},
            }
        )

    # Queues: KAI's harness puts every queue under one unlimited "default" department
    # unless the test has departments or disables it.
    queues = [dict(q) for q in get(topo, "Queues", [])]
    departments = [dict(d) for d in get(topo, "Departments", [])]
    if not departments and not get(topo, "DisableDefaultDepartment", False):
        for queue in queues:
            queue["ParentQueue"] = "default"
        departments = [{"Name": "default", "DeservedGPUs": -1, "MaxAllowedGPUs": -1}]
    for index, department in enumerate(departments):
        deserved = float(get(department, "DeservedGPUs", 0))
        gpu = {
            "quota": deserved,
            "limit": float(get(department, "MaxAllowedGPUs", 0)) or -1,
            # KAI gives a department its deserved GPUs as over-quota weight.
            "overQuotaWeight": deserved if deserved > 0 else (1 if deserved < 0 else 0),
        }
        objects.append(_queue(department["Name"], None, None, gpu, department, index, {}))
    for index, queue in enumerate(queues):
        if get(queue, "V1"):
            raise UnsupportedError("v1 queue without resources")
        if get(queue, "InteractiveTimeoutInMinutes") or get(queue, "UseOnlyFreeCPUResources"):
            raise UnsupportedError("queue interactive timeout / free-CPU-only")
        gpu = {
            "quota": float(get(queue, "DeservedGPUs", 0)),
            "limit": float(get(queue, "MaxAllowedGPUs", 0)) or -1,
            "overQuotaWeight": float(get(queue, "GPUOverQuotaWeight", 0)),
        }
        extra: dict[str, Any] = {}
        if get(queue, "ReclaimMinRuntime") is not None:
            extra["reclaimMinRuntime"] = duration(
                float(get(get(queue, "ReclaimMinRuntime"), "Duration", 0))
            )
        objects.append(
            _queue(
                queue["Name"],
                queue.get("ParentQueue") or None,
                get(queue, "Priority"),
                gpu,
                queue,
                index,
                extra,
            )
        )

    # Priority classes for every priority a job uses.
    priorities = sorted({int(get(j, "Priority", 0)) for j in jobs})
    for value in priorities:
        objects.append(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": f"kai-test-priority-{value}"},
                "value": value,
            }
        )

    # Jobs and tasks
    names: dict[str, str] = {}
    pods: dict[str, dict[str, Any]] = {}  # task id (KAI) -> facts used by the expectations
    job_of: dict[str, list[str]] = {}
    generated = Counter[str]()
    for index, job in enumerate(jobs):
        job_name = str(job["Name"])
        name = k8s_name(job_name)
        if name in names.values():
            raise UnsupportedError(f"job names collide after making them Kubernetes names: {name}")
        names[job_name] = name
        namespace = k8s_name(str(get(job, "Namespace", ""))) or NAMESPACE
        age = int(get(job, "JobAgeInMinutes", 0)) or (len(jobs) - index)
        created = NOW - timedelta(minutes=age)
        tasks = list(get(job, "Tasks", []))
        statuses = [status_of(get(t, "State")) for t in tasks]
        for field_name in ("JobNotReadyForSsn",):
            if get(job, field_name):
                raise UnsupportedError(f"job {field_name}")
        if "Pipelined" in statuses:
            raise UnsupportedError(
                "a pod that starts Pipelined: kai's input has no pipelined state"
            )
        if "Unknown" in statuses or "Deleted" in statuses:
            raise UnsupportedError("pods in Unknown/Deleted state")
        spec: dict[str, Any] = {
            "queue": str(get(job, "QueueName", "")),
            "priorityClassName": f"kai-test-priority-{int(get(job, 'Priority', 0))}",
        }
        if get(job, "Preemptibility"):
            spec["preemptibility"] = str(get(job, "Preemptibility"))
        if get(job, "PreemptionDelay") is not None:
            spec["preemptionDelay"] = duration(
                float(get(get(job, "PreemptionDelay"), "Duration", 0))
            )
        if get(job, "PerJobStalenessGracePeriod") is not None:
            spec["stalenessGracePeriod"] = duration(
                float(get(get(job, "PerJobStalenessGracePeriod"), "Duration", 0))
            )
        labelled = _subgroups(job, tasks, spec)
        annotations: dict[str, str] = {}
        if any(s in ALLOCATED for s in statuses):
            annotations["kai.scheduler/last-start-timestamp"] = stamp(NOW - timedelta(minutes=1))
        if get(job, "StaleDuration") is not None:
            annotations["kai.scheduler/stale-podgroup-timestamp"] = stamp(
                NOW - timedelta(seconds=float(get(job, "StaleDuration")))
            )
        objects.append(
            {
                "apiVersion": "scheduling.run.ai/v2alpha2",
                "kind": "PodGroup",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "uid": name,
                    "creationTimestamp": stamp(created),
                    **({"annotations": annotations} if annotations else {}),
                },
                "spec": spec,
            }
        )
        job_of[job_name] = []
        for task_index, task in enumerate(tasks):
            task_id = f"{job_name}-{task_index}"
            pod_name = f"{name}-{task_index}"
            status = statuses[task_index]
            pod, facts = _pod(
                job, task, status, pod_name, namespace, name, created, labelled, generated
            )
            objects.append(pod)
            facts["key"] = f"{namespace}/{pod_name}"
            pods[task_id] = facts
            job_of[job_name].append(task_id)

    expect = _expectations(topo, meta, driver, pods, job_of, notes)
    case: dict[str, Any] = {"engine": {}, "expect": expect, "objects": objects}
    strategy = placement_strategy(topo)
    if strategy is not None and strategy[0] == "spread":
        case["engine"]["placement"] = "spread"
    if strategy is not None and strategy[1] == "spread":
        case["engine"]["devicePlacement"] = "spread"
    if strategy is not None and strategy == ("binpack", "binpack"):
        notes.append(
            "KAI test sets its own scheduler configuration (plugins); kai runs its defaults"
        )
    if driver.kind == "unit":
        case["engine"]["consolidation"] = driver.action == "consolidation"
        case["engine"]["staleGangEviction"] = driver.action == "stalegangeviction"
    if notes:
        case["notes"] = notes
    return case


def _queue(
    name: str,
    parent: str | None,
    priority: Any,
    gpu: dict[str, Any],
    source: dict[str, Any],
    index: int,
    extra: dict[str, Any],
) -> dict[str, Any]:
    def resource(quota_key: str, limit_key: str) -> dict[str, Any]:
        quota = source.get(quota_key)
        limit = source.get(limit_key)
        return {
            "quota": -1 if quota is None else quota,
            "limit": -1 if limit is None else limit,
            "overQuotaWeight": 1,
        }

    spec: dict[str, Any] = {
        "resources": {
            "gpu": gpu,
            "cpu": resource("DeservedCPUs", "MaxAllowedCPUs"),
            "memory": resource("DeservedMemory", "MaxAllowedMemory"),
        }
    }
    if parent:
        spec["parentQueue"] = parent
    if priority is not None:
        spec["priority"] = int(priority)
    spec.update(extra)
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name, "creationTimestamp": stamp(NOW + timedelta(minutes=index))},
        "spec": spec,
    }


def _subgroups(job: GoStruct, tasks: list[Any], spec: dict[str, Any]) -> bool:
    """Fill minMember / subGroups / minSubGroup; True when pods carry subgroup labels."""
    root = get(job, "RootSubGroupSet")
    named = [get(t, "SubGroupName", "") for t in tasks]
    if root is None:
        if any(named):
            raise UnsupportedError("tasks name subgroups but the job has no RootSubGroupSet")
        spec["minMember"] = len(tasks)
        return False
    assert isinstance(root, SubGroupSet)
    constraint = _constraint(root.topology)
    if constraint:
        spec["topologyConstraint"] = constraint
    if not root.children and not root.pod_sets and not any(named):
        # KAI's fake puts the tasks in a "default" pod set of all of them.
        spec["minMember"] = len(tasks)
        return False
    if (
        not root.children
        and len(root.pod_sets) == 1
        and root.pod_sets[0].name == "default"
        and not any(named)
        and not root.pod_sets[0].topology
    ):
        spec["minMember"] = root.pod_sets[0].min_available
        return False
    if not all(named):
        raise UnsupportedError("some tasks have no subgroup while the job has a subgroup tree")
    subgroups: list[dict[str, Any]] = []

    def walk(group: SubGroupSet, parent: str | None) -> None:
        for pod_set in group.pod_sets:
            entry: dict[str, Any] = {"name": pod_set.name, "minMember": pod_set.min_available}
            if parent:
                entry["parent"] = parent
            if _constraint(pod_set.topology):
                entry["topologyConstraint"] = _constraint(pod_set.topology)
            subgroups.append(entry)
        for child in group.children:
            entry = {"name": child.name}
            if parent:
                entry["parent"] = parent
            if child.min_sub_group is not None:
                entry["minSubGroup"] = child.min_sub_group
            if _constraint(child.topology):
                entry["topologyConstraint"] = _constraint(child.topology)
            subgroups.append(entry)
            walk(child, child.name)

    walk(root, None)
    for entry in subgroups:
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", entry["name"]):
            raise UnsupportedError(
                f"subgroup name {entry['name']!r} is not a valid Kubernetes name"
            )
    spec["subGroups"] = subgroups
    if root.min_sub_group is not None:
        spec["minSubGroup"] = root.min_sub_group
    else:
        spec["minMember"] = _required(root)
    return True


def _constraint(info: Any) -> dict[str, str]:
    """A `topology_info.TopologyConstraintInfo` as a PodGroup's `topologyConstraint`."""
    fields = {
        "topology": "Topology",
        "requiredTopologyLevel": "RequiredLevel",
        "preferredTopologyLevel": "PreferredLevel",
    }
    return {key: str(get(info, name)) for key, name in fields.items() if get(info, name)}


def _required(group: SubGroupSet) -> int:
    needs = sorted(
        [p.min_available for p in group.pod_sets] + [_required(c) for c in group.children]
    )
    if group.min_sub_group is not None:
        return sum(needs[: group.min_sub_group])
    return sum(needs)


def _pod(
    job: GoStruct,
    task: GoStruct,
    status: str,
    pod_name: str,
    namespace: str,
    group: str,
    created: datetime,
    labelled: bool,
    generated: Counter[str],
) -> tuple[dict[str, Any], dict[str, Any]]:
    gpus = get(job, "RequiredGPUsPerTask", 0)
    fraction = not float(gpus).is_integer()
    memory_mib = int(get(job, "RequiredGpuMemory", 0))
    devices = get(job, "RequiredMultiFractionDevicesPerTask")
    node = str(get(task, "NodeName", "")) if status in ACTIVE_USED | {"Succeeded", "Failed"} else ""
    annotations: dict[str, str] = {"pod-group-name": group}
    labels: dict[str, str] = {}
    requests: dict[str, str] = {}
    if not get(job, "IsBestEffortJob", False):
        requests["cpu"] = (
            number(get(job, "RequiredCPUsPerTask", 0))
            if get(job, "RequiredCPUsPerTask", 0)
            else "1"
        )
        requests["memory"] = (
            number(get(job, "RequiredMemoryPerTask", 0))
            if get(job, "RequiredMemoryPerTask", 0)
            else "1G"
        )
        whole = int(gpus) if not fraction else 0
        if get(task, "RequiredGPUs") is not None:
            whole = int(get(task, "RequiredGPUs"))
        if whole and not memory_mib:
            requests["nvidia.com/gpu"] = str(whole)
        for profile, count in get(task, "RequiredMigInstances", {}).items():
            requests[str(profile)] = str(int(count))
        if fraction:
            annotations["gpu-fraction"] = number(gpus)
        if memory_mib:
            annotations["gpu-memory"] = str(memory_mib)
        if devices is not None:
            annotations["gpu-fraction-num-devices"] = str(int(devices))
    shared = (fraction or memory_mib) and not get(job, "IsBestEffortJob", False)
    groups = [str(g) for g in get(task, "GPUGroups", [])]
    if shared and node and status in ACTIVE_USED:
        while len(groups) < int(devices or 1):
            generated[node] += 1
            groups.append(f"{node}-device-{generated[node]}")
    if groups and node:
        labels["runai-gpu-group"] = groups[0]
        if len(groups) > 1:
            for g in groups:
                labels[f"runai-gpu-group/{g}"] = g
    if get(task, "Priority") is not None:
        labels["kai.scheduler/task-priority"] = str(int(get(task, "Priority")))
    if labelled:
        labels["kai.scheduler/subgroup-name"] = str(get(task, "SubGroupName"))
    affinity_labels = {str(k): str(v) for k, v in get(task, "PodAffinityLabels", {}).items()}
    labels.update(affinity_labels)
    annotations.update({str(k): str(v) for k, v in get(task, "Annotations", {}).items()})
    metadata: dict[str, Any] = {
        "name": pod_name,
        "namespace": namespace,
        "uid": pod_name,
        "creationTimestamp": stamp(created),
        "annotations": annotations,
    }
    if labels:
        metadata["labels"] = labels
    if status == "Releasing":
        metadata["deletionTimestamp"] = stamp(NOW - timedelta(seconds=30))
    if status == "StuckInReleasing":  # a running pod deleted past KAI's 2-minute threshold
        metadata["deletionTimestamp"] = stamp(NOW - timedelta(minutes=5))
    container: dict[str, Any] = {"name": "main", "resources": {"requests": requests}}
    limited = {k: v for k, v in requests.items() if k.startswith("nvidia.com/")}
    if limited:  # extended resources: the API server wants the limit, equal to the request
        container["resources"]["limits"] = limited
    pod_spec: dict[str, Any] = {"schedulerName": "kai-scheduler", "containers": [container]}
    if node:
        pod_spec["nodeName"] = node
    affinity_names = get(task, "NodeAffinityNames", [])
    if affinity_names:
        pod_spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "kai.scheduler/type",
                                    "operator": "In",
                                    "values": [str(v) for v in affinity_names],
                                }
                            ]
                        }
                    ]
                }
            }
        }
    for kind, key in (
        ("podAffinity", get(task, "PodAffinityTopologyKey")),
        ("podAntiAffinity", get(task, "PodAntiAffinityTopologyKey")),
    ):
        if affinity_labels and key:  # KAI's tasks_fake: one term selecting the pod's own labels
            term = {"topologyKey": str(key), "labelSelector": {"matchLabels": affinity_labels}}
            pod_spec.setdefault("affinity", {})[kind] = {
                "requiredDuringSchedulingIgnoredDuringExecution": [term]
            }
    phase = {"Succeeded": "Succeeded", "Failed": "Failed"}.get(
        status, "Running" if node else "Pending"
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": pod_spec,
        "status": {"phase": phase},
    }
    gpu_request: float | None
    if memory_mib:
        gpu_request = None  # KAI counts gpu-memory against the node's device memory: not compared
    elif fraction:
        gpu_request = float(gpus) * int(devices or 1)
    else:
        gpu_request = float(requests.get("nvidia.com/gpu", 0))
    return pod, {"initial": status, "node": node or None, "gpus": gpu_request}


def _counts(topo: GoStruct) -> dict[str, int]:
    requirements = get(get(topo, "Mocks"), "CacheRequirements")
    if requirements is None:
        return {}
    return {
        "maxBinds": int(get(requirements, "NumberOfCacheBinds", 0)),
        "maxEvictions": int(get(requirements, "NumberOfCacheEvictions", 0)),
        "maxPipelined": int(get(requirements, "NumberOfPipelineActions", 0)),
    }


def unit_outcome(initial: str, expected: str) -> str:
    """What kai's one cycle must do to a pod for KAI's single-action expectation to hold."""
    if expected in ("Succeeded", "Failed"):
        return "unchanged"
    if initial in ("Releasing", "StuckInReleasing"):
        return "releasing" if expected == initial else f"unexpected:{initial}->{expected}"
    if initial == "Pending":
        if expected in ALLOCATED:
            return "bound"
        if expected == "Pipelined":
            return "pipelined"
        if expected == "Pending":
            return "pending"
    if initial in ALLOCATED:
        if expected in ALLOCATED:
            return "running"
        if expected == "Releasing":
            return "evicted"
        if expected == "Pipelined":
            return "moved"
    return f"unexpected:{initial}->{expected}"


def integration_outcome(initial: str, expected: str, deleted: bool) -> str:
    """The state KAI's harness rebuilds after the rounds (Binding -> Running, Pipelined -> Pending)."""
    if expected in ("Succeeded", "Failed"):
        return "unchanged"
    if expected in ALLOCATED:
        return "running"
    if expected == "Pending":
        return "pending"
    if (expected == "Releasing" and deleted) or expected == "StuckInReleasing":
        return "releasing"
    return f"unexpected:{initial}->{expected}"


def _expectations(
    topo: GoStruct,
    meta: GoStruct | None,
    driver: Driver,
    pods: dict[str, dict[str, Any]],
    job_of: dict[str, list[str]],
    notes: list[str],
) -> dict[str, Any]:
    deleted = {str(j["Name"]) for j in get(topo, "Jobs", []) if get(j, "DeleteJobInTest")}
    per_task: dict[str, tuple[GoStruct, str]] = {}
    jobs: dict[str, Any] = {}
    for job_name, expected in get(topo, "JobExpectedResults", {}).items():
        if job_name not in job_of:
            raise UnsupportedError(f"expected result for unknown job {job_name}")
        for task_id in job_of[job_name]:
            per_task[task_id] = (expected, job_name)
        gpus = [pods[t]["gpus"] for t in job_of[job_name]]
        if all(g is not None for g in gpus):
            jobs[job_name] = {"gpusRequired": float(get(expected, "GPUsRequired", 0))}
            if abs(sum(gpus) - float(get(expected, "GPUsRequired", 0))) > 1e-9:
                notes.append(
                    f"job {job_name}: KAI expects {get(expected, 'GPUsRequired', 0)} GPUs requested, "
                    f"the converted pods request {sum(gpus)}"
                )
    for task_id, expected in get(topo, "TaskExpectedResults", {}).items():
        if task_id not in pods:
            # KAI's matcher looks results up by the session's task ids: this one is never checked.
            notes.append(
                f"KAI expects a result for task {task_id}, which no job has (KAI never checks it)"
            )
            continue
        per_task[task_id] = (expected, task_id.rsplit("-", 1)[0])
    result_pods: dict[str, Any] = {}
    for task_id, (expected, job_name) in sorted(per_task.items()):
        facts = pods[task_id]
        status = status_of(get(expected, "Status"))
        if driver.kind == "unit":
            outcome = unit_outcome(facts["initial"], status)
        else:
            outcome = integration_outcome(facts["initial"], status, job_name in deleted)
        if outcome.startswith("unexpected:"):
            raise UnsupportedError(f"task {task_id}: no kai reading of {outcome[11:]}")
        entry: dict[str, Any] = {"kaiStatus": status, "outcome": outcome}
        if get(expected, "NodeName"):
            entry["node"] = str(get(expected, "NodeName"))
        groups = get(expected, "GPUGroups", [])
        if groups and not get(expected, "DontValidateGPUGroup", False):
            entry["gpuGroups"] = [str(g) for g in groups]
        result_pods[facts["key"]] = entry
        if get(expected, "ExpectedErrorMessage"):
            notes.append(f"{task_id}: KAI's error message is not compared")
    expect: dict[str, Any] = {"pods": result_pods}
    if jobs:
        expect["jobs"] = {
            pods[job_of[j][0]]["key"].rsplit("-", 1)[0]: v for j, v in jobs.items() if job_of[j]
        }
    expect.update(_counts(topo))
    if get(topo, "ExpectedNodesResources"):
        notes.append("KAI's expected node idle/releasing GPUs are not compared")
    if driver.kind == "integration":
        expect["roundsUntilMatch"] = (
            int(get(meta, "RoundsUntilMatch", 0)) or DEFAULT_ROUNDS_UNTIL_MATCH
        )
        expect["roundsAfterMatch"] = (
            int(get(meta, "RoundsAfterMatch", 0)) or DEFAULT_ROUNDS_AFTER_MATCH
        )
        interval = float(get(meta, "SchedulingDuration", 0) or 0)
        if interval:
            expect["roundInterval"] = interval
    return expect


# --- the whole run ------------------------------------------------------------------------


def built_cases(evaluator: Evaluator, name: str, function: Any, cases: list[Any]) -> list[Any]:
    """The cases a function builds with statements (make, append, loops), not as a table.

    A helper (`getXMetadata()`) returns them: it is run. A Test function hands a variable
    to the harness: its statements are run up to the harness call, and each case is what
    the variable the case literal declared holds then.
    """
    if not name.startswith("Test"):
        returned = evaluator.call_function(function, [])
        return list(returned) if isinstance(returned, list) else [returned]
    scope = evaluator.run_until_harness(function)
    values = []
    for case in cases:
        declaration = case.parent.parent if case.parent is not None else None
        if declaration is None or declaration.type != "short_var_declaration":
            raise UnsupportedError("a case built by statements but not declared by name")
        left = declaration.child_by_field_name("left")
        values.append(scope.lookup(text(left.named_children[0])))
    return values


def slug(name: str) -> str:
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]+", "-", name.lower())).strip("-")[:60] or "case"


def convert_file(repo: Path, tag: str, path: str, outcome: Outcome, out: Path) -> None:
    source = git(repo, "show", f"{tag}:{path}").encode()
    evaluator = Evaluator(source)
    harness = drivers(evaluator)
    stem = file_stem(path)
    number_in_file = 0
    for function_name, function in evaluator.functions.items():
        cases = find_cases(function)
        if not cases:
            continue
        driver, reason = harness.get(
            function_name, (None, f"{function_name} is not run by a Test function")
        )
        built: list[Any] | None = None
        if evaluator.reassigned_locals(function) and driver is not None:
            try:
                built = built_cases(evaluator, function_name, function, cases)
            except UnsupportedError as error:
                driver, reason = (
                    None,
                    f"the case is built by Go code (make, append, loops), not a table: {error}",
                )
        for index, case_node in enumerate(cases):
            if built is not None and index >= len(built):
                break
            number_in_file += 1
            case_id = f"{stem}/{number_in_file:03d}"
            scope = evaluator.function_scope(function)
            title = sibling_name(case_node) or ""
            try:
                value = built[index] if built is not None else evaluator.eval(case_node, scope)
                is_meta = getattr(value, "type_name", None) == "TestTopologyMetadata" or (
                    isinstance(value, GoStruct) and "TestTopologyBasic" in value
                )
                meta = value if is_meta else None
                topo = get(value, "TestTopologyBasic") if meta is not None else value
                if not isinstance(topo, GoStruct):
                    raise UnsupportedError("case is not a TestTopologyBasic literal")
                title = (
                    str(get(topo, "Name", ""))
                    or title
                    or (str(get(meta, "Name", "")) if meta else "")
                )
                case_id = f"{stem}/{number_in_file:03d}-{slug(title)}"
                if driver is None:
                    raise UnsupportedError(reason)
                case = convert_case(topo, meta, driver)
            except NotSupportedError as error:
                outcome.not_supported.append((case_id, title, str(error)))
                continue
            except UnsupportedError as error:
                feature = FEATURE_MARKERS.search(text(case_node))
                if str(error).startswith(
                    ("slice_type", "map_type", "unknown identifier", "comparison")
                ):
                    error = UnsupportedError(
                        f"the case is built by Go code (make, append, loops), not a table: {error}"
                    )
                if feature:
                    outcome.not_supported.append((case_id, title, f"{feature.group(0)} ({error})"))
                else:
                    outcome.unconverted.append((case_id, title, str(error)))
                continue
            document = {
                "kai": {
                    "source": path,
                    "tag": tag,
                    "testFunction": driver.function,
                    "testName": title,
                    "index": number_in_file - 1,
                    "category": category(path),
                    "kind": driver.kind,
                    **({"action": driver.action} if driver.action else {}),
                },
                **case,
            }
            target = out / f"{case_id}.yaml"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(
                f"# Generated by tests/kai_port/convert.py from KAI {tag} {path}; do not edit.\n"
                + yaml.safe_dump(document, sort_keys=False, width=120)
            )
            outcome.converted.append(document)


def write_unconverted(outcome: Outcome, out: Path, tag: str) -> None:
    lines = [
        f"# KAI {tag} test cases not converted",
        "",
        "Generated by tests/kai_port/convert.py; do not edit.",
        "",
        f"Converted: {len(outcome.converted)}. Not converted: {len(outcome.unconverted)}. "
        f"Not supported by kai (MIG, DRA, NUMA, ...): {len(outcome.not_supported)}.",
        "",
        "## Not converted (the converter cannot express the case)",
        "",
        "| case | KAI test name | reason |",
        "|---|---|---|",
    ]
    lines += [f"| {c} | {_cell(n)} | {_cell(r)} |" for c, n, r in outcome.unconverted]
    lines += [
        "",
        "## Not supported (a feature kai does not model)",
        "",
        "| case | KAI test name | feature |",
        "|---|---|---|",
    ]
    lines += [f"| {c} | {_cell(n)} | {_cell(r)} |" for c, n, r in outcome.not_supported]
    (out / "UNCONVERTED.md").write_text("\n".join(lines) + "\n")


def _cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", type=Path, help="KAI checkout or git mirror")
    parser.add_argument("--tag", default="v0.17.0")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "cases")
    args = parser.parse_args(argv)
    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    outcome = Outcome()
    for path in test_files(args.repo, args.tag):
        convert_file(args.repo, args.tag, path, outcome, args.out)
    write_unconverted(outcome, args.out, args.tag)
    print(
        f"converted {len(outcome.converted)}, not converted {len(outcome.unconverted)}, "
        f"not supported {len(outcome.not_supported)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
