"""A pod parsed again after a change parse_pod does not read, or after its bind, without
validating it again: the result must be exactly what parsing it would give.

Every case is checked against `parse_pod` itself on the changed pod, so the shortcut can
only ever agree with the parser or step aside (None).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from kai.api.pods import parse_pod, reparsed
from kai.engine.model import PodPhase
from tests.unit.api.pod_manifests import Manifest, waiting_pod

GROUP = "team/pg-1"


def bound(pod: Manifest) -> None:
    """What a Binding does to the pod (and what the server changes beside it)."""
    pod["spec"]["nodeName"] = "gpu-1"
    pod["metadata"]["resourceVersion"] = "101"
    pod["metadata"]["managedFields"] = [{"manager": "kube-apiserver", "operation": "Update"}]
    pod["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-12-05T03:00:01Z"}
    ]


def only_version(pod: Manifest) -> None:
    pod["metadata"]["resourceVersion"] = "102"


def relabelled(pod: Manifest) -> None:
    pod["metadata"]["labels"]["kai.scheduler/subgroup-name"] = "workers"


def reannotated(pod: Manifest) -> None:
    pod["metadata"]["annotations"]["gpu-fraction"] = "0.25"


def deleted(pod: Manifest) -> None:
    pod["metadata"]["deletionTimestamp"] = "2026-12-05T03:01:00Z"


def running(pod: Manifest) -> None:
    bound(pod)
    pod["status"]["phase"] = "Running"


def asks_more(pod: Manifest) -> None:
    bound(pod)
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "4"


def gated(pod: Manifest) -> None:
    pod["spec"]["schedulingGates"] = [{"name": "wait"}]


def nominated(pod: Manifest) -> None:
    pod["status"]["nominatedNodeName"] = "gpu-2"


SPECS: dict[str, dict[str, Any]] = {
    "plain": {},
    "affinity": {
        "nodeSelector": {"nvidia.com/gpu.product": "A100"},
        "tolerations": [{"key": "gpu", "operator": "Exists"}],
    },
}
CHANGES: dict[str, tuple[Callable[[Manifest], None], bool]] = {
    # change -> (what it does, whether the shortcut must take it)
    "bound": (bound, True),
    "only its version": (only_version, True),
    "a label": (relabelled, False),
    "an annotation": (reannotated, False),
    "deleted": (deleted, False),
    "running": (running, False),
    "its requests": (asks_more, False),
    "gated": (gated, False),
    "nominated": (nominated, False),
}


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("change", CHANGES)
def test_a_reparsed_pod_is_what_parsing_it_gives(spec: str, change: str) -> None:
    before = waiting_pod(**SPECS[spec])
    after = copy.deepcopy(before)
    apply, taken = CHANGES[change]
    apply(after)
    found = reparsed(before, after, parse_pod(before, GROUP))
    if taken:
        assert found is not None, "the shortcut stepped aside"
    else:
        assert found is None
    if found is not None:
        assert found == parse_pod(after, GROUP)


def test_a_bound_pod_reparsed_is_bound_to_its_node() -> None:
    before = waiting_pod()
    after = copy.deepcopy(before)
    bound(after)
    found = reparsed(before, after, parse_pod(before, GROUP))
    assert found is not None
    assert (found.phase, found.node, found.key) == (PodPhase.BOUND, "gpu-1", "team/worker-0")


def test_a_pod_moved_to_another_node_is_parsed_again() -> None:
    before = waiting_pod()
    bound(before)
    after = copy.deepcopy(before)
    after["spec"]["nodeName"] = "gpu-2"
    assert reparsed(before, after, parse_pod(before, GROUP)) is None


def test_a_nominated_pod_reparsed_once_bound_is_nominated_no_more() -> None:
    before = waiting_pod()
    nominated(before)
    after = copy.deepcopy(before)
    bound(after)
    found = reparsed(before, after, parse_pod(before, GROUP))
    assert found is not None and found == parse_pod(after, GROUP)
    assert (found.node, found.nominated_node) == ("gpu-1", None)
