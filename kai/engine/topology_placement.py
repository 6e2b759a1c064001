"""The greedy pass's placement of a topology-constrained gang core: domain by domain, as KAI's allocate does.

For the PodGroup and then each sub-group down its tree, the candidate domains of
its constraint (`kai.engine.topology.candidates`, KAI's order) are tried one at a
time; a sub-group's domains are searched inside the node set its parent was
given, and a domain whose pods do not all fit is undone before the next is tried.
Inside a domain wider than the preferred level, each pod looks at the preferred
sub-domains with the most room first. The first complete placement is taken,
which is what the CP-SAT model improves on by choosing the domains of all gangs
jointly. Inter-pod terms, when given (`KeptApart`), narrow each pod's nodes beside
the pods the search has seated so far; a domain undone takes its seats with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kai.engine.model import Pod, PodGroup
from kai.engine.node_index import NodeIndex
from kai.engine.subgroups import Member, tree
from kai.engine.topology import (
    GroupRules,
    MemberRule,
    candidates,
    no_domain_message,
    preferred_order,
)

Seat = tuple[Pod, str, tuple[str, ...]]
"""A pod, its node and the shared devices it takes (the greedy pass's PodPlacement)."""
Eligible = Callable[[str], bool]
KeptApart = Callable[[Pod, Eligible, Sequence[Seat]], list[Eligible]]
"""A pod's eligible nodes narrowed by inter-pod terms beside the seats made before it, in
tiers its preferred terms score alike, best first: a preference outranks the preferred
level's order, as KAI's pod-affinity score outweighs its topology score."""


@dataclass
class _Search:
    index: NodeIndex
    eligible_for: Callable[[Pod], Callable[[str], bool]]
    rules: GroupRules
    running: Sequence[Pod]
    alone: bool
    kept_apart: KeptApart | None = None
    seated: list[Seat] = field(default_factory=list)  # the search's seats so far, in order
    failure: str | None = None
    tried: list[str] = field(default_factory=list)  # candidate domains, as level id

    def pods_under(self, member: Member, pods: Sequence[Pod]) -> list[Pod]:
        if member.name is None:
            return list(pods)
        names = {leaf.name for leaf in member.leaves()}
        return [pod for pod in pods if pod.subgroup in names]

    def place(
        self,
        member: Member,
        pods: Sequence[Pod],
        allowed: frozenset[str] | None,
        order: list[frozenset[str]] | None,
    ) -> list[Seat] | None:
        mine = self.pods_under(member, pods)
        if not mine:
            return []
        rule = self.rules.rules.get(member.name)
        options: list[tuple[frozenset[str] | None, list[frozenset[str]] | None]]
        if rule is None:
            options = [(allowed, order)]
        else:
            options = self._options(rule, member, mine, allowed)
            if not options:
                return None
        for nodes, within in options:
            self.index.begin()
            mark = len(self.seated)
            placed = self._place_all(member, mine, nodes, within)
            if placed is not None:
                self.index.commit()
                return placed
            self.index.rollback()
            del self.seated[mark:]
        return None

    def _options(
        self, rule: MemberRule, member: Member, pods: Sequence[Pod], allowed: frozenset[str] | None
    ) -> list[tuple[frozenset[str] | None, list[frozenset[str]] | None]]:
        pinned = [p.node for p in self.pods_under(member, self.running) if p.node]
        found, misses = candidates(rule, pods, self.index.capacity, allowed, pinned)
        if not found and self.failure is None:
            self.failure = no_domain_message(rule, pods, misses)
        self.tried += [f"{rule.tree.display(c.domain.level)} {c.domain.id}" for c in found]
        return [
            (
                c.nodes,
                preferred_order(rule, pods, c.nodes, self.index.capacity)
                if rule.preferred and c.domain.level != rule.preferred
                else None,
            )
            for c in found
        ]

    def _place_all(
        self,
        member: Member,
        pods: Sequence[Pod],
        nodes: frozenset[str] | None,
        order: list[frozenset[str]] | None,
    ) -> list[Seat] | None:
        placed: list[Seat] = []
        if not member.is_leaf:
            covered: set[str] = set()
            for child in member.children:
                got = self.place(child, pods, nodes, _within(order, nodes))
                if got is None:
                    return None
                placed += got
                covered.update(seat[0].key for seat in got)
            rest = [pod for pod in pods if pod.key not in covered]  # pods of no known sub-group
        else:
            rest = list(pods)
        for pod in rest:
            node = self._find(pod, nodes, order)
            if node is None:
                return None
            seat = (pod, node, self.index.take(node, pod, alone=self.alone))
            placed.append(seat)
            self.seated.append(seat)
        return placed

    def _find(
        self, pod: Pod, nodes: frozenset[str] | None, order: list[frozenset[str]] | None
    ) -> str | None:
        eligible = self.eligible_for(pod)
        tiers = (
            [eligible] if self.kept_apart is None else self.kept_apart(pod, eligible, self.seated)
        )
        parts: list[frozenset[str] | None] = [*order] if order is not None else [nodes]
        for allowed in tiers:
            for part in parts:
                inside = allowed if part is None else _inside(part, allowed)
                found = self.index.find(pod, inside, self.alone)
                if found is not None:
                    return found
        return None


def _inside(part: frozenset[str], eligible: Callable[[str], bool]) -> Callable[[str], bool]:
    return lambda name: name in part and eligible(name)


def _within(
    order: list[frozenset[str]] | None, nodes: frozenset[str] | None
) -> list[frozenset[str]] | None:
    if order is None or nodes is None:
        return order
    return [part & nodes for part in order if part & nodes]


def place_constrained(
    group: PodGroup,
    core: Sequence[Pod],
    rules: GroupRules,
    running: Sequence[Pod],
    index: NodeIndex,
    eligible_for: Callable[[Pod], Callable[[str], bool]],
    kept_apart: KeptApart | None = None,
) -> tuple[list[Seat] | None, str]:
    """The core's placements in one domain per constraint, or None and why not;
    `kept_apart`: the inter-pod terms that concern the core's pods, if any.

    The caller holds a checkpoint on `index`: a failed search leaves no trace.
    """
    if not core:
        return [], ""
    search = _Search(index, eligible_for, rules, running, len(core) == 1, kept_apart)
    placed = search.place(tree(group), core, None, None)
    if placed is not None:
        return placed, ""
    if search.failure is not None:
        return None, search.failure
    shown = ", ".join(search.tried[:5]) + (" ..." if len(search.tried) > 5 else "")
    return None, (
        f"the {len(core)} pods fit the free resources of {len(search.tried)} candidate topology "
        f"domain(s) ({shown}) but not on nodes they may use one by one (node selectors, "
        "affinity, taints, inter-pod terms or per-node room)"
    )
