"""Leader election on a coordination.k8s.io Lease: of several replicas, exactly one schedules.

The protocol is client-go's. The holder renews the Lease every `retry_seconds`;
it considers itself leader only until `renew_deadline_seconds` after its last
successful renewal, which is shorter than the lease duration, so it stops before
anyone else may start. A candidate takes the Lease once its record has not changed
for `lease_seconds` as measured on the candidate's own clock (so clock skew
between machines does not matter), or at once when the holder released it on a
clean shutdown. Writes carry the resourceVersion read, so two candidates cannot
both win a takeover.

A renewal counts from the moment its attempt started, not from when the answer
came (the answer may be late, and the others measure from when the write was
made), and every attempt is cut off when the leadership it would extend runs
out: a request that hangs cannot keep the holder believing it leads, nor keep it
from noticing that it no longer does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import structlog

from kai.kube.client import ApiError, Kube

log = structlog.get_logger(__name__)

_NOT_FOUND, _CONFLICT = 404, 409


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        identity: str,
        lease_seconds: float = 15.0,
        renew_deadline_seconds: float = 10.0,
        retry_seconds: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[bool], None] = lambda leading: None,
    ) -> None:
        if not retry_seconds < renew_deadline_seconds < lease_seconds:
            raise ValueError("leader election needs retry < renew deadline < lease duration")
        self.identity = identity
        self._kube = kube
        self._path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self._collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self._name = name
        self._namespace = namespace
        self._lease_seconds = lease_seconds
        self._renew_deadline = renew_deadline_seconds
        self._retry = retry_seconds
        self._clock = clock
        self._on_change = on_change
        self._valid_until = 0.0
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self._was_leading = False

    def is_leader(self) -> bool:
        return self._clock() < self._valid_until

    async def run(self) -> None:
        """Acquire and renew until cancelled; leadership is lost when renewals stop working."""
        while True:
            started = self._clock()
            try:
                async with asyncio.timeout(self._attempt_seconds(started)):
                    renewed = await self._try_acquire_or_renew()
                if renewed:
                    self._valid_until = started + self._renew_deadline
            except ApiError as error:
                log.warning("lease update failed", lease=self._name, error=str(error))
            except TimeoutError:
                log.warning("lease update timed out", lease=self._name)
            self._report()
            await asyncio.sleep(self._retry)

    def _attempt_seconds(self, started: float) -> float:
        """How long an attempt may take: while leading, only until the leadership runs out."""
        left = self._valid_until - started
        return left if left > 0 else self._renew_deadline

    def _report(self) -> None:
        leading = self.is_leader()
        if leading != self._was_leading:
            self._was_leading = leading
            log.info("leadership changed", leading=leading, identity=self.identity)
            self._on_change(leading)

    async def _try_acquire_or_renew(self) -> bool:
        try:
            lease = await self._kube.get(self._path)
        except ApiError as error:
            if error.status != _NOT_FOUND:
                raise
            return await self._create()
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        record = (holder, str(spec.get("renewTime") or ""))
        now = self._clock()
        if record != self._observed:
            self._observed, self._observed_at = record, now
        duration = float(spec.get("leaseDurationSeconds") or self._lease_seconds)
        held_by_other = holder and holder != self.identity and now < self._observed_at + duration
        if held_by_other:
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        new_spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": round(self._lease_seconds),
            "renewTime": _micro_time(),
            "acquireTime": spec.get("acquireTime") if holder == self.identity else _micro_time(),
            "leaseTransitions": transitions if holder == self.identity else transitions + 1,
        }
        return await self._replace(lease, new_spec)

    async def _create(self) -> bool:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self._name, "namespace": self._namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": round(self._lease_seconds),
                "acquireTime": _micro_time(),
                "renewTime": _micro_time(),
                "leaseTransitions": 0,
            },
        }
        try:
            await self._kube.create(self._collection, body)
        except ApiError as error:
            if error.status == _CONFLICT:  # another candidate created it first
                return False
            raise
        return True

    async def _replace(self, lease: dict[str, Any], spec: dict[str, Any]) -> bool:
        body = {**lease, "spec": spec}
        try:
            await self._kube.write("PUT", self._path, body)
        except ApiError as error:
            if error.status == _CONFLICT:  # someone else wrote it since we read it
                return False
            raise
        return True

    async def release(self) -> None:
        """Give the Lease up on a clean stop, so a standby takes over without waiting it out."""
        if not self.is_leader():
            return
        self._valid_until = 0.0
        self._report()
        try:
            async with asyncio.timeout(self._renew_deadline):  # a stop must not hang on it
                lease = await self._kube.get(self._path)
                spec = dict(lease.get("spec") or {})
                if spec.get("holderIdentity") != self.identity:
                    return
                spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=_micro_time())
                await self._replace(lease, spec)
        except (ApiError, TimeoutError) as error:
            log.warning("lease not released", lease=self._name, error=repr(error))
