"""What a node offers besides what it lists itself: one of each host port some pod asks
for (`kai.api.host_ports`), and its free volumes made beforehand that some pod's claims
ask for (`kai.api.static_volumes`). Both are scalar resources the snapshot's makers lay
on the parsed node, since they follow from other objects than the node."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from kai.api.host_ports import is_host_port
from kai.api.static_volumes import is_volume_resource
from kai.api.volumes import VolumeObjects
from kai.engine.model import Node, Pod
from kai.engine.scalars import MILLI, Scalars


def offering(node: Node, ports: frozenset[str], volumes: Scalars = ()) -> Node:
    """The node offering one of each of `ports`, and `volumes`, beside its own scalars."""
    own = [(name, amount) for name, amount in node.scalars if not _laid_on(name)]
    offered = tuple(sorted([*own, *((port, MILLI) for port in ports), *volumes]))
    return node if offered == node.scalars else dataclasses.replace(node, scalars=offered)


def volume_offers(
    pods: Iterable[Pod], nodes: Iterable[Node], objects: VolumeObjects
) -> dict[str, Scalars]:
    """Node name -> the free volumes it offers of those the pods' claims ask for."""
    asked = frozenset(
        name for pod in pods if pod.scalars for name, _ in pod.scalars if is_volume_resource(name)
    )
    return objects.static.offers(nodes, asked) if asked else {}


def _laid_on(name: str) -> bool:
    return is_host_port(name) or is_volume_resource(name)
