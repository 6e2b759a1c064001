"""Admission rules: what kai's webhook refuses or adds, checked on the cases of KAI's own tests.

The tables hold the data of KAI's webhook tests (queue_validator_test.go,
podgroup_webhook_test.go, gpu_request_validator_test.go, gpu_sharing_test.go,
config_map_name_test.go, volumes_test.go, env_test.go) as manifests, with the field kai
names. Where kai decides differently from KAI the case says so; those are the README's
"Where we differ" entries.
"""

from __future__ import annotations

import copy
import re
from types import MappingProxyType
from typing import Any

import pytest

from kai.api.admission import (
    _injected,
    config_map_prefix,
    config_volume_name,
    gpu_sharing_injection,
    pod_admission_errors,
    pod_group_admission_errors,
    queue_admission_errors,
)
from kai.api.errors import ManifestError
from kai.api.gpu_sharing import FractionContainer
from kai.api.parse import parse_pod, parse_pod_group

# --- Queues ---------------------------------------------------------------------------------

RESOURCES = {"cpu": {"quota": 1000}, "gpu": {"quota": 4}, "memory": {"quota": 8192}}


def queue(name: str, parent: str | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"resources": RESOURCES, **spec}
    if parent is not None:
        body["parentQueue"] = parent
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": body,
    }


def fields_and_names(errors: list[ManifestError]) -> list[tuple[str, str]]:
    return [(error.name, error.field) for error in errors]


def test_a_queue_without_resources_is_refused_and_with_them_admitted() -> None:
    # KAI: "should reject queue without resources" / "should accept queue with resources".
    bare = {"metadata": {"name": "test-queue"}, "spec": {}}
    errors = queue_admission_errors(bare, {})
    assert [(e.field, e.message) for e in errors] == [("spec.resources", "required")]
    assert str(errors[0]) == "Queue test-queue: spec.resources: required"
    assert queue_admission_errors(queue("test-queue"), {}) == []


def test_resources_may_be_empty_as_in_kai() -> None:
    # KAI's validator checks that the field is there (non-nil), nothing inside it.
    assert queue_admission_errors(queue("q", resources={}), {}) == []
    nulled = queue("q", resources=None)
    assert [e.field for e in queue_admission_errors(nulled, {})] == ["spec.resources"]


def test_bad_queue_fields_are_all_reported() -> None:
    manifest = queue(
        "q", priority="high", resources={"gpu": {"quota": -2}, "cpu": {"limit": "lots"}}
    )
    assert sorted(e.field for e in queue_admission_errors(manifest, {})) == [
        "spec.priority",
        "spec.resources.cpu.limit",
        "spec.resources.gpu.quota",
    ]


def test_the_parent_must_exist() -> None:
    errors = queue_admission_errors(queue("team", "dept"), {})
    assert [(e.field, e.message) for e in errors] == [
        ("spec.parentQueue", "parent queue 'dept' does not exist")
    ]
    assert queue_admission_errors(queue("team", "dept"), {"dept": queue("dept")}) == []


def test_a_new_parent_must_not_close_a_cycle() -> None:
    existing = {"a": queue("a", "b"), "b": queue("b")}
    # Updating b to hang under a: a -> b -> a.
    errors = queue_admission_errors(queue("b", "a"), existing)
    assert [(e.name, e.field, e.message) for e in errors] == [
        ("b", "spec.parentQueue", "queues form a cycle: a -> b -> a")
    ]
    self_parent = queue_admission_errors(queue("c", "c"), existing)
    assert [e.message for e in self_parent] == ["queues form a cycle: c -> c"]


def test_the_old_version_of_the_queue_is_replaced_by_the_new_one() -> None:
    existing = {"dept": queue("dept"), "team": queue("team", "gone")}
    assert queue_admission_errors(queue("team", "dept"), existing) == []
    # ... and the old version's own parent link does not count either.
    existing = {"a": queue("a", "b"), "b": queue("b", "a")}
    assert queue_admission_errors(queue("b"), existing) == []


def test_problems_elsewhere_in_the_tree_are_not_this_queues() -> None:
    existing = {
        "orphan": queue("orphan", "missing"),
        "x": queue("x", "y"),
        "y": queue("y", "x"),
        "dept": queue("dept"),
    }
    assert queue_admission_errors(queue("team", "dept"), existing) == []


def test_a_queue_kai_cannot_parse_still_holds_its_place_in_the_tree() -> None:
    broken = queue("dept", "team", priority="high")
    # It exists, so it is a parent; and its link to team closes the cycle.
    assert queue_admission_errors(queue("leaf", "dept"), {"dept": broken}) == []
    errors = queue_admission_errors(queue("team", "dept"), {"dept": broken})
    assert fields_and_names(errors) == [("team", "spec.parentQueue")]


def test_a_queue_named_only_by_generate_name_is_judged_under_its_prefix() -> None:
    manifest = queue("x")
    manifest["metadata"] = {"generateName": "team-"}
    assert queue_admission_errors(manifest, {}) == []


# --- PodGroups ------------------------------------------------------------------------------


def pod_group(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "team-a"},
        "spec": {"queue": "team-a", **spec},
    }


def sub(name: str, parent: str | None = None, **fields: int) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, **fields}
    if parent is not None:
        body["parent"] = parent
    return body


def pg_fields(**spec: Any) -> list[str]:
    """The fields named, sorted: a cycle is reported in the order it runs."""
    return sorted(e.field for e in pod_group_admission_errors(pod_group(**spec)))


STRICTER = "KAI only warns"

# (KAI's case name, spec, the fields kai names, how KAI differs if it does)
POD_GROUP_CASES: list[tuple[str, dict[str, Any], list[str], str | None]] = [
    # TestValidateSubGroups
    (
        "Valid DAG single root",
        {
            "subGroups": [
                sub("a", minSubGroup=1),
                sub("b", "a", minSubGroup=1),
                sub("c", "b", minMember=1),
            ]
        },
        [],
        None,
    ),
    (
        "Valid DAG multiple roots",
        {
            "subGroups": [
                sub("a", minSubGroup=1),
                sub("b", minSubGroup=1),
                sub("c", "a", minMember=1),
                sub("d", "b", minMember=1),
            ]
        },
        [],
        None,
    ),
    (
        "Missing parent",
        {"subGroups": [sub("a", minMember=1), sub("b", "x", minMember=1)]},
        ["spec.subGroups[1].parent"],
        None,
    ),
    ("Empty list", {"subGroups": []}, [], None),
    (
        "nil minMember on leaf subgroup",
        {"subGroups": [sub("a")]},
        ["spec.subGroups[0].minMember"],
        None,
    ),
    (
        "parent subgroup may omit minMember when it has subgroup children",
        {"subGroups": [sub("p"), sub("l", "p", minMember=1)]},
        [],
        None,
    ),
    (
        "leaf child still requires minMember when parent omits it",
        {"subGroups": [sub("p"), sub("l", "p")]},
        ["spec.subGroups[1].minMember"],
        None,
    ),
    (
        "Duplicate subgroup names",
        {"subGroups": [sub("a", minMember=1), sub("a", minMember=1)]},
        ["spec.subGroups[0].name", "spec.subGroups[1].name"],
        None,
    ),
    (
        "Self-parent subgroup (cycle of length 1)",
        {"subGroups": [sub("a", "a", minMember=1)]},
        # KAI stops at the cycle; kai also names the minMember the loop makes a parent's.
        ["spec.subGroups[0].minMember", "spec.subGroups[0].parent"],
        None,
    ),
    (
        "Cycle in graph (a -> b -> c -> a)",
        {
            "subGroups": [
                sub("a", "c", minSubGroup=1),
                sub("b", "a", minSubGroup=1),
                sub("c", "b", minSubGroup=1),
            ]
        },
        ["spec.subGroups[0].parent", "spec.subGroups[1].parent", "spec.subGroups[2].parent"],
        None,
    ),
    (
        "Multiple disjoint cycles",
        {
            "subGroups": [
                sub("a", "b", minSubGroup=1),
                sub("b", "a", minSubGroup=1),
                sub("c", "d", minSubGroup=1),
                sub("d", "c", minSubGroup=1),
            ]
        },
        [f"spec.subGroups[{i}].parent" for i in range(4)],
        None,
    ),
    (
        "Valid: mid-level SubGroup uses minSubGroup",
        {
            "subGroups": [
                sub("parent", minSubGroup=2),
                sub("child-1", "parent", minMember=4),
                sub("child-2", "parent", minMember=4),
            ]
        },
        [],
        None,
    ),
    (
        "Invalid: leaf SubGroup uses minSubGroup",
        {"subGroups": [sub("a", minSubGroup=1)]},
        ["spec.subGroups[0].minMember", "spec.subGroups[0].minSubGroup"],
        None,
    ),
    (
        "Invalid: mid-level SubGroup uses minMember",
        {
            "subGroups": [
                sub("parent", minMember=2),
                sub("child-1", "parent", minMember=4),
                sub("child-2", "parent", minMember=4),
            ]
        },
        ["spec.subGroups[0].minMember"],
        "KAI only warns on update",
    ),
    (
        "Invalid: SubGroup has both minMember and minSubGroup",
        {
            "subGroups": [
                sub("parent", minMember=2, minSubGroup=1),
                sub("child-1", "parent", minMember=4),
            ]
        },
        ["spec.subGroups[0].minMember", "spec.subGroups[0].minSubGroup"],
        None,
    ),
    (
        "Invalid: SubGroup minSubGroup exceeds child count",
        {
            "subGroups": [
                sub("parent", minSubGroup=3),
                sub("child-1", "parent", minMember=4),
                sub("child-2", "parent", minMember=4),
            ]
        },
        ["spec.subGroups[0].minSubGroup"],
        STRICTER,
    ),
    (
        "Valid: minSubGroup equals child count",
        {
            "subGroups": [
                sub("parent", minSubGroup=2),
                sub("child-1", "parent", minMember=4),
                sub("child-2", "parent", minMember=4),
            ]
        },
        [],
        None,
    ),
    (
        "Invalid: minSubGroup = 0 on leaf SubGroup",
        {"subGroups": [sub("a", minSubGroup=0)]},
        ["spec.subGroups[0].minMember", "spec.subGroups[0].minSubGroup"],
        None,
    ),
    (
        "Valid: 2-level hierarchy with minSubGroup at both levels",
        {
            "subGroups": [
                sub("decode", minSubGroup=2),
                sub("decode-leaders", "decode", minMember=1),
                sub("decode-workers", "decode", minMember=4),
                sub("prefill", minSubGroup=2),
                sub("prefill-leaders", "prefill", minMember=1),
                sub("prefill-workers", "prefill", minMember=4),
            ]
        },
        [],
        None,
    ),
    # TestValidatePodGroupSpec
    ("Valid: minMember only, no subgroups", {"minMember": 4}, [], None),
    (
        "Valid: minSubGroup with leaf subgroups using minMember",
        {"minSubGroup": 3, "subGroups": [sub(f"prefill-{i}", minMember=8) for i in range(4)]},
        [],
        None,
    ),
    (
        "Valid: minSubGroup equals subgroup count",
        {"minSubGroup": 2, "subGroups": [sub("a", minMember=4), sub("b", minMember=4)]},
        [],
        None,
    ),
    (
        "Valid: minSubGroup of 0 (no gang requirement)",
        {"minSubGroup": 0, "subGroups": [sub("a", minMember=4), sub("b", minMember=4)]},
        [],
        None,
    ),
    (
        "Invalid: both minMember and minSubGroup set on PodGroup",
        {"minMember": 24, "minSubGroup": 3, "subGroups": [sub(n, minMember=8) for n in "abc"]},
        ["spec.minSubGroup"],
        None,
    ),
    (
        "Invalid: minSubGroup exceeds root subgroup count",
        {"minSubGroup": 5, "subGroups": [sub(n, minMember=8) for n in "abcd"]},
        ["spec.minSubGroup"],
        STRICTER,
    ),
    (
        "Invalid: subgroup validation error propagates",
        {"minSubGroup": 1, "subGroups": [sub("leaf", minSubGroup=1)]},
        ["spec.subGroups[0].minMember", "spec.subGroups[0].minSubGroup"],
        None,
    ),
    ("Valid: no subgroups, no minMember, no minSubGroup", {}, [], None),
    (
        "Invalid: minSubGroup with no subgroups defined",
        {"minSubGroup": 1},
        ["spec.minSubGroup"],
        STRICTER,
    ),
    # TestCreateRejectsWhatUpdateWarns
    (
        "minMember on a non-leaf subgroup",
        {"subGroups": [sub("parent", minMember=2), sub("child", "parent", minMember=1)]},
        ["spec.subGroups[0].minMember"],
        "KAI only warns on update",
    ),
    # Where kai used to differ from KAI: a 0 still counts as set, and minSubGroup 0 asks nothing.
    (
        "minMember 0 with minSubGroup",
        {"minMember": 0, "minSubGroup": 1, "subGroups": [sub("a", minMember=1)]},
        ["spec.minSubGroup"],
        None,
    ),
    ("minSubGroup 0 without subgroups", {"minSubGroup": 0}, [], None),
    (
        "minMember 0 on a subgroup with children",
        {"subGroups": [sub("p", minMember=0), sub("c", "p", minMember=1)]},
        ["spec.subGroups[0].minMember"],
        None,
    ),
    (
        "minSubGroup 0 on a subgroup with children",
        {"subGroups": [sub("p", minSubGroup=0), sub("c", "p", minMember=1)]},
        [],
        None,
    ),
]


@pytest.mark.parametrize(
    ("spec", "fields"),
    [pytest.param(spec, fields, id=name) for name, spec, fields, _ in POD_GROUP_CASES],
)
def test_pod_group_rules_on_kais_cases(spec: dict[str, Any], fields: list[str]) -> None:
    assert pg_fields(**spec) == fields


def test_the_webhook_and_the_parser_agree_on_every_case() -> None:
    for name, spec, fields, _ in POD_GROUP_CASES:
        manifest = pod_group(**spec)
        try:
            parse_pod_group(manifest, {})
        except ManifestError as error:
            parsed = sorted(e.field for e in error.all_errors)
        else:
            parsed = []
        assert parsed == fields, name


def test_pod_group_messages_name_object_and_field() -> None:
    (error,) = pod_group_admission_errors(
        pod_group(minMember=24, minSubGroup=3, subGroups=[sub("a", minMember=1)])
    )
    assert str(error) == "PodGroup team-a/pg: spec.minSubGroup: cannot be combined with minMember"
    (error,) = pod_group_admission_errors(pod_group(subGroups=[sub("b", "x", minMember=1)]))
    assert error.message == "subgroup 'x' does not exist"


def test_field_types_are_checked_too() -> None:
    assert pg_fields(minMember=-1) == ["spec.minMember"]
    assert pg_fields(subGroups=[sub("Bad_Name", minMember=1)]) == ["spec.subGroups[0].name"]
    assert pg_fields(preemptibility="sometimes") == ["spec.preemptibility"]


def test_a_pod_group_named_only_by_generate_name_is_judged_under_its_prefix() -> None:
    manifest = pod_group(minMember=2)
    manifest["metadata"] = {"generateName": "pg-", "namespace": "team-a"}
    assert pod_group_admission_errors(manifest) == []


# --- Pod GPU requests -----------------------------------------------------------------------


def container(name: str = "main", **limits: str) -> dict[str, Any]:
    return {"name": name, "image": "busybox", "resources": {"limits": dict(limits)}}


def gpu_pod(
    annotations: dict[str, str] | None = None,
    containers: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "test-pod",
            "namespace": "test-namespace",
            "annotations": annotations or {},
        },
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": containers if containers is not None else [container()],
            **spec,
        },
    }


FRACTION = "metadata.annotations.gpu-fraction"
MEMORY = "metadata.annotations.gpu-memory"
DEVICES = "metadata.annotations.gpu-fraction-num-devices"
MPS = "metadata.annotations.mps"
GPU = "nvidia.com/gpu"

# (KAI's case name, annotations, containers, the fields kai names)
POD_CASES: list[tuple[str, dict[str, str], list[dict[str, Any]], list[str]]] = [
    (
        "allow MPS and fractional GPU limits",
        {"mps": "true", "gpu-fraction": "0.5"},
        [container()],
        [],
    ),
    ("Don't allow MPS and whole gpu limit", {"mps": "true"}, [container(**{GPU: "1"})], [MPS]),
    ("block MPS without GPU request", {"mps": "true"}, [container()], [MPS]),
    ("MPS off needs nothing", {"mps": "false"}, [container()], []),
    (
        "forbid GPU annotation and GPU request mismatch (fractional)",
        {"gpu-fraction": "0.5"},
        [container(**{GPU: "2m"})],
        [FRACTION],
    ),
    ("forbid fraction limit (1500 milli)", {"gpu-fraction": "1.5"}, [container()], [FRACTION]),
    ("Allow whole GPU resource limit of 2", {}, [container(**{GPU: "2"})], []),
    ("Allow whole gpu request of 2, represented as millis", {}, [container(**{GPU: "2000m"})], []),
    (
        "forbid GPU fraction with GPU Memory fraction annotation",
        {"gpu-fraction": "0.5", "gpu-memory": "1"},
        [container()],
        [FRACTION],
    ),
    (
        "Allow multiple containers with whole GPU resource request",
        {},
        [container("a", **{GPU: "1"}), container("b", **{GPU: "2"})],
        [],
    ),
    (
        "forbid GPU resource limit with GPU Memory fraction annotation",
        {"gpu-memory": "1"},
        [container(**{GPU: "1m"})],
        [MEMORY],
    ),
    (
        "forbid GPU resource limit in sidecar container with GPU Memory fraction annotation",
        {"gpu-memory": "1"},
        [container("distraction"), container("sneaky", **{GPU: "1m"})],
        [MEMORY],
    ),
    ("forbid negative GPU memory annotation", {"gpu-memory": "-1"}, [container()], [MEMORY]),
    ("forbid negative GPU fraction annotation", {"gpu-fraction": "-1"}, [container()], [FRACTION]),
    (
        "forbid GPU fraction which is greater than 1.0",
        {"gpu-fraction": "1.2"},
        [container()],
        [FRACTION],
    ),
    (
        "forbid GPU fraction count without fractions or memory",
        {"gpu-fraction-num-devices": "1"},
        [container()],
        [DEVICES],
    ),
    (
        "forbid a fraction count that is no integer",
        {"gpu-fraction-num-devices": "1.2", "gpu-fraction": "0.2"},
        [container()],
        [DEVICES],
    ),
    (
        "allow GPU fraction count with memory",
        {"gpu-fraction-num-devices": "2", "gpu-memory": "1000"},
        [container()],
        [],
    ),
    (
        "allow GPU fraction count with fractions",
        {"gpu-fraction-num-devices": "2", "gpu-fraction": "0.3"},
        [container()],
        [],
    ),
    ("Block NaN fraction value", {"gpu-fraction": "NaN"}, [container()], [FRACTION]),
    ("Block hex float fraction value", {"gpu-fraction": "0x1p-1"}, [container()], [FRACTION]),
    # Where kai differs from KAI's validator (README, "Where we differ"):
    (
        "KAI allows scientific notation; kai wants a plain decimal",
        {"gpu-fraction": "1.2e-10"},
        [container()],
        [FRACTION],
    ),
    (
        "KAI refuses 1; kai reads it as a whole device shared",
        {"gpu-fraction": "1"},
        [container()],
        [],
    ),
    ("KAI refuses 2; kai reads it as two whole devices", {"gpu-fraction": "2"}, [container()], []),
    (
        "KAI refuses an empty fraction; kai reads it as absent",
        {"gpu-fraction": ""},
        [container()],
        [],
    ),
    # The share needs a container to go to (KAI's mutator refuses the pod otherwise).
    (
        "fraction container named",
        {"gpu-fraction": "0.5", "gpu-fraction-container-name": "main"},
        [container()],
        [],
    ),
    (
        "pod with GPU fraction and non-existent container name",
        {"gpu-fraction": "0.5", "gpu-fraction-container-name": "non-existent"},
        [container()],
        ["metadata.annotations.gpu-fraction-container-name"],
    ),
    ("no GPU annotations", {"gpu-fraction-container-name": "nowhere"}, [container()], []),
]


@pytest.mark.parametrize(
    ("annotations", "containers", "fields"),
    [pytest.param(a, c, f, id=name) for name, a, c, f in POD_CASES],
)
def test_pod_gpu_rules_on_kais_cases(
    annotations: dict[str, str], containers: list[dict[str, Any]], fields: list[str]
) -> None:
    assert [e.field for e in pod_admission_errors(gpu_pod(annotations, containers))] == fields


def test_the_webhook_and_parse_pod_agree_on_every_gpu_case() -> None:
    for name, pod_annotations, containers, fields in POD_CASES:
        try:
            parse_pod(gpu_pod(pod_annotations, containers), "test-namespace/pg")
        except ManifestError as error:
            # parse_pod also refuses a fractional nvidia.com/gpu quantity, as the API server does.
            parsed = [e.field for e in error.all_errors if e.field.startswith("metadata.")]
        else:
            parsed = []
        assert parsed == fields, name


def test_a_pod_without_gpu_annotations_is_not_looked_at() -> None:
    # Not even a malformed one: the API server judges the rest of a pod.
    assert (
        pod_admission_errors({"metadata": {"name": "p"}, "spec": {"containers": "nonsense"}}) == []
    )
    assert pod_admission_errors(gpu_pod(containers=[container(**{GPU: "1"})])) == []


def test_a_pod_that_has_no_name_yet_is_judged_all_the_same() -> None:
    manifest = gpu_pod({"gpu-fraction": "abc"})
    manifest["metadata"] = {"generateName": "job-", "annotations": {"gpu-fraction": "abc"}}
    assert [e.field for e in pod_admission_errors(manifest)] == [FRACTION]


def test_gpu_messages_name_the_annotation() -> None:
    (error,) = pod_admission_errors(gpu_pod({"mps": "true"}))
    assert str(error).startswith(
        "Pod test-namespace/test-pod: metadata.annotations.mps: needs gpu-fraction"
    )


# --- GPU-sharing injection ------------------------------------------------------------------

PREFIX = re.compile(r"^test-pod-[bcdfghjklmnpqrstvwxz2456789]{7}-shared-gpu$")
SHARED = "runai/shared-gpu-configmap"


def device_env(config_map: str) -> list[dict[str, Any]]:
    return [
        {"name": key, "valueFrom": {"configMapKeyRef": {"key": key, "name": config_map}}}
        for key in ("NVIDIA_VISIBLE_DEVICES", "RUNAI_NUM_OF_GPUS", "GPU_PORTION")
    ]


def injected(manifest: dict[str, Any], runtime_class: str | None = None) -> dict[str, Any]:
    result = gpu_sharing_injection(manifest, runtime_class)
    assert result is not None
    return result


def test_a_fraction_pod_gets_kais_annotation_env_env_from_and_volume() -> None:
    # KAI: "pod with GPU fraction - should mutate with default container".
    pod = injected(gpu_pod({"gpu-fraction": "0.5"}))
    prefix = pod["metadata"]["annotations"][SHARED]
    assert PREFIX.match(prefix)
    (main,) = pod["spec"]["containers"]
    assert main["env"] == device_env(f"{prefix}-0")
    assert main["envFrom"] == [{"configMapRef": {"name": f"{prefix}-0-evar", "optional": False}}]
    assert pod["spec"]["volumes"] == [
        {"name": f"{prefix}-0-vol", "configMap": {"name": f"{prefix}-0"}}
    ]
    assert "volumeMounts" not in main  # KAI mounts the volume nowhere
    assert "runtimeClassName" not in pod["spec"]


def test_the_whole_result_when_the_prefix_is_given() -> None:
    manifest = gpu_pod({"gpu-memory": "4096", SHARED: "cm"})
    expected = copy.deepcopy(manifest)
    expected["spec"]["containers"][0]["env"] = device_env("cm-0")
    expected["spec"]["containers"][0]["envFrom"] = [
        {"configMapRef": {"name": "cm-0-evar", "optional": False}}
    ]
    expected["spec"]["volumes"] = [{"name": "cm-0-vol", "configMap": {"name": "cm-0"}}]
    expected["spec"]["runtimeClassName"] = "nvidia"
    assert injected(manifest, "nvidia") == expected


def test_a_dotted_pod_name_keeps_its_dot_in_the_config_maps_but_not_in_the_volume() -> None:
    # KAI: "pod with dotted name keeps configmap refs and sanitizes volume name".
    manifest = gpu_pod({"gpu-fraction": "0.5"})
    manifest["metadata"]["name"] = "test.pod"
    pod = injected(manifest)
    prefix = pod["metadata"]["annotations"][SHARED]
    assert prefix.startswith("test.pod-")
    (volume,) = pod["spec"]["volumes"]
    assert volume == {
        "name": config_volume_name(f"{prefix}-0"),
        "configMap": {"name": f"{prefix}-0"},
    }
    assert "." not in volume["name"] and volume["name"].startswith("test-pod-")
    main = pod["spec"]["containers"][0]
    assert {var["valueFrom"]["configMapKeyRef"]["name"] for var in main["env"]} == {f"{prefix}-0"}
    assert main["envFrom"][0]["configMapRef"]["name"] == f"{prefix}-0-evar"


def test_the_named_container_gets_the_share_and_the_others_nothing() -> None:
    # KAI: "pod with GPU fraction and specific container name".
    manifest = gpu_pod(
        {"gpu-fraction": "0.5", "gpu-fraction-container-name": "gpu-container", SHARED: "cm"},
        [container("sidecar"), container("gpu-container")],
    )
    sidecar, gpu = injected(manifest)["spec"]["containers"]
    assert sidecar == container("sidecar")
    assert gpu["env"] == device_env("cm-1")
    assert gpu["envFrom"] == [{"configMapRef": {"name": "cm-1-evar", "optional": False}}]


def test_an_init_container_is_named_with_an_i() -> None:
    # KAI: "pod with GPU fraction and init container".
    manifest = gpu_pod(
        {"gpu-fraction": "0.5", "gpu-fraction-container-name": "init-gpu", SHARED: "cm"},
        [container("main-container")],
        initContainers=[container("init-gpu")],
    )
    pod = injected(manifest)
    assert pod["spec"]["initContainers"][0]["env"] == device_env("cm-i0")
    assert pod["spec"]["initContainers"][0]["envFrom"][0]["configMapRef"]["name"] == "cm-i0-evar"
    assert pod["spec"]["volumes"] == [{"name": "cm-i0-vol", "configMap": {"name": "cm-i0"}}]
    assert pod["spec"]["containers"] == [container("main-container")]


@pytest.mark.parametrize(
    "manifest",
    [
        pytest.param(gpu_pod(), id="no GPU annotation"),
        pytest.param(gpu_pod(containers=[container(**{GPU: "1"})]), id="whole GPU pod"),
        pytest.param(gpu_pod({"gpu-fraction": "0.5"}, containers=[]), id="no containers"),
        pytest.param(gpu_pod({"gpu-fraction": "abc"}), id="invalid fraction"),
        pytest.param(
            gpu_pod({"gpu-fraction": "0.5"}, [container(**{GPU: "1"})]), id="fraction and whole"
        ),
        pytest.param(gpu_pod({"gpu-fraction": "2"}), id="a whole number is whole devices"),
        pytest.param(
            gpu_pod({"gpu-fraction": "0.5", "gpu-fraction-container-name": "non-existent"}),
            id="non-existent container",
        ),
        pytest.param(gpu_pod({"mps": "true"}), id="mps alone"),
    ],
)
def test_no_mutation(manifest: dict[str, Any]) -> None:
    assert gpu_sharing_injection(manifest, "nvidia") is None


def test_existing_variables_of_the_same_name_are_replaced_and_the_others_kept() -> None:
    # KAI's env_test: TestOverrideVar / TestOverrideVarWithValueFrom.
    main = container()
    main["env"] = [
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
        {"name": "MINE", "value": "1"},
        {"name": "GPU_PORTION", "valueFrom": {"configMapKeyRef": {"key": "x", "name": "old"}}},
    ]
    pod = injected(gpu_pod({"gpu-fraction": "0.5", SHARED: "cm"}, [main]))
    assert pod["spec"]["containers"][0]["env"] == [
        {"name": "MINE", "value": "1"},
        *device_env("cm-0"),
    ]


def test_a_volume_of_the_same_name_is_replaced_and_an_env_from_not_repeated() -> None:
    # KAI's volumes_test: TestOverrideConfigMapVolume; env_vars.go skips a present envFrom.
    main = container()
    main["envFrom"] = [{"secretRef": {"name": "s"}}, {"configMapRef": {"name": "cm-0-evar"}}]
    manifest = gpu_pod(
        {"gpu-fraction": "0.5", SHARED: "cm"},
        [main],
        volumes=[
            {"name": "data", "emptyDir": {}},
            {"name": "cm-0-vol", "configMap": {"name": "conf1"}},
        ],
    )
    pod = injected(manifest)
    assert pod["spec"]["volumes"] == [
        {"name": "data", "emptyDir": {}},
        {"name": "cm-0-vol", "configMap": {"name": "cm-0"}},
    ]
    assert pod["spec"]["containers"][0]["envFrom"] == main["envFrom"]


@pytest.mark.parametrize(
    ("spec", "runtime_class", "expected"),
    [
        ({}, "nvidia", "nvidia"),
        ({"runtimeClassName": ""}, "nvidia", "nvidia"),
        ({"runtimeClassName": "kata"}, "nvidia", "kata"),
        ({}, None, None),
        ({}, "", None),
    ],
)
def test_runtime_class_is_set_only_when_the_pod_sets_none(
    spec: dict[str, Any], runtime_class: str | None, expected: str | None
) -> None:
    pod = injected(gpu_pod({"gpu-fraction": "0.5"}, **spec), runtime_class)
    assert pod["spec"].get("runtimeClassName") == expected


@pytest.mark.parametrize(
    "annotations",
    [
        {"gpu-fraction": "0.5"},
        {"gpu-memory": "1000", "gpu-fraction-num-devices": "2"},
        {"gpu-fraction": "0.25", "gpu-fraction-container-name": "b"},
    ],
)
def test_idempotent_and_the_input_untouched(annotations: dict[str, str]) -> None:
    main = container("a")
    main["env"] = [{"name": "MINE", "value": "1"}]
    manifest = gpu_pod(
        annotations, [main, container("b")], volumes=[{"name": "data", "emptyDir": {}}]
    )
    before = copy.deepcopy(manifest)
    once = injected(manifest, "nvidia")
    assert manifest == before
    once_copy = copy.deepcopy(once)
    assert injected(once, "nvidia") == once
    assert once == once_copy


def test_a_read_only_manifest_is_copied_not_changed() -> None:
    manifest = gpu_pod({"gpu-fraction": "0.5", SHARED: "cm"})
    frozen = MappingProxyType({**manifest, "metadata": MappingProxyType(manifest["metadata"])})
    pod = gpu_sharing_injection(frozen, None)
    assert pod is not None
    assert pod["metadata"]["annotations"] == {"gpu-fraction": "0.5", SHARED: "cm"}
    assert isinstance(pod["metadata"], dict)


def test_an_empty_prefix_annotation_gets_a_generated_prefix() -> None:
    pod = injected(gpu_pod({"gpu-fraction": "0.5", SHARED: ""}))
    assert PREFIX.match(pod["metadata"]["annotations"][SHARED])


def test_the_random_part_is_the_only_one() -> None:
    manifest = gpu_pod({"gpu-fraction": "0.5"})
    first = _injected(manifest, None, lambda: "bcdfghj")
    assert (
        first is not None
        and first["metadata"]["annotations"][SHARED] == "test-pod-bcdfghj-shared-gpu"
    )
    assert _injected(manifest, None, lambda: "bcdfghj") == first


# --- ConfigMap names ------------------------------------------------------------------------

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def named(name: str = "", owner: str | None = None, generate: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name} if name else {}
    if owner is not None:
        metadata["ownerReferences"] = [{"name": owner}]
    if generate is not None:
        metadata["generateName"] = generate
    return {"metadata": metadata}


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        # KAI: TestSetGpuCapabilitiesConfigMapNameTrimsTrailingDotAfterTruncation
        (named("a" * 32 + ".b"), "a" * 32 + "-bcdfghj-shared-gpu"),
        # KAI: ...UsesOwnerRefAndTrimsTrailingHyphenAfterTruncation
        (named("fallback-name", owner="a" * 32 + "-b"), "a" * 32 + "-bcdfghj-shared-gpu"),
        (named("test-pod"), "test-pod-bcdfghj-shared-gpu"),
        # No name yet and no owner: KAI's prefix would start with a hyphen.
        (named(generate="train-"), "train-bcdfghj-shared-gpu"),
    ],
)
def test_config_map_prefix(manifest: dict[str, Any], expected: str) -> None:
    prefix = config_map_prefix(manifest, FractionContainer(0), "bcdfghj")
    assert prefix == expected
    assert DNS_SUBDOMAIN.match(f"{prefix}-0") and ".-" not in prefix and "--" not in prefix


def test_the_longest_names_still_fit() -> None:
    for container_ref in (
        FractionContainer(0),
        FractionContainer(10),
        FractionContainer(3, init=True),
    ):
        prefix = config_map_prefix(named("x" * 63), container_ref, "bcdfghj")
        capabilities = f"{prefix}-{container_ref.key}"
        assert len(f"{capabilities}-evar") <= 63
        assert len(config_volume_name(capabilities)) <= 63


@pytest.mark.parametrize(
    ("config_map", "volume"),
    [
        # KAI: TestGetConfigVolumeName
        ("test.pod-abc1234-shared-gpu-0", "test-pod-abc1234-shared-gpu-0-vol"),
        ("test_pod.config@1", "test-pod-config-1-vol"),
    ],
)
def test_config_volume_name(config_map: str, volume: str) -> None:
    assert config_volume_name(config_map) == volume
    assert DNS_LABEL.match(volume)
