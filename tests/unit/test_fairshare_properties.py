"""Properties of fair-share division that must hold on any valid queue tree.

The checks recompute what they need (subtree requests, requestable, the phase-1 grant)
from the generated input, never from the code under test, and look at every group of
siblings with the amount that group divided: the total for the top level, the
parent's fair share below it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from kai.engine.fairshare import QueueShare, QueueUsage, compute_fair_shares
from kai.engine.model import UNLIMITED, Queue, QueueResource
from kai.engine.resources import RESOURCE_NAMES, ResourceName, Resources

FAST = settings(max_examples=200, deadline=None)


@dataclass(frozen=True)
class Scenario:
    total: Resources
    queues: tuple[Queue, ...]
    usage: dict[str, QueueUsage]
    k_value: Fraction

    def divide(self) -> dict[str, QueueShare]:
        return compute_fair_shares(self.total, self.queues, self.usage, self.k_value)


@dataclass(frozen=True)
class Units:
    """How amounts are drawn: whole units, or twentieths (which cover 0.25 and 0.1 steps).

    One integer draw per value keeps generation cheap; a negative draw means -1 (unlimited).
    """

    denominator: int

    def amount(self, draw: st.DrawFn) -> Fraction:
        return Fraction(draw(st.integers(0, 20 * self.denominator)), self.denominator)

    def quota_or_limit(self, draw: st.DrawFn) -> Fraction:
        value = draw(st.integers(-4 * self.denominator, 20 * self.denominator))
        return UNLIMITED if value < 0 else Fraction(value, self.denominator)

    def resources(self, draw: st.DrawFn) -> Resources:
        return Resources(self.amount(draw), self.amount(draw), self.amount(draw))

    def queue_resource(self, draw: st.DrawFn) -> QueueResource:
        return QueueResource(
            quota=self.quota_or_limit(draw),
            limit=self.quota_or_limit(draw),
            over_quota_weight=Fraction(draw(st.integers(0, 3))),
        )


@st.composite
def scenarios(draw: st.DrawFn, units: Units, *, with_usage: bool) -> Scenario:
    count = draw(st.integers(1, 7))
    queues = []
    for index in range(count):
        parent = draw(st.integers(-1, index - 1))  # -1: a top-level queue
        day = draw(st.integers(0, 3))  # 0: no creation timestamp
        queues.append(
            Queue(
                name=f"q{index}",
                parent=None if parent < 0 else f"q{parent}",
                priority=draw(st.sampled_from([50, 100, 150])),
                gpu=units.queue_resource(draw),
                cpu=units.queue_resource(draw),
                memory=units.queue_resource(draw),
                created=datetime(2024, 1, day, tzinfo=UTC) if day else None,
            )
        )
    usage = {}
    for queue in queues:
        if draw(st.booleans()):
            history = Units(4).resources(draw) if with_usage else Resources()
            usage[queue.name] = QueueUsage(
                allocated=units.resources(draw),
                allocated_non_preemptible=units.resources(draw),
                pending=units.resources(draw),
                usage=history.scaled(Fraction(1, 20)),  # 0 to 1 of the cluster, in 1/80 steps
            )
    k_value = draw(st.sampled_from([Fraction(0), Fraction(1, 2), Fraction(1), Fraction(2)]))
    return Scenario(
        total=units.resources(draw).scaled(3),
        queues=tuple(queues),
        usage=usage,
        k_value=k_value if with_usage else Fraction(1),
    )


WHOLE = scenarios(Units(1), with_usage=False)
FRACTIONAL_WITH_USAGE = scenarios(Units(20), with_usage=True)


# --- an independent reading of the input ---------------------------------------------------


def children(scenario: Scenario, parent: str | None) -> list[Queue]:
    return [queue for queue in scenario.queues if queue.parent == parent]


def subtree_request(scenario: Scenario, queue: Queue, resource: ResourceName) -> Fraction:
    own = scenario.usage.get(queue.name)
    mine = own.allocated.get(resource) + own.pending.get(resource) if own else Fraction(0)
    return mine + sum(
        (subtree_request(scenario, child, resource) for child in children(scenario, queue.name)),
        Fraction(0),
    )


def requestable(scenario: Scenario, queue: Queue, resource: ResourceName) -> Fraction:
    request = subtree_request(scenario, queue, resource)
    limit = queue.resource(resource).limit
    return request if limit == UNLIMITED else min(limit, request)


def deserved_grant(
    scenario: Scenario, queue: Queue, resource: ResourceName, amount: Fraction
) -> Fraction:
    """What phase 1 gives: the deserved quota (-1 = the whole amount), capped by requestable."""
    quota = queue.resource(resource).quota
    return min(amount if quota == UNLIMITED else quota, requestable(scenario, queue, resource))


@dataclass(frozen=True)
class SiblingGroup:
    resource: ResourceName
    amount: Fraction
    members: list[Queue]


def sibling_groups(scenario: Scenario, shares: dict[str, QueueShare]) -> list[SiblingGroup]:
    groups = []
    for resource in RESOURCE_NAMES:
        groups.append(
            SiblingGroup(resource, scenario.total.get(resource), children(scenario, None))
        )
        for parent in scenario.queues:
            kids = children(scenario, parent.name)
            if kids:
                amount = shares[parent.name].fair_share.get(resource)
                groups.append(SiblingGroup(resource, amount, kids))
    return groups


def fair(shares: dict[str, QueueShare], queue: Queue, resource: ResourceName) -> Fraction:
    return shares[queue.name].fair_share.get(resource)


# --- properties ------------------------------------------------------------------------------


def assert_division_bounds(scenario: Scenario) -> dict[str, QueueShare]:
    """Bounds for every input: deserved honoured; amount kept unless quotas over-commit it."""
    shares = scenario.divide()
    assert set(shares) == {queue.name for queue in scenario.queues}
    for group in sibling_groups(scenario, shares):
        grants = {
            q.name: deserved_grant(scenario, q, group.resource, group.amount) for q in group.members
        }
        given_out = sum((fair(shares, q, group.resource) for q in group.members), Fraction(0))
        for q in group.members:
            assert fair(shares, q, group.resource) >= grants[q.name]
            assert shares[q.name].request.get(group.resource) == subtree_request(
                scenario, q, group.resource
            )
            quota = q.resource(group.resource).quota
            effective = group.amount if quota == UNLIMITED else quota
            assert shares[q.name].deserved.get(group.resource) == effective
        if sum(grants.values(), Fraction(0)) <= group.amount:
            assert given_out <= group.amount
        else:  # over-committed quotas: phase 1 only, nothing scaled down
            assert all(fair(shares, q, group.resource) == grants[q.name] for q in group.members)
    return shares


@FAST
@given(WHOLE)
def test_whole_units_never_exceed_request_or_limit(scenario: Scenario) -> None:
    shares = assert_division_bounds(scenario)
    for queue in scenario.queues:
        for resource in RESOURCE_NAMES:
            assert fair(shares, queue, resource) <= requestable(scenario, queue, resource)
            assert fair(shares, queue, resource).denominator == 1


@FAST
@given(FRACTIONAL_WITH_USAGE)
def test_fractional_units_exceed_requestable_by_less_than_one_unit(scenario: Scenario) -> None:
    # KAI's phase 3 hands out a whole unit without re-checking a fractional need, once per queue.
    shares = assert_division_bounds(scenario)
    for queue in scenario.queues:
        for resource in RESOURCE_NAMES:
            assert fair(shares, queue, resource) - requestable(scenario, queue, resource) < 1


@FAST
@given(WHOLE)
def test_without_usage_history_nothing_wanted_is_left_undivided(scenario: Scenario) -> None:
    # With usage 0 every hungry queue of positive weight scores 2n > 0, so the rounds and
    # the remainders leave nothing behind while such a queue still wants more. A queue of
    # weight 0 wants no more than its deserved grant.
    shares = scenario.divide()
    for group in sibling_groups(scenario, shares):
        grants = [deserved_grant(scenario, q, group.resource, group.amount) for q in group.members]
        if sum(grants, Fraction(0)) > group.amount:
            continue
        wanted = sum(
            (
                requestable(scenario, q, group.resource)
                if q.resource(group.resource).over_quota_weight > 0
                else grant
                for q, grant in zip(group.members, grants, strict=True)
            ),
            Fraction(0),
        )
        given_out = sum((fair(shares, q, group.resource) for q in group.members), Fraction(0))
        assert given_out == min(group.amount, wanted)


@FAST
@given(WHOLE, st.randoms(use_true_random=False))
def test_input_order_does_not_matter(scenario: Scenario, rng: random.Random) -> None:
    shuffled = list(scenario.queues)
    rng.shuffle(shuffled)
    usage = dict(reversed(list(scenario.usage.items())))
    again = compute_fair_shares(scenario.total, shuffled, usage, scenario.k_value)
    assert again == scenario.divide()
