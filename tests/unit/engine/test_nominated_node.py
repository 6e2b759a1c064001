"""A pending pod's nominated node is tried first, as KAI's nominatednode plugin ranks it.

KAI adds a million to the score of the node in a pod's `status.nominatedNodeName`, above
every other score (kube-scheduler's inter-pod ones included); kai read no nomination.
The greedy pass, and the eviction actions' seating on the room victims leave, now try
that node first, wherever the pod may go and fits there.
"""

from __future__ import annotations

import dataclasses

import pytest

from kai.engine.cycle import run_cycle
from kai.engine.model import EngineConfig, Placement, PodAffinityTerm, PodPhase, Snapshot
from tests.unit.engine.builders import ANYWHERE, NOW, group, node, pod, queue, snapshot

HOST = "kubernetes.io/hostname"
GREEDY = EngineConfig(time_limit_seconds=0)


def _one_pending(nominated: str | None, placement: Placement = ANYWHERE) -> Snapshot:
    """n1 has one GPU free, n2 four: bin-packing seats a 1-GPU pod on n1."""
    busy = [pod(f"busy-{i}", "busy", 1, node_name="n1") for i in range(3)]
    waiting = dataclasses.replace(
        pod("job-0", "job", 1, placement=placement), nominated_node=nominated
    )
    nodes = [node(n, gpus=4, labels={HOST: n}) for n in ("n1", "n2")]
    return snapshot(nodes, [*busy, waiting], [group("busy", "q"), group("job", "q")], [queue("q")])


def _bound(snap: Snapshot) -> dict[str, str]:
    return {b.pod: b.node for b in run_cycle(snap, GREEDY).bindings if b.pod == "ns/job-0"}


def test_a_pod_goes_first_to_the_node_it_is_nominated_to() -> None:
    assert _bound(_one_pending(None)) == {"ns/job-0": "n1"}
    assert _bound(_one_pending("n2")) == {"ns/job-0": "n2"}


def test_a_nomination_counts_only_where_the_pod_fits_and_may_go() -> None:
    full = _one_pending("n1")
    full = dataclasses.replace(full, pods=(*full.pods, pod("busy-3", "busy", 1, node_name="n1")))
    assert _bound(full) == {"ns/job-0": "n2"}
    elsewhere = Placement(node_selector=((HOST, "n1"),))
    assert _bound(_one_pending("n2", elsewhere)) == {"ns/job-0": "n1"}
    assert _bound(_one_pending("gone")) == {"ns/job-0": "n1"}


def _waiting_on_leaving_pods(nominated: str | None, termed: bool) -> Snapshot:
    """Each node has pods being deleted (KAI's Releasing) and no idle GPU; n1 will have
    one GPU free, n2 two, so bin-packing pipelines a 1-GPU pod onto n1."""
    nodes = [node(n, gpus=4, labels={HOST: n}) for n in ("n1", "n2")]
    leaving = [
        dataclasses.replace(
            pod(f"old-{n}-{i}", f"old-{n}", 1, node_name=n),
            phase=PodPhase.RELEASING,
            deleting_since=NOW,
        )
        for n, count in (("n1", 1), ("n2", 2))
        for i in range(count)
    ]
    busy = [pod(f"busy-n1-{i}", "busy", 1, node_name="n1") for i in range(3)]
    busy += [pod(f"busy-n2-{i}", "busy", 1, node_name="n2") for i in range(2)]
    busy = [dataclasses.replace(p, labels=(("app", "busy"),)) for p in busy]
    # Preferring the busy pods' hosts, most of them on n1, seats it by the terms' tiers.
    prefers = PodAffinityTerm(
        False, HOST, (("app", "busy"),), namespaces=frozenset({"ns"}), weight=1
    )
    waiting = dataclasses.replace(
        pod("job-0", "job", 1), nominated_node=nominated, preferred_terms=(prefers,) * termed
    )
    groups = [group("old-n1", "q"), group("old-n2", "q"), group("busy", "q"), group("job", "q")]
    return snapshot(nodes, [*leaving, *busy, waiting], groups, [queue("q")])


@pytest.mark.parametrize("termed", [False, True], ids=["plain", "with-a-preference"])
def test_a_pod_waiting_on_room_being_freed_waits_on_its_nominated_node(termed: bool) -> None:
    """The room pods being deleted leave is seated by the eviction actions' seating (by
    the terms' tiers when a term concerns the pod): the nominated node comes first there
    too."""
    plain = run_cycle(_waiting_on_leaving_pods(None, termed), GREEDY)
    assert [(p.pod, p.node) for p in plain.pipelined] == [("ns/job-0", "n1")]
    nominated = run_cycle(_waiting_on_leaving_pods("n2", termed), GREEDY)
    assert [(p.pod, p.node) for p in nominated.pipelined] == [("ns/job-0", "n2")]
