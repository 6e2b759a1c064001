"""Host ports as scalar resources (`kai.api.host_ports`): what a pod asks, what nodes offer,
the builder's memo of nodes offering them (`kai.operator.offers_memo`), and the pods one
node takes when they bind a port to host addresses, as kube-scheduler's NodePorts filter
decides it."""

from __future__ import annotations

from typing import Any

import pytest

from kai.api.host_ports import ports_in_use
from kai.api.node_offers import offering
from kai.api.pods import parse_pod
from kai.engine.cycle import run_cycle
from kai.engine.model import EngineConfig
from kai.engine.scalars import MILLI
from kai.operator.offers_memo import NodeOffers
from tests.unit.engine.builders import group, node, queue, snapshot


def _pod(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {"schedulerName": "kai-scheduler", **spec},
    }


def _container(*ports: dict[str, Any], **rest: Any) -> dict[str, Any]:
    return {"name": "c", "ports": list(ports), **rest}


def test_a_pod_asks_one_of_each_host_port_its_running_containers_hold() -> None:
    spec = {
        "containers": [
            _container({"containerPort": 80, "hostPort": 8080}, {"containerPort": 81}),
            _container({"containerPort": 53, "hostPort": 53, "protocol": "UDP"}),
            _container({"containerPort": 80, "hostPort": 8080}),  # the same port again
        ],
        "initContainers": [
            _container({"containerPort": 1, "hostPort": 7000}),  # done before the others start
            _container({"containerPort": 2, "hostPort": 7001}, restartPolicy="Always"),  # sidecar
        ],
    }
    pod = parse_pod(_pod(spec), "ml/g")
    assert pod.scalars == (
        ("host-port/TCP/7001", MILLI),
        ("host-port/TCP/8080", MILLI),
        ("host-port/UDP/53", MILLI),
    )


def test_on_the_hosts_network_a_container_port_is_a_host_port() -> None:
    spec = {"hostNetwork": True, "containers": [_container({"containerPort": 9100})]}
    assert parse_pod(_pod(spec), "ml/g").scalars == (("host-port/TCP/9100", MILLI),)
    spec["hostNetwork"] = False
    assert parse_pod(_pod(spec), "ml/g").scalars == ()


def test_host_ports_sit_beside_other_scalar_resources_in_name_order() -> None:
    asks = {"rdma/hca": "1"}
    spec = {
        "containers": [
            _container(
                {"containerPort": 80, "hostPort": 8080},
                resources={"requests": asks, "limits": asks},
            )
        ]
    }
    assert parse_pod(_pod(spec), "ml/g").scalars == (
        ("host-port/TCP/8080", MILLI),
        ("rdma/hca", MILLI),
    )


def test_every_node_offers_one_of_each_port_in_use_and_keeps_its_own_resources() -> None:
    spec = {"containers": [_container({"containerPort": 80, "hostPort": 8080})]}
    ports = ports_in_use([parse_pod(_pod(spec), "ml/g")])
    assert ports == {"host-port/TCP/8080"}
    plain = node("n0", scalars={"rdma/hca": 2})
    offered = offering(plain, ports)
    assert dict(offered.scalars) == {"host-port/TCP/8080": MILLI, "rdma/hca": 2 * MILLI}
    assert offering(offered, ports) is offered
    assert offering(plain, frozenset()) is plain
    assert dict(offering(offered, frozenset()).scalars) == {"rdma/hca": 2 * MILLI}


def test_the_memo_keeps_each_node_offering_until_its_offer_changes() -> None:
    offers = NodeOffers()
    first, second = node("n0"), node("n1")
    ports = frozenset({"host-port/TCP/8080"})
    nodes, parsed = offers.offered([first, second], {"n1": second}, ports, {})
    assert offers.reoffered == ["n0", "n1"]
    assert [dict(n.scalars) for n in nodes] == [{"host-port/TCP/8080": MILLI}] * 2
    assert parsed == {"n0": nodes[0], "n1": nodes[1]}
    again, parsed = offers.offered([first, second], {}, ports, {})
    assert offers.reoffered == []
    assert again[0] is nodes[0] and again[1] is nodes[1] and parsed == {}
    replaced = node("n1", labels={"new": "label"})
    later, parsed = offers.offered([first, replaced], {"n1": replaced}, ports, {})
    assert later[0] is nodes[0] and later[1] is not nodes[1] and offers.reoffered == []
    assert parsed == {"n1": later[1]} and dict(later[1].scalars) == {"host-port/TCP/8080": MILLI}
    volume = (("volume/local/Filesystem/100Gi+", MILLI),)
    one, parsed = offers.offered([first, replaced], {}, ports, {"n1": volume})
    assert one[0] is nodes[0] and offers.reoffered == ["n1"] and parsed == {"n1": one[1]}
    assert dict(one[1].scalars) == {"host-port/TCP/8080": MILLI, volume[0][0]: MILLI}
    fewer, parsed = offers.offered([first, replaced], {}, frozenset(), {})
    assert fewer == [first, replaced] and offers.reoffered == ["n0", "n1"]
    none, parsed = offers.offered([first, replaced], {}, frozenset(), {})
    assert none == [first, replaced] and offers.reoffered == [] and parsed == {}


def test_a_port_bound_on_one_address_asks_a_thousandth_of_the_port_and_that_address() -> None:
    spec = {
        "containers": [
            _container(
                {"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1"},
                {"containerPort": 81, "hostPort": 8080, "hostIP": "10.0.0.2"},
                {"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "0.0.0.0"},
            )
        ]
    }
    assert parse_pod(_pod(spec), "ml/g").scalars == (
        ("host-port/TCP/8080", 2),
        ("host-port/TCP/8080/10.0.0.1", MILLI),
        ("host-port/TCP/8080/10.0.0.2", MILLI),
        ("host-port/UDP/53", MILLI),
    )


def test_a_pod_holding_a_port_on_every_address_and_on_one_asks_the_whole_port() -> None:
    """A pod never conflicts with itself: what it asks of the port stays one whole."""
    ports: list[dict[str, Any]] = [
        {"containerPort": 80, "hostPort": 8080},
        {"containerPort": 81, "hostPort": 8080, "hostIP": "10.0.0.1"},
    ]
    scalars = dict(parse_pod(_pod({"containers": [_container(*ports)]}), "ml/g").scalars)
    assert scalars["host-port/TCP/8080"] == MILLI


def _on_one_node(*addresses: str) -> list[str]:
    """One pod per address, each holding port 8080 there ("" for every address), pending
    beside a single node offering what they ask: the pods it takes, in order."""
    pods = []
    for index, address in enumerate(addresses):
        port = {"containerPort": 80, "hostPort": 8080, **({"hostIP": address} if address else {})}
        manifest = _pod({"containers": [_container(port)]})
        manifest["metadata"]["name"] = f"p{index}"
        pods.append(parse_pod(manifest, f"ml/p{index}"))
    offered = offering(node("n0", gpus=0), ports_in_use(pods))
    groups = [group(pod.name, "q", namespace="ml") for pod in pods]
    snap = snapshot([offered], pods, groups, [queue("q")])
    result = run_cycle(snap, EngineConfig(time_limit_seconds=0))
    return sorted(binding.pod for binding in result.bindings)


@pytest.mark.parametrize(
    ("addresses", "bound"),
    [
        (("10.0.0.1", "10.0.0.2"), ["ml/p0", "ml/p1"]),  # two addresses: both on one node
        (("10.0.0.1", "10.0.0.1"), ["ml/p0"]),  # the same address: one
        (("", "10.0.0.1"), ["ml/p0"]),  # every address, then one: one
        (("10.0.0.1", "0.0.0.0"), ["ml/p0"]),  # one, then every address: one
        (("", ""), ["ml/p0"]),
    ],
)
def test_one_node_takes_pods_on_a_port_as_kube_schedulers_node_ports_filter(
    addresses: tuple[str, ...], bound: list[str]
) -> None:
    """kube-scheduler's `HostPortInfo.CheckConflict`: a port on one address conflicts with
    the same address and with every address; on every address, with any. Before, kai read
    no host IP, and two pods on two addresses never shared a node."""
    assert _on_one_node(*addresses) == bound
