"""Queue order and its derived quantities (kai-semantics §10.4, §10.6), one rule at a time.

Each ordering test makes two queues equal on every earlier rule and different on the
rule under test, sometimes pulling the other way on a later rule, so only the rule
under test can explain the order.
"""

from __future__ import annotations

from datetime import UTC, datetime
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from kai.engine.fairshare import QueueShare
from kai.engine.model import UNLIMITED, Queue, QueueResource
from kai.engine.queue_order import (
    ShareRatio,
    allocatable_share,
    dominant_resource_share,
    queue_order_key,
)
from kai.engine.resources import ResourceName, Resources

TOTAL = Resources.of(gpu=100, cpu=100_000, memory=10**12)
NO_JOB = Resources()
NO_LIMITS = Resources.of(gpu=-1, cpu=-1, memory=-1)


def gpus(value: Fraction | int) -> Resources:
    return Resources.of(gpu=value)


def share(
    deserved: Resources = TOTAL,
    fair: Resources = TOTAL,
    allocated: Resources = NO_JOB,
    limit: Resources = NO_LIMITS,
) -> QueueShare:
    return QueueShare(
        deserved=deserved,
        fair_share=fair,
        allocated=allocated,
        allocated_non_preemptible=NO_JOB,
        request=allocated,
        limit=limit,
    )


def queue(
    name: str = "q", *, priority: int = 100, gpu_quota: Fraction | int = 0, day: int = 1
) -> Queue:
    return Queue(
        name=name,
        parent=None,
        priority=priority,
        gpu=QueueResource(quota=Fraction(gpu_quota)),
        created=datetime(2024, 1, day, tzinfo=UTC),
    )


def first(a: tuple[QueueShare, Queue, Resources], b: tuple[QueueShare, Queue, Resources]) -> str:
    """Name of the queue served first; the keys themselves must differ."""
    keyed = [(queue_order_key(s, q, job, TOTAL), q.name) for s, q, job in (a, b)]
    assert keyed[0][0] != keyed[1][0]
    return min(keyed)[1]


# --- allocatable share ----------------------------------------------------------------------


def test_allocatable_share_is_the_larger_of_deserved_and_fair_share() -> None:
    assert allocatable_share(share(deserved=gpus(10), fair=gpus(70)), queue()).gpu == 70
    assert allocatable_share(share(deserved=gpus(30), fair=gpus(20)), queue()).gpu == 30


def test_allocatable_share_is_capped_at_the_limit() -> None:
    capped = share(deserved=gpus(10), fair=gpus(70), limit=Resources.of(gpu=50, cpu=-1, memory=-1))
    assert allocatable_share(capped, queue()).gpu == 50


def test_unlimited_quota_makes_the_limit_the_allocatable_share() -> None:
    limited = share(deserved=gpus(100), fair=gpus(5), limit=Resources.of(gpu=40, cpu=-1, memory=-1))
    assert allocatable_share(limited, queue(gpu_quota=UNLIMITED)).gpu == 40
    assert (
        allocatable_share(share(deserved=gpus(100), fair=gpus(5)), queue(gpu_quota=UNLIMITED)).gpu
        == -1
    )


# --- dominant resource share ---------------------------------------------------------------


def test_drs_is_the_largest_allocated_to_allocatable_ratio() -> None:
    allocated = Resources.of(gpu=5, cpu=300)
    allocatable = Resources.of(gpu=10, cpu=1000, memory=10)
    assert dominant_resource_share(allocated, allocatable, TOTAL) == Fraction(1, 2)


def test_drs_measures_unlimited_against_the_total() -> None:
    allocated = Resources.of(gpu=25)
    assert dominant_resource_share(allocated, Resources.of(gpu=-1), TOTAL) == Fraction(1, 4)


def test_drs_penalises_holding_what_may_not_be_held() -> None:
    assert dominant_resource_share(Resources.of(gpu=2), Resources(), TOTAL) == 2000
    assert dominant_resource_share(Resources(), Resources(), TOTAL) == 0


def test_drs_is_never_negative() -> None:
    assert dominant_resource_share(Resources.of(gpu=-3), Resources.of(gpu=10), TOTAL) == 0


# --- predicates -----------------------------------------------------------------------------


def is_over_fair_share(holding: QueueShare) -> bool:
    return queue_order_key(holding, queue(), NO_JOB, TOTAL)[0]


def fits_within_deserved(holding: QueueShare, of: Queue, request: Resources) -> bool:
    return not queue_order_key(holding, of, request, TOTAL)[1]


def test_over_fair_share_means_strictly_over_in_every_resource() -> None:
    fair = Resources.of(gpu=2, cpu=2, memory=2)
    assert is_over_fair_share(share(fair=fair, allocated=Resources.of(gpu=3, cpu=3, memory=3)))
    assert not is_over_fair_share(share(fair=fair, allocated=Resources.of(gpu=3, cpu=3, memory=2)))
    assert not is_over_fair_share(share(fair=fair, allocated=Resources.of(gpu=2, cpu=3, memory=3)))


def test_within_deserved_is_exact_for_fractional_gpus() -> None:
    # 0.1 allocated + 0.2 requested against 0.3 deserved fits exactly (KAI#2209).
    holding = share(deserved=gpus(Fraction("0.3")), allocated=gpus(Fraction("0.1")))
    assert fits_within_deserved(holding, queue(), gpus(Fraction("0.2")))
    assert not fits_within_deserved(holding, queue(), gpus(Fraction("0.21")))


def test_unlimited_quota_always_fits_within_deserved() -> None:
    holding = share(deserved=gpus(100), allocated=gpus(100))
    assert fits_within_deserved(holding, queue(gpu_quota=UNLIMITED), gpus(1))


# --- queue order, rule by rule --------------------------------------------------------------


def test_rule_1_a_queue_within_fair_share_goes_first() -> None:
    fair = Resources.of(gpu=2, cpu=2, memory=2)
    over = (
        share(fair=fair, allocated=Resources.of(gpu=3, cpu=3, memory=3)),
        queue("over", priority=200),
        NO_JOB,
    )
    # `under` is past its deserved of 0 and lower in priority; only rule 1 puts it first.
    under = (share(deserved=NO_JOB, fair=fair, allocated=gpus(1)), queue("under"), NO_JOB)
    assert first(over, under) == "under"


def test_rule_2_a_queue_staying_within_deserved_goes_first() -> None:
    fits = (share(deserved=gpus(10), allocated=gpus(5)), queue("fits"), gpus(3))
    exceeds = (share(deserved=gpus(10), allocated=gpus(8)), queue("exceeds", priority=200), gpus(3))
    assert first(fits, exceeds) == "fits"


def test_rule_3_higher_priority_goes_first() -> None:
    # Neither fits within a deserved of 0; `high` would also hold a GPU its allocatable share
    # of 0 does not allow, which rule 4 would penalise, but priority is decided first.
    low = (share(deserved=NO_JOB, fair=gpus(10)), queue("low", day=1), gpus(1))
    high = (share(deserved=NO_JOB, fair=NO_JOB), queue("high", priority=150, day=2), gpus(1))
    assert first(low, high) == "high"


def test_rule_4_holding_what_the_queue_may_not_have_goes_last() -> None:
    zero_limit = Resources.of(gpu=0, cpu=-1, memory=-1)
    blocked = (
        share(deserved=NO_JOB, fair=NO_JOB, limit=zero_limit),
        queue("blocked", day=1),
        gpus(1),
    )
    # Neither fits within deserved. `allowed` is far above its CPU share (DRS 2000 against
    # 1000 for `blocked`), so only rule 4 can put it first.
    allowed = (
        share(
            deserved=Resources.of(cpu=10),
            fair=Resources.of(gpu=10, cpu=10),
            allocated=Resources.of(cpu=20_000),
        ),
        queue("allowed", day=2),
        gpus(1),
    )
    assert first(blocked, allowed) == "allowed"


def test_rule_5_lower_drs_with_the_job_goes_first() -> None:
    # With the job 3/10 against 5/10; without it 2/10 against 1/10 would say the opposite.
    small_job = (
        share(allocated=gpus(2), deserved=gpus(10), fair=gpus(10)),
        queue("small_job", day=2),
        gpus(1),
    )
    big_job = (
        share(allocated=gpus(1), deserved=gpus(10), fair=gpus(10)),
        queue("big_job", day=1),
        gpus(4),
    )
    assert first(small_job, big_job) == "small_job"


def test_rule_6_lower_drs_without_the_job_goes_first() -> None:
    # Both 2/5 with the job (8/20 and 4/10); without it 1/10 against 3/10. The larger
    # allocatable share and the younger age of `lighter` (rules 7, 8) pull the other way.
    lighter = (
        share(allocated=gpus(2), deserved=gpus(20), fair=gpus(20)),
        queue("lighter", day=2),
        gpus(6),
    )
    heavier = (
        share(allocated=gpus(3), deserved=gpus(10), fair=gpus(10)),
        queue("heavier", day=1),
        gpus(1),
    )
    assert first(lighter, heavier) == "lighter"


def test_rule_7_smaller_allocatable_share_goes_first() -> None:
    # Nothing allocated, so both DRS are 0; allocatable 10 against 20 GPUs.
    smaller = (share(deserved=gpus(10), fair=gpus(10)), queue("smaller", day=2), NO_JOB)
    larger = (share(deserved=gpus(20), fair=gpus(20)), queue("larger", day=1), NO_JOB)
    assert first(smaller, larger) == "smaller"


def test_rule_8_the_older_queue_goes_first_then_the_name_decides() -> None:
    assert (
        first((share(), queue("young", day=2), NO_JOB), (share(), queue("old", day=1), NO_JOB))
        == "old"
    )
    assert first((share(), queue("b", day=1), NO_JOB), (share(), queue("a", day=1), NO_JOB)) == "a"


# --- the key's integer arithmetic against the rules in Fractions ------------------------------

_amount = st.one_of(
    st.integers(-4, 40).map(Fraction),
    st.fractions(min_value=-4, max_value=40, max_denominator=12),
)
_share_amount = st.one_of(st.just(Fraction(UNLIMITED)), st.integers(0, 40).map(Fraction), _amount)
_resources = st.builds(Resources, _amount, _amount, _amount)
_share_resources = st.builds(Resources, _share_amount, _share_amount, _share_amount)


def _ratio(held: Fraction, allowed: Fraction, total: Fraction) -> Fraction:
    denominator = total if allowed == UNLIMITED else allowed
    return held * 1000 if denominator == 0 else held / denominator


def _reference_key(holding: QueueShare, of: Queue, job: Resources) -> tuple[object, ...]:
    """KAI's comparison restated term by term in Fractions, the way §10.6 reads."""
    allocatable = allocatable_share(holding, of)
    with_job = holding.allocated + job
    names: tuple[ResourceName, ...] = ("gpu", "cpu", "memory")
    return (
        all(holding.allocated.get(r) > holding.fair_share.get(r) for r in names),
        any(
            of.resource(r).quota != UNLIMITED and with_job.get(r) > holding.deserved.get(r)
            for r in names
        ),
        -of.priority,
        any(allocatable.get(r) == 0 and with_job.get(r) > 0 for r in names),
        max(
            [Fraction(0)]
            + [_ratio(with_job.get(r), allocatable.get(r), TOTAL.get(r)) for r in names]
        ),
        max(
            [Fraction(0)]
            + [_ratio(holding.allocated.get(r), allocatable.get(r), TOTAL.get(r)) for r in names]
        ),
    )


@settings(max_examples=400, deadline=None)
@given(
    deserved=_share_resources,
    fair=_share_resources,
    limit=_share_resources,
    allocated=_resources,
    job=_resources,
    unlimited_quota=st.booleans(),
)
def test_the_key_is_the_rules_computed_exactly(
    deserved: Resources,
    fair: Resources,
    limit: Resources,
    allocated: Resources,
    job: Resources,
    unlimited_quota: bool,
) -> None:
    holding = share(deserved=deserved, fair=fair, allocated=allocated, limit=limit)
    of = queue(gpu_quota=UNLIMITED if unlimited_quota else 0)
    assert queue_order_key(holding, of, job, TOTAL)[:6] == _reference_key(holding, of, job)


_ratios = st.tuples(st.integers(-(10**12), 10**12), st.integers(1, 10**9))


@settings(max_examples=400, deadline=None)
@given(left=_ratios, right=_ratios)
def test_a_share_ratio_orders_and_equals_as_the_fraction_of_the_same_value(
    left: tuple[int, int], right: tuple[int, int]
) -> None:
    # Unreduced on purpose: the queue order builds them without a gcd.
    a, b = ShareRatio(*left), ShareRatio(*right)
    exact_a, exact_b = Fraction(*left), Fraction(*right)
    assert (a < b, a <= b, a == b, a >= b, a > b) == (
        exact_a < exact_b,
        exact_a <= exact_b,
        exact_a == exact_b,
        exact_a >= exact_b,
        exact_a > exact_b,
    )
    assert a == exact_a and exact_a == a
    assert hash(a) == hash(exact_a)  # equal values hash alike, whatever their form
    assert (ShareRatio(left[0] * left[1], left[1]) == left[0]) and ShareRatio(3, 1) != 2
