"""A workload whose values have the wrong shape is named in an error, never a crash.

Custom resources reach the grouper, the expansion and `kai workload describe` with
whatever their schema allowed: a string where an object goes, a number where a list
goes. Read by rules that expect each field's usual shape, such a value raised a
TypeError or an AttributeError; out of the live pod grouper that failed the whole cycle,
for every workload, for as long as the object existed. Each is now a ManifestError
naming the object (`kai.api.shapes.naming_unreadable`), which every caller reports, and
the field, where Kubernetes' conventions say what its shape should be.
"""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kai.api.constants import default_priority_classes
from kai.api.errors import ManifestError
from kai.cli.describe import NoDefinitionError, describe_workload
from kai.grouping import GroupingError, plan_pod_group, resolve_owner_chain
from kai.kube.owners import OwnerChainError
from kai.workloads.catalog import catalog_registry
from kai.workloads.expansion import expand_workload, is_workload_kind
from kai.workloads.jqeval import JqError
from tests.unit.grouping.test_grouping_rules import obj, template
from tests.unit.manifest_edits import edit_carelessly

REGISTRY = catalog_registry()
CLASSES = default_priority_classes()
UNREADABLE = "a value has a type or shape kai cannot read"
FIXTURES = Path(__file__).parents[2] / "fixtures" / "workloads"
WORKLOADS = [
    doc
    for path in sorted(FIXTURES.glob("*.yaml"))
    for doc in yaml.safe_load_all(path.read_text())
    if isinstance(doc, dict)
    and is_workload_kind(str(doc.get("apiVersion")), str(doc.get("kind")), REGISTRY)
]
ODD_VALUES: list[Any] = [
    None,
    0,
    -1,
    2,
    1.5,
    True,
    "",
    "x",
    "a/b",
    [],
    {},
    ["x"],
    [{}],
    [None],
    10**12,
    "9" * 12,
]
REPORTED = (ManifestError, GroupingError, OwnerChainError, JqError, NoDefinitionError)


def _pytorch_job() -> dict[str, Any]:
    replicas = {"Master": {"replicas": 1, "template": template()}}
    return obj("kubeflow.org/v1", "PyTorchJob", "pt", {"pytorchReplicaSpecs": replicas})


def test_the_grouper_names_an_owner_it_cannot_read() -> None:
    job = _pytorch_job()
    [pod] = [item for item in expand_workload(job, REGISTRY) if item["kind"] == "Pod"]
    job["spec"]["elasticPolicy"] = "x"  # edited after its pods were created
    with pytest.raises(ManifestError) as raised:
        plan_pod_group(pod, resolve_owner_chain(pod, [job]), REGISTRY, CLASSES)
    assert str(raised.value) == (
        "PyTorchJob ns/pt: spec.elasticPolicy: an object expected, found the string 'x'"
    )


def test_a_value_no_convention_covers_names_the_object_alone() -> None:
    """A replicated job that is a string: an element of a list has no field name, so no
    convention says what it holds, and the object is named with what failed to read it."""
    jobset = obj("jobset.x-k8s.io/v1alpha2", "JobSet", "js", {"replicatedJobs": ["x"]})
    with pytest.raises(ManifestError) as raised:
        expand_workload(jobset, REGISTRY)
    assert raised.value.field == ""
    assert str(raised.value).startswith(f"JobSet ns/js: {UNREADABLE} (AttributeError: ")


def test_the_expansion_names_a_workload_it_cannot_read() -> None:
    jobs = [{"name": "w", "replicas": 1, "template": "x"}]
    jobset = obj("jobset.x-k8s.io/v1alpha2", "JobSet", "js", {"replicatedJobs": jobs})
    with pytest.raises(ManifestError) as raised:
        expand_workload(jobset, REGISTRY)
    assert str(raised.value) == (
        "JobSet ns/js: spec.replicatedJobs[0].template: an object expected, found the string 'x'"
    )


def test_describe_names_a_workload_it_cannot_read() -> None:
    pods = template()
    pods["metadata"]["labels"] = ["x"]
    deployment = obj("apps/v1", "Deployment", "web", {"replicas": 1, "template": pods})
    with pytest.raises(ManifestError) as raised:
        describe_workload(deployment, REGISTRY)
    assert str(raised.value) == (
        "Deployment ns/web: spec.template.metadata.labels: an object expected, found a list"
    )


@st.composite
def _edited(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A fixture workload as written, and the same one with one to three values changed
    (its kind and apiVersion kept, so the same rules read it)."""
    workload = draw(st.sampled_from(WORKLOADS))
    edited = copy.deepcopy(workload)
    edit_carelessly(draw, [edited], ODD_VALUES, kept=frozenset({"apiVersion", "kind"}))
    return workload, edited


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_edited())
def test_an_edited_workload_is_grouped_expanded_and_described_or_reported(
    pair: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    workload, edited = pair
    objects = expand_workload(workload, REGISTRY)
    owners = [edited, *(item for item in objects if item["kind"] != "Pod")]
    for pod in (item for item in objects if item["kind"] == "Pod"):
        with contextlib.suppress(*REPORTED):
            plan_pod_group(pod, resolve_owner_chain(pod, owners), REGISTRY, CLASSES)
    for attempt in (expand_workload, describe_workload):
        with contextlib.suppress(*REPORTED):
            attempt(edited, REGISTRY)
