"""What the CP-SAT model needs to hold topology-constrained gangs to their domains.

A constrained gang's pods get shapes of their own (tagged with the gang and the
pod's sub-group) whose eligible nodes are the Topology's; node classes are split by
domain, so each class lies in one domain of every level; and each constraint
becomes a `DomainChoice` over those classes. A gang with elastic pods, or whose
constraint cannot be used, stays with the greedy pass (which places it domain by
domain, as KAI does).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from kai.engine.gangs import GangRequest
from kai.engine.model import Pod
from kai.engine.solver.model import DomainChoice
from kai.engine.solver.shapes import NodeClass
from kai.engine.topology import GroupRules, MemberRule, TopologyIndex, constrained


def rules_for_model(gang: GangRequest, topology: TopologyIndex | None) -> GroupRules | bool | None:
    """The gang's rules when the model can hold them; None for an unconstrained gang;
    False for one the model leaves to the greedy pass."""
    if not constrained(gang.group):
        return None
    if topology is None or gang.elastic:
        return False
    rules = topology.rules(gang.group)
    if rules.problem is not None or not rules.rules:
        return False
    return rules


def member_of(gang: GangRequest, pod: Pod) -> str:
    return f"{gang.key}/{pod.subgroup or ''}"


def topology_nodes(rules: GroupRules, pod: Pod) -> frozenset[str] | None:
    """The nodes the pod may use by its rules (every rule's Topology), None if unconstrained."""
    allowed: frozenset[str] | None = None
    for rule in rules.rules.values():
        if rule.holds(pod):
            allowed = rule.tree.nodes if allowed is None else allowed & rule.tree.nodes
    return allowed


def domain_key(
    topology: TopologyIndex | None, used: Sequence[str]
) -> Callable[[str], tuple[object, ...]]:
    """A node's domain path in every Topology a modelled gang uses: what splits classes."""
    trees = [topology.trees[name] for name in sorted(set(used))] if topology else []

    def key(name: str) -> tuple[object, ...]:
        return tuple(tree.path(name) for tree in trees)

    return key


def domain_choices(
    gangs: Sequence[tuple[GangRequest, GroupRules]],
    classes: Sequence[NodeClass],
    shape_index: Mapping[str, int],
    topology: TopologyIndex,
) -> list[DomainChoice]:
    """One choice per constrained (sub)group and level (required, then preferred)."""
    found: list[DomainChoice] = []
    for gang, rules in gangs:
        running = topology.running(gang.key)
        for rule in rules.rules.values():
            shapes = frozenset(shape_index[p.key] for p in gang.core if rule.holds(p))
            if not shapes:
                continue
            for level, required in ((rule.required, True), (rule.preferred, False)):
                if level is None:
                    continue
                found.append(
                    DomainChoice(
                        gang.key,
                        f"{gang.key}:{rule.member or ''}:{level}",
                        shapes,
                        _class_domains(rule, level, classes),
                        _pinned(rule, level, running) if required else None,
                        required,
                    )
                )
    return found


def _class_domains(rule: MemberRule, level: str, classes: Sequence[NodeClass]) -> dict[int, str]:
    result: dict[int, str] = {}
    for node_class in classes:
        domain = rule.tree.domain_id(node_class.nodes[0], level)
        if domain is not None:
            result[node_class.index] = domain
    return result


def _pinned(rule: MemberRule, level: str, running: Sequence[Pod]) -> frozenset[str] | None:
    ids = {rule.tree.domain_id(p.node, level) for p in running if p.node and rule.holds(p)}
    ids.discard(None)
    return frozenset(str(i) for i in ids) or None
