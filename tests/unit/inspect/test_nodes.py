"""`kai nodes` from objects: whole devices, shared devices with their fractions, reservations, free."""

from __future__ import annotations

from typing import Any

from kai.inspect.nodes import NodesReport, summarise_nodes
from tests.unit.inspect.objects import node, pod

RESERVATIONS = "kai-resource-reservation"
GROUP = "runai-gpu-group"


def _objects() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    finished = pod("done", "done", node="n1", gpus=4)
    finished["status"]["phase"] = "Succeeded"
    pods = [
        pod("w", "w", node="n1", gpus=1),
        pod("other", None, node="n1", gpus=1, schedulerName="default-scheduler"),
        pod("h1", "h1", node="n1", annotations={"gpu-fraction": "0.5"}, labels={GROUP: "dev-1"}),
        pod("h2", "h2", node="n1", annotations={"gpu-memory": "10000"}, labels={GROUP: "dev-1"}),
        pod("res-1", None, node="n1", gpus=1, labels={GROUP: "dev-1"}, namespace=RESERVATIONS),
        pod("res-2", None, node="n1", gpus=1, labels={GROUP: "dev-2"}, namespace=RESERVATIONS),
        pod("waiting", "waiting", gpus=2),
        finished,
        pod("bad", "bad", node="n1", cpu="lots"),
    ]
    nodes = [node("n2", gpus=2), node("n1", gpus=6), node("n3", gpus=1, memory_mib="big")]
    return nodes, pods


def _report(names: list[str] | None = None) -> NodesReport:
    nodes, pods = _objects()
    return summarise_nodes(nodes, pods, RESERVATIONS, names or [])


def test_each_device_shows_what_holds_it_and_what_is_free() -> None:
    assert _report().rows() == [
        ("NODE", "DEVICE", "COUNT", "USED", "FREE", "HELD-BY"),
        ("n1", "all", "6", "3.75", "2.25", "Ready, 40000 MiB per device"),
        ("n1", "whole", "1", "1", "0", "ml/other"),
        ("n1", "whole", "1", "1", "0", "ml/w"),
        (
            "n1",
            "shared:dev-1",
            "1",
            "0.75",
            "0.25",
            "ml/h1 0.5, ml/h2 0.25; reservation kai-resource-reservation/res-1",
        ),
        ("n1", "reserved", "1", "1", "0", "kai-resource-reservation/res-2 (no pod shares it)"),
        ("n1", "free", "2", "0", "2", ""),
        ("n2", "all", "2", "0", "2", "Ready, 40000 MiB per device"),
        ("n2", "free", "2", "0", "2", ""),
    ]


def test_the_document_has_the_numbers() -> None:
    n1 = _report().document()["nodes"][0]
    assert n1["name"] == "n1"
    assert (n1["gpus"], n1["freeDevices"], n1["freeShare"], n1["freeGpus"]) == (6, 2, 0.25, 2.25)
    assert n1["wholeGpuPods"] == [
        {"pod": "ml/other", "devices": 1},
        {"pod": "ml/w", "devices": 1},
    ]
    assert n1["sharedDevices"] == [
        {
            "group": "dev-1",
            "reservationPod": "kai-resource-reservation/res-1",
            "usedMiB": 30000,
            "freeShare": 0.25,
            "pods": [
                {"pod": "ml/h1", "share": 0.5, "memoryMiB": 20000},
                {"pod": "ml/h2", "share": 0.25, "memoryMiB": 10000},
            ],
        }
    ]
    assert n1["idleReservations"] == ["kai-resource-reservation/res-2"]
    # w, other, h1, h2 and the idle reservation: 100m and 1Gi each. A reservation in use is
    # accounted through its sharing pods, as the engine does, so res-1 is not subtracted.
    assert n1["cpu"] == {"allocatable": 8000, "free": 7500}
    assert n1["memory"] == {"allocatable": 64 * 2**30, "free": 59 * 2**30}
    assert n1["pods"] == {"allocatable": 110, "free": 105}


def test_wide_adds_free_cpu_memory_and_pod_slots_on_the_node_line() -> None:
    rows = _report(["n1"]).rows(wide=True)
    assert rows[0] == (
        "NODE", "DEVICE", "COUNT", "USED", "FREE", "CPU-FREE", "MEM-FREE", "PODS-FREE", "HELD-BY"
    )  # fmt: skip
    assert rows[1] == ("n1", "all", "6", "3.75", "2.25", "7500m", "59Gi", "105",
                       "Ready, 40000 MiB per device")  # fmt: skip
    assert rows[2] == ("n1", "whole", "1", "1", "0", "", "", "", "ml/other")


def test_named_nodes_only() -> None:
    assert [n.node.name for n in _report(["n2"]).nodes] == ["n2"]


def test_a_malformed_node_or_pod_is_a_line_naming_it_and_its_field() -> None:
    assert [problem.split(": ")[:2] for problem in _report().problems] == [
        ["Node n3", "metadata.labels.nvidia.com/gpu.memory"],
        ["Pod ml/bad", "spec.containers[0].resources.requests.cpu"],
    ]


def test_devices_offered_as_extended_resources_show_what_holds_them() -> None:
    """MIG slices and an RDMA device get a line each (ephemeral storage only the document),
    with the pods that hold them; a pod that asks for none is not listed there."""
    mig = node("m1", gpus=0)
    mig["status"]["allocatable"].update(
        {"nvidia.com/mig-1g.10gb": "7", "rdma/hca": "1", "ephemeral-storage": "100Gi"}
    )
    sliced = pod("s", "s", node="m1")
    sliced["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/mig-1g.10gb": "2"}
    wired = pod("r", "r", node="m1")
    wired["spec"]["containers"][0]["resources"]["limits"] = {"rdma/hca": "1"}
    report = summarise_nodes([mig], [sliced, wired, pod("cpu", "cpu", node="m1")], RESERVATIONS, [])
    assert report.rows()[2:] == [
        ("m1", "nvidia.com/mig-1g.10gb", "7", "2", "5", "ml/s 2"),
        ("m1", "rdma/hca", "1", "1", "0", "ml/r 1"),
    ]
    [document] = report.document()["nodes"]
    assert document["scalars"] == [
        {"name": "ephemeral-storage", "allocatable": 100 * 2**30, "free": 100 * 2**30, "pods": []},
        {
            "name": "nvidia.com/mig-1g.10gb",
            "allocatable": 7,
            "free": 5,
            "pods": [{"pod": "ml/s", "amount": 2}],
        },
        {"name": "rdma/hca", "allocatable": 1, "free": 0, "pods": [{"pod": "ml/r", "amount": 1}]},
    ]


def test_a_host_port_gets_a_line_on_the_node_where_a_pod_holds_it() -> None:
    """Every node offers every port in use; the table shows one where a pod holds it."""
    holder = pod("web", "web", node="n1")
    holder["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    report = summarise_nodes([node("n1", 0), node("n2", 0)], [holder], RESERVATIONS, [])
    assert [row for row in report.rows() if "host-port/TCP/8080" in row] == [
        ("n1", "host-port/TCP/8080", "1", "1", "0", "ml/web 1")
    ]
    free = next(n for n in report.document()["nodes"] if n["name"] == "n2")["scalars"]
    assert free == [{"name": "host-port/TCP/8080", "allocatable": 1, "free": 1, "pods": []}]


def test_a_port_held_on_one_address_gets_the_line_of_that_address() -> None:
    """Two pods hold port 8080 on n1 on two addresses: a line each, none for the port as
    a whole, which no pod holds on every address."""
    holders = []
    for name, address in (("a", "10.0.0.1"), ("b", "10.0.0.2")):
        holder = pod(name, name, node="n1")
        port = {"containerPort": 80, "hostPort": 8080, "hostIP": address}
        holder["spec"]["containers"][0]["ports"] = [port]
        holders.append(holder)
    report = summarise_nodes([node("n1", 0)], holders, RESERVATIONS, [])
    assert [row for row in report.rows() if any("host-port" in cell for cell in row)] == [
        ("n1", "host-port/TCP/8080/10.0.0.1", "1", "1", "0", "ml/a 1"),
        ("n1", "host-port/TCP/8080/10.0.0.2", "1", "1", "0", "ml/b 1"),
    ]
