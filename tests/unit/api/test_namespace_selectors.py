"""Inter-pod terms that select namespaces by their labels read the cluster's Namespaces.

kai did not read namespaces: a pod with such a term waited with `UnhonouredConstraint`.
The parser now keeps the selector (`PodAffinityTerm.namespace_selector`), the snapshot's
makers add the namespaces it selects from the Namespaces' labels (`kai.api.namespaces`,
applied by `kai.api.dependencies`), and the live memo reads them again once a namespace's
labels change.
"""

from __future__ import annotations

from typing import Any

from kai.api.dependencies import ClusterObjects, depends, with_dependencies
from kai.api.namespaces import NAME_LABEL, names_namespace_labels
from kai.api.pods import parse_pod
from kai.api.volumes import VolumeObjects
from kai.engine.cycle import run_cycle
from kai.engine.model import EngineConfig, Pod, Requirement
from kai.operator.dependencies_memo import DependenciesMemo
from tests.unit.engine.builders import group, node, queue, snapshot

HOST = "kubernetes.io/hostname"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
TEAM_A = {"matchLabels": {"team": "a"}}


def _term(selector: dict[str, Any] | None, **more: Any) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": HOST, **more}
    if selector is not None:
        term["namespaceSelector"] = selector
    return term


def _manifest(
    name: str,
    affinity: dict[str, Any] | None = None,
    namespace: str = "ml",
    labels: dict[str, str] | None = None,
    node_name: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "kai-scheduler",
        "containers": [
            {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
        ],
    }
    if affinity is not None:
        spec["affinity"] = affinity
    if node_name is not None:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def _namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def _cluster(*namespaces: dict[str, Any]) -> ClusterObjects:
    return ClusterObjects(
        VolumeObjects({}, {}, {}),
        frozenset(),
        {item["metadata"]["name"]: item for item in namespaces},
    )


def _away_from_db(selector: dict[str, Any], **more: Any) -> dict[str, Any]:
    return _manifest("p", {"podAntiAffinity": {REQUIRED: [_term(selector, **more)]}})


def test_the_parser_keeps_a_selector_with_labels_for_the_namespaces_to_answer() -> None:
    listed = parse_pod(_away_from_db(TEAM_A, namespaces=["ops"]), "ml/g")
    [term] = listed.pod_terms
    assert term.namespaces == frozenset({"ops"})  # not the pod's own: a selector is given
    assert term.namespace_selector == (Requirement("team", "In", ("a",)),)
    assert listed.unhonoured is None
    [every] = parse_pod(_away_from_db({}), "ml/g").pod_terms
    assert (every.namespaces, every.namespace_selector) == (None, None)


def test_only_pods_with_such_a_term_depend_on_the_namespaces() -> None:
    assert names_namespace_labels(_away_from_db(TEAM_A))
    preferred = {"podAffinity": {PREFERRED: [{"weight": 3, "podAffinityTerm": _term(TEAM_A)}]}}
    assert names_namespace_labels(_manifest("p", preferred))
    assert depends(_manifest("p", preferred))
    assert not names_namespace_labels(_away_from_db({}))
    assert not names_namespace_labels(_manifest("p"))
    assert not depends(_away_from_db({}))


def test_the_term_selects_the_namespaces_whose_labels_meet_it_and_those_it_lists() -> None:
    manifest = _away_from_db(
        {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]},
        namespaces=["ops"],
    )
    pod = parse_pod(manifest, "ml/g")
    cluster = _cluster(
        _namespace("ml", team="a"), _namespace("data", team="b"), _namespace("web", team="c")
    )
    [term] = with_dependencies(pod, manifest, cluster).pod_terms
    assert term.namespaces == frozenset({"ml", "data", "ops"})


def test_a_selector_may_read_the_name_label_every_namespace_carries() -> None:
    by_name = {"matchLabels": {NAME_LABEL: "data"}}
    manifest = _away_from_db(by_name)
    pod = parse_pod(manifest, "ml/g")
    [term] = with_dependencies(pod, manifest, _cluster(_namespace("data"))).pod_terms
    assert term.namespaces == frozenset({"data"})


def test_the_memo_reads_the_namespaces_again_once_one_is_labelled() -> None:
    manifest = _away_from_db(TEAM_A)
    pod = parse_pod(manifest, "ml/g")
    memo = DependenciesMemo()
    first = memo.applied("ml/p", pod, manifest, _cluster(_namespace("data")))
    assert first.pod_terms[0].namespaces == frozenset()
    memo.end_cycle()
    same = memo.applied("ml/p", pod, manifest, _cluster(_namespace("data")))
    assert same is first
    memo.end_cycle()
    labelled = memo.applied("ml/p", pod, manifest, _cluster(_namespace("data", team="a")))
    assert labelled.pod_terms[0].namespaces == frozenset({"data"})


def _placed(namespaces: tuple[dict[str, Any], ...]) -> dict[str, str]:
    """A db pod runs on n0 in namespace data; a pod that must avoid db pods of team-a
    namespaces waits; n0 is the fuller node, which bin-packing would pick."""
    db = _manifest("db", namespace="data", labels={"app": "db"}, node_name="n0")
    busy = _manifest("busy", namespace="data", node_name="n0")
    avoiding = _away_from_db(TEAM_A)
    cluster = _cluster(*namespaces)
    pods: list[Pod] = [
        parse_pod(db, "data/db"),
        parse_pod(busy, "data/busy"),
        with_dependencies(parse_pod(avoiding, "ml/p"), avoiding, cluster),
    ]
    snap = snapshot(
        [node("n0", gpus=4, labels={HOST: "n0"}), node("n1", gpus=4, labels={HOST: "n1"})],
        pods,
        [
            group("db", "q", namespace="data"),
            group("busy", "q", namespace="data"),
            group("p", "q", namespace="ml"),
        ],
        [queue("q")],
    )
    result = run_cycle(snap, EngineConfig(time_limit_seconds=0))
    return {binding.pod: binding.node for binding in result.bindings}


def test_the_engine_keeps_the_pod_away_only_from_the_selected_namespaces() -> None:
    assert _placed((_namespace("data", team="a"),)) == {"ml/p": "n1"}
    assert _placed((_namespace("data", team="b"),)) == {"ml/p": "n0"}
