"""The read part of a manifest: everything its wire model validates, nothing else.

Sharing a parse between two pods is sound only if every field the model reads is in the
read part; it pays only if the fields real pods differ in (volumes, env, managed fields)
are not.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, model_validator

from kai.api import corev1
from kai.api.fields import WireModel
from kai.api.projection import read_part


def pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"a": "b"}},
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Exists"}]}]
            }}},
            "tolerations": [{"key": "gpu", "operator": "Exists"}],
        },
        "status": {"phase": "Pending"},
    }  # fmt: skip


def _set(manifest: dict[str, Any], path: tuple[str | int, ...], value: object) -> None:
    target: Any = manifest
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value


UNREAD = {
    "a volume": (("spec", "volumes"), [{"name": "kube-api-access-x7k2p"}]),
    "a mount": (("spec", "containers", 0, "volumeMounts"), [{"name": "kube-api-access-x7k2p"}]),
    "an env": (("spec", "containers", 0, "env"), [{"name": "RANK", "value": "3"}]),
    "managed fields": (("metadata", "managedFields"), [{"manager": "kubectl"}]),
    "a resource version": (("metadata", "resourceVersion"), "42"),
    "a host name": (("spec", "hostname"), "worker-3"),
    "a DNS policy": (("spec", "dnsPolicy"), "ClusterFirst"),
    "a condition": (("status", "conditions"), [{"type": "PodScheduled"}]),
}


@pytest.mark.parametrize("change", UNREAD)
def test_what_no_model_reads_is_left_out(change: str) -> None:
    changed = pod()
    _set(changed, *UNREAD[change])
    assert read_part(corev1.Pod, changed) == read_part(corev1.Pod, pod())


_AFFINITY_TERM = (
    "spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
    "nodeSelectorTerms", 0, "matchExpressions", 0,
)  # fmt: skip
READ = {
    "a container's request": (("spec", "containers", 0, "resources", "requests", "cpu"), "2"),
    "a container's restart policy": (("spec", "containers", 0, "restartPolicy"), "Always"),
    "an affinity term": ((*_AFFINITY_TERM, "operator"), "DoesNotExist"),
    "a toleration's effect": (("spec", "tolerations", 0, "effect"), "NoSchedule"),
    "a field by its Python name": (("spec", "node_name"), "gpu-1"),
    "a request as a number": (("spec", "containers", 0, "resources", "requests", "cpu"), 1),
    "the phase": (("status", "phase"), "Running"),
    **{
        f"spec.{info.alias}": (("spec", str(info.alias)), "sentinel")
        for info in corev1.PodSpec.model_fields.values()
    },
    **{
        f"metadata.{info.alias}": (("metadata", str(info.alias)), "sentinel")
        for info in corev1.Pod.model_fields["metadata"].annotation.model_fields.values()  # type: ignore[union-attr]
    },
}


@pytest.mark.parametrize("change", READ)
def test_every_field_a_model_reads_is_kept(change: str) -> None:
    changed = pod()
    _set(changed, *READ[change])
    assert read_part(corev1.Pod, changed) != read_part(corev1.Pod, pod())


def test_a_value_of_the_wrong_type_is_kept_as_it_is() -> None:
    """Validation decides what a list where a model belongs means; the read part keeps it."""
    changed = pod()
    changed["spec"]["containers"] = {"name": "c"}
    assert read_part(corev1.Pod, changed)["spec"]["containers"] == {"name": "c"}  # type: ignore[index]


class _KeepsExtras(WireModel):
    model_config = ConfigDict(extra="allow")
    name: str = ""


class _ReadsTheWhole(WireModel):
    name: str = ""

    @model_validator(mode="before")
    @classmethod
    def _looks_at_everything(cls, data: Any) -> Any:
        return data


@pytest.mark.parametrize("model", [_KeepsExtras, _ReadsTheWhole])
def test_a_model_that_may_read_unknown_keys_is_taken_whole(model: type[BaseModel]) -> None:
    value = {"name": "n", "other": 1}
    assert read_part(model, copy.deepcopy(value)) == value


class _A(WireModel):
    a: str = ""


class _B(WireModel):
    b: str = ""


class _Either(WireModel):
    either: _A | _B | None = None


def test_a_union_of_models_is_taken_whole() -> None:
    value = {"either": {"a": "x", "other": 1}}
    assert read_part(_Either, copy.deepcopy(value)) == value
