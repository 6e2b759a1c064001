"""Inter-pod affinity and anti-affinity: required terms kept as kube-scheduler's filter keeps
them, preferred ones scored as its InterPodAffinity score counts them (KAI uses both).

A domain is the set of nodes that share a value of a term's topology key. A pod's
affinity term holds on a node whose domain runs a pod the term selects; its anti-affinity
term fails on a node whose domain runs one; and a pod that runs with an anti-affinity
term closes its own domain to every pod the term selects (the rule is symmetric). A node
without the key's label is in no domain: an affinity term never holds there, and an
anti-affinity term never closes it. When no pod in any domain matches any of a pod's
affinity terms and the pod matches all of them itself, they hold on every node: the first
of a set of pods that want to be together goes anywhere.

The pods counted are those on a node (bound, running or being deleted) and those the
cycle has placed before, in the order it places them: the greedy pass asks for each pod
with every placement before it, its own gang's included, so a gang's pods keep their
terms among themselves too. The CP-SAT model does not see the terms: it leaves out the
gangs they concern (`concerns`), which the greedy pass places after its answer (an answer
that places such a gang worse in KAI's order than the greedy pass did is not taken), and
the eviction actions seat such a gang's pods by them (`kai.engine.evictions.term_seats`).
The validator checks the required terms on its own.

Preferred terms (`preferred_tiers`) rank the nodes a pod fits in the greedy pass (inside a
topology-constrained gang's domain too) and in the eviction actions' seats, above their
packing order, as KAI ranks kube-scheduler's score above all of its own but a nominated
node's.
"""

from __future__ import annotations

import copy
import functools
import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from kai.engine.eligibility import value_meets
from kai.engine.model import Node, Pod, PodAffinityTerm

Eligible = Callable[[str], bool]
HARD_AFFINITY_WEIGHT = 1
"""What a running pod's required affinity term adds to the score of a pod it selects, in
its domain: kube-scheduler's `hardPodAffinityWeight`, whose default KAI keeps."""
T = TypeVar("T")


def selects(term: PodAffinityTerm, pod: Pod) -> bool:
    """Whether the term selects `pod`: its namespace and its labels."""
    if term.selects_nothing or (
        term.namespaces is not None and pod.namespace not in term.namespaces
    ):
        return False
    if not all(pair in pod.labels for pair in term.match_labels):
        return False
    if not term.expressions:
        return True
    labels = dict(pod.labels)
    return all(value_meets(req, labels.get(req.key)) for req in term.expressions)


def _first_pair(term: PodAffinityTerm) -> tuple[str, str] | None:
    """A label every pod the term selects carries, to look candidates up by."""
    return term.match_labels[0] if term.match_labels else None


class Placed(Protocol):
    """A pod and the node the cycle placed it on (the greedy pass's placements are these)."""

    @property
    def pod(self) -> Pod: ...

    @property
    def node(self) -> str: ...


class _Indexed:
    """Pods on nodes, indexed by each of their labels, and their anti-affinity terms by a
    label the pods they select must carry: a pod's terms read only the pods they may
    select (a cluster may run thousands of pods, hundreds with a term)."""

    def __init__(self) -> None:
        self.every: list[tuple[Pod, str]] = []
        self._by_label: dict[tuple[str, str], list[tuple[Pod, str]]] = {}
        self._closing: dict[tuple[str, str] | None, list[tuple[Pod, str, PodAffinityTerm]]] = {}
        self._scoring: dict[tuple[str, str] | None, list[tuple[Pod, str, PodAffinityTerm]]] = {}

    def add(self, pod: Pod, node: str) -> None:
        self.every.append((pod, node))
        for pair in pod.labels:
            self._by_label.setdefault(pair, []).append((pod, node))
        for term in pod.pod_terms:
            index = self._closing if term.anti else self._scoring
            index.setdefault(_first_pair(term), []).append((pod, node, term))
        for term in pod.preferred_terms:
            self._scoring.setdefault(_first_pair(term), []).append((pod, node, term))

    def may_be_selected(self, term: PodAffinityTerm) -> Sequence[tuple[Pod, str]]:
        pair = _first_pair(term)
        return self.every if pair is None else self._by_label.get(pair, [])

    def may_close(self, pod: Pod) -> Iterator[tuple[Pod, str, PodAffinityTerm]]:
        return _by_labels(self._closing, pod)

    def may_score(self, pod: Pod) -> Iterator[tuple[Pod, str, PodAffinityTerm]]:
        return _by_labels(self._scoring, pod)


class _Source(Protocol):
    """Pods at nodes, as a pod's terms read them (`_Indexed`, or a view of one)."""

    def may_be_selected(self, term: PodAffinityTerm) -> Sequence[tuple[Pod, str]]: ...

    def may_close(self, pod: Pod) -> Iterator[tuple[Pod, str, PodAffinityTerm]]: ...

    def may_score(self, pod: Pod) -> Iterator[tuple[Pod, str, PodAffinityTerm]]: ...


@dataclass(frozen=True)
class _Leaving:
    """The pods on nodes but those leaving (`PodAffinity.without`): an evicted pod's room
    is free, and its terms and labels no longer count where it ran (placed again, it counts
    where it goes)."""

    on_nodes: _Indexed
    gone: frozenset[str]

    def may_be_selected(self, term: PodAffinityTerm) -> Sequence[tuple[Pod, str]]:
        return [(p, n) for p, n in self.on_nodes.may_be_selected(term) if p.key not in self.gone]

    def may_close(self, pod: Pod) -> Iterator[tuple[Pod, str, PodAffinityTerm]]:
        return (entry for entry in self.on_nodes.may_close(pod) if entry[0].key not in self.gone)

    def may_score(self, pod: Pod) -> Iterator[tuple[Pod, str, PodAffinityTerm]]:
        return (entry for entry in self.on_nodes.may_score(pod) if entry[0].key not in self.gone)


class PodAffinity:
    """The cycle's inter-pod terms over its nodes, the pods on them and what it places."""

    def __init__(self, nodes: Iterable[Node], pods: Sequence[Pod]) -> None:
        self._labels = {node.name: dict(node.labels) for node in nodes}
        self._pods = pods
        # Every term by the label its pods need: of every pod, for `concerns`.
        self._selecting: dict[tuple[str, str] | None, list[tuple[str, PodAffinityTerm]]] = {}
        for pod in pods:
            for term in (*pod.pod_terms, *pod.preferred_terms):
                self._selecting.setdefault(_first_pair(term), []).append((pod.key, term))
        self._concerned: dict[str, tuple[bool, bool]] = {}  # constrains, scored
        self._members: dict[str, dict[str, list[str]]] = {}  # key -> value -> nodes
        # Each pass's placements, indexed as they grow (a pass only adds to them).
        self._passes: dict[int, tuple[Mapping[str, Placed], _Indexed]] = {}
        self._gone: frozenset[str] = frozenset()
        self._beside: Mapping[str, Placed] | None = None

    def without(self, gone: Iterable[str]) -> PodAffinity:
        """These terms as they will read once the pods `gone` (by key: evicted) have left
        their nodes: an eviction's seats and the look at the next cycle read them so. The
        view shares this object's indexes."""
        self._on_nodes  # built here, so that the view shares it  # noqa: B018
        view = copy.copy(self)
        view._gone = self._gone | frozenset(gone)
        return view

    def beside(self, placed: Mapping[str, Placed]) -> PodAffinity:
        """These terms reading the pods `placed` (by key) as on their nodes, but those
        leaving: the look at the next cycle reads this cycle's bindings so, bound by then."""
        view = copy.copy(self)
        view._beside = placed
        return view

    def concerns(self, pod: Pod) -> bool:
        """Whether a term, required or preferred, concerns where `pod` may go: its own, or
        another pod's that selects it (anti-affinity closes domains to it or scores them
        down; affinity draws its owner to it, so it must be placed where that owner's check
        sees it). Most pods of most clusters: no, and they pay nothing more."""
        constrains, scored = self._concerning(pod)
        return constrains or scored

    def constrains(self, pod: Pod) -> bool:
        """Whether a required term concerns where `pod` may go: those close nodes to it."""
        return self._concerning(pod)[0]

    def scored(self, pod: Pod) -> bool:
        """Whether a term may score the nodes for `pod` (`preferred_tiers`): its own
        preferred terms, or another pod's preferred or required affinity term that selects
        it."""
        return self._concerning(pod)[1]

    def _concerning(self, pod: Pod) -> tuple[bool, bool]:
        """(`constrains`, `scored`), worked out once per pod: a term is read only while it
        could change the answer (a replica's own term constrains it, so its siblings' terms
        that only keep it apart need not be matched)."""
        found = self._concerned.get(pod.key)
        if found is None:
            required, scored = bool(pod.pod_terms), bool(pod.preferred_terms)
            for owner, term in _by_labels(self._selecting, pod):
                if required and scored:
                    break
                keeps_apart = term.anti and not term.weight
                if (required or term.weight) and (scored or keeps_apart):
                    continue  # it could change neither answer
                if owner != pod.key and selects(term, pod):
                    required = required or not term.weight
                    scored = scored or not keeps_apart
            found = self._concerned[pod.key] = (required, scored)
        return found

    def restrict(
        self,
        pod: Pod,
        eligible: Eligible,
        placed: Mapping[str, Placed],
        mates: Sequence[Placed] = (),
    ) -> Eligible:
        """`eligible`, narrowed to the nodes where the terms hold for `pod` beside the pods on
        nodes, the pass's placements so far (`placed`, by pod key) and the gang mates placed
        before it (`mates`)."""
        domains = self._domains(pod, placed, mates)

        def allowed(name: str) -> bool:
            return eligible(name) and domains.why_not(self._labels.get(name, {})) is None

        return allowed

    def preferred_tiers(
        self, pod: Pod, placed: Mapping[str, Placed], mates: Sequence[Placed] = ()
    ) -> list[Eligible] | None:
        """The nodes in tiers the preferred terms score alike, best first, or None when no
        term scores `pod` (most pods: they pay nothing more). A pod takes a node of the
        first tier where it fits, and its own order chooses within the tier.

        A node's score is kube-scheduler's InterPodAffinity score before it normalises
        it: each pod on a node, placed by the pass or placed before in the gang (`mates`)
        adds to its domain, for each term of a key its node has, the weight of each
        preferred term of `pod` that selects it (less, for anti-affinity), the weight of
        each of its own preferred terms that selects `pod` (less, for anti-affinity), and
        `HARD_AFFINITY_WEIGHT` for each of its required affinity terms that selects `pod`.
        Tiers, not a score per node: only the nodes of a scored domain are counted, the
        rest tie at 0, so a pod that prefers to avoid a few replicas looks at no more
        nodes than one without the term."""
        totals = self._domain_totals(pod, placed, mates)
        scores: dict[str, int] = {}
        for (key, value), weight in totals.items():
            for name in self._domain_members(key).get(value, ()):
                scores[name] = scores.get(name, 0) + weight
        if not any(scores.values()):
            return None
        levels = sorted({0, *scores.values()}, reverse=True)
        return [functools.partial(_scored, scores, level) for level in levels]

    def tiers_within(
        self,
        pod: Pod,
        allowed: Eligible,
        placed: Mapping[str, Placed],
        mates: Sequence[Placed] = (),
    ) -> list[Eligible]:
        """`allowed` in the tiers of `preferred_tiers`, best first; one tier when no term
        scores `pod`. The greedy pass, the topology search and the eviction seats take a
        node of the first tier where the pod fits."""
        tiers = self.scored(pod) and self.preferred_tiers(pod, placed, mates)
        return [both(tier, allowed) for tier in tiers] if tiers else [allowed]

    def _domain_totals(
        self, pod: Pod, placed: Mapping[str, Placed], mates: Sequence[Placed]
    ) -> dict[tuple[str, str], int]:
        """`preferred_tiers`' sums, per domain (topology key, value)."""
        sources = self._sources(placed)
        around = [(mate.pod, mate.node) for mate in mates]
        totals: dict[tuple[str, str], int] = {}

        def add(term: PodAffinityTerm, node: str, weight: int) -> None:
            value = self._labels.get(node, {}).get(term.topology_key)
            if value is not None:
                domain = (term.topology_key, value)
                totals[domain] = totals.get(domain, 0) + weight

        for term in pod.preferred_terms:
            candidates = [*(p for source in sources for p in source.may_be_selected(term)), *around]
            for other, node in candidates:
                if other.key != pod.key and selects(term, other):
                    add(term, node, -term.weight if term.anti else term.weight)
        theirs = [(o, n, t) for source in sources for o, n, t in source.may_score(pod)]
        theirs += [
            (o, n, t)
            for o, n in around
            for t in (*o.pod_terms, *o.preferred_terms)
            if t.weight or not t.anti
        ]
        for owner, node, term in theirs:
            if owner.key != pod.key and selects(term, pod):
                weight = term.weight or HARD_AFFINITY_WEIGHT
                add(term, node, -weight if term.anti else weight)
        return totals

    def _domain_members(self, key: str) -> dict[str, list[str]]:
        """The nodes of each domain of a topology key, built when a score first reads it."""
        members = self._members.get(key)
        if members is None:
            members = self._members[key] = {}
            for name, labels in self._labels.items():
                value = labels.get(key)
                if value is not None:
                    members.setdefault(value, []).append(name)
        return members

    def wanted_by(self, pods: Iterable[Pod], placed: Mapping[str, Placed]) -> set[str]:
        """The pods (by key) that an affinity term of `pods` selects, on nodes or among the
        pass's placements: where such a pod goes, the seats that counted on it may not hold."""
        sources = self._sources(placed)
        found: set[str] = set()
        for pod in pods:
            for term in pod.pod_terms:
                if term.anti:
                    continue
                for source in sources:
                    found.update(
                        other.key
                        for other, _ in source.may_be_selected(term)
                        if other.key != pod.key and selects(term, other)
                    )
        return found

    def why_not(self, pod: Pod, nodes: Iterable[str], placed: Mapping[str, Placed]) -> str | None:
        """Why the terms close every one of `nodes` to `pod` beside the pass's placements
        (counts per cause), or None when one is open."""
        domains = self._domains(pod, placed, ())
        causes: Counter[str] = Counter()
        for name in nodes:
            cause = domains.why_not(self._labels.get(name, {}))
            if cause is None:
                return None
            causes[cause] += 1
        return "; ".join(f"{count} node(s) {cause}" for cause, count in sorted(causes.items()))

    @functools.cached_property
    def _on_nodes(self) -> _Indexed:
        """The pods on nodes, indexed when a pod a term concerns is first placed: a cycle
        whose pending pods no term concerns (most, on a cluster with a few terms) skips it."""
        index = _Indexed()
        for pod in self._pods:
            if pod.node is not None and pod.node in self._labels and pod.phase.occupies_node:
                index.add(pod, pod.node)
        return index

    def _pass(self, placed: Mapping[str, Placed]) -> _Indexed:
        known = self._passes.get(id(placed))
        if known is None or known[0] is not placed or len(known[1].every) > len(placed):
            known = self._passes[id(placed)] = (placed, _Indexed())
        index = known[1]
        for placement in itertools.islice(placed.values(), len(index.every), None):
            index.add(placement.pod, placement.node)
        return index

    def _sources(self, placed: Mapping[str, Placed]) -> tuple[_Source, ...]:
        """The pods a term reads: those on nodes (and `beside`) but the ones leaving, then
        the pass's."""
        on_nodes: _Source = _Leaving(self._on_nodes, self._gone) if self._gone else self._on_nodes
        if self._beside is None:
            return on_nodes, self._pass(placed)
        beside = self._pass(self._beside)
        return on_nodes, _Leaving(beside, self._gone), self._pass(placed)

    def _domains(self, pod: Pod, placed: Mapping[str, Placed], mates: Sequence[Placed]) -> _Domains:
        sources = self._sources(placed)
        around = [(mate.pod, mate.node) for mate in mates]
        closed: dict[str, set[str]] = {}  # topology key -> domains closed to the pod
        for term in pod.pod_terms:
            if term.anti:
                found = self._selected_in(term, pod, sources, around)
                closed.setdefault(term.topology_key, set()).update(found)
        theirs = [(o, n, t) for source in sources for o, n, t in source.may_close(pod)]
        theirs += [(o, n, t) for o, n in around for t in o.pod_terms if t.anti]
        for owner, node, term in theirs:  # symmetry: their anti-affinity closes theirs
            value = self._labels.get(node, {}).get(term.topology_key)
            if value is not None and owner.key != pod.key and selects(term, pod):
                closed.setdefault(term.topology_key, set()).add(value)
        wanted = [term for term in pod.pod_terms if not term.anti]
        near = [self._selected_in(term, pod, sources, around) for term in wanted]
        # kube-scheduler counts the pods each term wants per domain; with none counted for
        # any term, a pod that all its terms select is the first of its set.
        first = bool(wanted) and not any(near) and all(selects(term, pod) for term in wanted)
        wants = [] if first else [(t.topology_key, d) for t, d in zip(wanted, near, strict=True)]
        return _Domains(closed, wants)

    def _selected_in(
        self,
        term: PodAffinityTerm,
        pod: Pod,
        sources: Sequence[_Source],
        around: Sequence[tuple[Pod, str]],
    ) -> set[str]:
        """The domains of the term's key that run a pod it selects, `pod` itself aside."""
        domains = set()
        candidates = [*(p for source in sources for p in source.may_be_selected(term)), *around]
        for other, node in candidates:
            value = self._labels.get(node, {}).get(term.topology_key)
            if value is not None and other.key != pod.key and selects(term, other):
                domains.add(value)
        return domains


def both(first: Eligible, second: Eligible) -> Eligible:
    """The nodes both take: a preference tier within the nodes a pod may use."""
    return lambda name: first(name) and second(name)


def _scored(scores: Mapping[str, int], level: int, name: str) -> bool:
    """Whether the node's preference score (0 when its domains have none) is `level`."""
    return scores.get(name, 0) == level


def _by_labels(index: Mapping[tuple[str, str] | None, Sequence[T]], pod: Pod) -> Iterator[T]:
    """The entries of an index by needed label that may concern a pod with these labels."""
    yield from index.get(None, ())
    for pair in pod.labels:
        yield from index.get(pair, ())


@dataclass(frozen=True)
class _Domains:
    """For one pod: the domains closed to it, per topology key, and those its affinity
    terms want (each term one (key, domains))."""

    closed: Mapping[str, set[str]]
    wants: Sequence[tuple[str, set[str]]]

    def why_not(self, labels: Mapping[str, str]) -> str | None:
        """Why a node with these labels is closed to the pod, or None when it is open."""
        if any(labels.get(key) in domains for key, domains in self.closed.items()):
            return "in a domain where anti-affinity keeps it apart from a pod"
        if any(labels.get(key) not in domains for key, domains in self.wants):
            return "in no domain with a pod its affinity wants"
        return None
