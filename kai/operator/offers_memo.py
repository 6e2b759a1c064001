"""Nodes offering the host ports and the volumes made beforehand the cluster's pods ask
for, the same objects cycle to cycle.

Every node offers one of each host port some pod asks for, and its own free volumes of
the kinds some pod's claims ask for (`kai.api.node_offers`). Both change rarely (a pod
with a new port, a volume bound), so each node's offering is kept while its parse and
its offer are the same: the engine's memo sees the very node of the last cycle. A node
whose offer changed is another object, and the builder says so.
"""

from __future__ import annotations

from collections.abc import Mapping

from kai.api.node_offers import offering
from kai.engine.model import Node
from kai.engine.scalars import Scalars


class NodeOffers:
    """Each node with what it offers, by name, from the last cycle to this one."""

    def __init__(self) -> None:
        self._offers: dict[str, tuple[frozenset[str], Scalars]] = {}
        self._offered: dict[str, tuple[Node, Node]] = {}  # name -> (as parsed, offering)
        self.reoffered: list[str] = []
        """The nodes the last `offered` laid another offer on than the cycle before."""

    def offered(
        self,
        nodes: list[Node],
        parsed: Mapping[str, Node],
        ports: frozenset[str],
        volumes: Mapping[str, Scalars],
    ) -> tuple[list[Node], dict[str, Node]]:
        """The nodes offering `ports` and, by node name, `volumes`; and, by name, those of
        them parsed this cycle or in `reoffered`."""
        self.reoffered = []
        if not ports and not volumes and not self._offers:  # none offered now or before
            self._offered = {}
            return nodes, dict(parsed)
        kept, last_offers = self._offered, self._offers
        self._offered, self._offers = {}, {}
        result: list[Node] = []
        for node in nodes:
            offer = (ports, volumes.get(node.name, ()))
            last = kept.get(node.name)
            if last is not None and last[0] is node and last_offers.get(node.name, _NONE) == offer:
                offered = last[1]
            else:
                offered = offering(node, *offer)
                if last_offers.get(node.name, _NONE) != offer:
                    self.reoffered.append(node.name)
            if offer != _NONE:
                self._offers[node.name] = offer
            self._offered[node.name] = (node, offered)
            result.append(offered)
        names = [*parsed, *self.reoffered]
        return result, {name: self._offered[name][1] for name in names}


_NONE: tuple[frozenset[str], Scalars] = (frozenset(), ())
