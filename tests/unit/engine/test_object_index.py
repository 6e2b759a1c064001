"""An object index kept from snapshot to snapshot holds what an index built anew holds.

Over random runs of changing snapshots (`test_memo`'s changes: pods arriving, bound,
deleted or replaced, groups changing or coming and going, nodes changing), told what
changed since the snapshot before or since an earlier one (another lineage, which the
index must not read), the kept index holds the very objects a fresh one holds, and the
validator judges random bindings through it exactly as through a fresh one.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kai.engine.model import PodPhase, Snapshot
from kai.engine.object_index import ObjectIndex
from kai.engine.validator import ProposedBinding, validate
from tests.unit.engine.test_memo import told_states


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_a_kept_index_holds_what_a_fresh_one_holds(data: st.DataObject) -> None:
    kept = ObjectIndex()
    for state in told_states(data):
        kept.update(state)
        _assert_as_fresh(kept, state)
        pending = [p for p in state.pods if p.phase is PodPhase.PENDING]
        chosen = data.draw(st.lists(st.sampled_from(pending), unique=True)) if pending else []
        bindings = [
            ProposedBinding(p.key, data.draw(st.sampled_from([n.name for n in state.nodes])), ())
            for p in chosen
        ]
        assert validate(state, bindings, kept) == validate(state, bindings)


def _assert_as_fresh(kept: ObjectIndex, state: Snapshot) -> None:
    assert kept.pods.keys() == {p.key for p in state.pods}
    assert all(kept.pods[p.key] is p for p in state.pods)
    assert kept.groups.keys() == {g.key for g in state.pod_groups}
    assert all(kept.groups[g.key] is g for g in state.pod_groups)
    for name in {p.node for p in state.pods if p.node} | {n.name for n in state.nodes}:
        on_node = sorted((p for p in state.pods if p.node == name), key=lambda p: p.key)
        assert kept.on_node(name) == on_node
    for key in {p.group for p in state.pods}:
        members = sorted((p for p in state.pods if p.group == key), key=lambda p: p.key)
        assert kept.of_group(key) == members
