"""Pods of one template parse once: each sibling's result must be what parsing it gives.

Every case is checked against `parse_pod` itself on the sibling, so sharing can only ever
agree with the parser: the same Pod, or the same error.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

import kai.api.pods
from kai.api.errors import ManifestError
from kai.api.pods import SiblingParser, parse_pod
from kai.engine.model import Pod
from tests.unit.api.pod_manifests import Manifest, waiting_pod


def template() -> Manifest:
    return waiting_pod(nodeSelector={"nvidia.com/gpu.product": "A100"})


def _metadata(field: str, value: Any) -> Callable[[Manifest], None]:
    def change(pod: Manifest) -> None:
        pod["metadata"][field] = value

    return change


def _annotation(key: str, value: Any) -> Callable[[Manifest], None]:
    def change(pod: Manifest) -> None:
        pod["metadata"]["annotations"][key] = value

    return change


def _without_uid(pod: Manifest) -> None:
    del pod["metadata"]["uid"]


def _asks_more(pod: Manifest) -> None:
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "4"


def _asks_a_number(pod: Manifest) -> None:
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = 2


def _bound(pod: Manifest) -> None:
    pod["spec"]["nodeName"] = "gpu-1"


def _running(pod: Manifest) -> None:
    _bound(pod)
    pod["status"]["phase"] = "Running"


def _status_not_a_mapping(pod: Manifest) -> None:
    pod["status"] = ["Pending"]


SIBLINGS: dict[str, Callable[[Manifest], object]] = {
    "another name and uid": lambda pod: (
        _metadata("name", "worker-2")(pod),
        _metadata("uid", "uid-2")(pod),
    ),
    "another group annotation": _annotation("pod-group-name", "pg-2"),
    "no uid": _without_uid,
    "a null uid": _metadata("uid", None),
    "a uid that is a number": _metadata("uid", 7),
    "an empty name": _metadata("name", ""),
    "a name that is a number": _metadata("name", 3),
    "a group annotation that is a number": _annotation("pod-group-name", 1),
    "annotations that are a list": _metadata("annotations", ["gpu-fraction"]),
    "another fraction": _annotation("gpu-fraction", "0.25"),
    "a fraction that is a number": _annotation("gpu-fraction", 0.5),
    "another namespace": _metadata("namespace", "other"),
    "created later": _metadata("creationTimestamp", "2026-12-05T03:00:01Z"),
    "being deleted": _metadata("deletionTimestamp", "2026-12-05T03:01:00Z"),
    "another label": _metadata("labels", {"kai.scheduler/subgroup-name": "workers"}),
    "asks more": _asks_more,
    "asks a number, not a quantity": _asks_a_number,
    "bound": _bound,
    "running": _running,
    "a status that is a list": _status_not_a_mapping,
    "its own volume": lambda pod: pod["spec"].update(volumes=[{"name": "kube-api-access-x"}]),
}


def _parsed(parse: Callable[[Manifest, str], Pod], pod: Manifest, group: str) -> object:
    """The Pod with its derived fields (not compared by `==`), or the error's text."""
    try:
        found = parse(pod, group)
    except ManifestError as error:
        return str(error)
    return (found, found.key, found.cpu_millis, found.memory_bytes, found.whole_request)


@pytest.mark.parametrize("sibling", SIBLINGS)
@pytest.mark.parametrize("group", ["team/pg-1", "team/pg-2"])
def test_a_sibling_is_what_parsing_it_gives(sibling: str, group: str) -> None:
    siblings = SiblingParser()
    siblings.parse(template(), "team/pg-1")
    pod = template()
    SIBLINGS[sibling](pod)
    assert _parsed(siblings.parse, copy.deepcopy(pod), group) == _parsed(parse_pod, pod, group)


def test_pods_of_one_template_are_validated_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reason it exists: a burst of 100 pods from one template costs one parse."""
    calls = _counted(monkeypatch)
    siblings = SiblingParser()
    burst = []
    for index in range(100):
        pod = template()
        pod["metadata"].update(name=f"worker-{index}", uid=f"uid-{index}")
        pod["metadata"]["annotations"]["pod-group-name"] = f"pg-{index}"
        pod["spec"]["volumes"] = [{"name": f"kube-api-access-{index:05x}"}]  # the server's
        burst.append(siblings.parse(pod, f"team/pg-{index}"))
    assert calls == ["worker-0"]
    assert [pod.key for pod in burst] == [f"team/worker-{index}" for index in range(100)]
    assert {pod.group for pod in burst} == {f"team/pg-{index}" for index in range(100)}


def test_a_template_that_fails_is_not_shared() -> None:
    """An error names its pod: each bad sibling is parsed, and named, on its own."""
    siblings = SiblingParser()
    errors = []
    for name in ("worker-0", "worker-1"):
        pod = template()
        pod["metadata"]["name"] = name
        pod["status"]["phase"] = "Running"  # running, on no node
        with pytest.raises(ManifestError) as raised:
            siblings.parse(pod, "team/pg-0")
        errors.append(str(raised.value))
    assert "worker-0" in errors[0] and "worker-1" in errors[1]


def test_forgetting_ends_the_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counted(monkeypatch)
    siblings = SiblingParser()
    siblings.parse(template(), "team/pg-0")
    siblings.forget()
    siblings.parse(template(), "team/pg-0")
    assert calls == ["worker-0", "worker-0"]


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the pods `parse_pod` validates from now on."""
    calls: list[str] = []

    def counted(manifest: Manifest, pod_group_key: str) -> Pod:
        calls.append(manifest["metadata"]["name"])
        return parse_pod(manifest, pod_group_key)

    monkeypatch.setattr(kai.api.pods, "parse_pod", counted)
    return calls
