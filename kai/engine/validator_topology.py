"""The validator's own check of topology constraints: each constrained (sub)group in one domain.

Re-derived from the Topology objects and node labels with plain loops, apart from
`kai.engine.topology` (which the passes that place pods use): a node belongs to a
Topology only with every level's label, and two nodes share a domain of a level
when their label values agree on that level and every wider one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kai.engine.model import Node, Pod, PodGroup, Topology


def topology_problems(
    group: PodGroup,
    topologies: Mapping[str, Topology],
    nodes: Mapping[str, Node],
    running: Iterable[tuple[Pod, str]],
    added: Iterable[tuple[Pod, str]],
) -> list[str]:
    """What the new placements (pod, node) break of the group's required levels."""
    running, added = list(running), list(added)
    problems: list[str] = []
    parents = {sub.name: sub.parent for sub in group.subgroups}
    constraints = [(None, group.topology)] + [(sub.name, sub.topology) for sub in group.subgroups]
    for member, constraint in constraints:
        if constraint is None or not constraint.required_level:
            continue
        what = f"PodGroup {group.key}" + (f" sub-group {member}" if member else "")
        topology = topologies.get(constraint.topology)
        new = [(pod, node) for pod, node in added if _under(pod.subgroup, member, parents)]
        if not new:
            continue
        if topology is None:
            problems.append(f"{what}: pods bound under missing topology {constraint.topology}")
            continue
        labels = [level.node_label for level in topology.levels]
        depth = next(
            (
                i
                for i, level in enumerate(topology.levels)
                if constraint.required_level in (level.node_label, level.alias)
            ),
            None,
        )
        if depth is None:
            problems.append(f"{what}: pods bound under unknown level {constraint.required_level}")
            continue
        before = {
            _path(nodes, node, labels, depth)
            for pod, node in running
            if _under(pod.subgroup, member, parents)
        }
        before.discard(None)
        after = {_path(nodes, node, labels, depth) for _, node in new}
        if None in after:
            problems.append(f"{what}: a pod was bound to a node outside topology {topology.name}")
            continue
        if len(before | after) > max(1, len(before)):
            problems.append(
                f"{what}: pods span {len(before | after)} domains of {constraint.required_level}"
            )
    return problems


def _path(
    nodes: Mapping[str, Node], name: str, labels: list[str], depth: int
) -> tuple[str, ...] | None:
    """The node's label values from the widest level down to `depth`; None outside."""
    node_labels = dict(nodes[name].labels) if name in nodes else {}
    if any(label not in node_labels for label in labels):
        return None
    return tuple(node_labels[label] for label in labels[: depth + 1])


def _under(subgroup: str | None, member: str | None, parents: Mapping[str, str | None]) -> bool:
    """Whether a pod of `subgroup` counts in `member` (None: the whole PodGroup)."""
    if member is None:
        return True
    seen = subgroup
    while seen is not None:
        if seen == member:
            return True
        seen = parents.get(seen)
    return False
