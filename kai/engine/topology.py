"""Topology-aware placement: which node sets a (sub)group may use, and in which order (kai-semantics §12).

A Topology names node labels from the widest level (a zone) to the most local (a
rack, a host). A PodGroup or sub-group with a `topologyConstraint` must sit in one
domain of its required level, and should sit in one of its preferred level. This
module is that rule, asked by every pass: the greedy pass tries the candidate
domains in KAI's order (the most local level first; within a level the fullest
domain that still fits the whole (sub)group), the CP-SAT model chooses one domain
per constrained (sub)group jointly for all gangs, and explanations say which
domains came closest. The validator checks the outcome with its own arithmetic.

Domains are KAI's: a node belongs to a Topology only when it has every level's
label, and a domain's id joins the label values from the widest level down
("zone1.rack2"), so equal rack names in two zones are two racks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from kai.engine.budget import Refusal
from kai.engine.capacity import NodeCapacity
from kai.engine.model import Node, Pod, PodGroup, Topology, TopologyConstraint

ROOT = "root"
"""The level above every Topology level: the whole of the Topology's nodes, one domain."""
UNSCHEDULABLE = "Unschedulable"
INVALID_TOPOLOGY = "InvalidTopologyConstraint"


@dataclass(frozen=True)
class Domain:
    level: str  # the level's node label, or ROOT
    id: str
    nodes: frozenset[str]


class DomainTree:
    """One Topology over the cluster's nodes: every domain of every level."""

    def __init__(self, topology: Topology, nodes: Iterable[Node]) -> None:
        self.topology = topology
        self.labels = tuple(level.node_label for level in topology.levels)
        self._ids: dict[str, tuple[str, ...]] = {}  # node -> its domain id per level, widest first
        members: dict[tuple[str, str], set[str]] = {}
        for node in nodes:
            values = [node.label(label) for label in self.labels]
            if any(value is None for value in values):
                continue  # KAI: a node without every level's label is outside the Topology
            ids = tuple(".".join(str(v) for v in values[: i + 1]) for i in range(len(values)))
            self._ids[node.name] = ids
            for label, domain_id in zip(self.labels, ids, strict=True):
                members.setdefault((label, domain_id), set()).add(node.name)
        self.nodes = frozenset(self._ids)
        self._domains: dict[str, list[Domain]] = {ROOT: [Domain(ROOT, ROOT, self.nodes)]}
        for (label, domain_id), names in sorted(members.items()):
            self._domains.setdefault(label, []).append(Domain(label, domain_id, frozenset(names)))
        self._by_id = {(d.level, d.id): d for found in self._domains.values() for d in found}

    def domain(self, level: str, domain_id: str) -> Domain:
        """One domain by its level and id."""
        return self._by_id[level, domain_id]

    def domains(self, level: str) -> list[Domain]:
        """The level's domains, by id."""
        return self._domains.get(level, [])

    def domain_id(self, node: str, level: str) -> str | None:
        """The id of the node's domain at this level; None for a node outside the Topology."""
        ids = self._ids.get(node)
        if ids is None:
            return None
        return ROOT if level == ROOT else ids[self.labels.index(level)]

    def display(self, level: str) -> str:
        """The level as users name it: its alias when it has one."""
        for entry in self.topology.levels:
            if entry.node_label == level:
                return entry.alias or level
        return level

    def path(self, node: str) -> tuple[str, ...] | None:
        """The node's domain id at every level, widest first; None outside the Topology."""
        return self._ids.get(node)

    def depth(self, level: str) -> int:
        """0 for the root, 1 for the widest level, ... (deeper is more local)."""
        return 0 if level == ROOT else self.labels.index(level) + 1


@dataclass(frozen=True)
class MemberRule:
    """The resolved constraint of one (sub)group: its tree and levels as node labels."""

    group: str
    member: str | None  # the sub-group's name; None for the PodGroup itself
    tree: DomainTree
    required: str | None
    preferred: str | None
    subgroups: frozenset[str] | None = None
    """The sub-group and every sub-group below it: whose pods the rule holds (None: all)."""

    def holds(self, pod: Pod) -> bool:
        """Whether the pod is one the rule keeps together."""
        return self.subgroups is None or pod.subgroup in self.subgroups

    @property
    def levels(self) -> list[str]:
        """The levels KAI tries, most local first: from the preferred level up to the
        required one; up to the root with only a preferred level; the required one alone."""
        order = [*reversed(self.tree.labels), ROOT]
        start = self.preferred or self.required
        assert start is not None
        levels = order[order.index(start) :]
        if self.required is not None:
            levels = levels[: levels.index(self.required) + 1]
        return levels

    @property
    def deepest(self) -> str:
        """The most local level the (sub)group must or should share: what pins its pods."""
        return self.levels[0]

    def describe(self) -> str:
        what = f"job <{self.group}>" + (f", subgroup {self.member}" if self.member else "")
        required = self.tree.display(self.required) if self.required else "none"
        return f"topology {self.tree.topology.name}, requirement {required} for {what}"


@dataclass(frozen=True)
class GroupRules:
    """A PodGroup's constrained members, or why its constraint cannot be used at all."""

    rules: Mapping[str | None, MemberRule] = field(default_factory=dict)
    problem: Refusal | None = None


def constrained(group: PodGroup) -> bool:
    """Whether the group or any of its sub-groups names a Topology."""
    return group.topology is not None or any(sub.topology for sub in group.subgroups)


def resolve(group: PodGroup, trees: Mapping[str, DomainTree]) -> GroupRules:
    """The group's constraints against the cluster's Topologies, as KAI reads them: a
    missing Topology or a level it lacks keeps the group pending with that message."""
    constraints: list[tuple[str | None, TopologyConstraint]] = []
    if group.topology is not None:
        constraints.append((None, group.topology))
    constraints += [(sub.name, sub.topology) for sub in group.subgroups if sub.topology]
    rules: dict[str | None, MemberRule] = {}
    for member, constraint in constraints:
        if not (constraint.required_level or constraint.preferred_level):
            continue
        where = "workload" if member is None else f"sub-group {member}"
        tree = trees.get(constraint.topology)
        if tree is None:
            return GroupRules(
                problem=Refusal(
                    INVALID_TOPOLOGY,
                    f"{where} asks for topology {constraint.topology!r}, which does not exist",
                )
            )
        labels: dict[str, str | None] = {}
        for kind, level in (
            ("required", constraint.required_level),
            ("preferred", constraint.preferred_level),
        ):
            label = tree.topology.node_label(level) if level else None
            if level and label is None:
                return GroupRules(
                    problem=Refusal(
                        INVALID_TOPOLOGY,
                        f"{where} specified {level!r} as the {kind} topology level, but topology "
                        f"{tree.topology.name!r} has no level with that name or alias "
                        f"(levels: {', '.join(tree.labels)})",
                    )
                )
            labels[kind] = label
        required, preferred = labels["required"], labels["preferred"]
        if required and preferred and tree.depth(preferred) < tree.depth(required):
            preferred = None  # a preferred level wider than the required one adds nothing
        below = None if member is None else _below(group, member)
        rules[member] = MemberRule(group.key, member, tree, required, preferred, below)
    return GroupRules(rules)


def _below(group: PodGroup, member: str) -> frozenset[str]:
    parents = {sub.name: sub.parent for sub in group.subgroups}
    found = set()
    for name in parents:
        seen: str | None = name
        while seen is not None and seen not in found:
            if seen == member:
                found.add(name)
                break
            seen = parents.get(seen)
    return frozenset(found | {member})


@dataclass(frozen=True)
class Candidate:
    domain: Domain
    nodes: frozenset[str]  # the domain's nodes the (sub)group may use


def _free(cap: NodeCapacity) -> tuple[Fraction, int, int]:
    shared = sum(
        (Fraction(cap.node.gpu_memory_mib - used, cap.node.gpu_memory_mib or 1))
        for used in cap.shared.values()
    )
    return Fraction(max(0, cap.whole_gpus)) + shared, max(0, cap.cpu), max(0, cap.memory)


def _asked(pods: Sequence[Pod]) -> tuple[Fraction, int, int]:
    gpus = sum((Fraction(p.gpu.whole) + p.gpu.portion for p in pods), Fraction(0))
    return gpus, sum(p.cpu_millis for p in pods), sum(p.memory_bytes for p in pods)


def _total(capacity: Mapping[str, NodeCapacity], nodes: Iterable[str]) -> tuple[Fraction, int, int]:
    free = [_free(capacity[name]) for name in nodes if name in capacity]
    return (
        sum((f[0] for f in free), Fraction(0)),
        sum(f[1] for f in free),
        sum(f[2] for f in free),
    )


def _room(pods: Sequence[Pod], cap: NodeCapacity) -> int:
    """How many of these pods one node could take, counting each as the largest of them
    (KAI's representative-pod count)."""
    if cap.pods <= 0:
        return 0
    room = cap.pods
    cpu = max(p.cpu_millis for p in pods)
    memory = max(p.memory_bytes for p in pods)
    whole = max(p.gpu.whole for p in pods)
    portion = max(p.gpu.portion for p in pods)
    if cpu:
        room = min(room, cap.cpu // cpu)
    if memory:
        room = min(room, cap.memory // memory)
    if whole:
        room = min(room, max(0, cap.whole_gpus) // whole)
    elif portion:
        free, _, _ = _free(cap)
        room = min(room, int(free / portion))
    return max(0, room)


def _ratio(asked: tuple[Fraction, int, int], free: tuple[Fraction, int, int]) -> Fraction:
    """The dominant share of the domain's free resources the pods would take."""
    ratio = Fraction(0)
    pairs = [(asked[0], free[0]), (Fraction(asked[1]), Fraction(free[1]))]
    pairs.append((Fraction(asked[2]), Fraction(free[2])))
    for want, have in pairs:
        if want > 0:
            ratio = max(ratio, Fraction(1000) if have <= 0 else want / have)
    return ratio


@dataclass(frozen=True)
class DomainFit:
    """How one domain measures up to a (sub)group: for explanations."""

    domain: Domain
    room: int  # pods it could take
    free_gpus: Fraction


def candidates(
    rule: MemberRule,
    pods: Sequence[Pod],
    capacity: Mapping[str, NodeCapacity],
    allowed: frozenset[str] | None,
    pinned: Iterable[str] = (),
) -> tuple[list[Candidate], list[DomainFit]]:
    """The domains the pods may go to, in KAI's order, and for an empty answer the
    domains of the widest level tried, closest first.

    `allowed` is the node set the parent (sub)group was given; `pinned` the nodes the
    group's running pods are on: with a required level they fix the domain.
    """
    usable = rule.tree.nodes if allowed is None else rule.tree.nodes & allowed
    asked = _asked(pods)
    pinned_ids = (
        {rule.tree.domain_id(node, rule.required) for node in pinned} - {None}
        if rule.required
        else set()
    )
    found: list[tuple[int, list[tuple[Fraction, str]], Candidate]] = []
    misses: list[DomainFit] = []
    levels = rule.levels
    fullness: dict[tuple[str, str], Fraction] = {}

    def rank(level: str, domain_id: str) -> Fraction:
        """The pods' share of the domain's free room (all its nodes, as KAI counts it)."""
        key = (level, domain_id)
        if key not in fullness:
            members = rule.tree.domain(level, domain_id).nodes
            fullness[key] = _ratio(asked, _total(capacity, members))
        return fullness[key]

    def order(domain: Domain) -> list[tuple[Fraction, str]]:
        """KAI's order within a level: its tree sorted fullest first (ties by id) at every
        level from the widest down, then read level by level, so a domain's place follows
        its ancestors' before its own (the fullest zone's racks come first)."""
        if domain.level == ROOT:
            return []
        depth = rule.tree.depth(domain.level)
        node = next(iter(domain.nodes))
        chain = []
        for label in rule.tree.labels[:depth]:
            ancestor = rule.tree.domain_id(node, label) or ""
            chain.append((-rank(label, ancestor), ancestor))
        return chain

    for position, level in enumerate(levels):
        for domain in rule.tree.domains(level):
            nodes = domain.nodes & usable
            if not nodes:
                continue
            if pinned_ids and not any(
                rule.tree.domain_id(node, rule.required or ROOT) in pinned_ids for node in nodes
            ):
                continue
            room = sum(_room(pods, capacity[name]) for name in nodes if name in capacity)
            total = _total(capacity, nodes)
            if room < len(pods) or _ratio(asked, total) > 1:
                if position == len(levels) - 1:
                    misses.append(DomainFit(domain, room, total[0]))
                continue
            found.append((position, order(domain), Candidate(domain, nodes)))
    found.sort(key=lambda item: (item[0], item[1]))
    misses.sort(key=lambda fit: (-fit.room, -fit.free_gpus, fit.domain.id))
    return [item[2] for item in found], misses


def preferred_order(
    rule: MemberRule,
    pods: Sequence[Pod],
    nodes: frozenset[str],
    capacity: Mapping[str, NodeCapacity],
) -> list[frozenset[str]]:
    """Inside a domain wider than the preferred level: its preferred-level sub-domains in
    the order KAI's topology node score ranks them, so that the pods gather in as few as
    possible. KAI sorts sub-domains fullest first (the pods' share of their free room,
    ties by id) and scores a node by its sub-domain's place in that list, the last the
    highest: the sub-domain with the most room (among equals, the last id) comes first."""
    if rule.preferred is None:
        return [nodes]
    asked = _asked(pods)
    subs = []
    for domain in rule.tree.domains(rule.preferred):
        inside = domain.nodes & nodes
        if inside:
            subs.append((-_ratio(asked, _total(capacity, inside)), domain.id, inside))
    subs.sort(key=lambda item: item[:2])
    return [item[2] for item in reversed(subs)] or [nodes]


def no_domain_message(rule: MemberRule, pods: Sequence[Pod], misses: Sequence[DomainFit]) -> str:
    """KAI's wording, with the closest domains and their numbers."""
    gpus = _asked(pods)[0]
    level = rule.tree.display(rule.levels[-1])
    head = f"{rule.describe()} couldn't be satisfied"
    if not misses:
        return f"{head}: no {level} domain of the topology has nodes these {len(pods)} pods may use"
    shown = "; ".join(
        f"{level} {fit.domain.id}: room for {fit.room} of {len(pods)} pods, "
        f"{_number(fit.free_gpus)} GPUs free"
        for fit in misses[:3]
    )
    more = f" (and {len(misses) - 3} more)" if len(misses) > 3 else ""
    return f"{head}: this gang needs {len(pods)} pods and {_number(gpus)} GPUs in one {level}; {shown}{more}"


def _number(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{float(value):.2f}"


def domain_of_placed(
    rules: GroupRules, pod: Pod, placed: Iterable[tuple[Pod, str | None]]
) -> frozenset[str] | None:
    """The nodes a further pod of a constrained group may use: the required-level domains
    its group (and its own sub-groups) already occupies; None when nothing restricts it."""
    allowed: frozenset[str] | None = None
    for rule in rules.rules.values():
        if rule.required is None or not rule.holds(pod):
            continue
        ids = {
            rule.tree.domain_id(node, rule.required)
            for other, node in placed
            if node and rule.holds(other)
        }
        ids.discard(None)
        if not ids:
            nodes = rule.tree.nodes
        else:
            nodes = frozenset().union(*(rule.tree.domain(rule.required, str(i)).nodes for i in ids))
        allowed = nodes if allowed is None else allowed & nodes
    return allowed


def satisfied(rules: GroupRules, running: Iterable[Pod], seats: Iterable[tuple[Pod, str]]) -> bool:
    """Whether new seats keep every required level: each constrained (sub)group's pods,
    running and new, in one domain (or in the domains its running pods already hold)."""
    running, seats = list(running), list(seats)
    for rule in rules.rules.values():
        if any(node not in rule.tree.nodes for pod, node in seats if rule.holds(pod)):
            return False
        if rule.required is None:
            continue
        level = rule.required
        before = {rule.tree.domain_id(p.node, level) for p in running if p.node and rule.holds(p)}
        before.discard(None)
        after = {rule.tree.domain_id(node, level) for pod, node in seats if rule.holds(pod)}
        if None in after or len(before | after) > max(1, len(before)):
            return False
    return True


class TopologyIndex:
    """The cycle's Topologies over its nodes and each group's resolved rules, built once."""

    def __init__(
        self, topologies: Iterable[Topology], nodes: Sequence[Node], pods: Iterable[Pod]
    ) -> None:
        self.trees = {topology.name: DomainTree(topology, nodes) for topology in topologies}
        self._groups: dict[str, GroupRules] = {}
        self._running: dict[str, list[Pod]] = {}
        for pod in pods:
            if pod.node and pod.phase.is_active_allocated:
                self._running.setdefault(pod.group, []).append(pod)

    def running(self, group: str) -> list[Pod]:
        """The group's bound pods: with a required level, they fix its domain."""
        return self._running.get(group, [])

    def rules(self, group: PodGroup) -> GroupRules:
        found = self._groups.get(group.key)
        if found is None:
            found = resolve(group, self.trees)
            self._groups[group.key] = found
        return found
