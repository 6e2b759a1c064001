"""The grouping rule for Grove PodCliqueSets: one gang per PodCliqueSet replica.

KAI's Grove plugin reads the PodGang that Grove's operator creates for each replica
of a PodCliqueSet (kai-semantics §14.3). The simulator runs no Grove operator, so
the PodGang is derived from the set's own spec, as the operator builds it: the
pods of one replica (label `grove.io/podcliqueset-replica-index`) form one gang
that needs each clique's `minAvailable` pods, which defaults to its `replicas`.
The PodGang's clique sub-groups and pack constraints are not modelled.

This is a built-in rule, not the definition's gang instruction, because the
definition counts totals over every replica (as upstream's catalog does), so its
§6 size would be that of the whole set rather than of one replica.
"""

from __future__ import annotations

from kai.grouping.context import GroupingInput, spec_of, whole_number
from kai.grouping.plan import GroupDecision
from kai.workloads.objects import name_of, object_uid

REPLICA_INDEX_LABEL = "grove.io/podcliqueset-replica-index"


def podcliqueset_rule(inp: GroupingInput) -> GroupDecision:
    pcs = inp.top
    cliques = (spec_of(pcs).get("template") or {}).get("cliques") or []
    needed = 0
    for index, clique in enumerate(cliques):
        clique_spec = clique.get("spec") or {}
        field = f"spec.template.cliques[{index}].spec"
        replicas = whole_number(inp, clique_spec.get("replicas"), f"{field}.replicas", 1)
        needed += whole_number(
            inp, clique_spec.get("minAvailable"), f"{field}.minAvailable", replicas
        )
    replica = inp.pod_label(REPLICA_INDEX_LABEL) or "0"
    name = f"pg-{object_uid(pcs)}-{name_of(pcs)}-{replica}".lower()
    return GroupDecision(name=name, min_member=max(needed, 1))
