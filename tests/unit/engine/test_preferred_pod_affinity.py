"""Preferred inter-pod affinity and anti-affinity rank the nodes a pod fits, as KAI ranks them.

KAI adds kube-scheduler's InterPodAffinity score to each node's order a million times over,
above every other score but a nominated node's. kai read no preferred term: replicas that
prefer to be apart were packed onto one node, and a pod that prefers its cache's node went
wherever bin-packing put it. The preference now decides among the nodes a pod fits; the
packing order breaks ties.
"""

from __future__ import annotations

import dataclasses

from kai.api.parse import parse_pod
from kai.engine.cycle import POD_AFFINITY, run_cycle
from kai.engine.model import EngineConfig, Node, Pod, PodAffinityTerm, Requirement, Snapshot
from tests.unit.engine.builders import group, node, pod, queue, snapshot
from tests.unit.engine.test_topology import RACK, ZONE, cluster, constrained

HOST = "kubernetes.io/hostname"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
GREEDY = EngineConfig(time_limit_seconds=0)
SOLVER = EngineConfig(time_limit_seconds=1, solver_workers=1)


def _term(anti: bool, weight: int = 0, **labels: str) -> PodAffinityTerm:
    return PodAffinityTerm(
        anti, HOST, tuple(sorted(labels.items())), namespaces=frozenset({"ns"}), weight=weight
    )


def _with(p: Pod, *, prefers: tuple[PodAffinityTerm, ...] = (), **labels: str) -> Pod:
    return dataclasses.replace(p, labels=tuple(sorted(labels.items())), preferred_terms=prefers)


def _host(name: str, gpus: int = 8) -> Node:
    return node(name, gpus=gpus, labels={HOST: name})


def _bound(snap: Snapshot, config: EngineConfig = GREEDY) -> dict[str, str]:
    return {binding.pod: binding.node for binding in run_cycle(snap, config).bindings}


def _without_preferences(snap: Snapshot) -> Snapshot:
    return dataclasses.replace(
        snap, pods=tuple(dataclasses.replace(p, preferred_terms=()) for p in snap.pods)
    )


def test_the_parser_reads_preferred_terms_with_their_weights() -> None:
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOST}
    by_labels = {**term, "namespaceSelector": {"matchLabels": {"team": "a"}}}
    spec = {
        "schedulerName": "kai-scheduler",
        "containers": [{"name": "c"}],
        "affinity": {
            "podAntiAffinity": {PREFERRED: [{"weight": 70, "podAffinityTerm": term}]},
            "podAffinity": {
                PREFERRED: [
                    {"weight": 5, "podAffinityTerm": {**term, "namespaces": ["a"]}},
                    {"weight": 9, "podAffinityTerm": by_labels},
                ]
            },
        },
    }
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml", "labels": {"app": "web"}},
        "spec": spec,
    }
    parsed = parse_pod(manifest, "ml/pg")
    near, labelled, apart = parsed.preferred_terms  # affinity first, in the order written
    assert (near.anti, near.weight, near.namespaces) == (False, 5, frozenset({"a"}))
    assert (labelled.weight, labelled.namespaces) == (9, frozenset())  # the cluster's to answer
    assert labelled.namespace_selector == (Requirement("team", "In", ("a",)),)
    assert (apart.anti, apart.weight, apart.namespaces) == (True, 70, frozenset({"ml"}))
    assert apart.match_labels == (("app", "web"),)
    assert parsed.pod_terms == () and parsed.unhonoured is None  # a preference binds nothing


def test_replicas_that_prefer_to_be_apart_spread_where_bin_packing_would_stack_them() -> None:
    apart = _term(True, 50, app="web")
    replicas = [
        _with(pod(f"web{i}-0", f"web{i}", 1), prefers=(apart,), app="web") for i in range(3)
    ]
    snap = snapshot(
        [_host("a"), _host("b"), _host("c")],
        replicas,
        [group(f"web{i}", "q") for i in range(3)],
        [queue("q")],
    )
    for config in (GREEDY, SOLVER):
        assert sorted(_bound(snap, config).values()) == ["a", "b", "c"]
    assert len(set(_bound(_without_preferences(snap)).values())) == 1


def test_a_gangs_pods_that_prefer_to_be_apart_spread_too() -> None:
    """Each pod is scored beside the gang's pods placed before it."""
    apart = _term(True, 10, app="w")
    workers = [_with(pod(f"w-{i}", "w", 1), prefers=(apart,), app="w") for i in range(3)]
    snap = snapshot(
        [_host("a"), _host("b"), _host("c")], workers, [group("w", "q", min_member=3)], [queue("q")]
    )
    assert sorted(_bound(snap).values()) == ["a", "b", "c"]


def _cache_on_a(pending: Pod, *, a_gpus: int = 8) -> Snapshot:
    """The cache runs on a; b is fuller, so bin-packing puts a 1-GPU pod on b."""
    return snapshot(
        [_host("a", a_gpus), _host("b")],
        [
            _with(pod("cache-0", "cache", 1, node_name="a"), app="cache"),
            *(pod(f"busy{i}-0", f"busy{i}", 1, node_name="b") for i in range(4)),
            pending,
        ],
        [group("cache", "q"), *(group(f"busy{i}", "q") for i in range(4)), group("job", "q")],
        [queue("q")],
    )


def test_a_pod_that_prefers_its_cache_goes_to_the_caches_node() -> None:
    snap = _cache_on_a(_with(pod("job-0", "job", 1), prefers=(_term(False, 1, app="cache"),)))
    assert _bound(snap) == {"ns/job-0": "a"}
    assert _bound(_without_preferences(snap)) == {"ns/job-0": "b"}


def test_a_preference_ranks_only_the_nodes_the_pod_fits() -> None:
    """The cache's node has one GPU, taken by the cache: the pod goes where it fits."""
    snap = _cache_on_a(
        _with(pod("job-0", "job", 1), prefers=(_term(False, 100, app="cache"),)), a_gpus=1
    )
    assert _bound(snap) == {"ns/job-0": "b"}


def test_weights_add_up_across_terms() -> None:
    """Near the cache (10) but away from the batch pod (30), both on a: a scores -20, so the
    pod goes to b, which bin-packing would also pick; with the weights swapped, to a."""
    snap = _cache_on_a(
        _with(
            pod("job-0", "job", 1),
            prefers=(_term(False, 30, app="cache"), _term(True, 10, app="batch")),
        )
    )
    batch = _with(pod("batch-0", "batch", 1, node_name="a"), app="batch")
    snap = dataclasses.replace(
        snap, pods=(*snap.pods, batch), pod_groups=(*snap.pod_groups, group("batch", "q"))
    )
    assert _bound(snap) == {"ns/job-0": "a"}
    swapped = dataclasses.replace(
        snap,
        pods=tuple(
            dataclasses.replace(
                p, preferred_terms=(_term(False, 10, app="cache"), _term(True, 30, app="batch"))
            )
            if p.name == "job-0"
            else p
            for p in snap.pods
        ),
    )
    assert _bound(swapped) == {"ns/job-0": "b"}


def test_a_running_pods_terms_score_the_pods_they_select() -> None:
    """The cache on a prefers web pods away (weight 5): a web pod goes to c, not a, where
    bin-packing ties them. A running pod's required affinity term draws the pods it selects
    to its node with weight 1 (kube-scheduler's hardPodAffinityWeight): it goes to b."""
    pushing = _with(pod("cache-0", "cache", 1, node_name="a"), prefers=(_term(True, 5, app="web"),))
    drawing = dataclasses.replace(
        pod("db-0", "db", 1, node_name="b"), pod_terms=(_term(False, app="web"),)
    )
    newcomer = _with(pod("web-0", "web", 1), app="web")
    snap = snapshot(
        [_host("a"), _host("b"), _host("c", 7)],
        [pushing, drawing, newcomer],
        [group("cache", "q"), group("db", "q"), group("web", "q")],
        [queue("q")],
    )
    assert _bound(snap) == {"ns/web-0": "b"}
    without_db = dataclasses.replace(snap, pods=(pushing, newcomer))
    assert _bound(without_db) == {"ns/web-0": "c"}


def test_the_model_leaves_gangs_with_preferences_to_the_greedy_pass() -> None:
    """The CP-SAT model does not see the terms: with only such gangs pending it is not built."""
    apart = _term(True, 50, app="web")
    replicas = [
        _with(pod(f"web{i}-0", f"web{i}", 1), prefers=(apart,), app="web") for i in range(2)
    ]
    too_big = _with(pod("big-0", "big", 16), prefers=(apart,), app="web")
    snap = snapshot(
        [_host("a"), _host("b")],
        [*replicas, too_big],
        [group("web0", "q"), group("web1", "q"), group("big", "q")],
        [queue("q")],
    )
    result = run_cycle(snap, SOLVER)
    assert result.report.status == POD_AFFINITY
    assert sorted(b.node for b in result.bindings) == ["a", "b"]


def test_a_preemptor_is_seated_where_its_preference_is_best_of_the_room_its_victims_leave() -> None:
    """Evicting the low gang frees a GPU on a, beside a replica, and one on b: the pending
    replica, which prefers to be apart, is seated on b. Without the preference, on a (the
    two tie, and a comes first)."""
    apart = _term(True, 50, app="web")
    snap = snapshot(
        [_host("a", 2), _host("b", 2)],
        [
            _with(pod("web0-0", "web0", 1, node_name="a"), prefers=(apart,), app="web"),
            pod("low-0", "low", 1, node_name="a"),
            pod("low-1", "low", 1, node_name="b"),
            pod("keep-0", "keep", 1, node_name="b"),
            _with(pod("web1-0", "web1", 1), prefers=(apart,), app="web"),
        ],
        [
            group("web0", "q", priority=100),
            group("low", "q", min_member=2, priority=5),
            group("keep", "q", priority=100),
            group("web1", "q", priority=100),
        ],
        [queue("q")],
    )
    result = run_cycle(snap, GREEDY)
    assert sorted(e.pod for e in result.evictions) == ["ns/low-0", "ns/low-1"]
    assert {r.pod: r.node for r in result.pipelined} == {"ns/web1-0": "b"}
    plain = run_cycle(_without_preferences(snap), GREEDY)
    assert {r.pod: r.node for r in plain.pipelined} == {"ns/web1-0": "a"}


def test_a_topology_constrained_gangs_pods_spread_by_preference_inside_their_rack() -> None:
    """A gang required in one rack, its workers preferring to be apart: r2 is full, and
    inside rack r1 they take a host each, where bin-packing stacks them on r1a, the fuller
    host. The preference ranks above the search's own order within the domain."""
    apart = _term(True, 10, app="w")

    def racked(name: str, rack: str) -> Node:
        return node(name, gpus=4, labels={HOST: name, ZONE: "z", RACK: rack})

    nodes = [racked("r1a", "r1"), racked("r1b", "r1"), racked("r2a", "r2")]
    workers = [_with(pod(f"w-{i}", "w", 1), prefers=(apart,), app="w") for i in range(2)]
    busy = [pod("busy-0", "busy", 2, node_name="r1a"), pod("full-0", "full", 4, node_name="r2a")]
    groups = [group("busy", "q"), group("full", "q"), constrained("w", 2, required="rack")]
    snap = cluster(nodes, [*busy, *workers], groups)
    result = run_cycle(snap, GREEDY)
    assert sorted(b.node for b in result.bindings) == ["r1a", "r1b"]
    plain = run_cycle(_without_preferences(snap), GREEDY)
    assert len({b.node for b in plain.bindings}) == 1


def test_the_node_a_pod_is_nominated_to_outranks_its_preferences() -> None:
    """KAI's nominatednode score is above kube-scheduler's: nominated to b, it goes to b."""
    preferring = _with(pod("job-0", "job", 1), prefers=(_term(False, 100, app="cache"),))
    snap = _cache_on_a(dataclasses.replace(preferring, nominated_node="b"))
    assert _bound(snap) == {"ns/job-0": "b"}
