"""The validator is a second implementation: it imports no engine rule, and agrees with the engine.

Two implementations by design (issue 9, item 6): the validator's node predicates and
fair-share division are its own, pinned here by parsing its imports, and checked
against the engine's on generated inputs so that the two cannot drift apart silently.
"""

from __future__ import annotations

import ast
import dataclasses
from datetime import timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kai.engine
from kai.engine.accounting import accounting_device_memory, queue_shares
from kai.engine.eligibility import node_accepts
from kai.engine.evictions.decisions import MAINTAIN_FAIR_SHARE, Action, EvictionDecision
from kai.engine.model import (
    UNLIMITED,
    EngineConfig,
    Node,
    Placement,
    Pod,
    PodAffinityTerm,
    PodGroup,
    PodPhase,
    Queue,
    QueueResource,
    Requirement,
    Snapshot,
    Taint,
    Toleration,
)
from kai.engine.pod_affinity import selects
from kai.engine.resources import Resources
from kai.engine.validator import EvictionAudit
from kai.engine.validator_nodes import may_run_on, mig_mode_refuses
from kai.engine.validator_pod_affinity import selected_by
from kai.engine.validator_shares import entitlements, exact_sum, pending_device_memory
from tests.unit.engine.builders import GI, NOW, group, node, pod, snapshot
from tests.unit.evictions.clusters import inside_deserved_cluster
from tests.unit.evictions.test_audit import evict, wait

ENGINE = Path(kai.engine.__file__).parent
VALIDATOR_MODULES = (
    "validator.py",
    "validator_nodes.py",
    "validator_shares.py",
    "validator_topology.py",
    "validator_pod_affinity.py",
    "object_index.py",
)
DATA_TYPES = {
    "kai.engine.model",  # the snapshot's dataclasses
    "kai.engine.resources",  # Resources, resource names
    "kai.engine.evictions.decisions",  # the eviction records the audit checks
    "kai.engine.validator_nodes",  # the validator's own predicates
    "kai.engine.validator_shares",  # the validator's own accounting
    "kai.engine.validator_topology",  # the validator's own topology check
    "kai.engine.validator_pod_affinity",  # the validator's own inter-pod affinity check
    "kai.engine.object_index",  # a lookup of the snapshot's objects, deriving nothing
}


def kai_imports(path: Path) -> set[str]:
    """Every kai module the file imports, at top level or inside a function."""
    found: set[str] = set()
    for item in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(item, ast.Import):
            found |= {alias.name for alias in item.names}
        elif isinstance(item, ast.ImportFrom):
            assert item.level == 0, f"{path.name}: relative import hides what it imports"
            found.add(item.module or "")
            found |= {
                f"{item.module}.{alias.name}" for alias in item.names if alias.name[0].islower()
            }
    return {name for name in found if name == "kai" or name.startswith("kai.")}


def test_the_validator_imports_only_the_engines_data_types() -> None:
    for name in VALIDATOR_MODULES:
        imported = kai_imports(ENGINE / name)
        modules = {m for m in imported if m in DATA_TYPES or not _is_member_of_allowed(m)}
        assert modules <= DATA_TYPES, f"{name} imports engine rules: {sorted(modules - DATA_TYPES)}"


def _is_member_of_allowed(name: str) -> bool:
    """`from kai.engine.model import UNLIMITED` also records kai.engine.model.UNLIMITED: a member."""
    return name.rsplit(".", 1)[0] in DATA_TYPES


def test_the_import_check_would_catch_an_engine_rule(tmp_path: Path) -> None:
    sneaky = tmp_path / "v.py"
    sneaky.write_text(
        "from kai.engine.model import Pod\n"
        "def f():\n"
        "    from kai.engine.eligibility import node_accepts\n"
        "    import kai.engine.fairshare\n"
    )
    imported = kai_imports(sneaky)
    assert {"kai.engine.eligibility", "kai.engine.fairshare"} <= imported
    assert not all(m in DATA_TYPES or _is_member_of_allowed(m) for m in imported)


# -- inter-pod affinity: the validator's selection and the engine's agree -------------------

LABEL_KEYS = st.sampled_from(["app", "tier"])
LABEL_VALUES = st.sampled_from(["a", "b"])
POD_LABELS = st.dictionaries(LABEL_KEYS, LABEL_VALUES)


@st.composite
def _terms(draw: st.DrawFn) -> PodAffinityTerm:
    expressions = draw(
        st.lists(
            st.builds(
                Requirement,
                LABEL_KEYS,
                st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
                st.lists(LABEL_VALUES, max_size=2).map(tuple),
            ),
            max_size=2,
        )
    )
    return PodAffinityTerm(
        draw(st.booleans()),
        "zone",
        tuple(sorted(draw(POD_LABELS).items())),
        tuple(expressions),
        draw(st.sampled_from([None, frozenset({"ns"}), frozenset({"other"})])),
        draw(st.booleans()),
    )


@settings(max_examples=300, deadline=None)
@given(_terms(), POD_LABELS, st.sampled_from(["ns", "other", "third"]))
def test_the_validator_selects_the_pods_the_engine_selects(
    term: PodAffinityTerm, labels: dict[str, str], namespace: str
) -> None:
    candidate = dataclasses.replace(
        pod("p", "g", namespace=namespace), labels=tuple(sorted(labels.items()))
    )
    assert selected_by(term, candidate) == selects(term, candidate)


# -- node predicates: the validator's and the engine's agree --------------------------------

KEYS = st.sampled_from(["pool", "gpu", "metadata.name"])
VALUES = st.sampled_from(["a", "3", "10", "n0"])
EFFECTS = st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"])

requirements = st.builds(
    Requirement,
    KEYS,
    st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Bogus"]),
    st.lists(VALUES, max_size=2).map(tuple),
)
node_terms = st.lists(st.lists(requirements, min_size=1, max_size=3).map(tuple), max_size=2).map(
    tuple
)
placements = st.builds(
    Placement,
    st.lists(st.tuples(KEYS.filter(lambda k: k != "metadata.name"), VALUES), max_size=2).map(tuple),
    node_terms,
    st.lists(
        st.builds(
            Toleration,
            st.one_of(st.none(), KEYS),
            st.sampled_from(["Equal", "Exists"]),
            st.one_of(st.none(), VALUES),
            st.one_of(st.none(), EFFECTS),
        ),
        max_size=3,
    ).map(tuple),
    volume_terms=st.lists(node_terms, max_size=2).map(tuple),  # each claim's volume's terms
)
nodes = st.builds(
    lambda labels, taints, ready, cordoned: node(
        "n0",
        labels=dict(labels),
        taints=tuple(taints),
        ready=ready,
        unschedulable=cordoned,
    ),
    st.lists(st.tuples(KEYS.filter(lambda k: k != "metadata.name"), VALUES), max_size=3),
    st.lists(st.builds(Taint, KEYS, st.one_of(st.none(), VALUES), EFFECTS), max_size=2),
    st.sampled_from([True, True, True, False]),  # mostly Ready and not cordoned, so that the
    st.sampled_from([False, False, False, True]),  # other predicates decide
)


@settings(max_examples=500, deadline=None)
@given(nodes, placements)
def test_the_validators_node_predicates_agree_with_the_engines(n: Node, p: Placement) -> None:
    assert may_run_on(n, p) == node_accepts(n, p)


SLICE = "nvidia.com/mig-1g.10gb"
BIG_SLICE = "nvidia.com/mig-3g.40gb"
gpu_asks = st.sampled_from(
    [
        {},
        {"gpus": 1},
        {"portion": Fraction(1, 2)},
        {"memory_mib": 5000},
        {"scalars": {SLICE: 1}},
        {"scalars": {BIG_SLICE: 2}},
        {"scalars": {"rdma/hca": 1}},
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([None, "", "none", "mixed", "single"]), gpu_asks)
def test_the_validators_mig_rule_agrees_with_the_engines(
    mig: str | None, ask: dict[str, Any]
) -> None:
    """KAI's PredicateByNodeResourcesType: the engine reads it from the kind of GPU ask its
    placement carries, the validator from the pod's own requests."""
    n = node("n0", mig=mig)
    p = pod("p", "g", **ask)
    assert (not node_accepts(n, p.placement)) == mig_mode_refuses(n, p)


EDGES = [
    # (node labels, taints, placement, may run)
    ({"gpu": "3"}, (), Placement(affinity_terms=((Requirement("gpu", "Gt", ("3",)),),)), False),
    ({"gpu": "4"}, (), Placement(affinity_terms=((Requirement("gpu", "Gt", ("3",)),),)), True),
    ({"gpu": "x"}, (), Placement(affinity_terms=((Requirement("gpu", "Lt", ("3",)),),)), False),
    ({}, (), Placement(affinity_terms=((Requirement("gpu", "NotIn", ("3",)),),)), True),
    ({}, (), Placement(affinity_terms=((Requirement("metadata.name", "In", ("n0",)),),)), True),
    (
        {"pool": "a"},
        (),
        Placement(
            affinity_terms=(
                (Requirement("pool", "In", ("b",)),),
                (Requirement("pool", "Exists"), Requirement("gpu", "DoesNotExist")),
            )
        ),
        True,
    ),
    (
        {},
        (Taint("k", "v", "NoSchedule"),),
        Placement(tolerations=(Toleration(None, "Equal", None, None),)),
        False,
    ),
    (
        {},
        (Taint("k", "v", "NoSchedule"),),
        Placement(tolerations=(Toleration(None, "Exists", None, None),)),
        True,
    ),
    (
        {},
        (Taint("k", None, "NoExecute"),),
        Placement(tolerations=(Toleration("k", "Equal", "", None),)),
        True,
    ),
    (
        {},
        (Taint("k", "v", "NoExecute"),),
        Placement(tolerations=(Toleration("k", "Exists", None, "NoSchedule"),)),
        False,
    ),
    ({}, (Taint("k", "v", "PreferNoSchedule"),), Placement(), True),
]


@pytest.mark.parametrize(("labels", "taints", "placement", "expected"), EDGES)
def test_edge_cases_of_the_predicates_are_decided_alike(
    labels: dict[str, str], taints: tuple[Taint, ...], placement: Placement, expected: bool
) -> None:
    n = node("n0", labels=labels, taints=taints)
    assert may_run_on(n, placement) is expected
    assert node_accepts(n, placement) is expected
    assert not may_run_on(dataclasses.replace(n, ready=False), placement)
    assert not may_run_on(dataclasses.replace(n, unschedulable=True), placement)


# -- fair shares: the validator's division and the engine's agree ---------------------------


@st.composite
def clusters(draw: st.DrawFn) -> Snapshot:
    """A random queue tree (up to three levels), nodes, and running and pending pods."""
    names = ["root", "a", "b", "c", "a1", "a2", "b1"]
    parents: dict[str, str | None] = {
        "root": None,
        "a": draw(st.sampled_from(["root", None])),
        "b": "root",
        "c": draw(st.sampled_from(["root", None, "ghost"])),  # "ghost": an orphan subtree
        "a1": "a",
        "a2": "a",
        "b1": "b",
    }
    # Mostly finite, small quotas and unequal weights: the surplus rounds, their flooring
    # and the remainders are where two divisions would differ.
    quotas = st.sampled_from([Fraction(v) for v in (-1, 0, 0, 1, 1, 2)] + [Fraction(7, 2)])
    limits = st.sampled_from([Fraction(v) for v in (-1, -1, -1, 2, 5)])
    weights = st.sampled_from([Fraction(v) for v in (0, 1, 1, 2, 3)])
    queues = [
        Queue(
            name,
            parents[name],
            draw(st.sampled_from([50, 100, 100, 150])),
            gpu=QueueResource(draw(quotas), draw(limits), draw(weights)),
            cpu=QueueResource(_millis(draw(quotas)), _millis(draw(limits)), draw(weights)),
            memory=QueueResource(Fraction(-1), Fraction(-1), draw(weights)),
            created=NOW - timedelta(minutes=draw(st.integers(0, 2))),
        )
        for name in names
    ]
    cluster_nodes = [
        node(
            f"n{i}",
            gpus=draw(st.sampled_from([4, 8, 8, 0])),
            cpu=draw(st.sampled_from([4000, 16000])),
            gpu_memory_mib=draw(st.sampled_from([20_000, 40_000])),
            ready=draw(st.booleans()) or i == 0,
            scalars=draw(st.sampled_from([None, None, {SLICE: 7}, {SLICE: 2, BIG_SLICE: 1}])),
        )
        for i in range(draw(st.integers(1, 3)))
    ]
    groups: list[PodGroup] = []
    pods: list[Pod] = []
    for g in range(draw(st.integers(0, 12))):
        target = draw(st.sampled_from([*names, "missing"]))
        groups.append(group(f"g{g}", target, preemptible=draw(st.booleans())))
        for i in range(draw(st.integers(1, 4))):
            where = draw(st.sampled_from([None, *(n.name for n in cluster_nodes)]))
            kind = draw(st.sampled_from(["whole", "portion", "memory", "mig"]))
            pods.append(
                pod(
                    f"g{g}-{i}",
                    f"g{g}",
                    gpus=draw(st.integers(1, 4)) if kind == "whole" else 0,
                    portion=Fraction(1, 2) if kind == "portion" else Fraction(0),
                    memory_mib=5000 if kind == "memory" else 0,
                    cpu=draw(st.sampled_from([500, 1000, 3000])),
                    memory=GI,
                    node_name=where,
                    scalars={draw(st.sampled_from([SLICE, BIG_SLICE])): draw(st.integers(1, 2))}
                    if kind == "mig"
                    else None,
                    ours=draw(st.sampled_from([True] * 7 + [False])) or where is None,
                    phase=draw(
                        st.sampled_from([None, None, PodPhase.RELEASING, PodPhase.SUCCEEDED])
                    ),
                )
            )
    return snapshot(cluster_nodes, pods, groups, queues)


def _millis(cores: Fraction) -> Fraction:
    return cores if cores == UNLIMITED else cores * 1000


@settings(max_examples=500, deadline=None)
@given(clusters())
def test_the_validators_fair_shares_agree_with_the_engines(snap: Snapshot) -> None:
    engine = queue_shares(snap)
    mine = entitlements(snap)
    assert set(mine) == set(engine)
    for name, share in engine.items():
        assert mine[name].deserved == share.deserved, name
        assert mine[name].fair_share == share.fair_share, name
    assert pending_device_memory(snap) == accounting_device_memory(snap)


def reclaim_borrowed(snap: Snapshot) -> EvictionDecision:
    victims = [f"ns/borrow-{i}" for i in range(4)]
    return EvictionDecision(
        Action.RECLAIM,
        "ns/claim",
        evict(snap, Action.RECLAIM, MAINTAIN_FAIR_SHARE, "ns/claim", *victims),
        wait(snap, *((f"ns/claim-{i}", "n1") for i in range(4))),
        "cp-sat",
    )


def test_engine_shares_that_disagree_are_reported_on_reclaim() -> None:
    snap = inside_deserved_cluster()
    decision = reclaim_borrowed(snap)
    right = queue_shares(snap)
    assert EvictionAudit(snap, EngineConfig(), [], right).check(decision) == []
    claim_queue = next(g.queue for g in snap.pod_groups if g.key == "ns/claim")
    wrong = dict(right)
    wrong[claim_queue] = dataclasses.replace(
        right[claim_queue], fair_share=right[claim_queue].fair_share + Resources.of(gpu=1)
    )
    problems = EvictionAudit(snap, EngineConfig(), [], wrong).check(decision)
    assert any(f"queue {claim_queue}: engine's gpu fair share" in p for p in problems), problems
    del wrong[claim_queue]
    problems = EvictionAudit(snap, EngineConfig(), [], wrong).check(decision)
    assert any("fair share computed on one side only" in p for p in problems), problems


@settings(max_examples=300, deadline=None)
@given(st.lists(st.fractions(max_denominator=10**6) | st.integers(-(10**15), 10**15)))
def test_the_validators_fast_sum_is_the_exact_sum(values: list[Fraction | int]) -> None:
    total = exact_sum(values)
    assert total == sum(values, Fraction(0))
    assert isinstance(total, Fraction)
