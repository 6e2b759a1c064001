"""A PodGroup's gang rule as a tree: sub-groups, their minimums and `minSubGroup` (KAI v0.17).

A PodGroup without sub-groups is one leaf whose minimum is `minMember`. With
sub-groups, each leaf sub-group needs its own `minMember` of pods, and a sub-group
with children (or the PodGroup itself) needs `minSubGroup` of its direct children
satisfied, or all of them when `minSubGroup` is unset. This module says which
pending pods a gang must place together this cycle and which it may add one by one,
so that every pass that asks (allocation, evictions, stale gangs, explanations) asks
the same rule.

The choice follows KAI's: while a (sub)group is unsatisfied, the pods that bring its
K most urgent children up to their minimums (unsatisfied children first, then the
lowest satisfied/required ratio, then the order they are declared in); once it is
satisfied, the next most urgent child that still has pods: a whole child gang when
that child is below its minimum, otherwise one more pod (elastic growth).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from kai.engine.model import Pod, PodGroup


@dataclass(frozen=True)
class Member:
    """One node of the tree: a leaf holds pods, a set holds child members."""

    name: str | None  # None for the PodGroup itself
    min_member: int  # a leaf's pod minimum
    min_sub_group: int | None  # a set's child minimum; None means every child
    children: tuple[Member, ...] = ()

    @property
    def is_leaf(self) -> bool:
        return not self.children

    @property
    def required(self) -> int:
        if self.min_sub_group is None:
            return len(self.children)
        return min(self.min_sub_group, len(self.children))

    def leaves(self) -> list[Member]:
        if self.is_leaf:
            return [self]
        return [leaf for child in self.children for leaf in child.leaves()]


def tree(group: PodGroup) -> Member:
    """The PodGroup's gang tree; a PodGroup without sub-groups is a single leaf."""
    if not group.subgroups:
        return Member(None, group.min_member, None)
    children: dict[str | None, list[str]] = defaultdict(list)
    by_name = {sub.name: sub for sub in group.subgroups}
    for sub in group.subgroups:
        children[sub.parent if sub.parent in by_name else None].append(sub.name)

    def build(name: str) -> Member:
        sub = by_name[name]
        kids = tuple(build(child) for child in children.get(name, []))
        return Member(name, 0 if kids else sub.min_member, sub.min_sub_group, kids)

    return Member(None, 0, group.min_sub_group, tuple(build(n) for n in children.get(None, [])))


def leaf_of(root: Member, pod: Pod) -> str | None:
    """The leaf a pod counts in: its sub-group, or the PodGroup itself when it has none."""
    return None if root.is_leaf else pod.subgroup


def counts(root: Member, pods: Sequence[Pod]) -> dict[str | None, int]:
    """Pods per leaf."""
    result: dict[str | None, int] = defaultdict(int)
    for pod in pods:
        result[leaf_of(root, pod)] += 1
    return result


def is_satisfied(member: Member, per_leaf: Mapping[str | None, int]) -> bool:
    """Whether these pods per leaf meet the member's gang minimum, all the way down."""
    if member.is_leaf:
        return per_leaf.get(member.name, 0) >= member.min_member
    return _satisfied_children(member, per_leaf) >= member.required


def may_run_below_minimum(group: PodGroup) -> bool:
    """Whether some non-empty set of the gang's pods fails `holds`: not for a gang of one
    pod without sub-groups, which runs whole whenever it runs at all (most of a cluster's
    gangs, which the stale check then need not gather every cycle)."""
    return group.min_member > 1 or bool(group.subgroups)


def holds(group: PodGroup, pods: Sequence[Pod]) -> bool:
    """Whether these pods are a whole gang: the tree satisfied, `minMember` counted over all
    of them, and no leaf part-run (a leaf with pods holds at least its minimum).

    The test for a gang that keeps running (after evictions) and for one that is not stale.
    """
    if len(pods) < group.min_member:
        return False
    if not group.subgroups:  # one leaf, its minimum just met: asked per running gang per cycle
        return True
    root = tree(group)
    per_leaf = counts(root, pods)
    if not is_satisfied(root, per_leaf):
        return False
    return all(
        per_leaf.get(leaf.name, 0) == 0 or is_satisfied(leaf, per_leaf) for leaf in root.leaves()
    )


def _satisfied_children(member: Member, per_leaf: Mapping[str | None, int]) -> int:
    return sum(1 for child in member.children if is_satisfied(child, per_leaf))


def _urgency(member: Member, per_leaf: Mapping[str | None, int]) -> tuple[bool, Fraction]:
    """KAI's sub-group order: unsatisfied first, then the lowest satisfied/required ratio."""
    if member.is_leaf:
        have, need = per_leaf.get(member.name, 0), member.min_member
    else:
        have, need = _satisfied_children(member, per_leaf), member.required
    ratio = Fraction(have, need) if need else Fraction(1)
    return is_satisfied(member, per_leaf), ratio


def _ordered(member: Member, per_leaf: Mapping[str | None, int]) -> list[Member]:
    return sorted(member.children, key=lambda child: _urgency(child, per_leaf))  # stable: declared


@dataclass(frozen=True)
class Choice:
    """What a gang asks for this cycle."""

    core: tuple[Pod, ...]  # placed together or not at all
    growth: bool  # the core is a whole extra child of an already satisfied gang
    elastic: tuple[Pod, ...]  # each may be placed alone once the core is in


def choose(
    group: PodGroup, active: Sequence[Pod], pending: Sequence[Pod], total_minimum: int = 0
) -> Choice | None:
    """The core and the elastic pods; None when too few pods exist to satisfy the gang at all.

    `pending` must be in KAI's task order: the first pods of a leaf are taken first.
    `total_minimum` is the PodGroup's `minMember` counted over all of its pods, which a
    PodGroup with sub-groups may also set.
    """
    root = tree(group)
    have = counts(root, active)
    queue: dict[str | None, list[Pod]] = defaultdict(list)
    for pod in pending:
        queue[leaf_of(root, pod)].append(pod)
    growth = is_satisfied(root, have)
    if growth:
        core = _elastic_phase(root, have, queue)
        if len(core) <= 1:
            core, growth = [], False  # a single pod is plain elastic growth, below
    else:
        gang = _gang_phase(root, have, queue)
        if gang is None:
            return None
        core = gang
    taken = {pod.key for pod in core}
    short = total_minimum - len(active) - len(core)
    if short > 0:
        rest = [p for p in pending if p.key not in taken]
        if len(rest) < short:
            return None
        core = [*core, *rest[:short]]
        taken.update(p.key for p in rest[:short])
    left = [pod for pod in pending if pod.key not in taken]
    if root.is_leaf:
        return Choice(tuple(core), growth, tuple(left))
    return Choice(tuple(core), growth, _elastic_sequence(root, have, core, left))


def _elastic_sequence(
    root: Member, have: Mapping[str | None, int], core: Sequence[Pod], left: Sequence[Pod]
) -> tuple[Pod, ...]:
    """The pods KAI's elastic phase would add one at a time after the core, in that order.

    Each step is the next most urgent child's next pod, counted as if every earlier step
    had succeeded. The sequence stops where the next child would need several pods at once
    (a whole child gang): that child is a later cycle's growth. Every pod in it keeps the
    gang valid on its own: it is a surplus pod of a leaf at its minimum, or the one pod
    its leaf lacks.
    """
    after: dict[str | None, int] = defaultdict(int, have)
    for pod in core:
        after[pod.subgroup] += 1
    queue: dict[str | None, list[Pod]] = defaultdict(list)
    for pod in left:
        queue[pod.subgroup].append(pod)
    sequence: list[Pod] = []
    while True:
        step = _elastic_phase(root, after, queue)
        if len(step) != 1:
            return tuple(sequence)
        pod = step[0]
        sequence.append(pod)
        after[pod.subgroup] += 1
        queue[pod.subgroup].remove(pod)


def _gang_phase(
    member: Member, have: Mapping[str | None, int], queue: Mapping[str | None, list[Pod]]
) -> list[Pod] | None:
    """Pods that satisfy `member`'s K most urgent children; None when they do not exist."""
    if is_satisfied(member, have):
        return []
    if member.is_leaf:
        short = member.min_member - have.get(member.name, 0)
        waiting = queue.get(member.name, [])
        return list(waiting[:short]) if len(waiting) >= short else None
    chosen: list[Pod] = []
    for child in _ordered(member, have)[: member.required]:
        pods = _gang_phase(child, have, queue)
        if pods is None:
            return None
        chosen += pods
    return chosen


def _elastic_phase(
    member: Member, have: Mapping[str | None, int], queue: Mapping[str | None, list[Pod]]
) -> list[Pod]:
    """The next most urgent child that still has pods: its gang if below its minimum, else one pod."""
    if member.is_leaf:
        waiting = queue.get(member.name, [])
        if not is_satisfied(member, have):
            short = member.min_member - have.get(member.name, 0)
            return list(waiting[:short]) if len(waiting) >= short else []
        return list(waiting[:1])
    for child in _ordered(member, have):
        if is_satisfied(child, have):
            pods = _elastic_phase(child, have, queue)
        else:
            pods = _gang_phase(child, have, queue) or []
        if pods:
            return pods
    return []
