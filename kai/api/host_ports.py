"""Host ports, as kube-scheduler's NodePorts filter keeps them under KAI: a port of a node
(by protocol) is held by one pod at a time on each of the host's addresses, and a pod
that binds it on every address (host IP empty or 0.0.0.0) holds it on all of them.

kai counts them as scalar resources (`kai.engine.scalars`), so every pass that seats a
pod, the victim searches and the validator keep them with no rule of their own. A pod
asks for each host port of its containers (and of its sidecars, which run beside them;
a `hostNetwork` pod's container ports are its host ports, as the API server writes them):
- bound on every address: the whole `host-port/<protocol>/<port>`;
- bound on one address: a thousandth of it, and the whole
  `host-port/<protocol>/<port>/<address>`.
Every node offers one of each such resource some pod of the snapshot asks for
(`kai.api.node_offers`). So two
pods that bind the port on two addresses share a node (two thousandths), two on one
address do not, and a pod on every address shares it with none: exactly kube-scheduler's
`HostPortInfo.CheckConflict`, for up to a thousand addresses of one port on a node. A
pod whose port is held on a node goes elsewhere, or preempts the pod that holds it, and
otherwise waits, told `insufficient host-port/TCP/8080 (needs 1, free 0)`; where a pod
holds the port on one address, the port's free part reads 0.999.
"""

from __future__ import annotations

from collections.abc import Iterable

from kai.api import corev1
from kai.engine.model import Pod
from kai.engine.scalars import MILLI, Scalars

HOST_PORT_PREFIX = "host-port/"
EVERY_ADDRESS = "0.0.0.0"
"""kube-scheduler's `DefaultBindAllHostIP`: an empty host IP means it too."""
ONE_ADDRESS = 1
"""What a port bound on one address asks of the port's resource, in thousandths."""


def asked_ports(spec: corev1.PodSpec) -> Scalars:
    """The host ports the pod's containers and sidecars hold, as scalar resources."""
    running = [
        *spec.containers,
        *(container for container in spec.init_containers if container.restart_policy == "Always"),
    ]
    # On the host's network a container's port is a host port: the API server writes it
    # so, and a manifest written by hand for `kai simulate` may leave it to it.
    held = {
        (f"{HOST_PORT_PREFIX}{port.protocol}/{host_port}", port.host_ip or EVERY_ADDRESS)
        for container in running
        for port in container.ports
        if (host_port := port.host_port or (port.container_port if spec.host_network else 0))
    }
    asks: dict[str, int] = {}
    for name, address in held:
        if address == EVERY_ADDRESS:
            asks[name] = MILLI
        else:  # a pod never conflicts with itself: at most the whole port
            asks[name] = min(MILLI, asks.get(name, 0) + ONE_ADDRESS)
            asks[f"{name}/{address}"] = MILLI
    return tuple(sorted(asks.items()))


def ports_in_use(pods: Iterable[Pod]) -> frozenset[str]:
    """Every host port some pod asks for."""
    return frozenset(
        name for pod in pods if pod.scalars for name, _ in pod.scalars if is_host_port(name)
    )


def is_host_port(name: str) -> bool:
    return name.startswith(HOST_PORT_PREFIX)
