"""Nodes offering the host ports the cluster's pods ask for, the same objects cycle to cycle.

Every node offers one of each host port some pod asks for (`kai.api.host_ports`). That
set changes rarely (a pod with a new port), so each node's offering is kept while its
parse and the set are the same: the engine's memo sees the very node of the last
cycle. When the set changes, every node is another object, and the builder says so.
"""

from __future__ import annotations

from collections.abc import Mapping

from kai.api.host_ports import offering
from kai.engine.model import Node


class PortOffers:
    """Each node with the ports on offer, by name, from the last cycle to this one."""

    def __init__(self) -> None:
        self._ports: frozenset[str] = frozenset()
        self._offered: dict[str, tuple[Node, Node]] = {}  # name -> (as parsed, offering)
        self.changed = False
        """Whether the last `offered` changed the ports on offer: every node is new."""

    def offered(
        self, nodes: list[Node], parsed: Mapping[str, Node], ports: frozenset[str]
    ) -> tuple[list[Node], dict[str, Node]]:
        """The nodes offering `ports`, and those of them parsed this cycle by name."""
        self.changed = ports != self._ports
        if not ports and not self.changed:  # none on offer, as before: the nodes as parsed
            return nodes, dict(parsed)
        self._ports = ports
        kept = self._offered
        self._offered = {}
        result: list[Node] = []
        for node in nodes:
            last = kept.get(node.name)
            if last is not None and last[0] is node and not self.changed:
                offered = last[1]
            else:
                offered = offering(node, ports)
            self._offered[node.name] = (node, offered)
            result.append(offered)
        return result, {name: self._offered[name][1] for name in parsed}
