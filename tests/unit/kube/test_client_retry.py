"""The client's one retry policy: reads and repeatable writes ride out throttling, server errors
and timeouts; a create or a binding is repeated only when it certainly did not happen."""

from __future__ import annotations

from collections import Counter

import pytest
from aiohttp import web

from kai.kube.client import ApiError
from kai.kube.retry import RetryPolicy
from tests.unit.kube.fake_api import kube_at, never, serving, status

BINDING = "/api/v1/namespaces/ns/pods/p/binding"
POD = "/api/v1/namespaces/ns/pods/p"


class Script:
    """Answers each method's requests from a list, in order, the last one for ever after."""

    def __init__(self, **answers: list[int]) -> None:
        self.answers = {method: iter(codes) for method, codes in answers.items()}
        self.last: dict[str, int] = {}
        self.seen: Counter[str] = Counter()

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        self.seen[request.method] += 1
        code = next(self.answers[request.method], self.last.get(request.method, 200))
        self.last[request.method] = code
        if code == 0:  # no answer: the client times out
            await never()
        if code == 429:
            return status(429, "TooManyRequests", {"Retry-After": "0"})
        if code >= 300:
            return status(code, "Failed")
        return web.json_response({"kind": "Pod", "metadata": {"name": "p"}}, status=code)


async def test_a_read_rides_out_server_errors_and_throttling() -> None:
    script = Script(GET=[503, 429, 500, 200])
    async with serving(script) as url, kube_at(url) as kube:
        pod = await kube.get(POD)
    assert pod["metadata"]["name"] == "p"
    assert script.seen["GET"] == 4


async def test_a_read_that_times_out_is_tried_again() -> None:
    script = Script(GET=[0, 200])
    async with serving(script) as url, kube_at(url) as kube:
        pod = await kube.request("GET", POD, timeout=2.0)
    assert pod["metadata"]["name"] == "p"
    assert script.seen["GET"] >= 2  # more if the answer itself took 2 s on a loaded machine


async def test_a_merge_patch_is_repeated_after_a_server_error() -> None:
    script = Script(PATCH=[500, 200])
    async with serving(script) as url, kube_at(url) as kube:
        await kube.merge_patch(POD, {"metadata": {"labels": {"a": "b"}}})
    assert script.seen["PATCH"] == 2


async def test_a_binding_that_may_have_committed_reaches_the_caller_unrepeated() -> None:
    script = Script(POST=[503, 0])
    async with serving(script) as url, kube_at(url) as kube:
        with pytest.raises(ApiError) as server_error:
            await kube.create(BINDING, {"kind": "Binding"})
        with pytest.raises(ApiError) as no_answer:
            await kube.write("POST", BINDING, {"kind": "Binding"}, timeout=1.0)
    assert server_error.value.status == 503 and server_error.value.outcome_unknown
    assert no_answer.value.status == 0 and no_answer.value.outcome_unknown
    assert script.seen["POST"] == 2  # one attempt each


async def test_a_throttled_binding_is_sent_again() -> None:
    script = Script(POST=[429, 201])
    async with serving(script) as url, kube_at(url) as kube:
        await kube.create(BINDING, {"kind": "Binding"})
    assert script.seen["POST"] == 2


async def test_a_throttled_binding_is_not_sent_again_once_the_writer_may_not_write() -> None:
    script = Script(POST=[429, 201])
    async with serving(script) as url, kube_at(url) as kube:
        with pytest.raises(ApiError) as throttled:
            await kube.create(BINDING, {"kind": "Binding"}, proceed=lambda: False)
    assert throttled.value.status == 429 and not throttled.value.outcome_unknown
    assert script.seen["POST"] == 1


async def test_a_refusal_is_not_retried() -> None:
    script = Script(GET=[404], PUT=[409])
    async with serving(script) as url, kube_at(url) as kube:
        with pytest.raises(ApiError) as missing:
            await kube.get(POD)
        with pytest.raises(ApiError) as conflict:
            await kube.write("PUT", POD, {"kind": "Pod"})
    assert (missing.value.status, conflict.value.status) == (404, 409)
    assert not conflict.value.outcome_unknown
    assert script.seen == Counter(GET=1, PUT=1)


async def test_a_retry_after_beyond_the_deadline_ends_the_retries_at_once() -> None:
    async def busy(_request: web.Request) -> web.StreamResponse:
        seen.append(1)
        return status(503, "ServiceUnavailable", {"Retry-After": "60"})

    seen: list[int] = []
    policy = RetryPolicy(deadline_seconds=30.0, max_retry_after_seconds=60.0)
    async with serving(busy) as url, kube_at(url, policy) as kube:
        with pytest.raises(ApiError) as error:
            await kube.get(POD)
    assert error.value.retry_after == 60.0
    assert seen == [1]


def _error(status: int, *, sent: bool = True, retry_after: float | None = None) -> ApiError:
    return ApiError("POST", BINDING, status, "x", "y", sent=sent, retry_after=retry_after)


def test_a_write_that_never_left_is_retried_and_one_that_did_is_not() -> None:
    policy = RetryPolicy()
    assert policy.should_retry(_error(0, sent=False), idempotent=False)
    assert policy.should_retry(_error(429), idempotent=False)
    assert not policy.should_retry(_error(0), idempotent=False)
    assert not policy.should_retry(_error(504), idempotent=False)
    assert policy.should_retry(_error(504), idempotent=True)
    assert not policy.should_retry(_error(422), idempotent=True)


def test_the_wait_honours_retry_after_up_to_a_cap_and_backs_off_otherwise() -> None:
    policy = RetryPolicy(
        first_backoff_seconds=0.2,
        max_backoff_seconds=5.0,
        max_retry_after_seconds=10.0,
        jitter=lambda: 0.999,
    )
    assert policy.delay(0, _error(429, retry_after=3.0)) == 3.0
    assert policy.delay(0, _error(503, retry_after=300.0)) == 10.0
    assert policy.delay(0, _error(500)) == pytest.approx(0.2, rel=0.01)
    assert policy.delay(1, _error(500)) == pytest.approx(0.4, rel=0.01)
    assert policy.delay(30, _error(0)) == pytest.approx(5.0, rel=0.01)
    assert RetryPolicy(jitter=lambda: 0.0).delay(0, _error(500)) == pytest.approx(0.1)
