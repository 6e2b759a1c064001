"""A queue's limit counts its pods that are being deleted; its fair share and status do not.

A pod being deleted holds its devices until it is gone. KAI leaves it out of the
queue's allocated at once, so a pod of the queue can be bound in idle room while the
old one still runs and the queue holds more than its limit (the soak saw 17 GPUs on a
limit of 16). kai binds only under the limit counted with them; a gang that fits
once they are gone is pipelined there. Fair share and Queue status stay KAI's.
"""

from __future__ import annotations

from kai.engine.cycle import run_cycle
from kai.engine.evictions.actions import PIPELINED
from kai.engine.model import EngineConfig, PodPhase, Snapshot
from kai.engine.validator import ProposedBinding, validate
from tests.unit.engine.builders import group, node, pod, queue, snapshot

FAST = EngineConfig(time_limit_seconds=0.5, solver_workers=1)


def _queue_at_its_limit_while_a_pod_leaves() -> Snapshot:
    return snapshot(
        [node("n1", gpus=4)],
        [
            pod("leaving", "old", gpus=2, node_name="n1", phase=PodPhase.RELEASING),
            pod("next", "new", gpus=2),
        ],
        [group("old", "capped"), group("new", "capped")],
        [queue("capped", gpu_quota=2, gpu_limit=2)],
    )


def test_a_gang_that_fits_under_the_limit_only_without_a_leaving_pod_is_pipelined() -> None:
    result = run_cycle(_queue_at_its_limit_while_a_pod_leaves(), FAST)
    assert result.bindings == ()
    assert [p.pod for p in result.pipelined] == ["ns/next"]
    decision = result.groups["ns/new"]
    assert not decision.scheduled and decision.reason == PIPELINED
    assert result.evictions == ()  # the room is being freed already: nobody else goes


def test_fair_share_and_status_leave_the_leaving_pod_out_as_kai_does() -> None:
    result = run_cycle(_queue_at_its_limit_while_a_pod_leaves(), FAST)
    assert result.queues["capped"].allocated.gpu == 0


def test_the_validator_refuses_a_bind_over_the_limit_counted_with_leaving_pods() -> None:
    problems = validate(
        _queue_at_its_limit_while_a_pod_leaves(), [ProposedBinding("ns/next", "n1", ())]
    )
    assert any("above limit" in problem for problem in problems), problems


def test_once_the_pod_is_gone_the_gang_is_bound() -> None:
    gone = snapshot(
        [node("n1", gpus=4)],
        [pod("next", "new", gpus=2)],
        [group("new", "capped")],
        [queue("capped", gpu_quota=2, gpu_limit=2)],
    )
    assert [b.pod for b in run_cycle(gone, FAST).bindings] == ["ns/next"]
