"""Host ports, as kube-scheduler's NodePorts filter keeps them under KAI: a port of a node
(by protocol) is held by one pod at a time.

kai counts them as scalar resources (`kai.engine.scalars`), so every pass that seats a
pod, the victim searches and the validator keep them with no rule of their own: a pod
asks one `host-port/<protocol>/<port>` for each host port of its containers (and of its
sidecars, which run beside them; a `hostNetwork` pod's container ports are its host
ports, as the API server writes them), and every node offers one of each port any pod
of the snapshot asks for. So a pod whose port another pod holds on a node goes
elsewhere, or preempts that pod, and otherwise waits, told `insufficient
host-port/TCP/8080 (needs 1, free 0)`.

Where kai differs: kube-scheduler lets two pods hold the same port on one node when
they bind it to different host IPs; kai reads no host IP, so they never share a node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from kai.api import corev1
from kai.engine.model import Node, Pod
from kai.engine.scalars import MILLI, Scalars

HOST_PORT_PREFIX = "host-port/"


def asked_ports(spec: corev1.PodSpec) -> Scalars:
    """The host ports the pod's containers and sidecars hold, as scalar resources."""
    running = [
        *spec.containers,
        *(container for container in spec.init_containers if container.restart_policy == "Always"),
    ]
    # On the host's network a container's port is a host port: the API server writes it
    # so, and a manifest written by hand for `kai simulate` may leave it to it.
    names = {
        f"{HOST_PORT_PREFIX}{port.protocol}/{host_port}"
        for container in running
        for port in container.ports
        if (host_port := port.host_port or (port.container_port if spec.host_network else 0))
    }
    return tuple((name, MILLI) for name in sorted(names))


def ports_in_use(pods: Iterable[Pod]) -> frozenset[str]:
    """Every host port some pod asks for."""
    return frozenset(
        name for pod in pods if pod.scalars for name, _ in pod.scalars if is_host_port(name)
    )


def offering(node: Node, ports: frozenset[str]) -> Node:
    """The node offering one of each of `ports` beside its own scalar resources."""
    own = [(name, amount) for name, amount in node.scalars if not is_host_port(name)]
    offered = tuple(sorted([*own, *((port, MILLI) for port in ports)]))
    return node if offered == node.scalars else dataclasses.replace(node, scalars=offered)


def is_host_port(name: str) -> bool:
    return name.startswith(HOST_PORT_PREFIX)
