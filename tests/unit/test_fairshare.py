"""Fair-share division (kai-semantics §10.1-10.3) on hand-computed examples.

Every expected number below is worked out in the comment next to it from the rules,
not taken from the code under test.
"""

from __future__ import annotations

from datetime import UTC, datetime
from fractions import Fraction

import pytest

from kai.engine.fairshare import QueueShare, QueueUsage, compute_fair_shares
from kai.engine.model import UNLIMITED, Queue, QueueResource
from kai.engine.resources import Resources


def gpu(
    quota: Fraction | int = 0, weight: Fraction | int = 1, limit: Fraction | int = -1
) -> QueueResource:
    return QueueResource(
        quota=Fraction(quota), limit=Fraction(limit), over_quota_weight=Fraction(weight)
    )


def queue(
    name: str,
    resources: QueueResource | None = None,
    *,
    parent: str | None = None,
    priority: int = 100,
    day: int | None = None,
    cpu: QueueResource | None = None,
    memory: QueueResource | None = None,
) -> Queue:
    """A queue whose GPU terms are `resources`; cpu and memory default to unlimited, weight 1."""
    return Queue(
        name=name,
        parent=parent,
        priority=priority,
        gpu=resources or gpu(),
        cpu=cpu or gpu(),
        memory=memory or gpu(),
        created=datetime(2024, 1, day, tzinfo=UTC) if day else None,
    )


def pending_gpus(amount: Fraction | int, usage: Fraction | int = 0) -> QueueUsage:
    return QueueUsage(
        allocated=Resources(),
        allocated_non_preemptible=Resources(),
        pending=Resources.of(gpu=amount),
        usage=Resources.of(gpu=usage),
    )


def gpu_fair(shares: dict[str, QueueShare]) -> dict[str, Fraction]:
    return {name: share.fair_share.gpu for name, share in shares.items()}


def divide_gpus(
    total: Fraction | int,
    queues: list[Queue],
    pending: dict[str, Fraction | int],
    k_value: Fraction = Fraction(1),
) -> dict[str, Fraction]:
    usage = {name: pending_gpus(amount) for name, amount in pending.items()}
    return gpu_fair(compute_fair_shares(Resources.of(gpu=total), queues, usage, k_value))


# --- the worked examples of §10.3 -----------------------------------------------------


def test_example_a_surplus_follows_over_quota_weight() -> None:
    # Phase 1: 10 + 10, left 80. Phase 2: n = 3/4, 1/4 -> offers 60 and 20, both need 90.
    shares = divide_gpus(
        100,
        [queue("q1", gpu(10, weight=3)), queue("q2", gpu(10, weight=1))],
        {"q1": 100, "q2": 100},
    )
    assert shares == {"q1": 70, "q2": 30}


def test_example_b_flooring_remainder_goes_to_the_oldest_queue() -> None:
    # Offers 10/3 each -> 3 each with remainder 1/3; the one unit left goes to the oldest.
    queues = [queue("a", day=3), queue("b", day=1), queue("c", day=2)]
    shares = divide_gpus(10, queues, {"a": 10, "b": 10, "c": 10})
    assert shares == {"b": 4, "a": 3, "c": 3}


def test_example_b_equal_age_breaks_the_tie_by_name() -> None:
    queues = [queue("c", day=1), queue("b", day=1), queue("a", day=1)]
    assert divide_gpus(10, queues, {"a": 10, "b": 10, "c": 10}) == {"a": 4, "b": 3, "c": 3}


def test_larger_remainder_beats_age_in_phase_three() -> None:
    # Weights 1 and 2 over 10: offers 10/3 and 20/3 -> 3 (rem 1/3) and 6 (rem 2/3).
    queues = [queue("old", gpu(weight=1), day=1), queue("young", gpu(weight=2), day=9)]
    assert divide_gpus(10, queues, {"old": 10, "young": 10}) == {"old": 3, "young": 7}


def test_example_c_over_committed_quota_is_not_scaled_down() -> None:
    shares = divide_gpus(10, [queue("q1", gpu(8)), queue("q2", gpu(8))], {"q1": 10, "q2": 10})
    assert shares == {"q1": 8, "q2": 8}


# --- phase 1: deserved, capped by requestable -----------------------------------------


def test_request_caps_the_share_and_the_rest_goes_to_the_others() -> None:
    shares = divide_gpus(100, [queue("small"), queue("big")], {"small": 5, "big": 100})
    assert shares == {"small": 5, "big": 95}


def test_deserved_is_capped_by_request() -> None:
    # Quota 50 but only 20 requested: phase 1 gives 20, the other queue's offer is all 80.
    shares = divide_gpus(100, [queue("q1", gpu(50)), queue("q2")], {"q1": 20, "q2": 100})
    assert shares == {"q1": 20, "q2": 80}


def test_limit_caps_the_share() -> None:
    # Offers 50/50: q1 needs only 20 (its limit) and is satisfied; the 30 it left go to q2.
    shares = divide_gpus(100, [queue("q1", gpu(limit=20)), queue("q2")], {"q1": 100, "q2": 100})
    assert shares == {"q1": 20, "q2": 80}


def test_limit_caps_even_the_deserved_quota() -> None:
    shares = divide_gpus(100, [queue("q1", gpu(40, limit=25))], {"q1": 100})
    assert shares == {"q1": 25}


def test_limit_zero_means_nothing_may_be_allocated() -> None:
    # KAI's trap: an unset limit is 0 and blocks even the deserved quota.
    shares = divide_gpus(
        10, [queue("blocked", gpu(5, limit=0)), queue("open")], {"blocked": 10, "open": 10}
    )
    assert shares == {"blocked": 0, "open": 10}


def test_unlimited_deserved_takes_the_whole_amount_being_divided() -> None:
    shares = compute_fair_shares(
        Resources.of(gpu=100),
        [queue("all", gpu(UNLIMITED)), queue("other")],
        {"all": pending_gpus(30), "other": pending_gpus(100)},
    )
    assert shares["all"].deserved.gpu == 100
    assert shares["all"].fair_share.gpu == 30
    assert shares["other"].fair_share.gpu == 70


def test_unlimited_deserved_greedily_takes_everything_it_requests() -> None:
    # Phase 1 gives -1 quota its whole request before anyone else's surplus.
    shares = divide_gpus(
        10, [queue("all", gpu(UNLIMITED)), queue("other")], {"all": 10, "other": 10}
    )
    assert shares == {"all": 10, "other": 0}


# --- phase 2: priority buckets, weights, usage ----------------------------------------


def test_higher_priority_bucket_takes_the_surplus_first() -> None:
    queues = [queue("hi", gpu(weight=1), priority=200), queue("lo", gpu(weight=10), priority=100)]
    assert divide_gpus(10, queues, {"hi": 8, "lo": 10}) == {"hi": 8, "lo": 2}
    assert divide_gpus(10, queues, {"hi": 20, "lo": 10}) == {"hi": 10, "lo": 0}


def test_priority_does_not_override_deserved_quota() -> None:
    queues = [queue("hi", priority=200), queue("lo", gpu(3), priority=100)]
    assert divide_gpus(10, queues, {"hi": 20, "lo": 10}) == {"hi": 7, "lo": 3}


def test_a_bucket_keeps_its_own_flooring_remainder() -> None:
    # The top bucket floors 10/3 three times and hands the lost unit out among itself
    # (KAI's divideRemainingResource runs per bucket) before the low bucket sees anything.
    queues = [
        queue("a", priority=200, day=1),
        queue("b", priority=200, day=2),
        queue("c", priority=200, day=3),
        queue("low", priority=100),
    ]
    assert divide_gpus(10, queues, {"a": 10, "b": 10, "c": 10, "low": 10}) == {
        "a": 4,
        "b": 3,
        "c": 3,
        "low": 0,
    }


def test_weight_zero_never_gets_surplus() -> None:
    # q0 gets its quota 2 only; q1 is satisfied at 5; the 3 left stay undivided.
    queues = [queue("q0", gpu(2, weight=0)), queue("q1")]
    assert divide_gpus(10, queues, {"q0": 10, "q1": 5}) == {"q0": 2, "q1": 5}


def test_exactly_satisfied_queue_does_not_start_another_round() -> None:
    # Weights 3, 4, 5 over 20: offers 5, 20/3, 25/3. q0 needs exactly 5 (nothing left over,
    # so no new round); q1 takes 6 (rem 2/3), q2 takes 8 (rem 1/3); the unit left goes to q1.
    queues = [queue("q0", gpu(weight=3)), queue("q1", gpu(weight=4)), queue("q2", gpu(weight=5))]
    assert divide_gpus(20, queues, {"q0": 5, "q1": 10, "q2": 13}) == {"q0": 5, "q1": 7, "q2": 8}


def test_satisfied_queue_leaves_its_offer_for_another_round() -> None:
    # Offers 30 each: a needs 10 and is satisfied; round two splits the 20 it left: 10 each.
    queues = [queue("a"), queue("b"), queue("c")]
    assert divide_gpus(90, queues, {"a": 10, "b": 100, "c": 100}) == {"a": 10, "b": 40, "c": 40}


def test_historical_usage_shifts_the_surplus() -> None:
    # n = 1/2 each; s = max(0, n + k(n - usage)): heavy 1/2, light 1 -> offers 30 and 60.
    usage = {"heavy": pending_gpus(100, usage=Fraction(1, 2)), "light": pending_gpus(100)}
    shares = compute_fair_shares(Resources.of(gpu=90), [queue("heavy"), queue("light")], usage)
    assert gpu_fair(shares) == {"heavy": 30, "light": 60}


def test_k_value_scales_the_usage_correction() -> None:
    # k = 2: s = 1/2 and 3/2 -> offers 22.5 and 67.5, floored to 22 and 67; the unit left
    # goes to the older of the equal remainders.
    usage = {"heavy": pending_gpus(100, usage=Fraction(1, 2)), "light": pending_gpus(100)}
    queues = [queue("heavy", day=2), queue("light", day=1)]
    shares = compute_fair_shares(Resources.of(gpu=90), queues, usage, k_value=Fraction(2))
    assert gpu_fair(shares) == {"heavy": 22, "light": 68}


def test_usage_above_the_weight_share_can_zero_the_surplus() -> None:
    # usage 1: s = max(0, 1/2 + (1/2 - 1)) = 0, so all the surplus goes to the other queue.
    usage = {"heavy": pending_gpus(100, usage=1), "light": pending_gpus(100)}
    shares = compute_fair_shares(
        Resources.of(gpu=90), [queue("heavy", gpu(10)), queue("light")], usage
    )
    assert gpu_fair(shares) == {"heavy": 10, "light": 80}


def test_k_value_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="k_value"):
        compute_fair_shares(Resources(), [queue("q")], {}, k_value=Fraction(-1))


# --- exact arithmetic and fractional GPUs ---------------------------------------------


def test_fractional_requests_add_up_exactly() -> None:
    # 0.1 + 0.2 GPUs pending against a 0.3 quota: exactly 3/10, no float drift (KAI#2209).
    usage = QueueUsage(
        allocated=Resources.of(gpu=Fraction("0.1")),
        allocated_non_preemptible=Resources(),
        pending=Resources.of(gpu=Fraction("0.2")),
    )
    shares = compute_fair_shares(
        Resources.of(gpu=1), [queue("q", gpu(Fraction("0.3"), weight=0))], {"q": usage}
    )
    assert shares["q"].request.gpu == Fraction(3, 10)
    assert shares["q"].fair_share.gpu == Fraction(3, 10)


def test_need_within_offer_is_given_exactly_even_when_fractional() -> None:
    # Offers 1/2 each: a needs 3/10 (exact), b needs 7/10 (floor(1/2) = 0, remainder 1/2);
    # a left something over, so round two offers b the 7/10 left, exactly its need.
    shares = divide_gpus(1, [queue("a"), queue("b")], {"a": Fraction(3, 10), "b": Fraction(7, 10)})
    assert shares == {"a": Fraction(3, 10), "b": Fraction(7, 10)}


def test_phase_three_unit_may_exceed_a_fractional_request() -> None:
    # KAI hands out whole units in phase 3 without re-checking the need: offers 10/3 each,
    # a (3.5 requested, oldest) floors to 3 and then wins the unit left -> 4.
    queues = [queue("a", day=1), queue("b", day=2), queue("c", day=3)]
    shares = divide_gpus(10, queues, {"a": Fraction(7, 2), "b": 10, "c": 10})
    assert shares == {"a": 4, "b": 3, "c": 3}


def test_phase_three_hands_out_a_fraction_when_less_than_a_unit_is_left() -> None:
    # Offers 3/4 each and both need 1: each floors to 0 (remainder 3/4), so all 3/2 is
    # still left. Phase 3: the older gets a whole unit, the younger the 1/2 that remains.
    queues = [queue("old", day=1), queue("young", day=2)]
    assert divide_gpus(Fraction(3, 2), queues, {"old": 1, "young": 1}) == {
        "old": 1,
        "young": Fraction(1, 2),
    }


# --- resources are independent ---------------------------------------------------------


def test_each_resource_is_divided_on_its_own_terms() -> None:
    q1 = queue("q1", gpu(weight=3), cpu=gpu(weight=1), memory=gpu(limit=1000))
    q2 = queue("q2", gpu(weight=1), cpu=gpu(weight=3), memory=gpu(weight=0))
    want = Resources.of(gpu=100, cpu=100_000, memory=10**12)
    usage = {name: QueueUsage(Resources(), Resources(), want) for name in ("q1", "q2")}
    total = Resources.of(gpu=100, cpu=8000, memory=4000)
    shares = compute_fair_shares(total, [q1, q2], usage)
    # gpu 3:1 of 100; cpu 1:3 of 8000 millicores; memory: q1 capped at 1000 bytes and q2
    # has weight 0, so 3000 bytes stay undivided.
    assert shares["q1"].fair_share == Resources.of(gpu=75, cpu=2000, memory=1000)
    assert shares["q2"].fair_share == Resources.of(gpu=25, cpu=6000, memory=0)


# --- the hierarchy ----------------------------------------------------------------------


def hierarchy() -> list[Queue]:
    return [
        queue("A", gpu(30)),
        queue("B", gpu(10)),
        queue("a1", gpu(10, weight=2), parent="A"),
        queue("a2", gpu(10, weight=1), parent="A"),
        queue("b1", parent="B"),
    ]


def test_parents_split_the_total_then_children_split_their_parent() -> None:
    # Top: A 30 + B 10, left 60, offers 30/30: B needs exactly 30, A floors to 30 -> 60/40.
    # Under A (60): 10 + 10, left 40, offers 80/3 and 40/3 -> 26 and 13 (rems 2/3, 1/3);
    # the unit left goes to a1 -> 37 and 23. Under B (40): b1 needs 40 -> 40.
    shares = divide_gpus(100, hierarchy(), {"a1": 50, "a2": 50, "b1": 40})
    assert shares == {"A": 60, "B": 40, "a1": 37, "a2": 23, "b1": 40}


def test_children_see_the_parents_share_not_the_total() -> None:
    queues = [queue("A", gpu(20, weight=0)), queue("child", gpu(UNLIMITED), parent="A")]
    shares = compute_fair_shares(Resources.of(gpu=100), queues, {"child": pending_gpus(100)})
    assert shares["A"].fair_share.gpu == 20
    assert shares["child"].deserved.gpu == 20
    assert shares["child"].fair_share.gpu == 20


def test_subtree_totals_sum_allocated_non_preemptible_and_request() -> None:
    usage = {
        "a1": QueueUsage(Resources.of(gpu=2, cpu=100), Resources.of(gpu=1), Resources.of(gpu=3)),
        "a2": QueueUsage(Resources.of(gpu=4), Resources(), Resources.of(memory=7)),
    }
    shares = compute_fair_shares(Resources.of(gpu=100), hierarchy(), usage)
    assert shares["A"].allocated == Resources.of(gpu=6, cpu=100)
    assert shares["A"].allocated_non_preemptible == Resources.of(gpu=1)
    assert shares["A"].request == Resources.of(gpu=9, cpu=100, memory=7)
    assert shares["a1"].request == Resources.of(gpu=5, cpu=100)
    assert shares["B"].request == Resources()


def test_limits_are_reported_with_unlimited_kept() -> None:
    q = queue("q", gpu(limit=8), cpu=gpu(limit=UNLIMITED), memory=gpu(limit=0))
    shares = compute_fair_shares(Resources(), [q], {})
    assert shares["q"].limit == Resources.of(gpu=8, cpu=-1, memory=0)


def test_orphans_are_dropped_with_their_subtree() -> None:
    queues = [*hierarchy(), queue("orphan", parent="gone"), queue("grandchild", parent="orphan")]
    shares = compute_fair_shares(Resources.of(gpu=10), queues, {"grandchild": pending_gpus(5)})
    assert set(shares) == {"A", "B", "a1", "a2", "b1"}


def test_a_parent_cycle_is_dropped_instead_of_looping() -> None:
    queues = [queue("x", parent="y"), queue("y", parent="x"), queue("root")]
    assert set(compute_fair_shares(Resources(), queues, {})) == {"root"}


def test_usage_of_unknown_queues_is_ignored() -> None:
    shares = compute_fair_shares(Resources.of(gpu=4), [queue("q")], {"missing": pending_gpus(3)})
    assert shares["q"].request == Resources()


# --- bad input ----------------------------------------------------------------------------


def test_duplicate_queue_names_are_rejected() -> None:
    with pytest.raises(ValueError, match=r"Queue q: metadata\.name"):
        compute_fair_shares(Resources(), [queue("q"), queue("q")], {})


@pytest.mark.parametrize(
    ("resources", "field"),
    [
        (gpu(quota=-2), "spec.resources.gpu.quota"),
        (gpu(limit=Fraction(-1, 2)), "spec.resources.gpu.limit"),
        (gpu(weight=-1), "spec.resources.gpu.overQuotaWeight"),
    ],
)
def test_invalid_queue_resources_name_the_queue_and_field(
    resources: QueueResource, field: str
) -> None:
    with pytest.raises(ValueError, match=f"Queue bad: {field}"):
        compute_fair_shares(Resources(), [queue("bad", resources)], {})
