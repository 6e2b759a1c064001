"""Bind backoff is per pod, not per name: a pod recreated under the same name starts afresh."""

from __future__ import annotations

from kai.operator.backoff import BindBackoff


def test_a_recreated_pod_does_not_inherit_its_predecessors_backoff() -> None:
    backoff = BindBackoff(base_seconds=10.0)
    backoff.failed("ns/web-0", "uid-old", "ns/pg-web", "q", "n1", "500 InternalError", now=0.0)
    assert set(backoff.held(now=1.0)) == {"ns/pg-web"}
    backoff.forget_missing({"uid-new"})  # the StatefulSet made web-0 again, with a new uid
    assert backoff.held(now=1.0) == {}
    assert len(backoff) == 0


def test_failures_of_the_same_pod_double_the_wait_until_it_succeeds() -> None:
    backoff = BindBackoff(base_seconds=1.0, cap_seconds=60.0)
    for _ in range(3):
        backoff.failed("ns/p", "uid", "ns/pg", "q", "n1", "webhook refused", now=0.0)
    held = backoff.held(now=3.9)
    assert "failed 3 time(s)" in held["ns/pg"].message and "waits 4s" in held["ns/pg"].message
    assert backoff.held(now=4.1) == {}
    backoff.succeeded("uid")
    assert len(backoff) == 0
